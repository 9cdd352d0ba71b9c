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


@pytest.mark.parametrize("shape, why", [
    ({"T": 2**20, "D": 64, "F": 64, "E": 2**15, "TOPK": 2, "SKEW": 0}, "router logits"),
    ({"T": 16, "D": 64, "F": 64, "E": 4, "TOPK": 8, "SKEW": 0}, "TOPK=8"),
])
def test_a_custom_shape_the_routing_step_cannot_take_is_refused_at_reset(shape, why):
    """T x E router logits beyond 2**26 (137 GB once reached the cost model's routing as an
    allocation failure) and more experts per token than experts: a ValueError at reset,
    the env keeps its shape and works on."""
    env = gym.make("Argus-MoE-v0", correctness="none")
    try:
        env.reset(seed=0)
        before = dict(env.unwrapped.sizes)
        with pytest.raises(ValueError, match=why):
            env.reset(seed=1, options={"shape": shape})
        assert env.unwrapped.sizes == before
        ok = {**shape, "T": 16, "E": 8, "TOPK": 2}
        env.reset(seed=2, options={"shape": ok})
        assert env.unwrapped.sizes == ok
    finally:
        env.close()


def test_custom_shapes_may_switch_a_flag_off():
    """Flags (attention's CAUSAL, MoE's SKEW) may be 0 in a custom shape; other sizes not."""
    for env_id, shape, flag in [
            ("Argus-Attention-v0", {"B": 1, "H": 2, "KVH": 2, "SQ": 128, "SK": 128, "D": 64,
                                    "CAUSAL": 0}, "CAUSAL"),
            ("Argus-MoE-v0", {"T": 16, "D": 64, "F": 64, "E": 8, "TOPK": 2, "SKEW": 0}, "SKEW")]:
        env = gym.make(env_id, correctness="none")
        try:
            env.reset(seed=0, options={"shape": shape})
            assert env.unwrapped.sizes == shape
            other = next(d for d in shape if d != flag)
            with pytest.raises(ValueError, match=f"{flag} from 0"):
                env.reset(seed=0, options={"shape": {**shape, other: 0}})
        finally:
            env.close()
