"""The action-masking wrapper: RLlib's Dict convention, audit of masked actions, shapes."""

import gymnasium as gym
import numpy as np
import pytest

from argus_env.agents.rl.wrappers import (MaskAudit, flatten_observation, make_env, make_raw_env,
                                read_audit)

FAST = {"correctness": "none", "shape": "decode-16", "max_episode_steps": 8}


def test_masked_observations_stay_in_their_space():
    env = make_env(FAST)
    space = env.observation_space
    assert set(space.spaces) == {"action_mask", "observations"}, space
    assert space["action_mask"].shape == (env.action_space.n,), space
    obs, info = env.reset(seed=0)
    rng = np.random.default_rng(0)
    for _ in range(6):
        assert space.contains(obs), f"observation outside {space}: {obs}"
        assert np.array_equal(obs["action_mask"], info["action_mask"]), "mask differs from info"
        a = int(rng.choice(np.flatnonzero(obs["action_mask"])))
        obs, _, term, trunc, info = env.step(a)
        if term or trunc:
            obs, info = env.reset()


def test_flattened_report_is_normalised():
    env = make_raw_env(FAST)
    obs, _ = env.reset(seed=0)
    obs["report"][:] = [1e6] * len(obs["report"])        # hostile values are clipped
    x = flatten_observation(obs)
    assert x.dtype == np.float32 and 0 <= x.min() and x.max() <= 4, x


def test_audit_counts_a_masked_action(tmp_path):
    path = tmp_path / "audit.jsonl"
    env = make_raw_env({**FAST, "mask_audit": str(path)})
    assert isinstance(env, MaskAudit)
    obs, _ = env.reset(seed=0)
    masked = int(np.flatnonzero(obs["action_mask"] == 0)[0])
    legal = int(np.flatnonzero(obs["action_mask"])[0])
    _, _, _, _, info = env.step(masked)
    assert info["error"], "the env should answer a masked action with an error"
    env.step(legal)
    assert (env.steps, env.violations) == (2, 1), (env.steps, env.violations)
    audit = read_audit(str(path))
    assert audit["steps"] == 2 and audit["violations"] == 1, audit


def test_env_config_reaches_the_env():
    env = make_raw_env({"correctness": "none", "split": "test", "max_episode_steps": 3})
    shapes = {c.name for c in env.unwrapped.task.shape_cases("test")}
    _, info = env.reset(seed=1)
    assert info["shape"] in shapes, (info["shape"], shapes)
    assert env.spec.max_episode_steps == 3, env.spec
    with pytest.raises(TypeError):
        make_raw_env({"no_such_setting": 1})


def test_shape_choice_follows_the_seed():
    env = make_raw_env({"correctness": "none", "shape": ["decode-16", "ragged-1000"]})
    drawn = [env.reset(seed=s)[1]["shape"] for s in (0, 1, 2, 0)]
    assert set(drawn) <= {"decode-16", "ragged-1000"} and drawn[0] == drawn[3], drawn
    assert env.reset(options={"shape": "square-2048"})[1]["shape"] == "square-2048"
    assert isinstance(env, gym.Wrapper)
