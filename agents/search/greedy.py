"""Greedy hill-climbing: keep a transformation when the reward is positive, undo it
otherwise.

From the current state the agent tries untried legal transformations in a random order;
one that earns a positive reward (higher measured throughput, no new violation) is kept
and the search continues from the new state; one that does not is undone (an env step
too). When every legal transformation of the current state has been tried, or the budget
is nearly spent, it submits the current state, which is the best it has kept. Uses only
the environment's public API: observations, rewards and `undo`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from argus_env.envs.record import EpisodeRecord, Recorder


@dataclass
class Args:
    budget: int = 50
    """environment steps, undo and submit steps included"""
    seed: int = 0
    """seeds the environment's reset and the agent's order of trials"""
    shape: str | None = None
    """shape name (or None: drawn from the environment's split)"""
    min_gain: float = 1e-6
    """a reward above this keeps the transformation"""


def run(env, args: Args, progress=None) -> EpisodeRecord:
    rng = np.random.default_rng(args.seed)
    rec = Recorder(env, "greedy", args.seed)
    obs, info = env.reset(seed=args.seed, options={"shape": args.shape} if args.shape else None)
    rec.start(info)
    catalog = env.unwrapped.catalog
    undo, submit = catalog.index(("undo", None)), catalog.index(("submit", None))

    def step(a: int):
        nonlocal obs
        obs, reward, term, trunc, info = env.step(a)
        rec.step(a, reward, info)
        if progress:
            progress(rec.rec)
        return reward, term or trunc, info

    tried: set[tuple] = set()
    while rec.rec.steps < args.budget - 2:
        state = tuple(np.round(obs["config"], 4))
        legal = [int(i) for i in np.flatnonzero(obs["action_mask"])
                 if i not in (undo, submit) and (state, int(i)) not in tried]
        if not legal:
            break
        a = int(rng.choice(legal))
        tried.add((state, a))
        reward, done, info = step(a)
        if done:
            return rec.rec
        if info["error"] is None and reward <= args.min_gain:
            _, done, _ = step(undo)
            if done:
                return rec.rec
    step(submit)
    return rec.rec
