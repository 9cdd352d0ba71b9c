"""Gymnasium environments: `KernelEnv` and the registered task ids.

    import gymnasium as gym, argus_env
    env = gym.make("Argus-GEMM-v0")                  # discrete actions, cost model
    env = gym.make("Argus-GEMM-v0", mode="text")     # text actions for LLM agents
"""

from __future__ import annotations

import gymnasium as gym
from gymnasium.envs.registration import WrapperSpec

from ..registry import env_ids
from .kernel_env import KernelEnv  # noqa: F401

MAX_EPISODE_STEPS = 64
ENV_IDS = env_ids()  # env id -> task name, from the registry (`argus_env/registry.py`)
# over gym.make's TimeLimit: hands its limit to the env, whose step at the limit submits
# the current program implicitly (`argus_env/envs/limit.py`)
STEP_LIMIT = WrapperSpec("StepLimit", "argus_env.envs.limit:StepLimit", {})


def register_envs() -> None:
    for env_id, task in ENV_IDS.items():
        if env_id not in gym.registry:
            gym.register(id=env_id, entry_point="argus_env.envs.kernel_env:KernelEnv",
                         kwargs={"task": task}, max_episode_steps=MAX_EPISODE_STEPS,
                         additional_wrappers=(STEP_LIMIT,))


def env_creator(env_config: dict | None = None) -> KernelEnv:
    """For RLlib: `tune.register_env("argus", env_creator)`; keys are KernelEnv's arguments."""
    return KernelEnv(env_config=dict(env_config or {}))


register_envs()
