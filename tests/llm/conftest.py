"""Shared fixtures: the local SmolLM2 backend is loaded once per test session (loading
de-quantizes the gguf, about 15 s on 2 cores; later loads read the saved copy)."""

import pytest


@pytest.fixture(scope="session")
def smol():
    from argus_env.agents.llm.backends import TransformersBackend
    return TransformersBackend("smollm2", max_new_tokens=24)


@pytest.fixture(scope="session")
def splitk_report():
    """The checker's real report after `split_k(4)` on decode-16 (coverage and
    exactly_once violations), from the text environment."""
    import gymnasium as gym

    import argus_env  # noqa: F401
    env = gym.make("Argus-GEMM-v0", mode="text")
    env.reset(seed=0, options={"shape": "decode-16"})
    obs, reward, term, trunc, info = env.step("split_k(4)")
    assert info["error"] is None, info["error"]
    env.close()
    return obs["report_text"]
