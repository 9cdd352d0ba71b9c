"""Argus-MoE-v0: the Gymnasium contract, the primitive scatter pair, text actions."""

import gymnasium as gym
import pytest
from gymnasium.utils.env_checker import check_env

import argus_env  # noqa: F401  (registers the ids)

SHAPE = "qwen3-decode-256-skewed"


def index(env, name, value=None):
    return env.unwrapped.catalog.index((name, value))


@pytest.mark.parametrize("mode", ["discrete", "text"])
def test_check_env_passes(mode):
    env = gym.make("Argus-MoE-v0", mode=mode)
    check_env(env.unwrapped, skip_render_check=True)


def test_primitive_scatter_is_reported_until_inverse_scatter():
    env = gym.make("Argus-MoE-v0")
    obs, info = env.reset(seed=0, options={"shape": SHAPE})
    assert info["report"]["ok"] and info["measurement"]["ok"], info["report_text"]
    obs, r1, *_, info = env.step(index(env, "fuse_scatter", True))
    kinds = {v["invariant"] for v in info["report"]["violations"]}
    assert {"scatter", "padding"} <= kinds, info["report_text"]
    assert r1 < 0
    assert not obs["action_mask"][index(env, "fuse_weight", True)]
    obs, r2, *_, info = env.step(index(env, "inverse_scatter", True))
    assert info["report"]["ok"], info["report_text"]
    assert obs["action_mask"][index(env, "fuse_weight", True)]


@pytest.mark.slow
def test_text_mode_takes_a_call_and_a_whole_program():
    env = gym.make("Argus-MoE-v0", mode="text")
    obs, info = env.reset(seed=1, options={"shape": SHAPE})
    obs, _, _, _, info = env.step("fuse_swiglu(True)")
    assert info["report"]["ok"] and "fused SwiGLU" in info["program"], info["report_text"]
    from argus_env.task import get_task
    text = get_task("moe").program("expert").text
    obs, _, _, _, info = env.step(text)
    assert info["report"]["ok"], info["report_text"]
