"""Experiment tracking with Weights & Biases, offline unless asked otherwise.

    from argus_env.agents.tracking import start_run
    run = start_run("Argus-GEMM-v0", "ppo", seed=0, config=asdict(args))
    run.log({"episode_return_mean": 0.3}, step=1)
    run.finish()

- Offline by default: `mode` comes from `WANDB_MODE` when the user set it, else
  "offline", so nothing reaches the network; `wandb sync <dir>/wandb/offline-run-*`
  uploads a run later.
- Files go under `dir` (else `$WANDB_DIR`, else `./wandb`); W&B itself puts each run in
  `<dir>/wandb/offline-run-<date>_<time>-<id>/` (`run-<id>.wandb`, `files/`, `logs/`).
- Runs are named CleanRL's way, `env__agent__seed__time` (time in seconds since the
  epoch), and the name is also the run id, so the run's folder carries it.
- `wandb` is imported only when a run starts; when it is not installed, `start_run`
  raises an ImportError that says how to install it.

Search agents opt in with an `Args.track` field and the `trackable("name")` decorator on
their `run`, which logs one row per environment step and a summary at the end; any agent
is logged so by `run_agent(module, env, args, wandb=True)` (`argus run --wandb`,
`argus bench --wandb`).
"""

from __future__ import annotations

import dataclasses
import functools
import os
import time
from pathlib import Path


def run_name(env_id: str, agent: str, seed: int, when: float | None = None) -> str:
    return f"{env_id}__{agent}__{seed}__{int(time.time() if when is None else when)}"


class Tracker:
    """A started W&B run: `log(metrics, step)`, `summary(metrics)`, `finish()`; a context
    manager too."""

    def __init__(self, run, name: str, dir: str):
        self.run, self.name, self.dir = run, name, dir

    def log(self, metrics: dict, step: int | None = None) -> None:
        flat = {k: v for k, v in _flatten(metrics).items() if _loggable(v)}
        self.run.log(flat, step=step)

    def summary(self, metrics: dict) -> None:
        for k, v in _flatten(metrics).items():
            if _loggable(v):
                self.run.summary[k] = v

    def finish(self) -> None:
        self.run.finish()

    @property
    def run_dir(self) -> str:
        """This run's folder (`<dir>/wandb/offline-run-...-<name>` when offline)."""
        return str(Path(self.run.dir).parent)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.finish()


def start_run(env_id: str, agent: str, seed: int, config: dict | None = None,
              dir: str | None = None, project: str | None = None, mode: str | None = None,
              group: str | None = None, name: str | None = None) -> Tracker:
    """Start a W&B run named `env__agent__seed__time` (or `name`) with `config` (an
    agent's Args)."""
    try:
        import wandb
    except ImportError as e:
        raise ImportError("tracking needs wandb: pip install -e '.[track]'") from e
    name = name or run_name(env_id, agent, seed)
    root = dir or os.environ.get("WANDB_DIR") or "./wandb"
    Path(root).mkdir(parents=True, exist_ok=True)
    run = wandb.init(project=project or os.environ.get("WANDB_PROJECT", "argus"),
                     name=name, id=name, group=group, dir=root,
                     mode=mode or os.environ.get("WANDB_MODE") or "offline",
                     config=_config(config or {}), job_type=agent, reinit="create_new",
                     settings=wandb.Settings(console="off", x_disable_stats=True))
    return Tracker(run, name, root)


def trackable(agent: str):
    """Decorator for a search agent's `run(env, args, progress=None)`: when `args.track`
    is true, the episode is played through `tracked` (each step and the summary logged to
    a W&B run named `env__agent__seed__time`)."""

    def wrap(run_fn):
        @functools.wraps(run_fn)
        def run(env, args, progress=None):
            if not getattr(args, "track", False):
                return run_fn(env, args, progress)
            return tracked(run_fn, env, args, progress, agent=agent)
        return run
    return wrap


def run_agent(module, env, args, progress=None, *, agent: str, wandb: bool = False,
              name: str | None = None, group: str | None = None):
    """`module.run(env, args, progress)`, logged to one W&B run when `wandb` is true: what
    `argus run --wandb` and `argus bench --wandb` call, for any agent. An agent's own
    `track` is turned off for the call, so the episode makes one run, not two."""
    if not wandb:
        return module.run(env, args, progress=progress)
    plain = dataclasses.replace(args, track=False) if getattr(args, "track", False) else args
    return tracked(module.run, env, plain, progress, agent=agent, name=name, group=group,
                   config=_config(args))


def tracked(run_fn, env, args, progress=None, *, agent: str, name: str | None = None,
            group: str | None = None, config: dict | None = None):
    """Play `run_fn(env, args, progress)` with every env step (reward, best fraction of the
    library so far) and the episode's summary logged to a W&B run; the record is returned."""
    env_id = env.spec.id if getattr(env, "spec", None) else type(env.unwrapped).__name__
    tracker = start_run(env_id, agent, getattr(args, "seed", 0),
                        _config(args) if config is None else config, name=name, group=group)
    steps = StepLog(tracker, progress)
    try:
        rec = run_fn(env, args, steps)
        steps.log(rec)                 # the steps after the agent's last progress call
        tracker.summary(episode_summary(rec))
        return rec
    finally:
        tracker.finish()


class StepLog:
    """A progress callback that logs each env step once, in order. Agents report progress
    after most steps, not all (an undo, a replay), so every call logs the steps since the
    last one: the best fraction from the trace (it spans the agent's resets) and, for the
    steps of the current episode, the reward and throughput."""

    def __init__(self, tracker: Tracker, progress=None):
        self.tracker, self.progress, self.logged = tracker, progress, 0

    def __call__(self, rec) -> None:
        self.log(rec)
        if self.progress:
            self.progress(rec)

    def log(self, rec) -> None:
        before = rec.env_steps - rec.steps     # env steps of the episodes before this one
        for step in range(self.logged + 1, rec.env_steps + 1):
            row = {"best_frac_anchor": rec.trace[step - 1][1] if step <= len(rec.trace)
                   else rec.best_frac_anchor}
            if step > before:
                i = step - before - 1
                row.update(reward=rec.rewards[i], tflops=rec.step_tflops[i])
            if step == rec.env_steps:
                row.update(best_tflops=rec.best_tflops, **{"return": rec.return_})
            self.tracker.log(row, step=step)
        self.logged = max(self.logged, rec.env_steps)


def episode_summary(rec) -> dict:
    """The figures of an episode record that a run's summary keeps."""
    return {"return": rec.return_, "best_frac_anchor": rec.best_frac_anchor,
            "final_frac_anchor": rec.final_frac_anchor, "best_tflops": rec.best_tflops,
            "final_tflops": rec.final_tflops, "baseline_tflops": rec.baseline_tflops,
            "steps": rec.steps, "env_steps": rec.env_steps, "submitted": rec.submitted,
            "shape": rec.shape, "invalid_actions": rec.invalid_actions,
            "violations_met": dict(rec.violations_met), "violations_fixed": rec.violations_fixed}


def _config(config) -> dict:
    if dataclasses.is_dataclass(config) and not isinstance(config, type):
        return dataclasses.asdict(config)
    return dict(config)


def _flatten(d: dict, prefix: str = "") -> dict:
    out = {}
    for k, v in d.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict):
            out.update(_flatten(v, key + "/"))
        else:
            out[key] = v
    return out


def _loggable(v) -> bool:
    if isinstance(v, bool) or v is None:
        return isinstance(v, bool)
    if isinstance(v, (int, float, str)):
        return True
    return hasattr(v, "item") and getattr(v, "size", 2) == 1
