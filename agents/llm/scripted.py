"""The knowledge-guided planner without a model: the knowledge base's plans in order of
expected gain, violations repaired from the checker's report, episodic memory across
episodes (agent `kb`).

The same planner as the LLM one (`planner.py`), with the model's choice replaced by a
scripted rule. Each decision, at the current program (clean and measured):

1. **Rank.** Every plan of the knowledge base (`agents/knowledge/entries`, front-matter
   `plans`: a condition, catalog calls, the fraction of the library it should reach) whose
   condition holds for this shape and configuration (`knowledge/conditions.py`) and that
   still changes something gets an expected log gain: its own `expect` over the current
   fraction of the library (capped by the roofline the observation reports), blended with
   what this episode measured when it played the plan before and what the memory says it
   gained on this shape or shapes of its class. A path remembered as the best on this
   very shape is a plan too. Plans expected to gain are played best first; then single
   transformations from the catalog, ranked the same way (the plans that name them, this
   episode's measured gains, the memory's lessons), as a greedy climb.
2. **Play.** A plan's calls are applied in order (those already set or masked are skipped,
   as is any that would lead to a program already measured or refuted); the best program
   along the plan is kept if it beats where the plan started, else the planner goes back.
3. **Repair.** When the checker refutes a program, the violations in `info["report"]` are
   matched against the entries' `repairs` (an invariant and a phrase of the message, e.g.
   exactly_once "without an atomic add" -> `combine('atomic')`), and the repair is applied;
   a program still refuted is undone and never played again.

Ablations, through the same code: `knowledge=False` plays every entry's plans in a
seeded random order with no condition and no expected gain (single moves in random
order too); `report=False` never reads the report, so a refuted program is undone like
any unmeasured one (no repair); `memory=False` starts every episode without memory.
Deterministic per seed; every env step (undo and submit too) counts against the budget,
which always leaves room to return to the best program and submit it
(`agents/search/walk.py`). Each decision is kept in the episode record's `transcript`.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from argus_env.agents.knowledge import Entry, load_entries
from argus_env.agents.knowledge.conditions import evaluate, holds, situation
from argus_env.agents.knowledge.prior import ActionPrior
from argus_env.agents.search.walk import Walker
from argus_env.agents.tracking import trackable
from argus_env.envs.record import EpisodeRecord

from .memory import Memory, StepRecord
from .prompt import summary_line


@dataclass
class Args:
    budget: int = 30
    """environment steps, the final undo/replay/submit steps included"""
    seed: int = 0
    """seeds the environment's reset and every order the planner draws"""
    shape: str | None = None
    """shape name (or None: drawn from the environment's split)"""
    knowledge: bool = True
    """rank the knowledge base's plans by expected gain where their conditions hold;
    False: every plan in a seeded random order, conditions and expected gains ignored"""
    report: bool = True
    """read the checker's report and repair violations with the entries' repairs; False:
    a refuted program is undone like any unmeasured one"""
    memory: bool = True
    """use episodic memory: plan outcomes, lessons and best paths of earlier episodes"""
    memory_path: str = "none"
    """JSON file of the memory ("{task}" and "{seed}" are filled in); auto:
    $ARGUS_CACHE_DIR/llm/kb-memory-<task>.json; none: in-process only (empty at start
    unless the caller passes a Memory), so a run is reproducible on its own"""
    memory_update: bool = True
    """write what this episode taught back to memory_path (False: read it only)"""
    prior_weight: float = 1.0
    """how many measured outcomes a plan's own expected gain counts as in the blend"""
    class_weight: float = 0.5
    """weight of memory from another shape of the same class (decode, ragged, large)"""
    min_gain: float = 0.0
    """a plan's program is kept when it beats the starting one by more than this fraction"""
    fix_steps: int = 1
    """repair steps tried after a refuted program before undoing it"""
    kick: int = 0
    """when no untried move is left and budget remains: from the best program, this many
    random legal single calls (a seeded perturbation, kept whatever it measures), then the
    climb again from there; repeated until the budget runs out (0: stop and submit, the
    planner as the boards played it)"""
    track: bool = False
    """log each step and a summary to W&B (offline by default; agents/tracking.py)"""


@dataclass
class Move:
    """A plan (or a single call) the planner may play from the current program."""

    key: str                      # "entry-id#i", "memory", or "call:tile_m(128)"
    calls: list[str]              # catalog calls still to apply
    expected: float = 0.0         # expected log gain (0 without knowledge)
    source: str = "plan"          # plan | memory | single
    why: dict = field(default_factory=dict)


class ScriptedPlanner:
    """One episode of the scripted knowledge-guided planner in a discrete environment."""

    def __init__(self, env, args: Args, memory: Memory | None = None, progress=None,
                 entries: tuple[Entry, ...] | None = None):
        self.env, self.args, self.core = env, args, env.unwrapped
        if self.core.mode != "discrete":
            raise ValueError("the scripted planner plays the discrete environment (mode='discrete')")
        self.w = Walker(env, "kb", args.budget, args.seed, args.shape, progress)
        self.view = self.w.view
        self.rng = np.random.default_rng(args.seed)
        task = self.core.task.name
        self.calls = {f"{n}({v!r})": i for i, (n, v) in enumerate(self.core.catalog)
                      if n not in ("undo", "submit")}
        entries = entries if entries is not None else load_entries()
        self.plans = [(f"{e.id}#{i}", p) for e in entries for i, p in enumerate(e.plans)
                      if task in (p.tasks or e.tasks) and all(c in self.calls for c in p.actions)]
        self.prior = ActionPrior(env, entries)   # single moves' share of the plans' gains
        self.repairs = [r for e in entries if not e.tasks or task in e.tasks for r in e.repairs
                        if all(c in self.calls for c in r.actions)]
        if not args.knowledge:   # the entries in a seeded random order, no ranking
            order = self.rng.permutation(len(self.plans))
            self.plans = [self.plans[i] for i in order]
        self.memory = memory if args.memory else None
        if self.memory is None and args.memory:
            self.memory = _open_memory(args, task)
        self.refuted: set[tuple] = set()          # configurations refuted or failed
        self.tried: set[tuple] = set()            # (configuration, move key) played from there
        self.outcomes: dict[str, list[float]] = {}    # plan key -> log gains this episode
        self.gains: dict[str, list[float]] = {}       # call -> measured log gains this episode
        self.transcript: list[dict] = []

    # ------------------------------------------------------------ episode
    def run(self) -> EpisodeRecord:
        w = self.w
        w.reset()
        w.rec.rec.transcript = self.transcript
        self.shape, self.sizes = w.info["shape"], dict(w.info["sizes"])
        if self.memory is not None:
            self.memory.begin(self.core.task.name, self.shape, self.sizes, w.frac)
        while True:
            move = self.next_move()
            if move is None and self.args.kick > 0 and self._kick():
                continue
            if move is None or not self.play(move):
                break
        rec = w.finish()
        if self.memory is not None:
            self.memory.end(w.best_frac, [self._label(a) for a in w.best_path])
        return rec

    # ------------------------------------------------------------ choosing
    def next_move(self) -> Move | None:
        """The best move from here that has not been played from here and still changes the
        program; None when none is left or the budget has no room for one more step."""
        if not self.w.fits(self.w.path, 2):   # a step, and an undo should it fail
            return None
        config = self.w.config
        cfg = self.view.as_dict(config)
        names = situation(self.core, self.sizes, cfg, self.w.obs["perf"])
        moves = [m for m in self._plan_moves(cfg, names) + self._single_moves(cfg)
                 if (config, m.key) not in self.tried and m.calls]
        if not moves:
            return None
        if not self.args.knowledge:   # plans first, in their seeded order; then single moves
            return moves[0]
        plans = [m for m in moves if m.source != "single" and m.expected > 0]
        if plans:
            return max(plans, key=lambda m: m.expected)   # first of equals: entry order
        return max((m for m in moves if m.source == "single"), key=lambda m: m.expected,
                   default=None)

    def _remaining(self, calls, cfg: dict) -> list[str]:
        out = []
        for call in calls:
            name, value = self.core.catalog[self.calls[call]]
            if cfg.get(name) != value:
                out.append(call)
        return out

    def _plan_moves(self, cfg: dict, names: dict) -> list[Move]:
        out = []
        frac = max(float(self.w.obs["perf"][2]), 1e-6)
        ceiling = frac / float(self.w.obs["perf"][1]) if self.w.obs["perf"][1] > 0 else math.inf
        for key, plan in self.plans:
            calls = self._remaining(plan.actions, cfg)
            if not self.args.knowledge:
                out.append(Move(key, calls))
                continue
            if not calls or not holds(plan.when, names):
                continue
            try:
                expect = float(evaluate(plan.expect, names))
            except (ValueError, ZeroDivisionError, OverflowError):
                continue
            prior = math.log(max(min(expect, ceiling), 1e-6) / frac)
            out.append(self._blend(Move(key, calls), prior, self.outcomes.get(key, []),
                                   self._memory_outcome(key)))
        if self.memory is not None:
            best = self.memory.best_episode(self.shape)
            if best is not None and all(c in self.calls for c in best["best_actions"]):
                calls = self._remaining(best["best_actions"], cfg)
                prior = math.log(max(best["best_frac"], 1e-6) / frac)
                move = Move("memory", calls, prior if self.args.knowledge else 0.0, "memory",
                            {"prior": round(prior, 4), "remembered": round(best["best_frac"], 4)})
                out.insert(0, move)
        return out

    def _single_moves(self, cfg: dict) -> list[Move]:
        legal = self.view.transforms(self.w.obs["action_mask"])
        calls = [self._label(a) for a in legal]
        if not self.args.knowledge:
            return [Move(f"call:{c}", [str(c)], 0.0, "single") for c in self.rng.permutation(calls)]
        # a plan's expected gain, shared among its calls (none below nothing known)
        share = self.prior.scores(self.sizes, cfg, self.w.obs["perf"])
        out = []
        for c in map(str, self.rng.permutation(calls)):   # ties fall in a seeded order
            mem = self.memory.evidence(self.shape, self.sizes, c, self.args.class_weight) \
                if self.memory is not None else (0.0, 0.0)
            out.append(self._blend(Move(f"call:{c}", [c], source="single"),
                                   max(share.get(self.calls[c], 0.0), 0.0),
                                   self.gains.get(c, []), mem))
        return out

    def _memory_outcome(self, key: str) -> tuple[float, float]:
        if self.memory is None:
            return 0.0, 0.0
        return self.memory.outcome(self.shape, self.sizes, key, self.args.class_weight)

    def _blend(self, move: Move, prior: float, episode: list[float], mem: tuple[float, float]) -> Move:
        """Expected log gain: the knowledge's prior, this episode's measured outcomes and the
        memory's, each weighted by how much evidence it is."""
        pw = self.args.prior_weight
        total = pw * prior + sum(episode) + mem[0] * mem[1]
        move.expected = total / (pw + len(episode) + mem[1])
        move.why = {"prior": round(prior, 4), "episode": [round(x, 4) for x in episode],
                    "memory": [round(mem[0], 4), round(mem[1], 2)]}
        return move

    def _kick(self) -> bool:
        """An escape from a local optimum (`kick`): back to the best program, then `kick`
        random legal single calls (to a program not met before where there is one), kept
        whatever they measure (the walker returns to the best one at the end). False when
        the budget has no room for it or no call was taken."""
        w = self.w
        if not w.goto(w.best_path):
            return False
        taken = tries = 0
        while taken < self.args.kick and tries < 3 * self.args.kick:   # refuted ones retried
            tries += 1
            legal = [a for a in self.view.transforms(w.obs["action_mask"])
                     if self.view.after(w.config, a) not in self.refuted]
            # a program not met yet where there is one (the best's neighbours all are)
            calls = [a for a in legal if self.view.after(w.config, a) not in w.known] or legal
            if not calls:
                break
            a = int(self.rng.choice(calls))
            if not w.fits(w.path + [a], 2):
                break
            self.transcript.append({"step": w.rec.rec.env_steps, "action": self._label(a),
                                    "why": "kick: a random move away from the best program"})
            if self.take(a):
                taken += 1
        return taken > 0 and w.fits(w.path, 2)

    # ------------------------------------------------------------ playing
    def play(self, move: Move) -> bool:
        """Play `move` from the current program; keep the best program along it when it beats
        the start, else go back. False when the budget ran out."""
        w = self.w
        start, start_frac, start_cfg = list(w.path), w.frac, w.config
        self.tried.add((start_cfg, move.key))
        best_frac, best_depth = start_frac, len(start)
        reached = 0.0                             # the best measured program the move met
        entry = {"step": w.rec.rec.env_steps, "move": move.key, "source": move.source,
                 "calls": list(move.calls), "expected": round(move.expected, 4), **move.why}
        applied, room = [], True
        for call in move.calls:
            a = self.calls[call]
            name, value = self.core.catalog[a]
            if self.view.as_dict(w.config).get(name) == value or not w.obs["action_mask"][a]:
                continue
            nxt = self.view.after(w.config, a)
            if nxt in self.refuted or nxt in w.known:
                continue
            if not w.fits(w.path + [a], 2):   # the step, and an undo should it fail
                room = False
                break
            if self.take(a):
                applied.append(call)
                reached = max(reached, w.frac)
                if w.frac > best_frac:
                    best_frac, best_depth = w.frac, len(w.path)
        keep = best_frac > start_frac * (1 + self.args.min_gain) and best_depth > len(start)
        target = w.path[:best_depth] if keep else start
        moved = w.goto(target)
        gain = math.log(reached / max(start_frac, 1e-9)) if reached > 0 else None
        if gain is not None and move.source != "single":
            self.outcomes.setdefault(move.key, []).append(gain)
            if self.memory is not None:
                self.memory.note_outcome(move.key, gain)
        entry.update(applied=[str(c) for c in applied], gain=None if gain is None else round(gain, 4), kept=keep,
                     frac=round(w.frac, 4))
        self.transcript.append(entry)
        return room and moved

    def take(self, a: int) -> bool:
        """Step `a`; repair a refuted program from the report (when `report`), else undo it.
        True when it ends on a clean, measured program one or more steps further on."""
        w = self.w
        depth = len(w.path)
        if not self.step(a):
            return False
        if w.frac <= 0:   # refuted here, whatever a repair makes of it
            self.refuted.add(w.config)
        if w.frac <= 0 and self.args.report and w.info["report"]["violations"]:
            self.repair()
        if w.frac > 0:
            return True
        self.refuted.add(w.config)
        while len(w.path) > depth:
            if not self.step(self.view.undo, why="undo: refuted or unmeasured"):
                break
        return False

    def repair(self) -> None:
        """Apply the entries' repairs for the report's violations, up to `fix_steps` steps."""
        w = self.w
        for _ in range(self.args.fix_steps):
            violations = w.info["report"]["violations"]
            if not violations:
                return
            votes: dict[str, int] = {}
            for v in violations:
                for r in self.repairs:
                    if r.invariant == v["invariant"] and r.match in v.get("message", ""):
                        for c in r.actions:
                            votes[c] = votes.get(c, 0) + 1
            options = [c for c in sorted(votes, key=lambda c: -votes[c])
                       if w.obs["action_mask"][self.calls[c]]
                       and self.view.after(w.config, self.calls[c]) not in self.refuted]
            if not options or not w.fits(w.path + [self.calls[options[0]]], 2):
                return
            self.step(self.calls[options[0]], why=f"repair: {', '.join(sorted({v['invariant'] for v in violations}))}")

    def step(self, a: int, why: str | None = None) -> bool:
        """One env step through the walker, noted in memory, the episode's evidence and (for
        undo and repairs) the transcript."""
        w = self.w
        before_frac, before_state = w.frac, summary_line(w.info["program"])
        ok = w.step(a)
        info, label = w.info, self._label(a)
        kinds = sorted({v["invariant"] for v in info["report"]["violations"]}) if self.args.report else []
        if ok and a != self.view.undo and before_frac > 0 and w.frac > 0:
            self.gains.setdefault(label, []).append(math.log(w.frac / before_frac))
        if self.memory is not None:
            self.memory.note(StepRecord(before_state, label, kinds, w.reward, w.frac, info["error"]))
        if why:
            self.transcript.append({"step": w.rec.rec.env_steps, "action": label, "why": why,
                                    "frac": round(w.frac, 4)})
        return ok

    def _label(self, a: int) -> str:
        name, value = self.core.catalog[a]
        return f"{name}()" if value is None else f"{name}({value!r})"


def _open_memory(args: Args, task: str) -> Memory:
    path = args.memory_path
    if path in ("none", "", None):
        return Memory(None)
    if path == "auto":
        root = os.environ.get("ARGUS_CACHE_DIR") or os.path.join(Path.home(), ".cache", "argus")
        path = str(Path(root) / "llm" / f"kb-memory-{task}.json")
    memory = Memory(path.format(task=task, seed=args.seed))
    if not args.memory_update:
        memory.path = None   # read, never written
    return memory


def play(env, args: Args, memory: Memory | None = None, progress=None) -> EpisodeRecord:
    """One episode of the scripted planner; `memory` may be shared across episodes (it is
    used only when `args.memory`)."""
    return ScriptedPlanner(env, args, memory, progress).run()


@trackable("kb")
def run(env, args: Args, progress=None) -> EpisodeRecord:
    """One episode of the scripted planner, its memory from `args.memory_path`."""
    return play(env, args, progress=progress)
