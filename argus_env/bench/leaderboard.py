"""Leaderboards from results files: per env, track and budget, agents ranked by the kernels
they submit.

    argus leaderboard results/default.jsonl --out-dir leaderboard/   # leaderboard.md + .html
    argus leaderboard results/*.jsonl --check my-submission/      # replay a submission first

An episode on a board is its agent, env, shape, seed *and budget*: results of several
budgets (the same suite at 10 and at 50 env steps, in one file or several) make a board
per budget, each ranked and given its best known on its own (a longer budget finds
more), titled with its budget; the same episode twice at one budget is an error.

Figures, per (env, track, budget) and agent:

- **score**: the geometric mean over the track's shapes of the fraction of the library
  anchor (cuBLAS for GEMM) that the *submitted* kernel reaches, each shape's fraction the
  mean over seeds (an episode whose last step reached the budget, the env's step limit,
  without `submit()` was submitted there implicitly: its final program counts, as its
  reward did). An episode that submits nothing measurable scores 0, counted as
  `FLOOR` in the geometric mean; so does an episode of the board (any shape and seed some
  line of it played) that an agent has no line for: an agent's best shapes or seeds alone
  are not ranked above agents that played every episode. The spread is the min and max (and std) over seeds of
  the per-seed geometric means.
- **best found**: the same mean over the best kernel the agent measured at any step.
- **best known** per shape: the best program known on the board's GPU: where a live file
  joined to the board gives it, the fastest correct program of that GPU's tables when the
  live figures were written (`live.LiveFigures.best_known`); else that of the tables as
  they are when the board is written (`measure.optimum.best_known`); both measurements.
  Only where the tables never measured the shape, the best fraction any episode of the
  results reached there (then said so).
- **steps to 90% / 95%**: the first env step at which the agent's best-so-far trace
  reaches 90% (95%) of the best known; median over the episodes that get there, with
  their count. The trace holds the episode's own figures (table measurements and, for
  programs the table lacks, estimates).
- **live / best known**: the live score over the geometric mean of the best known, where
  both are GPU measurements (a GPU best known at every shape and every episode verified);
  the best known as timed in the live run where that run timed its program (a board
  kernel is the best known: `live_frac_anchor`), else its table figure.
- **invalid actions**: invalid (masked, unparsable) actions per env step.
- **violations met**: invariant violations the checker reported, per episode.
- **from table**: submitted kernels whose figure is a recorded GPU measurement rather than
  the cost model's estimate for a program the table lacks (table mode only).
- **live**: the same geometric mean over the *live* GPU figures of the submitted kernels
  (`live.LiveFigures`, joined by hardware, env, shape and submitted program hash; a
  kernel that failed on the GPU counts as 0). An agent is *verified* when every one of its
  episodes has a live figure. Boards rank verified agents by the live score, then the
  unverified ones by the recorded score; with no live figures at all a board ranks by the
  recorded score and says so (`Board.ranked_by`).
"""

from __future__ import annotations

import datetime
import math
import statistics
from dataclasses import dataclass, field
from pathlib import Path

FLOOR = 0.01          # a zero score counts as this in a geometric mean
REACH = 0.9           # "steps to 90% of the best known"
REACH_HIGH = 0.95     # "steps to 95% of the best known"


def counted(n: int, noun: str, plural: str | None = None) -> str:
    """`n` and its noun in agreement ("1 seed", "3 seeds"): boards are read by people."""
    return f"{n} {noun if n == 1 else plural or noun + 's'}"


@dataclass
class Entry:
    """One agent on one (env, track)."""

    agent: str
    score: float = 0.0
    seed_scores: dict = field(default_factory=dict)    # seed -> geomean over shapes
    best_found: float = 0.0
    per_shape: dict = field(default_factory=dict)      # shape -> [submitted fraction per seed]
    best_per_shape: dict = field(default_factory=dict) # shape -> [best fraction per seed]
    steps_to_reach: float | None = None
    reached: int = 0
    steps_to_high: float | None = None                 # steps to REACH_HIGH of the best known
    reached_high: int = 0
    seconds_to_high: float | None = None               # wall-clock seconds to the same, over
    timed_high: int = 0                                # the episodes that reached it and
                                                       # timed their steps (`step_seconds`)
    timed_traces: list = field(default_factory=list)   # per timed episode: (seconds at each
                                                       # env step, best fraction so far)
    live_regret: float | None = None                   # live score / best known (both GPU)
    episodes: int = 0
    env_steps: int = 0
    invalid_rate: float = 0.0
    violations_per_episode: float = 0.0
    violations_by_kind: dict = field(default_factory=dict)
    from_table: int = 0                                # submitted kernels measured in the table
    curves: dict = field(default_factory=dict)         # seed -> mean-over-shapes curve
    rank: int = 0
    live_per_shape: dict = field(default_factory=dict) # shape -> [live fraction per seed]
    verified: int = 0                                  # episodes with a live figure
    live_failures: int = 0                             # submitted kernels that failed live
    live_score: float | None = None                    # None unless every episode is verified
    episode_rows: list = field(default_factory=list)   # (shape, seed, recorded, live figure)
    missing: int = 0                                   # the board's episodes it has no line
                                                       # for, each counted as a 0

    @property
    def is_verified(self) -> bool:
        return self.episodes > 0 and self.verified == self.episodes

    @property
    def ranked_score(self) -> float:
        """The figure the board ranks by: live when verified, else the recorded score."""
        return self.live_score if self.is_verified else self.score

    @property
    def spread(self) -> tuple[float, float]:
        v = list(self.seed_scores.values())
        return (min(v), max(v)) if v else (0.0, 0.0)

    @property
    def std(self) -> float:
        v = list(self.seed_scores.values())
        return statistics.pstdev(v) if len(v) > 1 else 0.0


@dataclass
class Board:
    """The leaderboard of one env and track."""

    env_id: str
    track: str
    shapes: list
    budget: int
    measure: str
    hardware: str
    seeds: list
    best_known: dict          # shape -> the best known fraction (see `known_from`)
    entries: list             # Entry, best first
    sources: dict = field(default_factory=dict)   # provenance common to the lines
    several_budgets: bool = False   # the results hold other budgets for this env and track
    ranked_by: str = "recorded"     # "live": verified agents ranked by their live score
    live_sources: list = field(default_factory=list)   # the live-figure files joined
    estimator: str | None = None    # how the model priced ("analytic", "corrected"; None: gpu)
    #: shape -> the best known program on the GPU (the live file's `best_known` entry), or
    #: None where the board's own episodes give the best known
    known_from: dict = field(default_factory=dict)

    @property
    def known_measured(self) -> bool:
        """Every shape's best known is a GPU measurement."""
        return bool(self.shapes) and all(self.known_from.get(s) for s in self.shapes)

    @property
    def title(self) -> str:
        """"env: track track", with the budget when another board has the same env and track."""
        budget = f", budget {counted(self.budget, 'env step')}" if self.several_budgets else ""
        return f"{self.env_id}: {self.track} track{budget}"


def geomean(values) -> float:
    values = [max(v, FLOOR) for v in values]
    return math.exp(sum(map(math.log, values)) / len(values)) if values else 0.0


def submitted_frac(line: dict) -> float:
    return float(line.get("final_frac_anchor") or 0.0) if line.get("submitted") else 0.0


def curve(trace: list, budget: int) -> list[float]:
    """Best fraction so far at env steps 1..budget (held after the last step)."""
    out, i, value = [], 0, trace[0][1] if trace else 0.0
    for s in range(1, budget + 1):
        while i < len(trace) and trace[i][0] <= s:
            value = trace[i][1]
            i += 1
        out.append(value)
    return out


def first_reach(trace: list, target: float) -> int | None:
    return next((int(s) for s, v in trace if v >= target - 1e-12), None)


def budget_of(line: dict) -> int:
    """The step budget an episode was played under (an `argus run` record: its env steps)."""
    return int(line["budget"] if line.get("budget") is not None else line["env_steps"])


def build(lines: list[dict], live=None) -> list[Board]:
    """Boards for every (env, track, budget) in `lines`; raises on mixed measure or
    hardware within one, and on an episode twice at one budget. `live`: a
    `live.LiveFigures` to join (None: no live figures, every line unverified)."""
    groups: dict = {}
    seen = set()
    for line in lines:
        budget = budget_of(line)
        key = (line["agent"], line["env_id"], line["shape"], int(line["seed"]), budget)
        if key in seen:
            raise ValueError(f"episode {key[:4]} appears twice in the results at budget {budget}")
        seen.add(key)
        track = line.get("track") or line.get("split") or "all"
        groups.setdefault((line["env_id"], track, budget), []).append(line)
    order = {"train": 0, "test": 1}
    keys = sorted(groups, key=lambda k: (k[0], order.get(k[1], 2), k[1], k[2]))
    boards = [_board(env_id, track, budget, groups[env_id, track, budget], live)
              for env_id, track, budget in keys]
    for b in boards:
        b.several_budgets = sum((o.env_id, o.track) == (b.env_id, b.track) for o in boards) > 1
    return boards


def _board(env_id: str, track: str, budget: int, lines: list[dict], live=None) -> Board:
    from .results import line_setting
    settings = {(ln["measure"], ln["hardware"], line_setting(ln, "estimator"),
                 line_setting(ln, "model_anchor")) for ln in lines}
    if len(settings) > 1:
        raise ValueError(f"{env_id} {track}, budget {budget}: results mix (measure, hardware, "
                         f"estimator, model anchor) {sorted(settings, key=str)}; make one "
                         f"leaderboard per setting")
    measure, hardware, estimator, _ = settings.pop()
    shapes = list(dict.fromkeys(ln["shape"] for ln in lines))
    best_known = {s: max(ln["best_frac_anchor"] for ln in lines if ln["shape"] == s) for s in shapes}
    known_from = {s: (live.best_known(hardware, env_id, s) if live else None) or
                  _table_known(lines, s, hardware) for s in shapes}
    for s, known in known_from.items():
        if known:
            best_known[s] = float(known["frac_anchor"])
    by_agent: dict = {}
    for ln in lines:
        by_agent.setdefault(ln["agent"], []).append(ln)
    seeds = sorted({int(ln["seed"]) for ln in lines})
    entries = [_entry(agent, group, shapes, best_known, budget, live, seeds)
               for agent, group in by_agent.items()]
    if all(known_from.values()):
        # the live score over the best known timed in the same run, where the run timed it
        # (a board kernel that is the best known program): the GPU's drift between runs
        # (its clocks, the library's own choices) then cancels out of the ratio
        known_mean = geomean([float(known_from[s].get("live_frac_anchor") or best_known[s])
                              for s in shapes])
        for e in entries:
            if e.is_verified and known_mean > 0:
                e.live_regret = e.live_score / known_mean
    entries.sort(key=lambda e: (not e.is_verified, -e.ranked_score, -e.best_found, e.agent))
    for i, e in enumerate(entries, 1):
        e.rank = i
    sources = {k: _common(lines, k) for k in ("hashes", "versions", "hardware_profile")}
    ranked_by = "live" if any(e.is_verified for e in entries) else "recorded"
    return Board(env_id, track, shapes, budget, measure, hardware,
                 sorted({int(ln["seed"]) for ln in lines}), best_known, entries, sources,
                 ranked_by=ranked_by, estimator=estimator, known_from=known_from,
                 # only files of the board's hardware can verify its lines: another GPU's
                 # figures never join them, so they are not named as the board's sources
                 live_sources=[s for s in live.sources if s.get("hardware") == hardware]
                 if live else [])


def _common(lines: list[dict], key: str) -> dict:
    """The values of `key`'s mapping that every line agrees on ("(mixed)" otherwise)."""
    maps = [ln.get(key) or {} for ln in lines]
    out = {}
    for k in dict.fromkeys(k for m in maps for k in m):
        vals = {repr(m.get(k)) for m in maps}
        out[k] = maps[0].get(k) if len(vals) == 1 else "(mixed)"
    return out


def live_figure(line: dict, live) -> dict | None:
    """The live figure of a line's submitted kernel (None: not measured, or no live
    figures given); where live figures are given, a line that submitted nothing has nothing
    to run, so its live figure is 0 like its recorded one."""
    if not live:
        return None
    if not line.get("submitted") or not line.get("submitted_program_hash"):
        return {"ok": False, "status": "nothing submitted", "frac_anchor": 0.0}
    return live.of(line)


def _table_known(lines: list[dict], shape: str, hardware: str) -> dict | None:
    """The fastest correct program of `hardware`'s GPU tables at `shape`
    (`measure.optimum.best_known`: a GPU measurement), named as a live file names its best
    known, where no live file gives one; None where the tables never measured the shape.
    A board's episodes alone (the best any of them reached, estimates included) are the
    best known only then: an agent that never left the baseline would otherwise be at
    100% of the best known from its first step."""
    from ..measure.optimum import best_known
    from ..task import get_task
    line = next(ln for ln in lines if ln["shape"] == shape)
    try:
        task = get_task(line["task"])
    except (KeyError, ValueError):
        return None
    found = best_known(task, line.get("sizes") or {}, hardware)
    if not found:
        return None
    recorded = found.get("date") or found.get("recorded", "")
    try:  # a row without its date: its Unix timestamp, as a date
        recorded = datetime.datetime.fromtimestamp(float(recorded), datetime.timezone.utc) \
            .isoformat(timespec="seconds")
    except (TypeError, ValueError, OverflowError, OSError):
        pass
    return {**found, "env_id": line["env_id"], "table": Path(found["table"]).name,
            "recorded": recorded}


def _entry(agent: str, lines: list[dict], shapes: list, best_known: dict, budget: int,
           live=None, seeds: list | None = None) -> Entry:
    """One agent's figures over the board's episodes: every shape of the board at every
    seed of the board (`seeds`; None: the agent's own). An episode the agent has no line
    for counts as one that submitted nothing (0), so that a line set of the agent's best
    shapes or seeds (a submission's own suite of them) is not ranked over fewer episodes
    than the agents that played them all."""
    from .live import live_frac
    e = Entry(agent, episodes=len(lines))
    by_seed: dict = {}
    reach, reach_high, seconds_high = [], [], []
    for ln in sorted(lines, key=lambda ln: int(ln["seed"])):
        seed = int(ln["seed"])
        e.per_shape.setdefault(ln["shape"], []).append(submitted_frac(ln))
        fig = live_figure(ln, live)
        if fig is not None:
            e.verified += 1
            e.live_failures += not fig["ok"] and bool(ln.get("submitted"))
            e.live_per_shape.setdefault(ln["shape"], []).append(live_frac(fig))
        e.episode_rows.append((ln["shape"], seed, submitted_frac(ln), fig))
        e.best_per_shape.setdefault(ln["shape"], []).append(float(ln["best_frac_anchor"]))
        by_seed.setdefault(seed, {})[ln["shape"]] = ln
        trace, secs = ln.get("trace") or [], ln.get("step_seconds") or []
        timed = bool(trace) and len(secs) == len(trace)   # the schema's rule
        if timed:
            e.timed_traces.append(([float(t) for t in secs], [float(v) for _, v in trace]))
        step = first_reach(trace, REACH * best_known[ln["shape"]])
        if step is not None:
            reach.append(step)
        step = first_reach(trace, REACH_HIGH * best_known[ln["shape"]])
        if step is not None:
            reach_high.append(step)
            if timed:
                seconds_high.append(float(secs[step - 1]))
        e.from_table += ln.get("final_measured_by") == "table" and ln.get("submitted", False)
        e.env_steps += int(ln["env_steps"])
        e.invalid_rate += int(ln["invalid_actions"])
        for kind, n in (ln.get("violations_met") or {}).items():
            e.violations_by_kind[kind] = e.violations_by_kind.get(kind, 0) + int(n)
    played = {(ln["shape"], int(ln["seed"])) for ln in lines}
    for shape in shapes:
        for seed in seeds if seeds is not None else []:
            if (shape, seed) not in played:   # not played: nothing submitted, nothing found
                e.missing += 1
                e.per_shape.setdefault(shape, []).append(0.0)
                e.best_per_shape.setdefault(shape, []).append(0.0)
                if live:
                    e.live_per_shape.setdefault(shape, []).append(0.0)
    here = [s for s in shapes if s in e.per_shape]
    e.score = geomean([statistics.fmean(e.per_shape[s]) for s in here])
    e.best_found = geomean([statistics.fmean(e.best_per_shape[s]) for s in here])
    if e.is_verified:
        e.live_score = geomean([statistics.fmean(e.live_per_shape[s]) for s in here])
    for seed, runs in by_seed.items():
        if set(runs) >= set(here):   # seeds that cover every shape
            e.seed_scores[seed] = geomean([submitted_frac(runs[s]) for s in here])
            curves = [curve(runs[s].get("trace") or [], budget) for s in here]
            e.curves[seed] = [statistics.fmean(col) for col in zip(*curves)]
    e.reached = len(reach)
    e.steps_to_reach = statistics.median(reach) if reach else None
    e.reached_high = len(reach_high)
    e.steps_to_high = statistics.median(reach_high) if reach_high else None
    e.timed_high = len(seconds_high)
    e.seconds_to_high = statistics.median(seconds_high) if seconds_high else None
    e.invalid_rate = e.invalid_rate / e.env_steps if e.env_steps else 0.0
    e.violations_per_episode = sum(e.violations_by_kind.values()) / max(len(lines), 1)
    return e
