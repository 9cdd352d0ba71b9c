"""Argus environments for RLlib: the action-masking form, and the plain ids in every process.

    import argus_env.rllib
    argus_env.rllib.register_ids()  # "Argus-GEMM-v0" etc. now name masked envs in RLlib
    config = PPOConfig().environment("Argus-GEMM-v0", env_config={"correctness": "none"})

RLlib's env runners make their environments in other processes, where a Gymnasium id
registered by `import argus_env` is unknown (Gymnasium 1.x no longer loads registration
plugins from package metadata). `register_ids()` puts each id in Ray Tune's registry, which
every Ray worker reads, with `make_env` as its creator.

Gymnasium wrappers that put an Argus environment into RLlib's action-masking form.

RLlib's action-masking convention (its `action_masking_rl_module.py` example) is a
`Dict` observation with two keys: `"observations"`, what the policy network reads, and
`"action_mask"`, a 0/1 vector over the discrete actions that the RLModule turns into
`-inf`-like logits. `MaskedObservation` builds that from `KernelEnv`'s Dict observation:

    observations = concat(config (18, already in [0, 1]),
                          report (22, normalised per field to [0, 1]),
                          perf   (4: log TFLOP/s / 8, fractions clipped to [0, 4]))
    action_mask  = the env's action_mask as float32

`make_env(env_config)` (alias `env_creator`) is what RLlib calls in every env runner;
`make_raw_env` is the same environment without the masking wrapper (what search agents
and the PPO agent's `run` see). Keys of `env_config` go to `KernelEnv` (task, mode,
measure, hardware, reward, split, correctness), except these wrapper keys:

- `env_id` (default "Argus-GEMM-v0"), `max_episode_steps` (default: the registration's);
- `shape`: a shape name or a list of names: every reset without an explicit shape draws
  one of them (with the env's `np_random`), so training can stay on cheap shapes;
- `mask_audit`: a file path; `MaskAudit` then appends one JSON line per step saying
  whether the stepped action was legal under the mask the agent was shown (tests use it
  to prove that masked actions never reach the environment, from any env runner).

Run `python -m argus_env.rllib` to print the spaces and one masked observation.
"""

from __future__ import annotations

import json
import os

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from .check.report import normalise_encoding
from .registry import DEFAULT_ENV_ID

ENV_NAME = "argus-masked"
WRAPPER_KEYS = ("env_id", "max_episode_steps", "shape", "mask_audit")
OBS_HIGH = 4.0


def normalise_report(report: np.ndarray) -> np.ndarray:
    """A `KernelEnv` report observation (`ReportLayout`: generic slots, then the task's
    block) scaled into [0, 1] (`argus_env.check.report.normalise_encoding`)."""
    return normalise_encoding(report)


def normalise_perf(perf: np.ndarray) -> np.ndarray:
    """log1p(TFLOP/s) / 8 (1000 TFLOP/s -> 0.86), then the fractions of the roofline, of
    the library and the best fraction so far, clipped to [0, OBS_HIGH]."""
    p = np.asarray(perf, dtype=np.float32).copy()
    p[0] = p[0] / 8
    return np.clip(p, 0.0, OBS_HIGH)


def flatten_observation(obs: dict) -> np.ndarray:
    """The policy's input vector from a `KernelEnv` Dict observation."""
    return np.concatenate([np.clip(np.asarray(obs["config"], np.float32), 0, 1),
                           normalise_report(obs["report"]),
                           normalise_perf(obs["perf"])]).astype(np.float32)


def masked_observation(obs: dict) -> dict:
    return {"action_mask": np.asarray(obs["action_mask"], dtype=np.float32),
            "observations": flatten_observation(obs)}


class MaskedObservation(gym.ObservationWrapper):
    """`KernelEnv`'s Dict observation -> `{"action_mask", "observations"}` (discrete mode)."""

    def __init__(self, env: gym.Env):
        super().__init__(env)
        if not isinstance(env.action_space, spaces.Discrete):
            raise ValueError("action masking needs discrete actions (mode='discrete'), "
                             f"got {env.action_space}")
        space = env.observation_space
        dim = sum(space[k].shape[0] for k in ("config", "report", "perf"))
        self.observation_space = spaces.Dict({
            "action_mask": spaces.Box(0.0, 1.0, (env.action_space.n,), np.float32),
            "observations": spaces.Box(0.0, OBS_HIGH, (dim,), np.float32)})

    def observation(self, obs: dict) -> dict:
        return masked_observation(obs)


class ShapeChoice(gym.Wrapper):
    """Resets without an explicit shape draw one of `shapes` (the env's `np_random`)."""

    def __init__(self, env: gym.Env, shapes):
        super().__init__(env)
        self.shapes = [shapes] if isinstance(shapes, str) else list(shapes)
        if not self.shapes:
            raise ValueError("shape: give a name or a non-empty list of names")

    def reset(self, *, seed=None, options=None):
        options = dict(options or {})
        if "shape" not in options:
            if seed is not None:  # seed the env's generator first, so the draw follows it
                gym.Env.reset(self.env.unwrapped, seed=seed)
                seed = None
            rng = self.env.unwrapped.np_random
            options["shape"] = self.shapes[int(rng.integers(len(self.shapes)))]
        return self.env.reset(seed=seed, options=options)


class MaskAudit(gym.Wrapper):
    """Counts steps whose action was masked (mask bit 0) in the observation the agent
    was last shown; with `path`, appends `{"pid", "action", "legal"}` per step as JSON
    lines (appends of one short line are atomic, so many processes can share a file)."""

    def __init__(self, env: gym.Env, path: str | None = None):
        super().__init__(env)
        self.path = path
        self.steps = self.violations = 0
        self._mask = None

    def reset(self, **kwargs):
        obs, info = self.env.reset(**kwargs)
        self._mask = np.asarray(obs["action_mask"]).copy()
        return obs, info

    def step(self, action):
        a = int(action)
        legal = self._mask is not None and 0 <= a < len(self._mask) and bool(self._mask[a])
        self.steps += 1
        self.violations += not legal
        if self.path:
            with open(self.path, "a") as f:
                f.write(json.dumps({"pid": os.getpid(), "action": a, "legal": legal}) + "\n")
        obs, reward, terminated, truncated, info = self.env.step(action)
        self._mask = np.asarray(obs["action_mask"]).copy()
        return obs, reward, terminated, truncated, info


def read_audit(path: str) -> dict:
    """Totals of a `MaskAudit` file: steps, violations, processes that wrote."""
    steps = violations = 0
    pids = set()
    if os.path.exists(path):
        with open(path) as f:
            for line in f:
                row = json.loads(line)
                steps += 1
                violations += not row["legal"]
                pids.add(row["pid"])
    return {"steps": steps, "violations": violations, "pids": sorted(pids)}


def make_raw_env(env_config: dict | None = None) -> gym.Env:
    """The Argus environment with its registration's wrappers, a time limit, and the
    optional shape choice and mask audit; Dict observations as `KernelEnv` gives them."""
    import argus_env  # noqa: F401  (registers the ids)
    cfg = dict(env_config or {})
    env_id = cfg.pop("env_id", DEFAULT_ENV_ID)
    steps = cfg.pop("max_episode_steps", None)
    shape = cfg.pop("shape", None)
    audit = cfg.pop("mask_audit", None)
    env = gym.make(env_id, max_episode_steps=steps, **cfg) if steps else gym.make(env_id, **cfg)
    if shape:
        env = ShapeChoice(env, shape)
    if audit:
        env = MaskAudit(env, audit)
    return env


def make_env(env_config: dict | None = None) -> MaskedObservation:
    """What RLlib's env runners build: `make_raw_env` under `MaskedObservation`."""
    return MaskedObservation(make_raw_env(env_config))


env_creator = make_env


def register(name: str = ENV_NAME) -> str:
    """`ray.tune.register_env(name, make_env)` (its `env_config` names the env id); returns
    the name for `config.environment`."""
    from ray.tune.registry import register_env
    register_env(name, make_env)
    return name


def register_ids() -> list[str]:
    """Every registered Argus id under its own name in Ray Tune's registry (`make_env` with
    that id), so `config.environment("Argus-GEMM-v0")` works in every env runner."""
    from ray.tune.registry import register_env

    from .envs import ENV_IDS
    for env_id in ENV_IDS:
        register_env(env_id, _creator(env_id))
    return list(ENV_IDS)


def _creator(env_id: str):
    def make(env_config=None) -> MaskedObservation:
        return make_env({**dict(env_config or {}), "env_id": env_id})
    return make


if __name__ == "__main__":
    env = make_env({"correctness": "none", "shape": "decode-16", "max_episode_steps": 8})
    obs, info = env.reset(seed=0)
    print(env.observation_space)
    print("legal actions:", int(obs["action_mask"].sum()), "of", env.action_space.n)
    print("observations:", np.round(obs["observations"], 3))
    assert env.observation_space.contains(obs), "observation outside its space"
