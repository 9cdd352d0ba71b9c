"""Greedy hill-climbing with random restarts: keep a transformation when the reward is
positive, undo it otherwise.

From the current state the agent tries untried legal transformations in a random order;
one that earns a positive reward (higher measured throughput, no new violation) is kept
and the climb continues from the new state; one that does not is undone (an env step
too). When every legal transformation of the state has been tried, the climb is stuck:
the agent restarts from the baseline with a few random legal transformations (a
perturbation) and climbs again. With the budget nearly spent it replays the best path
found (from a reset) and submits. Uses only the environment's public API: observations,
rewards, `undo` and `reset`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from argus_env.agents.tracking import trackable
from argus_env.envs.record import EpisodeRecord, Recorder


@dataclass
class Args:
    budget: int = 50
    """environment steps over all climbs, undo, replay and submit steps included"""
    seed: int = 0
    """seeds the environment's reset and the agent's order of trials"""
    shape: str | None = None
    """shape name (or None: drawn from the environment's split)"""
    min_gain: float = 1e-6
    """a reward above this keeps the transformation"""
    perturb: int = 2
    """random legal transformations applied after each restart"""
    track: bool = False
    """log each step and a summary to W&B (offline by default; agents/tracking.py)"""


class _Climber:
    def __init__(self, env, args: Args, progress):
        self.env, self.args, self.progress = env, args, progress
        self.rng = np.random.default_rng(args.seed)
        self.rec = Recorder(env, "greedy", args.seed)
        catalog = env.unwrapped.catalog
        self.undo, self.submit = catalog.index(("undo", None)), catalog.index(("submit", None))
        self.path: list[int] = []         # kept transformations since the last reset
        self.best_path: list[int] = []
        self.best = -1.0
        self.shape = args.shape
        self.obs = None

    def reset(self, first: bool = False) -> None:
        opts = {"shape": self.shape} if self.shape else None
        self.obs, info = self.env.reset(seed=self.args.seed, options=opts)
        if first:
            self.rec.start(info)
            self.shape = self.shape or info["shape"]
        else:
            self.rec.restart(info)
        self.path = []
        self._note()

    def step(self, a: int):
        self.obs, reward, term, trunc, info = self.env.step(a)
        self.rec.step(a, reward, info)
        if self.progress:
            self.progress(self.rec.rec)
        return reward, term or trunc, info

    def _note(self) -> None:
        frac = float(self.obs["perf"][2])
        if frac > self.best:
            self.best, self.best_path = frac, list(self.path)

    def left(self) -> int:
        return self.args.budget - self.rec.rec.env_steps

    def legal(self) -> list[int]:
        return [int(i) for i in np.flatnonzero(self.obs["action_mask"])
                if i not in (self.undo, self.submit)]

    def climb(self) -> None:
        tried: set[tuple] = set()
        while self.left() > len(self.best_path) + 3:
            state = tuple(np.round(self.obs["config"], 4))
            options = [a for a in self.legal() if (state, a) not in tried]
            if not options:
                return
            a = int(self.rng.choice(options))
            tried.add((state, a))
            reward, done, info = self.step(a)
            if info["error"] is None and reward > self.args.min_gain:
                self.path.append(a)
                self._note()
            elif info["error"] is None:
                self.step(self.undo)


@trackable("greedy")
def run(env, args: Args, progress=None) -> EpisodeRecord:
    c = _Climber(env, args, progress)
    c.reset(first=True)
    c.climb()
    while c.left() > len(c.best_path) + args.perturb + 4:
        c.reset()
        for _ in range(args.perturb):
            legal = c.legal()
            if legal:
                a = int(c.rng.choice(legal))
                _, _, info = c.step(a)
                if info["error"] is None:
                    c.path.append(a)
        c._note()
        c.climb()
    if c.path != c.best_path:
        c.reset()
        for a in c.best_path:
            c.step(a)
            c.path.append(a)
    c.step(c.submit)
    return c.rec.rec
