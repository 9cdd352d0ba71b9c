"""The environment as other libraries use it: the action types they send, the messages
their agents read."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

import argus_env  # noqa: F401


@pytest.fixture(scope="module")
def discrete():
    env = gym.make("Argus-GEMM-v0", correctness="none")
    yield env
    env.close()


@pytest.fixture(scope="module")
def text():
    env = gym.make("Argus-GEMM-v0", mode="text", correctness="none")
    yield env
    env.close()


@pytest.mark.parametrize("make", [lambda i: np.array(i), lambda i: np.array(i, dtype=np.int32),
                                  lambda i: np.int64(i), lambda i: i])
def test_every_action_the_space_contains_is_taken(discrete, make):
    obs, _ = discrete.reset(seed=0)
    index = int(np.flatnonzero(obs["action_mask"])[0])
    action = make(index)
    assert discrete.action_space.contains(action)
    _, _, _, _, info = discrete.step(action)
    assert info["error"] is None, info["error"]
    assert discrete.unwrapped.actions[-1] == discrete.unwrapped.actions[-1].strip()


@pytest.mark.parametrize("bad", [np.array([2]), np.array(2.0), "2", 2.5, np.array(10**6)])
def test_actions_outside_the_space_are_refused_with_a_message(discrete, bad):
    discrete.reset(seed=0)
    assert not discrete.action_space.contains(bad)
    _, reward, _, _, info = discrete.step(bad)
    assert info["error"] and reward < 0


@pytest.mark.parametrize("call, words", [
    ("splitk(4)", "did you mean split_k"),
    ("tile_m(", "never closed"),
    ("tile_m(128, 3)", "tile_m"),
])
def test_text_mode_keeps_the_parsers_message(text, call, words):
    text.reset(seed=0)
    _, reward, _, _, info = text.step(call)
    assert info["error"] and words in info["error"], info["error"]
    assert "TransformError" not in info["error"] and reward < 0


def test_measure_gpu_without_cuda_is_refused_at_make():
    import torch
    if torch.cuda.is_available():  # on a GPU machine the env must make
        env = gym.make("Argus-GEMM-v0", measure="gpu")
        env.close()
        return
    with pytest.raises(ValueError, match="needs a CUDA GPU"):
        gym.make("Argus-GEMM-v0", measure="gpu")


def _play(env, n=4):
    obs, _ = env.reset(seed=0, options={"shape": "decode-16"})
    for _ in range(n):
        legal = np.flatnonzero(obs["action_mask"][:-2])
        obs, *_ = env.step(int(legal[len(legal) // 2]))
    return obs


def test_the_env_pickles_and_deep_copies_without_its_worker(discrete):
    import copy
    import pickle
    _play(discrete)
    for twin in (pickle.loads(pickle.dumps(discrete)), copy.deepcopy(discrete)):
        a, b = twin.unwrapped, discrete.unwrapped
        assert a.actions == b.actions and a.state.program.text == b.state.program.text
        assert a.evaluator._worker is None, "a copy must not hold the original's worker"
        obs, reward, *_ = twin.step(len(a.catalog) - 2)  # undo
        assert a.actions[-1] == "undo()" and b.actions[-1] != "undo()"
        twin.close()


def test_fork_is_independent_and_shares_the_evaluator(discrete):
    _play(discrete)
    core = discrete.unwrapped
    fork = core.fork()
    assert fork.evaluator is core.evaluator and not fork._owns_evaluator
    before = list(core.actions)
    fork.step(len(fork.catalog) - 2)
    assert core.actions == before and fork.actions == before + ["undo()"]
    assert core.history, "test setup: the walk took no step"
    assert fork.state.program.text == core.history[-1].program.text


def test_env_state_is_plain_data_and_replays(discrete):
    import json

    from argus_env.envs.kernel_env import KernelEnv
    _play(discrete, 5)
    discrete.step(10 ** 6)  # a refused action is part of the state too
    state = json.loads(json.dumps(discrete.unwrapped.env_state()))
    again = KernelEnv.from_env_state(state, correctness="none")
    try:
        assert again.actions == discrete.unwrapped.actions
        assert again.state.program.text == discrete.unwrapped.state.program.text
        assert again.best_frac == discrete.unwrapped.best_frac
    finally:
        again.close()
