"""A prior over single catalog actions from the knowledge base, for search agents.

Each plan of the knowledge base (`entries/*.md`, front-matter `plans`) whose condition holds
at the current shape and configuration expects a fraction of the library; the log of that
over the current fraction, shared among the plan's calls not yet applied, is what each of
those calls may gain. An action's prior is the largest such share (0 where no plan names
it). The same ranking the scripted planner (`agents/llm/scripted.py`) gives single moves,
without its episode and memory terms; only the env's public facts are read.
"""

from __future__ import annotations

import math

from . import load_entries
from .conditions import evaluate, holds, situation


class ActionPrior:
    """Knowledge-base scores of the catalog's transformations, for one env."""

    def __init__(self, env, entries=None):
        core = env.unwrapped
        self.core = core
        self.calls = {f"{n}({v!r})": i for i, (n, v) in enumerate(core.catalog)
                      if n not in ("undo", "submit")}
        task = core.task.name
        entries = entries if entries is not None else load_entries()
        self.plans = [p for e in entries for p in e.plans
                      if task in (p.tasks or e.tasks) and all(c in self.calls for c in p.actions)]

    def _holding(self, names: dict):
        """(plan, expected log gain over the current fraction) for each plan whose
        condition holds at `names` (`situation`) and whose expectation evaluates."""
        frac = max(float(names["frac"]), 1e-6)
        for plan in self.plans:
            if not holds(plan.when, names):
                continue
            try:
                yield plan, math.log(max(float(evaluate(plan.expect, names)), 1e-6) / frac)
            except (ValueError, ZeroDivisionError, OverflowError):
                continue

    def targets(self, sizes: dict, config: dict, perf) -> list[tuple[float, dict]]:
        """The configurations the plans that hold here lead to (`config` with each plan's
        calls applied), with their expected log gain, best first; one per configuration."""
        best: dict[tuple, tuple[float, dict]] = {}
        for plan, gain in self._holding(situation(self.core, sizes, config, perf)):
            target = dict(config)
            target.update(self.core.catalog[self.calls[c]] for c in plan.actions)
            key = tuple(sorted((k, repr(v)) for k, v in target.items()))
            if target != config and (key not in best or best[key][0] < gain):
                best[key] = (gain, target)
        return sorted(best.values(), key=lambda gt: -gt[0])

    def scores(self, sizes: dict, config: dict, perf) -> dict[int, float]:
        """action index -> expected log gain of applying it here (absent: nothing known):
        the largest share of a holding plan's gain among its calls not yet applied."""
        out: dict[int, float] = {}
        for plan, gain in self._holding(situation(self.core, sizes, config, perf)):
            left = [self.calls[c] for c in plan.actions
                    if config.get(self.core.catalog[self.calls[c]][0]) !=
                    self.core.catalog[self.calls[c]][1]]
            for a in left:
                out[a] = max(out.get(a, -math.inf), gain / len(left))
        return out
