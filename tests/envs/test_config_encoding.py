"""The configuration part of the observation comes from the task's own encoder: every
choice a task's configuration holds is visible to the agent (before, the vector was
GEMM-shaped and two attention or MoE programs differing in a fusion looked the same)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from argus_env.registry import TASKS
from argus_env.task import FEATURE_FIELDS, get_task


def _variants(config):
    """(field, a configuration differing from `config` in that field only), per field."""
    for f in dataclasses.fields(config):
        value = getattr(config, f.name)
        if isinstance(value, bool):
            yield f.name, dataclasses.replace(config, **{f.name: not value})
        elif isinstance(value, int):
            yield f.name, dataclasses.replace(config, **{f.name: value * 2 + 1})
        elif value is None:
            yield f.name, dataclasses.replace(config, **{f.name: 3})
        elif isinstance(value, str):
            yield f.name, dataclasses.replace(config, **{f.name: value + "-other"})


@pytest.mark.parametrize("name", list(TASKS))
def test_every_configuration_field_changes_the_observation(name):
    task = get_task(name)
    base = task.space.baseline()
    sizes = task.shapes[0].sizes
    ref = task.encode_config(base, None, sizes)
    assert ref.shape == (task.config_dim,) and ref.dtype == np.float32
    assert ((0 <= ref) & (ref <= 1)).all()
    same = [field for field, other in _variants(base)
            if np.array_equal(task.encode_config(other, None, sizes), ref)]
    assert not same, f"{name}: fields invisible in the observation: {same}"


@pytest.mark.parametrize("name", list(TASKS))
def test_the_env_observation_uses_the_task_encoder(name):
    import gymnasium as gym
    env = gym.make(TASKS[name].env_id, correctness="none")
    try:
        obs, _ = env.reset(seed=0)
        task = env.unwrapped.task
        assert env.observation_space["config"].shape == (task.config_dim,)
        assert env.observation_space.contains(obs)
        fields = len(task.config_fields())
        assert fields > 0
        # the structure block is filled from the analysed program, the shape block from sizes
        block = obs["config"][fields:fields + len(FEATURE_FIELDS)]
        assert block.any()
        assert obs["config"][-len(task.size_names()):].any()
        np.testing.assert_array_equal(
            obs["config"], task.encode_config(env.unwrapped.state.config,
                                              env.unwrapped.state.evaluation.features,
                                              env.unwrapped.sizes))
    finally:
        env.close()


def test_a_text_program_sets_the_hand_written_flag():
    task = get_task("gemm")
    sizes = task.shapes[0].sizes
    flag = len(task.config_fields()) + len(FEATURE_FIELDS)
    assert task.encode_config(None, None, sizes)[flag] == 1.0
    assert task.encode_config(task.space.baseline(), None, sizes)[flag] == 0.0


def test_the_shape_block_tells_shapes_apart():
    task = get_task("moe")
    a, b = task.shapes[0].sizes, task.shapes[-1].sizes
    assert a != b
    base = task.space.baseline()
    assert not np.array_equal(task.encode_config(base, None, a), task.encode_config(base, None, b))
