"""Episodic memory for the planner: trajectories and the lessons distilled from them.

Across episodes (and runs) the planner keeps a JSON file with

- `episodes`: trajectories, one step each as (state summary, action, report kinds,
  reward, fraction of the library after the step);
- `lessons`: what those trajectories taught, keyed by shape and action chain, e.g.
  "on decode-16, split_k(4) then combine('atomic'): 1.41x throughput (fixes coverage,
  exactly_once that split_k(4) left)", with a running geometric-mean gain and a count.

- `outcomes`: what each knowledge-base plan gained where the scripted planner played it
  (`agents/llm/scripted.py`), keyed by shape and plan, as a running mean log gain and a
  count (`note_outcome`, `outcome`).

`relevant(...)` ranks lessons for the current situation (same shape, same violated
invariants, legal actions, large effects first) and the prompt shows the best ones, so
the next episode starts from what the last one learned: in-context reinforcement
learning. The file is written atomically (temp file + `os.replace`), so a run killed
mid-save leaves the previous memory intact.
"""

from __future__ import annotations

import json
import math
import os
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path

VERSION = 1


@dataclass
class StepRecord:
    """One step of a trajectory, as the memory keeps it."""

    state: str                 # configuration summary before the action
    action: str                # the call (or "program(...)")
    kinds: list = field(default_factory=list)   # invariants violated after the step
    reward: float = 0.0
    frac: float = 0.0          # fraction of the library after the step (0: unmeasured)
    error: str | None = None   # the env's error for an invalid action


@dataclass
class Lesson:
    """What an action chain did on a shape, aggregated over its occurrences."""

    shape: str
    actions: list
    gain: float                # geometric mean of frac_after / frac_before
    count: int = 1
    fixed: list = field(default_factory=list)   # invariants the chain's last step fixed
    undone: bool = False       # the chain left violations and was undone unfixed

    @property
    def key(self) -> str:
        return f"{self.shape}|{' > '.join(self.actions)}|{'undone' if self.undone else ''}"

    def informative(self, tol: float = 0.02) -> bool:
        """Worth a prompt line: a real change of throughput, a fix, or an unfixed chain."""
        return self.undone or bool(self.fixed) or abs(math.log(max(self.gain, 1e-9))) > tol

    def text(self) -> str:
        chain = " then ".join(self.actions)
        times = f", seen {self.count}x" if self.count > 1 else ""
        if self.undone:
            return f"on {self.shape}, {chain} left {', '.join(self.fixed)} violations unfixed{times}"
        fix = ""
        if self.fixed and len(self.actions) > 1:
            fix = f" ({self.actions[-1]} fixed the {', '.join(self.fixed)} that {self.actions[0]} left)"
        return f"on {self.shape}, {chain}: {self.gain:.2f}x throughput{fix}{times}"


class Memory:
    """Trajectories and lessons, optionally persisted at `path`."""

    def __init__(self, path: str | Path | None = None, max_episodes: int = 200,
                 max_lessons: int = 400):
        self.path = Path(path) if path else None
        self.max_episodes, self.max_lessons = max_episodes, max_lessons
        self.episodes: list[dict] = []
        self.lessons: dict[str, Lesson] = {}
        self.outcomes: dict[str, dict] = {}   # "shape|plan" -> {shape, sizes, plan, gain, count}
        self._current: dict | None = None
        if self.path and self.path.exists():
            self._load()

    # ------------------------------------------------------------ persistence
    def _load(self) -> None:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError) as e:
            raise ValueError(f"memory file {self.path} is unreadable ({e}); move it aside") from None
        if data.get("version") != VERSION:
            raise ValueError(f"memory file {self.path} has version {data.get('version')!r}, "
                             f"expected {VERSION}")
        self.episodes = list(data.get("episodes", []))
        for d in data.get("lessons", []):
            lesson = Lesson(**d)
            self.lessons[lesson.key] = lesson
        for d in data.get("outcomes", []):   # absent from files written before plans
            self.outcomes[f"{d['shape']}|{d['plan']}"] = dict(d)

    def save(self) -> None:
        """Write the memory atomically; a no-op without a path."""
        if not self.path:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        data = {"version": VERSION, "episodes": self.episodes[-self.max_episodes:],
                "lessons": [asdict(x) for x in self.lessons.values()],
                "outcomes": list(self.outcomes.values())}
        fd, tmp = tempfile.mkstemp(dir=self.path.parent, prefix=f".{self.path.name}.", suffix=".tmp")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                json.dump(data, f, indent=1)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, self.path)
        except BaseException:
            if os.path.exists(tmp):
                os.unlink(tmp)
            raise

    # ------------------------------------------------------------ recording
    def begin(self, task: str, shape: str, sizes: dict, baseline_frac: float) -> None:
        self._current = {"task": task, "shape": shape, "sizes": dict(sizes),
                         "baseline_frac": float(baseline_frac), "steps": [], "outcomes": []}

    def note(self, step: StepRecord) -> None:
        if self._current is None:
            raise RuntimeError("Memory.note before Memory.begin")
        self._current["steps"].append(asdict(step))

    def note_outcome(self, plan: str, log_gain: float) -> None:
        """What playing `plan` (a knowledge-base plan's key) gained in this episode: the log
        of the best fraction it reached over the fraction it started from."""
        if self._current is None:
            raise RuntimeError("Memory.note_outcome before Memory.begin")
        self._current["outcomes"].append([plan, float(log_gain)])

    def outcome(self, shape: str, sizes: dict, plan: str, class_weight: float = 0.5) -> tuple[float, float]:
        """Evidence on `plan` from earlier episodes: (weighted mean log gain, total weight),
        each earlier outcome on `shape` weighing 1 per time played, on another shape of the
        same class (decode, ragged, large) `class_weight`; (0, 0) without any."""
        total, weight = 0.0, 0.0
        cls = _shape_class(shape, self, sizes)
        for o in self.outcomes.values():
            if o["plan"] != plan:
                continue
            w = 1.0 if o["shape"] == shape else (
                class_weight if _shape_class(o["shape"], self, o.get("sizes")) == cls else 0.0)
            total += w * o["count"] * o["gain"]
            weight += w * o["count"]
        return (total / weight if weight else 0.0), weight

    def end(self, best_frac: float, best_actions: list[str]) -> list[Lesson]:
        """Close the episode: keep its trajectory, distil and merge its lessons, save."""
        ep = self._current
        if ep is None:
            return []
        self._current = None
        ep["best_frac"], ep["best_actions"] = float(best_frac), list(best_actions)
        self.episodes.append(ep)
        learned = distil(ep)
        for lesson in learned:
            old = self.lessons.get(lesson.key)
            if old is None:
                self.lessons[lesson.key] = lesson
            else:
                n = old.count + 1
                old.gain = math.exp((math.log(old.gain) * old.count + math.log(lesson.gain)) / n)
                old.count = n
        for plan, gain in ep.get("outcomes", []):
            key = f"{ep['shape']}|{plan}"
            old = self.outcomes.setdefault(key, {"shape": ep["shape"], "sizes": ep["sizes"],
                                                 "plan": plan, "gain": 0.0, "count": 0})
            old["gain"] = (old["gain"] * old["count"] + gain) / (old["count"] + 1)
            old["count"] += 1
        if len(self.lessons) > self.max_lessons:  # forget the weakest evidence first
            keep = sorted(self.lessons.values(), key=lambda x: (x.count, abs(math.log(x.gain))))
            for x in keep[:len(self.lessons) - self.max_lessons]:
                del self.lessons[x.key]
        self.save()
        return learned

    # ------------------------------------------------------------ recall
    def best_episode(self, shape: str) -> dict | None:
        eps = [e for e in self.episodes if e["shape"] == shape and e.get("best_actions")]
        return max(eps, key=lambda e: e["best_frac"]) if eps else None

    def relevant(self, shape: str, sizes: dict, kinds: set[str], legal: set[str],
                 k: int = 4) -> list[str]:
        """The prompt lines: the best known path on this shape, then the top-k lessons."""
        lines = []
        best = self.best_episode(shape)
        if best is not None:
            lines.append(f"best so far on {shape}: {best['best_frac']:.2f}x library via "
                         + ", ".join(best["best_actions"]))
        scored = sorted(((self._relevance(x, shape, sizes, kinds, legal), x)
                         for x in self.lessons.values()), key=lambda p: -p[0])
        lines += [x.text() for s, x in scored if s > 0 and x.informative()][:k]
        return lines

    def _relevance(self, x: Lesson, shape: str, sizes: dict, kinds: set[str], legal: set[str]) -> float:
        score = 2.0 if x.shape == shape else (1.0 if _shape_class(x.shape, self) == _shape_class(shape, self, sizes) else 0.0)
        if kinds and set(x.fixed) & kinds:
            score += 2.0 + (1.0 if not x.undone else 0.0)
        nxt = x.actions[-1] if kinds else x.actions[0]
        if nxt in legal:
            score += 0.5
        score += min(1.0, abs(math.log(max(x.gain, 1e-6)))) + (0.5 if x.gain > 1.0 else 0.0)
        return score + 0.1 * min(x.count, 5)

    def evidence(self, shape: str, sizes: dict, action: str, class_weight: float = 0.5) -> tuple[float, float]:
        """Evidence on one action from the lessons: (weighted mean log gain, total weight) of
        the chains it starts and that were not undone, on `shape` (weight 1 per occurrence)
        or another shape of its class (`class_weight`)."""
        total, weight = 0.0, 0.0
        cls = _shape_class(shape, self, sizes)
        for x in self.lessons.values():
            if not x.actions or x.actions[0] != action or x.undone:
                continue
            w = 1.0 if x.shape == shape else (class_weight if _shape_class(x.shape, self) == cls else 0.0)
            total += w * x.count * math.log(max(x.gain, 1e-9))
            weight += w * x.count
        return (total / weight if weight else 0.0), weight

    def prior(self, shape: str, action: str) -> float:
        """Mean log gain of lessons on `shape` that start with `action` (0 if none)."""
        gains = [math.log(x.gain) for x in self.lessons.values()
                 if x.shape == shape and x.actions and x.actions[0] == action and not x.undone]
        return sum(gains) / len(gains) if gains else 0.0


def _shape_class(shape: str, memory: Memory, sizes: dict | None = None) -> str:
    """decode (M <= 64), ragged (a size not a multiple of 64), or large."""
    if sizes is None:
        for e in memory.episodes:
            if e["shape"] == shape:
                sizes = e["sizes"]
                break
    if not sizes:
        return "?"
    vals = list(sizes.values())
    if min(vals) <= 64:
        return "decode"
    if any(v % 64 for v in vals):
        return "ragged"
    return "large"


def distil(ep: dict) -> list[Lesson]:
    """Lessons of one trajectory: each chain of actions from a clean measured state to the
    next clean measured state, with its throughput ratio and the violations it fixed; and
    chains that left violations and were undone unfixed."""
    out: list[Lesson] = []
    shape = ep["shape"]
    last = ep.get("baseline_frac", 0.0)
    stack = [last]          # fractions of the states on the undo stack
    chain: list[str] = []
    kinds: set[str] = set()
    for s in ep["steps"]:
        if s.get("error"):
            continue
        if s["action"] == "undo()":
            if chain and kinds:
                out.append(Lesson(shape, list(chain), 1.0, fixed=sorted(kinds), undone=True))
            chain, kinds = [], set()
            if len(stack) > 1:
                stack.pop()
            last = next((f for f in reversed(stack) if f > 0), 0.0)
            continue
        if s["action"] == "submit()":
            break
        chain.append(s["action"])
        stack.append(s["frac"])
        if s["kinds"]:
            kinds |= set(s["kinds"])
            continue
        if s["frac"] > 0 and last > 0:
            out.append(Lesson(shape, list(chain), s["frac"] / last, fixed=sorted(kinds)))
        chain, kinds = [], set()
        last = s["frac"] if s["frac"] > 0 else last
    return out
