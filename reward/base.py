"""Reward terms. Each reads the environment's `StepEvent` and the states around it."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

CONFIG_DIR = Path(__file__).resolve().parents[1] / "configs" / "reward"


@dataclass
class StepEvent:
    """What happened in one step, as far as rewards care."""

    kind: str                         # "transform", "undo", "submit", "program", "error"
    error: str | None = None          # "masked", "parse", "transform", "compile", "mismatch", ...
    new_violations: int = 0           # invariant violations the previous state did not have
    measured: bool = False            # the new state has a throughput
    throughput: float | None = None   # TFLOP/s of the new state
    previous_throughput: float | None = None  # last measured TFLOP/s before this step
    anchor: float | None = None       # the library's TFLOP/s at this shape
    info: dict = field(default_factory=dict)


class Reward:
    """Base class of reward terms."""

    name = "reward"
    deterministic = True
    platform_dependent = False

    def __init__(self, weight: float = 1.0):
        self.weight = float(weight)

    def reset(self, state: Any = None) -> None:
        pass

    def update(self, event: StepEvent) -> float:
        raise NotImplementedError

    def reward_on_error(self, kind: str) -> float:
        return 0.0

    def __repr__(self) -> str:
        return f"{type(self).__name__}(weight={self.weight})"


class ThroughputGain(Reward):
    """Potential-based gain: log T_t - log T_{t-1} over measured states, so an episode's
    return is log(T_final / T_baseline). An unmeasured step earns nothing."""

    name = "throughput_gain"

    def update(self, event: StepEvent) -> float:
        if not event.measured or not event.throughput or not event.previous_throughput:
            return 0.0
        return self.weight * (math.log(event.throughput) - math.log(event.previous_throughput))


class ViolationPenalty(Reward):
    """A penalty per invariant violation the previous program did not have."""

    name = "violation_penalty"

    def update(self, event: StepEvent) -> float:
        return -self.weight * event.new_violations


#: outcomes of running a program that cost the full failure penalty
FAILURES = ("compile", "mismatch", "fault", "timeout", "impossible")


class FailurePenalty(Reward):
    """A penalty for a numerical mismatch, a failed compile, or an action that could not
    be taken (masked, unparsable, hostile)."""

    name = "failure_penalty"

    def __init__(self, weight: float = 1.0, invalid_action: float = 0.5):
        super().__init__(weight)
        self.invalid_action = float(invalid_action)

    def update(self, event: StepEvent) -> float:
        if event.kind == "error":
            return self.reward_on_error(event.error or "error")
        if event.error in FAILURES:
            return -self.weight
        return 0.0

    def reward_on_error(self, kind: str) -> float:
        if kind in FAILURES:
            return -self.weight
        return -self.weight * self.invalid_action


class SubmitBonus(Reward):
    """On submit: log(T / T_library) of the submitted program (0 at library parity),
    or a penalty when the submitted program is not measured correct: `unmeasured` below
    what submitting the episode's starting program earns where that is below the
    library (else below parity). The starting program can always be submitted again
    (undo, or its text), so breaking a slow program before submitting never pays: with a
    flat penalty, a broken program (-1) out-earned a correct one below e^-1 of the
    library (the GEMM baseline at 0.29: -1.22).

    An episode that reaches its step limit is submitted too: the env sends the step that
    reaches it a "submit" event of the current program after the step's own
    (`KernelEnv._submit_at_limit`), so this term pays there what `submit()` would have.
    Without it, an agent below the library earned more by never submitting."""

    name = "submit_bonus"

    def __init__(self, weight: float = 1.0, unmeasured: float = 1.0):
        super().__init__(weight)
        self.unmeasured = float(unmeasured)
        self.start: float | None = None   # the starting program's bonus, where measured

    def _bonus(self, measured, t, anchor) -> float | None:
        """weight * log(t / anchor), or None where the figures are no measurement (a NaN,
        infinite or non-positive throughput or library figure: a row without an anchor)."""
        ok = bool(measured) and t and anchor and math.isfinite(t) and math.isfinite(anchor) \
            and t > 0 and anchor > 0
        return self.weight * math.log(t / anchor) if ok else None

    def reset(self, state: Any = None) -> None:
        ev = getattr(state, "evaluation", None)
        m = getattr(ev, "measurement", None)
        self.start = self._bonus(getattr(ev, "measured", False), getattr(ev, "throughput", None),
                                 getattr(m, "anchor_tflops", None))

    def update(self, event: StepEvent) -> float:
        if event.kind != "submit":
            return 0.0
        bonus = self._bonus(event.measured, event.throughput, event.anchor)
        return -self.unmeasured + min(0.0, self.start or 0.0) if bonus is None else bonus


TERMS = {cls.name: cls for cls in (ThroughputGain, ViolationPenalty, FailurePenalty, SubmitBonus)}


class Composite(Reward):
    """A weighted sum of terms; `last` keeps each term's share of the last reward."""

    name = "composite"

    def __init__(self, terms: list[Reward]):
        super().__init__(1.0)
        self.terms = terms
        self.deterministic = all(t.deterministic for t in terms)
        self.last: dict[str, float] = {}

    def reset(self, state: Any = None) -> None:
        for t in self.terms:
            t.reset(state)
        self.last = {}

    def update(self, event: StepEvent) -> float:
        self.last = {t.name: t.update(event) for t in self.terms}
        return float(sum(self.last.values()))

    def reward_on_error(self, kind: str) -> float:
        self.last = {t.name: t.reward_on_error(kind) for t in self.terms}
        return float(sum(self.last.values()))


def compose(config: dict) -> Composite:
    """Build a reward from `{"terms": [{"type": name, "weight": w, ...}, ...]}`."""
    if not isinstance(config, dict) or not isinstance(config.get("terms"), list):
        raise ValueError("a reward config is a mapping with a list `terms` of "
                         "{type: ..., weight: ...}")
    terms = []
    for spec in config["terms"]:
        spec = dict(spec)
        kind = spec.pop("type", None)
        if kind not in TERMS:
            raise ValueError(f"unknown reward term {kind!r}; known: {', '.join(TERMS)}")
        try:
            terms.append(TERMS[kind](**spec))
        except TypeError as e:
            raise ValueError(f"reward term {kind}: {e}") from None
    return Composite(terms)


def load_reward(name_or_path: str | dict = "default") -> Composite:
    """A reward from `configs/reward/<name>.yaml`, a YAML path, or a mapping."""
    import yaml
    if isinstance(name_or_path, dict):
        return compose(name_or_path)
    path = Path(name_or_path)
    if not path.suffix:
        path = CONFIG_DIR / f"{name_or_path}.yaml"
    if not path.exists():
        known = sorted(p.stem for p in CONFIG_DIR.glob("*.yaml"))
        raise ValueError(f"no reward config {name_or_path!r}; known: {', '.join(known)}")
    return compose(yaml.safe_load(path.read_text()))
