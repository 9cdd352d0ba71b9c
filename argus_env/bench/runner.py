"""`argus bench`: every agent of a suite on every env, track, shape and seed, under a
step budget, appending one JSON line per episode to `<out>/<name>.jsonl`.

    argus bench                                   # configs/bench/default.yaml -> results/default.jsonl
    argus bench --agents greedy --seeds 0 1 --budget 10 --name quick

Resumable: episodes whose (agent, env, shape, seed) is already in the file are skipped,
so an interrupted run continues where it stopped; a file made with another budget,
measure, hardware, mode or reward is refused rather than mixed. In table and model mode
every episode is exactly reproducible: two runs give the same lines but for `created`
and `seconds`.

Envs of one (env id, measure, hardware) share one `Evaluator`, whose answers depend only
on the program and the shape when the backend is deterministic: the cache makes a suite
faster and changes no figure (the gpu backend gets a fresh evaluator per episode).
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable

from . import results as R
from .config import BenchConfig, Episode
from .leaderboard import counted


@dataclass
class BenchSummary:
    path: Path
    ran: int
    skipped: int
    seconds: float


class Runner:
    """Plays a suite's episodes; with `wandb`, each episode is logged to a W&B run named
    `env__agent__seed__time__shape` (the shape: a suite plays several shapes of one agent,
    env and seed within a second), grouped by the suite's name."""

    def __init__(self, config: BenchConfig, out_dir: str | Path = "results", wandb: bool = False):
        self.config, self.wandb = config, wandb
        self.path = Path(out_dir) / f"{config.name}.jsonl"
        self._evaluators: dict = {}

    # ------------------------------------------------------------ one episode
    def make_env(self, env_id: str, track: str, budget: int | None = None):
        import gymnasium as gym

        import argus_env  # noqa: F401  (registers the envs)
        c = self.config
        kwargs = dict(mode=c.mode, measure=c.measure, hardware=c.hardware, reward=c.reward,
                      split=track, max_episode_steps=max(budget or c.budget, 1))
        if c.measure in ("model", "table"):
            kwargs["estimator"] = c.estimator
            kwargs["model_anchor"] = c.model_anchor
        kwargs["catalog"] = c.catalog_for(env_id)
        pinned = c.tables_for(env_id)
        if pinned is not None:   # the rows the suite's board was played against
            kwargs["table_snapshot"] = pinned
        env = gym.make(env_id, **kwargs)
        share(env, self._evaluators)
        return env

    def play(self, ep: Episode, progress: Callable | None = None) -> dict:
        """Play one episode and return its results line."""
        from argus_env.agents.tracking import run_agent, run_name
        c = self.config
        module = c.agent_module(ep.agent)
        budget = ep.budget or c.budget
        args = c.agent_args(ep.agent, ep.seed, ep.shape, budget)
        env = self.make_env(ep.env_id, ep.track, budget)
        t0 = time.perf_counter()
        record = run_agent(module, env, args, progress, agent=ep.agent, wandb=self.wandb,
                           name=f"{run_name(ep.env_id, ep.agent, ep.seed)}__{ep.shape}",
                           group=c.name)
        record.seconds = round(time.perf_counter() - t0, 2)
        record.agent = ep.agent   # the leaderboard entry's name (the module's may differ)
        line = R.to_line(record, **R.line_fields(
            env, record, track=ep.track, budget=budget, reward=c.reward, suite=c.name,
            agent_args=_jsonable(asdict(args))))
        env.close()
        return line

    # ------------------------------------------------------------ the suite
    def pending(self) -> tuple[list[Episode], int]:
        """Episodes not yet in the results file, and how many are."""
        R.repair(self.path)
        done = {}
        for line in R.read_lines(self.path):
            done[R.line_key(line)] = line
        for line in done.values():
            want = self.config.fingerprint(line["env_id"])
            got = {k: R.line_setting(line, k) for k in want}
            if got != want or (self.config.budgets
                               and line.get("budget") not in self.config.budget_axis()):
                got["budget"], want["budget"] = line.get("budget"), \
                    want.get("budget", self.config.budget_axis())
                raise ValueError(f"{self.path} holds episodes made with {got}, this suite "
                                 f"wants {want}: use another --name or another --out-dir")
        episodes = self.config.episodes()
        todo = [e for e in episodes if e.key not in done]
        return todo, len(episodes) - len(todo)

    def run(self, console=None) -> BenchSummary:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        todo, skipped = self.pending()
        t0 = time.perf_counter()
        with _Display(console, len(todo) + skipped, skipped, max(self.config.budget_axis())) as show:
            for ep in todo:
                show.start(ep)
                line = self.play(ep, progress=show.step)
                R.append_line(self.path, line)
                show.done(ep, line)
        return BenchSummary(self.path, len(todo), skipped, time.perf_counter() - t0)


class _Display:
    """A rich progress display: the suite's episodes and the current one's steps."""

    def __init__(self, console, total: int, skipped: int, budget: int):
        self.console, self.total, self.skipped, self.budget = console, total, skipped, budget
        self.bar = None

    def __enter__(self):
        if self.console is None:
            return self
        from rich.progress import (BarColumn, MofNCompleteColumn, Progress, TextColumn,
                                   TimeElapsedColumn, TimeRemainingColumn)
        self.bar = Progress(TextColumn("{task.description}", style="bold"), BarColumn(),
                            MofNCompleteColumn(), TimeElapsedColumn(), TimeRemainingColumn(),
                            console=self.console, transient=False)
        self.bar.__enter__()
        self.suite = self.bar.add_task("episodes", total=self.total, completed=self.skipped)
        self.episode = self.bar.add_task("", total=self.budget)
        return self

    def start(self, ep: Episode) -> None:
        if self.bar:
            self.label = f"{ep.agent} {ep.env_id} {ep.track}/{ep.shape} seed {ep.seed}"
            self.ep_budget = ep.budget or self.budget
            self.bar.reset(self.episode, total=self.ep_budget, description=self.label)

    def step(self, rec) -> None:
        if self.bar:
            self.bar.update(self.episode, completed=min(rec.env_steps, self.ep_budget),
                            description=f"{self.label}: best {rec.best_frac_anchor:.2f}x library")

    def done(self, ep: Episode, line: dict) -> None:
        if self.bar:
            self.bar.advance(self.suite)
            self.bar.console.print(
                f"{ep.agent:>14} {ep.env_id} {ep.track:5} {ep.shape:14} seed {ep.seed}: "
                f"submitted {line['final_frac_anchor']:.3f}x library, best "
                f"{line['best_frac_anchor']:.3f}x, {counted(line['env_steps'], 'step')}, "
                f"{line['seconds']:.1f} s")

    def __exit__(self, *exc):
        if self.bar:
            self.bar.__exit__(*exc)


def share(env, evaluators: dict) -> None:
    """Give `env` the evaluator of earlier envs of its task, measure and hardware, when
    its backend is deterministic (set after `gym.make`: an evaluator among the make
    arguments would make the env's spec uncopyable)."""
    core = env.unwrapped
    backend = core.evaluator.backend
    if not backend.deterministic:
        return
    from ..measure.analytic import format_snapshot
    snapshot = getattr(backend, "snapshot", None)
    key = (core.task.name, type(backend).__name__, getattr(core.profile, "name", ""),
           getattr(backend, "estimator", None), getattr(backend, "model_anchor", None),
           format_snapshot(snapshot) if snapshot is not None else None,
           getattr(backend, "fit", None))
    if key in evaluators:
        core.evaluator = evaluators[key]
    else:
        evaluators[key] = core.evaluator


def _jsonable(d: dict) -> dict:
    import json
    return json.loads(json.dumps(d, default=str))


def run_bench(config: BenchConfig, out_dir: str | Path = "results", console=None) -> BenchSummary:
    """Run (or resume) a suite; see the module docstring."""
    return Runner(config, out_dir).run(console)
