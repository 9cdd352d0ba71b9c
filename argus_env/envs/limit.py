"""`StepLimit`: hands the step limit of Gymnasium's `TimeLimit` to the `KernelEnv` under it.

`gym.make(id, max_episode_steps=N)` (or the registration's limit) wraps the env in a
`TimeLimit`, which the env itself cannot see. The env must know its limit: the step that
reaches it submits the episode's current program implicitly (the submit term's reward,
`KernelEnv.step`), so that an agent far below the library cannot earn more by never
submitting. The registrations list this wrapper in `additional_wrappers`, so `gym.make`
puts it on top of its `TimeLimit`, and it tells the env that limit (the smaller one where
the env was also given its own `max_episode_steps`). It changes nothing else: steps,
observations, rewards and flags pass through.
"""

from __future__ import annotations

import gymnasium as gym
from gymnasium.wrappers import TimeLimit


def time_limit(env: gym.Env) -> int | None:
    """The smallest `TimeLimit` among `env` and the wrappers under it (None: none)."""
    limits = []
    while isinstance(env, gym.Wrapper):
        if isinstance(env, TimeLimit):
            limits.append(int(env._max_episode_steps))
        env = env.env
    return min(limits) if limits else None


class StepLimit(gym.Wrapper, gym.utils.RecordConstructorArgs):
    """Tells the env under it the step limit of the `TimeLimit` beneath this wrapper."""

    def __init__(self, env: gym.Env):
        gym.utils.RecordConstructorArgs.__init__(self)
        gym.Wrapper.__init__(self, env)
        limit = time_limit(env)
        core = env.unwrapped
        if limit is not None and hasattr(core, "limit_steps"):
            core.limit_steps(limit)
