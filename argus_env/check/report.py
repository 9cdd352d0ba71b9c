"""`Violation` and `InvariantReport`: the checker's vocabulary.

A report is a list of violations, each a concrete counterexample: which invariant, at
which op and source line, in which program instance and loop iteration, at which tile
element (and thread and register, through the fragment's layout), with the expected and
the actual tag values, and a list of *undecided* obligations: proof obligations the checker
could not settle either way (the solver answered `unknown`: its time limit, a theory it
cannot decide, an interruption; or no proof strategy applied). A report's `status` is
`violation`, `undecided` or `proven`; only `proven` is `ok`. Reports serialise to JSON,
encode to a fixed-size numeric vector for observations, and render as short text an LLM
can act on.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field

from ..dsl.errors import DSLError


class CheckUnsupported(DSLError, NotImplementedError):
    """The program uses a construct the invariant checker has no rule for (a tile index it
    cannot read as an integer, say): no verdict is possible, so the program is refused
    like one that does not type-check, with the construct and its line named."""

    kind = "unsupported"


class CheckTimeout(CheckUnsupported):
    """The checker did not reach a verdict within the time it was given (an environment
    step's budget): the program is refused, not judged, and checked again if resent."""

    kind = "check timeout"


#: Invariant classes, in the order of the observation encoding. Names are stable API.
INVARIANTS = (
    "contraction",   # a dot contracts operand elements whose shared index tags differ
    "ownership",     # a stored element's tags differ from the destination coordinates
    "coverage",      # a reduction does not cover its range exactly once
    "exactly_once",  # two program instances (or iterations) write one element, not atomically
    "bounds",        # an access reaches outside its tensor and is not masked
    "bijection",     # an output element no program instance writes (pid remap not onto)
    "tag_conflict",  # an elementwise op meets values whose same-named tags differ
    "pipeline",      # a prefetched (loop-carried) operand is not the slice consumed next
    "assertion",     # an explicit `A.assert_tags` relation fails
    "causal",        # attention: a key after its query reaches the exponent unmasked
    "softmax",       # attention: online-softmax rescaling or normalisation inconsistent
    "exp_base",      # attention: exp2 without log2(e) folded into the scale
    "head_map",      # attention: query head meets the wrong KV head (GQA)
    "expert",        # MoE: a token row meets another expert's weights
    "scatter",       # MoE: a result is written to a token it did not come from
    "combine",       # MoE: the combine weight is not the token's top-k weight for the slot
    "padding",       # MoE: a padding row from block alignment is stored
)
INVARIANT_INDEX = {name: i for i, name in enumerate(INVARIANTS)}
#: the class code of an undecided report's first finding in the encoding (past every
#: invariant's code, so the observation's size does not change)
UNDECIDED_CODE = len(INVARIANTS) + 1
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

    def __post_init__(self) -> None:
        if self.invariant not in INVARIANT_INDEX:
            raise ValueError(f"unknown invariant {self.invariant!r}; known: {INVARIANTS}")

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
        out = {name: 0 for name in INVARIANTS}
        for v in self.violations:
            out[v.invariant] += 1
        return out

    def kinds(self) -> set[str]:
        return {v.invariant for v in self.violations}

    def encode(self):
        """Fixed-size float vector: one count per invariant class (log-scaled), then the
        first violation's class (one-hot position), line and normalised element."""
        import numpy as np
        vec = np.zeros(len(INVARIANTS) + 5, dtype=np.float32)
        for name, n in self.counts().items():
            vec[INVARIANT_INDEX[name]] = np.log1p(n)
        base = len(INVARIANTS)
        if self.violations:
            first = self.violations[0]
            vec[base] = 1.0 + INVARIANT_INDEX[first.invariant]
            vec[base + 1] = float(first.line)
            vec[base + 2] = float(len(self.violations))
            elem = list(first.element) + [0, 0]
            vec[base + 3], vec[base + 4] = float(elem[0]), float(elem[1])
        elif self.undecided:  # the class slot says "undecided"; line and count as above
            vec[base] = float(UNDECIDED_CODE)
            vec[base + 1] = float(self.undecided[0].line)
            vec[base + 2] = float(len(self.undecided))
        return vec

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
