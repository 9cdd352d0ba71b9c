"""Argus-GEMM-v0: the Gymnasium contract, transformations, masks, text actions, rewards."""

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

import argus_env  # noqa: F401  (registers the ids)
from argus_env.check.report import SLOT
from argus_env.envs import ENV_IDS

SHAPE = "square-4096"


def make(mode="discrete", **kw):
    return gym.make("Argus-GEMM-v0", mode=mode, **kw)


def index(env, name, value=None):
    return env.unwrapped.catalog.index((name, value))


@pytest.mark.parametrize("mode", ["discrete", "text"])
@pytest.mark.parametrize("env_id", sorted(ENV_IDS))
def test_check_env_passes(env_id, mode):
    env = gym.make(env_id, mode=mode)
    check_env(env.unwrapped, skip_render_check=True)


def test_reset_starts_from_baseline_on_a_train_shape():
    env = make()
    obs, info = env.reset(seed=3)
    train = {c.name for c in env.unwrapped.task.shape_cases("train")}
    assert info["shape"] in train, info["shape"]
    assert info["report"]["ok"] and info["measurement"]["ok"], info["report_text"]
    assert "BM: A.const = 64" in info["program"], info["program"]
    obs2, info2 = env.reset(options={"shape": "decode-64"})
    assert info2["shape"] == "decode-64" and info2["sizes"]["M"] == 64


def test_same_seed_and_actions_give_same_observations_and_rewards():
    def episode():
        env = make()
        obs, _ = env.reset(seed=11)
        out = [obs]
        rng = np.random.default_rng(0)
        rewards = []
        for _ in range(6):
            legal = np.flatnonzero(obs["action_mask"][:-1])
            obs, r, term, trunc, _ = env.step(int(rng.choice(legal)))
            out.append(obs)
            rewards.append(r)
        return out, rewards
    (o1, r1), (o2, r2) = episode(), episode()
    assert r1 == r2, (r1, r2)
    for a, b in zip(o1, o2):
        for key in a:
            assert np.array_equal(a[key], b[key]), key


def test_masked_action_is_rejected_naming_it_and_the_legal_ones():
    env = make()
    obs, _ = env.reset(seed=0, options={"shape": SHAPE})
    a = index(env, "combine", "atomic")
    assert obs["action_mask"][a] == 0, "combine needs split-K first"
    obs, reward, term, trunc, info = env.step(a)
    assert "combine('atomic')" in info["error"] and "split_k is 1" in info["error"], info["error"]
    assert "legal now:" in info["error"] and "tile_m(128)" in info["error"], info["error"]
    assert reward < 0 and not term
    assert info["action_mask"][a] == 0


def test_split_k_alone_breaks_coverage_until_combined():
    env = make()
    env.reset(seed=0, options={"shape": "decode-16"})
    obs, reward, _, _, info = env.step(index(env, "split_k", 4))
    kinds = {v["invariant"] for v in info["report"]["violations"]}
    assert {"exactly_once", "coverage"} <= kinds, info["report_text"]
    assert reward < 0, reward
    assert obs["report"][SLOT["count:coverage"]] > 0 and obs["perf"][0] == 0, \
        "coverage counted, nothing measured"
    assert "split-K" in info["program"] and "A.store" in info["program"]
    obs, reward, _, _, info = env.step(index(env, "combine", "atomic"))
    assert info["report"]["ok"], info["report_text"]
    assert "A.atomic_add" in info["program"]
    assert info["measurement"]["ok"] and obs["perf"][0] > 0
    assert reward > 0, "the combine recovers the throughput lost while unmeasured"


def test_undo_returns_to_the_previous_program():
    env = make()
    _, info0 = env.reset(seed=0, options={"shape": SHAPE})
    _, _, _, _, info1 = env.step(index(env, "tile_m", 128))
    assert "BM: A.const = 128" in info1["program"]
    _, _, _, _, info2 = env.step(index(env, "undo"))
    assert info2["program"] == info0["program"]


def test_submit_terminates_with_a_bonus_relative_to_the_library():
    env = make()
    env.reset(seed=0, options={"shape": SHAPE})
    obs, reward, term, trunc, info = env.step(index(env, "submit"))
    assert term and not trunc
    frac = info["measurement"]["frac_anchor"]
    assert reward == pytest.approx(np.log(frac)), (reward, frac)


def test_text_actions_calls_programs_and_hostile_text():
    env = make("text")
    obs, info = env.reset(seed=0, options={"shape": SHAPE})
    assert "A.store" in obs["program"] and "all invariants hold" in obs["report_text"]
    obs, r, _, _, info = env.step("tile_n(128)")
    assert info["error"] is None and "BN: A.const = 128" in obs["program"]
    for bad in ("import os", "__import__('os').system('true')", "tile_m(", "split_k(3)",
                "frobnicate(2)", "\x00\x01", "open('/etc/passwd')"):
        obs, r, term, _, info = env.step(bad)
        assert info["error"], f"no error for {bad!r}"
        assert r < 0 and not term, (bad, r)
    expert = env.unwrapped.task.program("expert").text
    obs, r, _, _, info = env.step(expert)
    assert info["error"] is None and info["measurement"]["ok"], info["report_text"]
    assert info["measurement"]["frac_anchor"] > 0.8, info["measurement"]
    broken = expert.replace("cols = pid_n * BN + A.arange(BN)", "cols = pid_n * BN + A.arange(BN) + 1")
    obs, r, _, _, info = env.step(broken)
    assert not info["report"]["ok"] and r < 0, info["report_text"]
    # columns shifted consistently for B and C: each stored value owns its place, but
    # column 0 is never written (and TMA clips the column past N)
    assert "[bijection]" in obs["report_text"] and "c[0, 0]" in obs["report_text"], obs["report_text"]
    obs, r, _, _, info = env.step("tile_m(128)")
    assert "written as text" in info["error"], info["error"]
    obs, r, _, _, info = env.step("undo()")
    assert info["error"] is None and info["report"]["ok"]


def test_program_with_wrong_signature_is_an_error_not_a_crash():
    env = make("text")
    env.reset(seed=0, options={"shape": SHAPE})
    text = env.unwrapped.task.program("baseline").text.replace('"M", "K"]', '"M", "J"]')
    obs, r, term, _, info = env.step(text)
    assert info["error"] and "tensor `a`" in info["error"], info["error"]


def test_env_config_mapping_as_rllib_passes_it():
    from argus_env.envs import env_creator
    env = env_creator({"mode": "text", "split": "test"})
    _, info = env.reset(seed=1)
    assert env.mode == "text" and info["shape"] in {c.name for c in env.task.shape_cases("test")}
