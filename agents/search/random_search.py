"""Random search: legal actions drawn uniformly; submits the best state at the end.

Each step picks a random legal transformation (from the observation's `action_mask`).
When the budget is nearly spent, the agent undoes its way back to the best measured
state it saw and submits it. Uses only the environment's public API.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from argus_env.agents.tracking import trackable
from argus_env.envs.record import EpisodeRecord, Recorder


@dataclass
class Args:
    budget: int = 50
    """environment steps, the final undo/submit steps included"""
    seed: int = 0
    """seeds the environment's reset and the agent's choices"""
    shape: str | None = None
    """shape name (or None: drawn from the environment's split)"""
    track: bool = False
    """log each step and a summary to W&B (offline by default; agents/tracking.py)"""


@trackable("random")
def run(env, args: Args, progress=None) -> EpisodeRecord:
    rng = np.random.default_rng(args.seed)
    rec = Recorder(env, "random", args.seed)
    obs, info = env.reset(seed=args.seed, options={"shape": args.shape} if args.shape else None)
    rec.start(info)
    catalog = env.unwrapped.catalog
    submit = catalog.index(("submit", None))
    undo = catalog.index(("undo", None))
    path: list[int] = []                    # transformations applied since the start
    best, best_depth = obs["perf"][2], 0
    # room for this step, the undos back to the best state it may leave, and the submit
    while rec.rec.steps + 1 + (len(path) + 1 - best_depth) + 1 <= args.budget:
        legal = [i for i in np.flatnonzero(obs["action_mask"]) if i not in (submit, undo)]
        if not legal:
            break
        a = int(rng.choice(legal))
        obs, reward, term, trunc, info = env.step(a)
        rec.step(a, reward, info)
        if info["error"] is None:
            path.append(a)
            if obs["perf"][2] > best:
                best, best_depth = obs["perf"][2], len(path)
        if progress:
            progress(rec.rec)
        if term or trunc:
            return rec.rec
    return _finish(env, rec, path, best_depth, undo, submit, progress)


def _finish(env, rec: Recorder, path: list, best_depth: int, undo: int, submit: int, progress):
    """Undo back to the best state seen, then submit it."""
    for _ in range(len(path) - best_depth):
        obs, reward, term, trunc, info = env.step(undo)
        rec.step(undo, reward, info)
        if term or trunc:
            return rec.rec
    obs, reward, term, trunc, info = env.step(submit)
    rec.step(submit, reward, info)
    if progress:
        progress(rec.rec)
    return rec.rec
