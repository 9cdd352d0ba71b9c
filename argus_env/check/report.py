"""`Violation` and `InvariantReport`: the checker's vocabulary.

A report is a list of violations, each a concrete counterexample: which invariant, at
which op and source line, in which program instance and loop iteration, at which tile
element (and thread and register, through the fragment's layout), with the expected and
the actual tag values, and a list of *undecided* obligations: proof obligations the checker
could not settle either way (the solver answered `unknown`: its time limit, a theory it
cannot decide, an interruption; or no proof strategy applied). A report's `status` is
`violation`, `undecided` or `proven`; only `proven` is `ok`. Reports serialise to JSON,
encode for observations (`ReportLayout`: generic slots every task shares, then the task's
own block), and render as short text an LLM can act on. A violation's class is a core one
or one a registered pack declares (`pack.py`).
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field

import numpy as np

from ..dsl.errors import DSLError
from .pack import CORE_CLASSES, InvariantPack, is_known_class, known_classes


class CheckUnsupported(DSLError, NotImplementedError):
    """The program uses a construct the invariant checker has no rule for (a tile index it
    cannot read as an integer, say): no verdict is possible, so the program is refused
    like one that does not type-check, with the construct and its line named."""

    kind = "unsupported"


class CheckTimeout(CheckUnsupported):
    """The checker did not reach a verdict within the time it was given (an environment
    step's budget): the program is refused, not judged, and checked again if resent."""

    kind = "check timeout"


#: The core's invariant classes, in the order of the report encoding's count slots. Names
#: are stable API. A task's pack adds its own (`pack.known_classes()` lists all).
INVARIANTS = CORE_CLASSES
STATUSES = ("proven", "violation", "undecided")


@dataclass
class Obligation:
    """A proof obligation the checker could not decide: the program is neither proven nor
    refuted there, so it is refused (never measured, never remembered as proven)."""

    what: str            # the obligation, e.g. "exactly-once writes of `c`"
    line: int            # source line of the op it belongs to
    reason: str          # why undecided: the solver's reason, or the missing strategy
    source: str = ""     # the DSL text of the statement

    def render(self) -> str:
        where = f"{self.source} at line {self.line}" if self.source else f"line {self.line}"
        return f"[undecided] {where}: {self.what} could not be decided ({self.reason})"

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass
class Violation:
    """One broken invariant with a concrete counterexample."""

    invariant: str
    op: str                                   # the DSL op: "store", "dot", "load", ...
    line: int                                 # source line of the op
    message: str                              # what went wrong, in one sentence
    source: str = ""                          # the DSL text of the statement
    sizes: dict[str, int] = field(default_factory=dict)       # problem sizes (M, N, K, ...)
    program_id: tuple[int, ...] = ()          # grid coordinates of the instance
    names: dict[str, int] = field(default_factory=dict)       # scalar variables there (pid_m, k)
    element: tuple[int, ...] = ()             # coordinates inside the tile
    thread: int | None = None                 # owning thread and register, where the
    register: int | None = None               # fragment layout of the tile is known
    expected: dict[str, object] = field(default_factory=dict)  # tag name -> expected value
    actual: dict[str, object] = field(default_factory=dict)    # tag name -> actual value
    tensor: str = ""                          # tensor accessed, if any
    coords: tuple[int, ...] = ()              # its coordinates at the element, if any
    other: dict[str, object] = field(default_factory=dict)    # second instance (exactly_once)
    witness: dict[str, object] = field(default_factory=dict)  # inputs realising it (a pack's)

    def __post_init__(self) -> None:
        if not is_known_class(self.invariant):
            raise ValueError(f"unknown invariant {self.invariant!r}; known: {known_classes()}")

    def where(self) -> str:
        """`store c[rows, cols] at line 14: program (pid_m=3, pid_n=1), element (17, 4)`"""
        parts = [f"{self.source or self.op} at line {self.line}"]
        inst = []
        if self.program_id:
            inst.append("program " + str(tuple(self.program_id)).replace(",)", ")"))
        if self.names:
            inst.append("(" + ", ".join(f"{k}={v}" for k, v in self.names.items()) + ")")
        if inst:
            parts.append(" ".join(inst))
        if self.element:
            parts.append(f"element {tuple(self.element)}")
        if self.thread is not None:
            parts.append(f"thread {self.thread} register {self.register}")
        return ": ".join([parts[0], ", ".join(parts[1:])]) if len(parts) > 1 else parts[0]

    def render(self) -> str:
        diff = ", ".join(f"{k}: expected {_fmt(self.expected.get(k))}, got {_fmt(self.actual.get(k))}"
                         for k in dict.fromkeys([*self.expected, *self.actual]))
        sizes = ", ".join(f"{k}={v}" for k, v in self.sizes.items())
        text = f"[{self.invariant}] {self.where()}: {self.message}"
        if diff:
            text += f" ({diff})"
        if sizes:
            text += f" [sizes {sizes}]"
        return text

    def to_dict(self) -> dict:
        d = asdict(self)
        d["program_id"] = list(self.program_id)
        d["element"] = list(self.element)
        d["coords"] = list(self.coords)
        return d

    @classmethod
    def from_dict(cls, d: dict) -> "Violation":
        d = dict(d)
        for key in ("program_id", "element", "coords"):
            d[key] = tuple(d.get(key, ()))
        return cls(**d)


def _fmt(v) -> str:
    if v is None:
        return "none"
    if isinstance(v, (list, tuple, set)):
        return "{" + ", ".join(map(str, v)) + "}"
    return str(v)


@dataclass
class InvariantReport:
    """Everything the checker found about one program."""

    program: str                               # program name
    program_hash: str
    violations: list[Violation] = field(default_factory=list)
    proven: list[str] = field(default_factory=list)      # checks proven, "op@line: invariant"
    queries: int = 0                           # solver queries made
    milliseconds: float = 0.0
    method: str = "symbolic"                   # "symbolic" (z3) or "concrete" (enumeration)
    notes: list[str] = field(default_factory=list)
    undecided: list[Obligation] = field(default_factory=list)

    @property
    def status(self) -> str:
        """`violation` (a counterexample exists), `undecided` (no counterexample found, but
        some obligation was not proven), or `proven` (every obligation proven)."""
        if self.violations:
            return "violation"
        return "undecided" if self.undecided else "proven"

    @property
    def ok(self) -> bool:
        """Every invariant proven: only then is a program run and measured."""
        return self.status == "proven"

    def findings(self) -> list[tuple[str, int]]:
        """(class, line) of every violation and undecided obligation: what a step is
        penalised for when the previous program did not have it."""
        return [(v.invariant, v.line) for v in self.violations] + \
            [("undecided", o.line) for o in self.undecided]

    def counts(self) -> dict[str, int]:
        """Violations per class: every core class, then the task's classes that occur."""
        out = {name: 0 for name in CORE_CLASSES}
        for v in self.violations:
            out[v.invariant] = out.get(v.invariant, 0) + 1
        return out

    def kinds(self) -> set[str]:
        return {v.invariant for v in self.violations}

    def encode(self, layout: "ReportLayout | None" = None) -> np.ndarray:
        """The fixed-layout float vector of `layout` (by default the generic slots alone,
        no task block): see `ReportLayout`."""
        return (layout or ReportLayout()).encode(self)

    def render(self, limit: int = 5) -> str:
        status = self.status
        if status == "proven":
            return (f"{self.program}: all invariants hold ({len(self.proven)} checks proven, "
                    f"{self.milliseconds:.0f} ms)")
        if status == "undecided":
            lines = [f"{self.program}: refused, {len(self.undecided)} obligation(s) undecided "
                     "(no counterexample was found, but nothing is proven there; the program "
                     "is not run)"]
            items = [o.render() for o in self.undecided]
        else:
            lines = [f"{self.program}: {len(self.violations)} violation(s)"]
            items = [v.render() for v in self.violations]
        lines += ["- " + x for x in items[:limit]]
        if len(items) > limit:
            lines.append(f"- ... {len(items) - limit} more")
        return "\n".join(lines)

    def to_dict(self) -> dict:
        return {"program": self.program, "program_hash": self.program_hash, "ok": self.ok,
                "status": self.status,
                "violations": [v.to_dict() for v in self.violations], "proven": self.proven,
                "undecided": [o.to_dict() for o in self.undecided],
                "queries": self.queries, "milliseconds": self.milliseconds,
                "method": self.method, "notes": self.notes, "counts": self.counts()}

    def to_json(self) -> str:
        return json.dumps(self.to_dict())

    @classmethod
    def from_dict(cls, d: dict) -> "InvariantReport":
        return cls(d["program"], d["program_hash"],
                   [Violation.from_dict(v) for v in d.get("violations", [])],
                   list(d.get("proven", [])), d.get("queries", 0), d.get("milliseconds", 0.0),
                   d.get("method", "symbolic"), list(d.get("notes", [])),
                   [Obligation(**o) for o in d.get("undecided", [])])


# ---------------------------------------------------------------- observation encoding
#: The generic slots of the report encoding, the same for every task. A task's classes
#: live in its own block after them (`ReportLayout`), so adding one changes that block only.
#: slots kept for the core classes: a core class added later takes a spare slot, so the
#: generic layout (and every policy trained on it) stays as it is
CORE_ROOM = 13
assert len(CORE_CLASSES) <= CORE_ROOM, "no spare core slot left: raise CORE_ROOM"
GENERIC_SLOTS = (
    "proven", "violation", "undecided",        # the status, one-hot
    *(f"count:{name}" for name in CORE_CLASSES),  # log1p(violations of the core class)
    *(f"count:spare{i}" for i in range(CORE_ROOM - len(CORE_CLASSES))),  # always 0
    "first_class",    # the first violation's class: 0 none, 1 + i core class i, TASK_CLASS
    "first_line",     # source line of the first violation, else of the first obligation
    "violations",     # how many violations
    "obligations",    # how many undecided obligations
    "element_0", "element_1",                  # the first violation's tile element
)
SLOT = {name: i for i, name in enumerate(GENERIC_SLOTS)}
GENERIC_DIM = len(GENERIC_SLOTS)
#: `first_class` of a violation of a task's class: its index is the task block's slot 0
TASK_CLASS = CORE_ROOM + 1


@dataclass(frozen=True)
class ReportLayout:
    """The report's observation encoding: `GENERIC_SLOTS`, then the task's block of
    `block` slots: slot 0 the first violation's class within the task (0 when it is not
    one of the task's, 1 + j for class j), then log1p(count) per task class, zero-padded.
    An undecided report has status `undecided`, `first_class` 0 and its obligations'
    line and count."""

    classes: tuple[str, ...] = ()   # the task's classes, in block order
    block: int = 0                  # slots of the task block (0 without a pack)

    def __post_init__(self) -> None:
        if self.block and self.block < 1 + len(self.classes):
            raise ValueError(f"a task block of {self.block} slots cannot hold "
                             f"{len(self.classes)} classes")
        if self.classes and not self.block:
            raise ValueError("task classes need a task block")

    @classmethod
    def for_pack(cls, pack: InvariantPack | None) -> "ReportLayout":
        if pack is None:
            return cls()
        return cls(pack.class_names, pack.block_size)

    @property
    def size(self) -> int:
        return GENERIC_DIM + self.block

    def encode(self, report: InvariantReport, element: bool = True) -> np.ndarray:
        """`report` as a float32 vector of `size`; `element=False` leaves the element
        slots 0 (for a violation whose element cannot be read as numbers)."""
        vec = np.zeros(self.size, dtype=np.float32)
        vec[SLOT[report.status]] = 1.0
        own = {name: j for j, name in enumerate(self.classes)}
        task_counts = [0] * len(self.classes)
        for v in report.violations:
            if v.invariant in own:
                task_counts[own[v.invariant]] += 1
            elif v.invariant in CORE_CLASSES:
                vec[SLOT[f"count:{v.invariant}"]] += 1
        for name in CORE_CLASSES:
            vec[SLOT[f"count:{name}"]] = math.log1p(vec[SLOT[f"count:{name}"]])
        vec[SLOT["violations"]] = len(report.violations)
        vec[SLOT["obligations"]] = len(report.undecided)
        if report.violations:
            first = report.violations[0]
            if first.invariant in CORE_CLASSES:
                vec[SLOT["first_class"]] = 1 + CORE_CLASSES.index(first.invariant)
            else:
                vec[SLOT["first_class"]] = TASK_CLASS
                if first.invariant in own:
                    vec[GENERIC_DIM] = 1 + own[first.invariant]
            vec[SLOT["first_line"]] = first.line if isinstance(first.line, (int, float)) else 0
            if element:
                elem = [float(x) for x in first.element] + [0.0, 0.0]
                vec[SLOT["element_0"]], vec[SLOT["element_1"]] = elem[0], elem[1]
        elif report.undecided:
            vec[SLOT["first_line"]] = float(report.undecided[0].line)
        if self.block:
            vec[GENERIC_DIM + 1:GENERIC_DIM + 1 + len(task_counts)] = np.log1p(task_counts)
        return vec


def normalise_encoding(vec) -> np.ndarray:
    """A report encoding (any task block) scaled into [0, 1] for a policy network: the
    status as is, log counts clipped at 5, the class code over its range, line and counts
    as log1p / 8, the element as log1p / 16; the task block's class code over the block's
    class slots and its counts as the generic ones."""
    r = np.asarray(vec, dtype=np.float32)
    out = np.zeros_like(r)
    counts = slice(SLOT[f"count:{CORE_CLASSES[0]}"], SLOT["first_class"])
    out[:3] = r[:3]
    out[counts] = np.clip(r[counts], 0, 5) / 5
    out[SLOT["first_class"]] = r[SLOT["first_class"]] / TASK_CLASS
    lines = slice(SLOT["first_line"], SLOT["element_0"])
    out[lines] = np.log1p(np.maximum(r[lines], 0)) / 8
    out[SLOT["element_0"]:GENERIC_DIM] = np.log1p(np.maximum(r[SLOT["element_0"]:GENERIC_DIM], 0)) / 16
    block = len(r) - GENERIC_DIM
    if block > 0:
        out[GENERIC_DIM] = r[GENERIC_DIM] / max(block - 1, 1)
        out[GENERIC_DIM + 1:] = np.clip(r[GENERIC_DIM + 1:], 0, 5) / 5
    return np.clip(np.nan_to_num(out, nan=0.0), 0.0, 1.0)
