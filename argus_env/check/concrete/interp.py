"""The concrete tag interpreter: runs one program instance over the IR with numpy.

`Interp.run(pid)` executes the kernel body for one program id tuple: statements in order,
runtime loops iteration by iteration (so loop-carried values need no special treatment),
expressions through the op rule tables of `ops`, `dot` and `memory`. Violations go to a shared `Recorder`, which keeps the first
counterexample per (invariant, source line) and the list of checks made. A `Probe` turns
the same run into a replay: at the op and iteration a violation names, the rule hands the
probe the values there.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field

import numpy as np

from ...ir.rewrite import assigned as _assigned
from ...ir import nodes as ir
from ...ir.printer import print_expr
from ...layout.tv import fragment_layout
from .dot import dot
from .memory import TensorWrites, load, reference, store
from .ops import CALL_RULES, ConcreteError, binop, unaryop
from .values import (Val, bcast, coverage_mismatch, cov_text, expect_range, first,
                              reshape, scalar, summary, tagged)
from ..fragments import as_stored
from ..pack import InvariantPack
from ..report import Violation

MAX_TRIPS = 1_000_000  # iterations of one loop; the concrete checker runs at small sizes


class Recorder:
    """First counterexample per (invariant, line), and every check made, for `proven`."""

    def __init__(self) -> None:
        self.found: dict[tuple[str, int], Violation] = {}
        self.checks: dict[tuple[str, int, str], None] = {}

    def wants(self, invariant: str, line: int) -> bool:
        return (invariant, line) not in self.found

    def checked(self, op: str, line: int, invariant: str) -> None:
        self.checks[(op, line, invariant)] = None

    def add(self, v: Violation) -> None:
        self.found.setdefault((v.invariant, v.line), v)

    def proven(self) -> list[str]:
        return [f"{op}@{line}: {inv}" for op, line, inv in self.checks
                if (inv, line) not in self.found]


@dataclass
class Probe:
    """What `replay` looks for: the op, line and loop variables of a violation."""

    violation: Violation
    found: dict | None = None


class ProbeDone(Exception):
    """Raised after the statement where the probe captured its values: the replay is over."""


class Fork(Exception):
    """An `if` on floating-point data with no decision taken yet: the instance is run again
    once per way it can go (`run.run_instance`)."""


@functools.lru_cache(maxsize=64)
def fragment(policy: str, shape: tuple[int, int], num_warps: int):
    try:
        return fragment_layout(policy, shape, num_warps)
    except ValueError:
        return None   # no layout for this tile (e.g. too small for the warps): no thread


def stmt_text(s: ir.Stmt) -> str:
    """The DSL text of a statement (its header for `for` and `if`)."""
    if isinstance(s, ir.Assign):
        return f"{', '.join(s.targets)} = {print_expr(s.value)}"
    if isinstance(s, ir.For):
        return f"for {s.var} in {print_expr(s.iter)}:"
    if isinstance(s, ir.If):
        return f"if {print_expr(s.cond)}:"
    return print_expr(s.value)


@dataclass
class Shared:
    """State shared by all instances of one run."""

    kernel: ir.Kernel
    sizes: dict[str, int]
    grid: tuple[int, ...]
    num_sms: int
    inputs: dict
    task_cov: dict[str, dict[str, tuple[int, int]]]
    carried: dict[int, frozenset[str]]          # id(For) -> loop-carried names
    rec: Recorder = field(default_factory=Recorder)
    writes: dict[str, TensorWrites] = field(default_factory=dict)
    probe: Probe | None = None
    data: dict[str, np.ndarray] = field(default_factory=dict)
    pack: InvariantPack | None = None           # the task's invariant pack, if any
    target: object = None                       # argus_env.target.Target: MMA defaults
    order_names: frozenset | None = None        # names the order rules check (`order.py`)
    body: tuple = ()                            # the statements of the launch being run
    #: the ways taken by the `if`s on floating-point data met so far in this path of the
    #: instance, in order (`run.run_instance` explores every sequence)
    decisions: list = field(default_factory=list)
    cursor: int = 0
    branches: bool = False                      # the launch holds an `if`
    #: the writes of finished launches, per tensor: what a later launch reads from a
    #: workspace covers what they wrote there (`memory.load`)
    memory: dict = field(default_factory=dict)
    #: the pack's per-check state (its rules keep what they derive once here: the routing
    #: of a routed program, say), as the symbolic checker's `memo`
    memo: dict = field(default_factory=dict)


class Interp:
    """One program instance's run; rules reach shared state through it."""

    def __init__(self, shared: Shared, pid: tuple[int, ...]):
        self.sh = shared
        self.kernel, self.sizes, self.grid = shared.kernel, shared.sizes, shared.grid
        self.num_sms, self.task_cov, self.writes = shared.num_sms, shared.task_cov, shared.writes
        self.num_warps = int(self.kernel.option("num_warps", 4))
        self.pid = tuple(pid)
        self.env: dict[str, object] = {}
        self.current: ir.Stmt | None = None   # the statement being run, for `source`
        self.loops: list[frozenset[str]] = []   # loop-carried names of the enclosing loops
        self.runtime: list[str] = []   # variables of the enclosing runtime (not static) loops
        self.fixed = {p.name for p in self.kernel.params} | set(self.kernel.sizes)
        for p in self.kernel.params:
            if p.kind == "tensor":
                self.env[p.name] = p
            elif p.kind == "const":
                self.env[p.name] = scalar(p.default)
            else:   # a runtime scalar: its value may come with the inputs
                self.env[p.name] = scalar(shared.inputs.get(p.name, p.default))
        for name in self.kernel.sizes:
            self.env[name] = scalar(self.sizes[name])

    @property
    def memo(self) -> dict:
        """The pack's per-check state (`Shared.memo`), named as on the symbolic checker so a
        hook both interpreters call (`InvariantPack.conflict`) reads it the same way."""
        return self.sh.memo

    # ------------------------------------------------------------ statements
    def run(self) -> None:
        self.block(self.sh.body)   # the grid was evaluated on the host

    def block(self, stmts) -> None:
        for s in stmts:
            self.stmt(s)
            if self.sh.probe is not None and self.sh.probe.found is not None:
                raise ProbeDone

    def stmt(self, s: ir.Stmt) -> None:
        self.current = s
        if isinstance(s, ir.Assign):
            value = self.eval(s.value)
            values = value if len(s.targets) > 1 else (value,)
            for name, v in zip(s.targets, values):
                self.env[name] = v
        elif isinstance(s, ir.ExprStmt):
            rule = STMT_RULES.get(s.value.fn)
            if rule is None:
                raise ConcreteError(f"concrete: op A.{s.value.fn} has no statement rule",
                                    s.loc.line)
            rule(self, s.value)
        elif isinstance(s, ir.For):
            self.loop(s)
        elif isinstance(s, ir.If):
            v = self.val(s.cond)
            if v.value is None:  # on floating-point data: each way, in its own path
                if self.sh.cursor >= len(self.sh.decisions):
                    raise Fork
                cond = self.sh.decisions[self.sh.cursor]
                self.sh.cursor += 1
            else:
                cond = self.known(v, "`if` condition")
            before = set(self.env)
            self.block(s.body if bool(cond) else s.orelse)
            self.forget(before | (_assigned(s.body) & _assigned(s.orelse)))
        else:
            raise ConcreteError(f"concrete: no rule for statement {type(s).__name__}", s.loc.line)

    def loop(self, s: ir.For) -> None:
        """Iteration by iteration. At each iteration's start the loop-carried names are
        marked, so a `dot` can tell a prefetched operand (SEMANTICS.md, "Loops")."""
        if s.iter.fn == "static_range":
            bounds = (0, int(self.known(self.val(s.iter.arg("n")), "static_range")), 1)
        else:
            bounds = tuple(int(self.known(self.val(s.iter.arg(k)), f"range {k}"))
                           for k in ("start", "stop", "step"))
        trips = range(*bounds)
        if len(trips) > MAX_TRIPS:
            raise ConcreteError(f"loop over {s.var} runs {len(trips)} iterations; the concrete "
                                "checker is meant for small sizes", s.loc.line)
        carried = self.sh.carried.get(id(s), frozenset())
        before = set(self.env)
        self.loops.append(carried)
        runtime = s.iter.fn != "static_range"
        if runtime:
            self.runtime.append(s.var)
        for v in trips:
            self.env[s.var] = scalar(v)
            for name in carried:
                held = self.env.get(name)
                if isinstance(held, Val):
                    self.env[name] = held.moved(carried=True)
            self.block(s.body)
        self.loops.pop()
        if runtime:
            self.runtime.pop()
        self.forget(before)

    def forget(self, visible: set[str]) -> None:
        """Drop names the semantic layer does not let past a loop or a one-sided `if`
        (the loop variable, temporaries of the body), so `names` shows only live ones."""
        for name in [n for n in self.env if n not in visible]:
            del self.env[name]

    # ------------------------------------------------------------ expressions
    def eval(self, e: ir.Expr):
        if isinstance(e, ir.Const):
            return None if e.value is None else scalar(e.value)
        if isinstance(e, ir.Name):
            if e.id not in self.env:
                raise ConcreteError(f"concrete: `{e.id}` has no value here", e.loc.line)
            return self.env[e.id]
        if isinstance(e, ir.Symbol):
            return e
        if isinstance(e, ir.TupleExpr):
            return tuple(self.eval(x) for x in e.elts)
        if isinstance(e, ir.BinOp):
            return binop(self, e)
        if isinstance(e, ir.UnaryOp):
            return unaryop(self, e)
        if isinstance(e, ir.Subscript):
            return reference(self, e) if isinstance(self.eval(e.base), ir.Param) else self.expand(e)
        if isinstance(e, ir.Call):
            rule = EXPR_RULES.get(e.fn)
            if rule is None:
                raise ConcreteError(f"concrete: op A.{e.fn} has no rule", e.loc.line)
            return rule(self, e)
        raise ConcreteError(f"concrete: no rule for {type(e).__name__}", e.loc.line)

    def val(self, e: ir.Expr) -> Val:
        v = self.eval(e)
        if not isinstance(v, Val):
            raise ConcreteError(f"concrete: `{print_expr(e)}` is not a value", e.loc.line)
        return v

    def known(self, v: Val, what: str) -> np.ndarray:
        """The integer/boolean value of `v`; floating-point data has none."""
        if v.value is None:
            raise ConcreteError(f"concrete: {what} depends on floating-point data, whose "
                                "values are not tracked")
        return v.value

    def fit(self, v: Val, shape: tuple[int, ...], what: str, line: int) -> Val:
        """`v` broadcast to a tile's shape. The semantic layer does not check the shapes of
        tag relations (`A.tag`, `A.assert_tags`), so a mismatch is reported here."""
        try:
            return bcast(v, shape)
        except ValueError:
            raise ConcreteError(f"{what}: a value of shape {v.shape} does not broadcast to the "
                                f"tile's shape {shape} (write e.g. rows[:, None])", line) from None

    def expand(self, e: ir.Subscript) -> Val:
        """`x[:, None]`: tags and coverage move with the elements."""
        x = self.val(e.base)
        shape, axis = [], 0
        for idx in e.index:
            if isinstance(idx, ir.Slice):
                shape.append(x.shape[axis])
                axis += 1
            else:
                shape.append(1)
        return reshape(x, tuple(shape))

    def tensor_data(self, p: ir.Param) -> np.ndarray:
        """An integer input tensor's content, from `inputs` (numpy or torch)."""
        if p.name not in self.sh.data:
            if p.name not in self.sh.inputs:
                raise ConcreteError(f"concrete: integer tensor `{p.name}` is read; pass its "
                                    f"content as inputs={{'{p.name}': ...}}")
            data = self.sh.inputs[p.name]
            data = data.detach().cpu().numpy() if hasattr(data, "detach") else np.asarray(data)
            want = tuple(self.sh.kernel.extents(self.sizes)[d] for d in p.dims)
            if data.shape != want:
                raise ConcreteError(f"concrete: input `{p.name}` has shape {data.shape}, "
                                    f"expected {want} at sizes {self.sizes}")
            self.sh.data[p.name] = data.astype(np.int64)
        return self.sh.data[p.name]

    # ------------------------------------------------------------ violations and probes
    def names(self) -> dict[str, int]:
        """Integer scalar variables in scope (pid_m, k, tile, ...)."""
        return {k: int(v.value) for k, v in self.env.items()
                if k not in self.fixed and isinstance(v, Val) and v.shape == ()
                and v.value is not None and v.value.dtype.kind in "iu"}

    def wants(self, invariant: str, line: int) -> bool:
        return self.sh.rec.wants(invariant, line)

    def checked(self, op: str, line: int, invariant: str) -> None:
        self.sh.rec.checked(op, line, invariant)

    def violate(self, invariant: str, op: str, line: int, message: str, *,
                element: tuple = (), tile: Val | None = None, expected: dict | None = None,
                actual: dict | None = None, tensor: str = "", coords: tuple = (),
                other: dict | None = None) -> None:
        """Record a counterexample in this instance, with thread and register when the
        tile's fragment layout is known (dot results: their MMA policy; else blocked)."""
        if not self.wants(invariant, line):
            return
        element = tuple(int(i) for i in element)
        thread = register = None
        if tile is not None and len(tile.shape) == 2 and len(element) == 2:
            # a transposed accumulator's element (i, j) is the accumulator's (j, i)
            policy, shape, at = as_stored(tile.layout or "blocked", tile.shape, element)
            layout = fragment(policy, shape, self.num_warps)
            if layout is not None:
                thread, register = (int(x) for x in layout.owner_of(*at))
        self.sh.rec.add(Violation(
            invariant, op, line, message, source=stmt_text(self.current) if self.current else "",
            sizes=dict(self.sizes), program_id=self.pid, names=self.names(), element=element,
            thread=thread, register=register, expected=dict(expected or {}),
            actual=dict(actual or {}),
            tensor=tensor, coords=tuple(int(c) for c in coords), other=dict(other or {})))

    def probe_at(self, op: str, line: int) -> Violation | None:
        """The violation being replayed, when this op execution is the one it names."""
        p = self.sh.probe
        if p is None or p.found is not None or p.violation.line != line or p.violation.op != op:
            return None
        return p.violation if self.names() == p.violation.names else None

    def capture(self, found: dict) -> None:
        self.sh.probe.found = {"names": self.names(), **found}


def assert_tags(it: Interp, call: ir.Call) -> None:
    """At every tagged element: `name=e` means tag `name` equals e (**assertion**);
    `name=A.covers(lo, hi)` means coverage of `name` is lo..hi-1 once each (**coverage**)."""
    x, line = it.val(call.arg("x")), call.loc.line
    where = tagged(x)
    p = it.probe_at("assert_tags", line)
    if p is not None:
        it.capture({"value": summary(x, p.element)})
    for name, rel in call.tags:
        if isinstance(rel, ir.Call) and rel.fn == "covers":
            lo, hi = (int(it.known(it.val(rel.arg(k)), "covers bound")) for k in ("lo", "hi"))
            it.checked("assert_tags", line, "coverage")
            el = None
            if it.wants("coverage", line):
                el = first(coverage_mismatch(x, name, lo, hi, where))
            if el is not None:
                got = cov_text(x, name, el)
                it.violate("coverage", "assert_tags", line, f"coverage of {name} is {got}, "
                           f"not {expect_range(lo, hi)} once each", element=el, tile=x,
                           expected={name: expect_range(lo, hi)}, actual={name: got})
            continue
        rel_v = it.fit(it.val(rel), x.shape, f"assert_tags: {name}={print_expr(rel)}", line)
        want = it.known(rel_v, f"assert_tags {name}")
        it.checked("assert_tags", line, "assertion")
        t = x.tags.get(name)
        # as the symbolic rule: where the tag is carried it must equal e; a tile that
        # carries the name nowhere fails wherever it carries data (an element carrying the
        # other operand's tags only, its own masked off, asserts nothing of the name)
        bad = where if t is None else where & t.has & (t.val != want)
        el = first(bad) if it.wants("assertion", line) else None
        if el is not None:
            got = int(t.val[el]) if t is not None and t.has[el] else None
            it.violate("assertion", "assert_tags", line, f"tag {name} is {got}, the assertion "
                       f"says {int(want[el])}", element=el, tile=x,
                       expected={name: int(want[el])}, actual={name: got})


STMT_RULES = {"store": store, "atomic_add": store, "assert_tags": assert_tags,
              "grid": lambda it, call: None}
EXPR_RULES = {**CALL_RULES, "load": load, "dot": dot}
