"""Model-based optimisation over the configuration space: Optuna's TPE sampler proposes
configurations, the agent reaches each one through catalog actions and tells the sampler
what it measured.

A configuration is one value per transformation of the catalog (`tile_m`, `stages`,
`tma`, ...; `ConfigView` reads it from the observation). TPE (a tree-structured Parzen
estimator: densities of the values in the best trials against the rest) proposes one;
the agent reaches it the cheapest way: from a program on its path back from here (undo),
or from the best program seen (undo, or reset, which takes no step, and replay), it sets
each differing value with its catalog action, in catalog order among those the action
mask allows. Every program met on the
way is measured too, and joins the sampler's history as a finished trial (once per
configuration). A proposal the mask keeps out of reach (no differing value's action is
legal, or it is reached but breaks an invariant and is not measured) is told to the
sampler as pruned, which TPE ranks below every measured trial; one already measured
costs no step and teaches nothing (told as failed, which TPE ignores). The objective is
the log of the measured fraction of the library anchor, so equal ratios weigh the same
at every shape.

The budget binds every env step, undo and submit included (`walk.Walker`): a proposal
is taken on only when its route leaves room to return to the best program and submit
it; when `max_asks` proposals in a row are known or too far, the agent takes one random
legal step to a configuration it has not measured, and when no step fits, it submits.

Needs Optuna (`pip install argus-env[search]`). Seeded: the env's reset and the
sampler's seed; in table and model modes the same seed gives the same episode.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass

import numpy as np

from argus_env.agents.tracking import trackable
from argus_env.envs.record import EpisodeRecord

from .walk import Walker


@dataclass
class Args:
    budget: int = 50
    """environment steps, undo and the final return to the best program and submit included"""
    seed: int = 0
    """seeds the environment's reset, the sampler and the fallback steps"""
    shape: str | None = None
    """shape name (or None: drawn from the environment's split)"""
    startup: int = 4
    """trials before TPE proposes from its model (random proposals until then); every
    measured program is a trial, the baseline included"""
    candidates: int = 64
    """candidates TPE draws from its model of the good trials per proposal"""
    multivariate: bool = True
    """model the values jointly (a tile size with the stages that fit it) rather than
    each on its own"""
    pool: int = 1
    """proposals asked at once; the one with the shortest route is taken (the others are
    told as failed): TPE does not know that a far configuration costs more steps"""
    max_asks: int = 32
    """proposals in a row that are already measured or too far for the budget left (or,
    over several asks, out of reach at once), before one random legal step instead"""
    prior: str = "knowledge"
    """"knowledge": before TPE's own proposals, the configurations the knowledge base's
    plans lead to from the baseline where their conditions hold and they expect a gain
    (`agents/knowledge/prior.py`), best expected first, as the first proposals (Optuna's
    enqueued trials: autotuning's warm start from known-good configurations); "uniform":
    TPE alone"""
    track: bool = False
    """log each step and a summary to W&B (offline by default; agents/tracking.py)"""


def _optuna():
    try:
        import optuna
    except ImportError as e:
        raise ImportError("the bo agent needs Optuna: pip install argus-env[search] "
                          "(or pip install 'optuna>=5.1,<6')") from e
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    return optuna


class _Sampler:
    """An Optuna study over the configuration space, fed with every measured program."""

    def __init__(self, view, args: Args):
        optuna = self.optuna = _optuna()
        self.names = view.names
        self.dists = {n: optuna.distributions.CategoricalDistribution(view.choices[n])
                      for n in view.names}
        with warnings.catch_warnings():   # multivariate TPE is marked experimental
            warnings.simplefilter("ignore")
            sampler = optuna.samplers.TPESampler(
                seed=args.seed, n_startup_trials=args.startup, n_ei_candidates=args.candidates,
                multivariate=args.multivariate, warn_independent_sampling=False)
        self.study = optuna.create_study(direction="maximize", sampler=sampler)
        self.told: set[tuple] = set()

    def observe(self, config: tuple, frac: float) -> None:
        """A program measured on the way: a finished trial (pruned when unmeasured)."""
        if config in self.told or "?" in config:
            return
        self.told.add(config)
        params = dict(zip(self.names, config))
        state = self.optuna.trial.TrialState
        trial = self.optuna.trial.create_trial(
            params=params, distributions=self.dists,
            **({"value": math.log(frac)} if frac > 0 else {"state": state.PRUNED}))
        self.study.add_trial(trial)

    def enqueue(self, config: dict) -> bool:
        """Propose `config` (transformation name -> value) before TPE does; False when a
        value is none of its transformation's choices."""
        params = {n: config[n] for n in self.names if n in config}
        if len(params) != len(self.names) or \
                any(v not in self.dists[n].choices for n, v in params.items()):
            return False
        self.study.enqueue_trial(params, skip_if_exists=True)
        return True

    def ask(self):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            trial = self.study.ask(self.dists)
        return trial, tuple(trial.params[n] for n in self.names)

    def tell(self, trial, config: tuple, frac: float | None) -> None:
        """The proposal's outcome: measured (`frac` > 0), pruned (0: out of reach or
        broken), or failed (None: known or unaffordable, which TPE ignores)."""
        state = self.optuna.trial.TrialState
        if frac is None:
            self.study.tell(trial, state=state.FAIL)
        elif frac > 0:
            self.study.tell(trial, math.log(frac))
        else:
            self.study.tell(trial, state=state.PRUNED)
        if frac is not None:
            self.told.add(config)


class _Search:
    def __init__(self, env, args: Args, progress):
        self.args = args
        self.walker = Walker(env, "bo", args.budget, args.seed, args.shape, progress)
        self.view = self.walker.view
        self.sampler = _Sampler(self.view, args)
        self.rng = np.random.default_rng(args.seed)
        self.target: tuple | None = None    # the proposal on its way
        self.stalls = 0                     # proposals in a row that took no step

    def step(self, action: int) -> bool:
        w = self.walker
        ok = w.step(action)
        if ok and action != self.view.undo and w.config != self.target:
            self.sampler.observe(w.config, w.frac)
        return ok

    def route(self, target: tuple) -> tuple[int, list[int], list[int]] | None:
        """The cheapest way to `target`: (env steps; the program to start from, as its
        actions from a reset: one on the path back from here, or the best program seen;
        the actions from there), or None when it does not fit the budget."""
        w = self.walker
        starts = [(w.path[:d], w.configs[d]) for d in range(len(w.path), -1, -1)]
        starts.append((w.best_path, w.best_config))
        best = None
        for path, config in starts:
            moves = self.view.moves(config, target)
            if moves is None:
                continue
            cost = w.travel(path) + len(moves)
            if best is None or cost < best[0]:
                best = (cost, path, moves)
        if best is None or not w.fits(best[1] + best[2], best[0]):
            return None
        return best

    def reach(self, target: tuple, start: list[int]) -> bool:
        """Go to `target` by way of the program `start` (actions from a reset)."""
        w = self.walker
        if not w.goto(start):
            return False
        for _ in range(2 * len(self.view.names)):   # a task's follow-up edits may add moves
            moves = self.view.moves(w.config, target)
            if not moves:
                return moves is not None
            legal = [a for a in moves if w.obs["action_mask"][a]]
            if not legal or not w.fits(w.path + legal[:1]) or not self.step(legal[0]):
                return False
        return w.config == target

    def propose(self) -> bool:
        """Ask, reach and tell one proposal; False when nothing could be tried."""
        asked = []
        for _ in range(self.args.max_asks):
            trial, target = self.sampler.ask()
            tried = target in self.walker.known or target in self.sampler.told
            plan = None if tried else self.route(target)
            if plan is None:
                self.sampler.tell(trial, target, None)
            else:
                asked.append((plan[0], len(asked), trial, target, plan))
            if len(asked) >= self.args.pool:
                break
        if not asked or self.stalls >= self.args.max_asks:
            self.stalls = 0
            return self.wander()
        asked.sort(key=lambda x: x[:2])
        for _, _, other, config, _ in asked[1:]:
            self.sampler.tell(other, config, None)
        _, _, trial, target, plan = asked[0]
        self.target, before = target, self.walker.rec.rec.env_steps
        reached = self.reach(target, plan[1])
        self.target = None
        self.stalls = self.stalls + 1 if self.walker.rec.rec.env_steps == before else 0
        self.sampler.tell(trial, target, self.walker.frac if reached else 0.0)
        return True

    def wander(self) -> bool:
        """One random legal step to a configuration not yet measured, if one fits."""
        w = self.walker
        fresh = [a for a in w.legal() if self.view.after(w.config, a) not in w.known
                 and w.fits(w.path + [a])]
        if not fresh:
            return False
        return self.step(int(self.rng.choice(fresh))) or True


@trackable("bo")
def run(env, args: Args, progress=None) -> EpisodeRecord:
    if args.prior not in ("knowledge", "uniform"):
        raise ValueError(f"bo: prior must be 'knowledge' or 'uniform', got {args.prior!r}")
    s = _Search(env, args, progress)
    s.walker.reset()
    s.sampler.observe(s.walker.config, s.walker.frac)
    if args.prior == "knowledge":
        from argus_env.agents.knowledge.prior import ActionPrior
        w = s.walker
        here = dict(zip(s.view.names, w.config))
        for gain, target in ActionPrior(env).targets(dict(w.info["sizes"]), here, w.obs["perf"]):
            if gain > 0:
                s.sampler.enqueue(target)
    while s.walker.left() > 1 and s.propose():
        pass
    return s.walker.finish()
