"""The part of a kernel that executes at given sizes, and facts about it.

Cost models and table look-ups must price what a GPU runs, not what a program's text
mentions. `live_kernel(kernel, sizes)` removes what never runs or never matters:

* loops whose trip count is known to be zero at these sizes (every program's, with
  `program_id` ranging over the grid), and the branch of an `if` whose condition is decided;
* statements whose values reach no `store`, `atomic_add` or the grid (checker-only
  `assert_tags` included), found by liveness over the structured body;
* compile-time constants no remaining statement reads, and the docstring.

Scalar facts are intervals: sizes and constants are points, `program_id(i)` spans the
grid's axis, anything read off a tile is unknown. Nothing is executed; the IR is walked.
`live_key` is the structural hash of the result (what a table keyed by "the program the
GPU runs" is keyed by); `feeds_index` and `persistent_loop` answer the questions cost
models ask of executed structure: does a name shape the addresses loaded and stored, does
a loop of tiles strided by the grid size hold the work.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from collections import OrderedDict

from . import nodes as ir
from .rewrite import assigned as _assigned, structural_hash, walk

INF = math.inf
UNKNOWN = (-INF, INF)
EFFECTS = ("store", "atomic_add", "grid")       # statements the GPU's result depends on


# ---------------------------------------------------------------- interval arithmetic
def _point(v) -> tuple:
    if isinstance(v, bool):
        return (int(v), int(v))
    return (v, v) if isinstance(v, (int, float)) and not math.isnan(v) else UNKNOWN


def _mul(a, b):
    def m(x, y):
        return 0 if x == 0 or y == 0 else x * y
    ps = [m(x, y) for x in a for y in b]
    return (min(ps), max(ps))


def _trunc_div(x, c):
    """x / c rounded toward zero: what a GPU's signed integer division gives (Triton's `//`
    on runtime integers, and its interpreter's), where Python's `//` rounds down."""
    q = abs(x) // c
    return q if x >= 0 else -q


def _div(a, b, ceil=False):
    """`a // b` (`A.cdiv(a, b)` with `ceil`) for a positive constant `b`. Where `a` may be
    negative the two roundings differ: Python's (compile-time constants: floor) and the
    GPU's (runtime integers: toward zero; `A.cdiv` is `(a + b - 1) // b`); the interval
    holds both, so no branch is decided by the one the kernel does not run."""
    c = b[0]
    if b[0] != b[1] or not isinstance(c, (int, float)) or c <= 0 or math.isinf(c):
        return UNKNOWN
    if ceil:
        fs = (lambda x: -(-x // c), lambda x: _trunc_div(x + c - 1, c))
    else:
        fs = (lambda x: x // c, lambda x: _trunc_div(x, c))
    lo, hi = a
    lo = lo if math.isinf(lo) else min(f(lo) for f in fs)
    hi = hi if math.isinf(hi) else max(f(hi) for f in fs)
    return (lo, hi)


def _floating(a) -> bool:
    """Whether interval `a` holds a float (not only integers and the unbounded ends): the
    value of float arithmetic, which the GPU does in float32 (its literal 1.00000001 is
    1.0) and this evaluation in Python's float64."""
    return any(isinstance(x, float) and not math.isinf(x) for x in a)


def _cmp(op, a, b):
    """(0, 0) or (1, 1) when the comparison is decided, else (0, 1)."""
    lt_sure, ge_sure = a[1] < b[0], a[0] >= b[1]
    le_sure, gt_sure = a[1] <= b[0], a[0] > b[1]
    eq_sure = a[0] == a[1] == b[0] == b[1]
    ne_sure = a[1] < b[0] or b[1] < a[0]
    yes, no = {"<": (lt_sure, ge_sure), "<=": (le_sure, gt_sure), ">": (gt_sure, le_sure),
               ">=": (ge_sure, lt_sure), "==": (eq_sure, ne_sure),
               "!=": (ne_sure, eq_sure)}[op]
    return (1, 1) if yes else (0, 0) if no else (0, 1)


class _Eval:
    """Intervals of scalar expressions over sizes, constants and known locals."""

    def __init__(self, env: dict, grid: list | None, sms: int | None):
        self.env, self.grid, self.sms = env, grid, sms
        self.pids: tuple | None = None   # one program's ids, where one is followed

    def __call__(self, e) -> tuple:
        try:
            return self._ev(e)
        except (TypeError, ValueError, ZeroDivisionError, OverflowError):
            return UNKNOWN

    def _ev(self, e) -> tuple:
        if isinstance(e, ir.Const):
            return _point(e.value)
        if isinstance(e, ir.Name):
            return self.env.get(e.id, UNKNOWN)
        if isinstance(e, ir.UnaryOp):
            a = self._ev(e.operand)
            if e.op == "-":
                return (-a[1], -a[0])
            if e.op == "not":
                return (1 - a[1], 1 - a[0]) if 0 <= a[0] <= a[1] <= 1 else (0, 1)
            return UNKNOWN
        if isinstance(e, ir.BinOp):
            a, b = self._ev(e.lhs), self._ev(e.rhs)
            if e.op == "+":
                return (a[0] + b[0], a[1] + b[1])
            if e.op == "-":
                return (a[0] - b[1], a[1] - b[0])
            if e.op == "*":
                return _mul(a, b)
            if e.op == "//":
                return _div(a, b)
            if e.op == "%":
                if a[0] == a[1] and b[0] == b[1] and b[0] and not math.isinf(a[0] + b[0]):
                    # Python's remainder takes the divisor's sign, the GPU's (runtime
                    # integers) the dividend's: both where they differ
                    py, c = a[0] % b[0], math.fmod(a[0], b[0])
                    c = int(c) if isinstance(a[0], int) and isinstance(b[0], int) else c
                    return _point(py) if py == c else (min(py, c), max(py, c))
                return (0, b[0] - 1) if a[0] >= 0 and b[0] == b[1] and 0 < b[0] < INF \
                    else UNKNOWN
            if e.op in ("<", "<=", ">", ">=", "==", "!="):
                if _floating(a) or _floating(b):
                    return (0, 1)  # the GPU compares floats in float32: not decided here
                return _cmp(e.op, a, b)
            if e.op in ("and", "&") and {a, b} <= {(0, 0), (1, 1), (0, 1)}:
                return (min(a[0], b[0]), min(a[1], b[1]))
            if e.op in ("or", "|") and {a, b} <= {(0, 0), (1, 1), (0, 1)}:
                return (max(a[0], b[0]), max(a[1], b[1]))
            return UNKNOWN
        if isinstance(e, ir.Call):
            return self._call(e)
        return UNKNOWN

    def _axis(self, e: ir.Call):
        axis = e.arg("axis")
        return axis.value if isinstance(axis, ir.Const) and isinstance(axis.value, int) else None

    def _call(self, e: ir.Call) -> tuple:
        if e.fn == "num_sms":
            return _point(self.sms) if self.sms else (1, INF)
        if e.fn == "program_id" and self.pids is not None:
            axis = self._axis(e)   # one program of the grid (`loop_work`)
            return _point(self.pids[axis]) if axis is not None and axis < len(self.pids) \
                else UNKNOWN
        if e.fn in ("program_id", "num_programs"):
            axis = self._axis(e)
            dim = self.grid[axis] if self.grid and axis is not None and axis < len(self.grid) \
                else (1, INF)
            return (0, dim[1] - 1) if e.fn == "program_id" else dim
        if e.fn in ("cdiv", "minimum", "maximum"):
            a, b = self._ev(e.arg("a")), self._ev(e.arg("b"))
            if e.fn == "cdiv":
                return _div(a, b, ceil=True)
            f = min if e.fn == "minimum" else max
            return (f(a[0], b[0]), f(a[1], b[1]))
        return UNKNOWN


def _hull(a: tuple, b: tuple) -> tuple:
    return (min(a[0], b[0]), max(a[1], b[1]))



def _range_args(it: ir.Call):
    start, stop, step = it.arg("start"), it.arg("stop"), it.arg("step")
    if stop is None:
        start, stop = ir.Const(0), start
    return start, stop, step if step is not None else ir.Const(1)


def trips_at_most(it: ir.Call, ev: _Eval) -> float:
    """An upper bound on the trips of loop iterator `it` (INF when nothing is known)."""
    if it.fn == "static_range":
        return ev(it.arg("n"))[1]
    start, stop, step = (ev(x) for x in _range_args(it))
    if step[0] > 0:
        span = stop[1] - start[0]
        return INF if math.isinf(span) else max(0, -(-span // step[0]))
    if step[1] < 0:
        span = start[1] - stop[0]
        return INF if math.isinf(span) else max(0, -(-span // -step[1]))
    return INF


# ---------------------------------------------------------------- pruning
class _Pruner:
    """Forward pass: drop zero-trip loops and the branches a decided condition skips."""

    def __init__(self, ev: _Eval):
        self.ev = ev

    def block(self, stmts) -> tuple:
        out = []
        for s in stmts:
            out.extend(self.stmt(s))
        return tuple(out)

    def stmt(self, s) -> list:
        env = self.ev.env
        if isinstance(s, ir.Assign):
            value = self.ev(s.value) if len(s.targets) == 1 else UNKNOWN
            for t in s.targets:
                env[t] = value
            return [s]
        if isinstance(s, ir.For):
            if trips_at_most(s.iter, self.ev) <= 0:
                return []
            span = _hull(*(self.ev(x) for x in _range_args(s.iter)[:2])) \
                if s.iter.fn == "range" else UNKNOWN
            for name in _assigned([s]):
                env[name] = UNKNOWN   # changes from trip to trip
            env[s.var] = span
            body = self.block(s.body)
            for name in _assigned([s]):
                env[name] = UNKNOWN
            return [dataclasses.replace(s, body=body)]
        if isinstance(s, ir.If):
            cond = self.ev(s.cond)
            if cond in ((1, 1),) or (cond[0] > 0 or cond[1] < 0):
                return list(self.block(s.body))
            if cond == (0, 0):
                return list(self.block(s.orelse))
            before = dict(env)
            body = self.block(s.body)
            after_body, self.ev.env = self.ev.env, dict(before)
            orelse = self.block(s.orelse)
            for name in _assigned(s.body) | _assigned(s.orelse):
                self.ev.env[name] = _hull(after_body.get(name, UNKNOWN),
                                          self.ev.env.get(name, UNKNOWN))
            return [dataclasses.replace(s, body=body, orelse=orelse)]
        if isinstance(s, ir.ExprStmt) and s.value.fn == "grid":
            self.ev.grid = _dims(s.value, self.ev)   # program_id/num_programs from here on
        return [s]


def _uses(e) -> set[str]:
    return {n.id for n in walk(e) if isinstance(n, ir.Name)}


def _effectful(e) -> bool:
    return any(isinstance(n, ir.Call) and n.fn in EFFECTS for n in walk(e))


def _dce_block(stmts, live: set) -> tuple[tuple, set]:
    out = []
    for s in reversed(stmts):
        kept, live = _dce_stmt(s, live)
        if kept is not None:
            out.append(kept)
    return tuple(reversed(out)), live


def _dce_stmt(s, live: set):
    if isinstance(s, ir.Assign):
        if set(s.targets) & live or _effectful(s.value):
            return s, (live - set(s.targets)) | _uses(s.value)
        return None, live
    if isinstance(s, ir.ExprStmt):
        if _effectful(s.value):
            return s, live | _uses(s.value)
        return None, live
    if isinstance(s, ir.If):
        body, lb = _dce_block(s.body, live)
        orelse, lo = _dce_block(s.orelse, live)
        if not body and not orelse:
            return None, live
        if not body:
            return ir.If(ir.UnaryOp("not", s.cond, loc=s.cond.loc), orelse, (), loc=s.loc), \
                lo | live | _uses(s.cond)
        return dataclasses.replace(s, body=body, orelse=orelse), lb | lo | _uses(s.cond)
    if isinstance(s, ir.For):
        at_end = set(live)
        while True:     # live at the end of an iteration: after the loop, or the next trip
            body, entry = _dce_block(s.body, at_end)
            grown = at_end | (entry - {s.var})
            if grown == at_end:
                break
            at_end = grown
        if not body:
            return None, live
        return dataclasses.replace(s, body=body), at_end | (entry - {s.var}) | _uses(s.iter)
    return s, live


def _dims(grid: ir.Call, ev: _Eval) -> list | None:
    dims = grid.arg("dims")
    if isinstance(dims, ir.TupleExpr):
        return [(max(1, lo), hi) for lo, hi in (ev(d) for d in dims.elts)]
    return None


def _known(kernel: ir.Kernel, sizes: dict) -> dict:
    """What is known before the kernel runs: its constants and the sizes, as points."""
    env = {name: _point(v) for name, v in kernel.consts.items()}
    env.update({name: _point(v) for name, v in sizes.items()})
    return env


def live_kernel(kernel: ir.Kernel, sizes: dict, sms: int | None = None,
                unused_consts: bool = False) -> ir.Kernel:
    """`kernel` as it executes at `sizes` (see the module docstring); `sms` prices
    `A.num_sms()` (unknown when None); `unused_consts` keeps the constants nothing reads."""
    env = _known(kernel, sizes)
    ev = _Eval(env, None, sms)
    body = _Pruner(ev).block(kernel.body)
    body, _ = _dce_block(body, set())
    used = set().union(*(_uses(s) for s in body))
    params = tuple(p for p in kernel.params if p.kind != "const" or p.name in used
                   or unused_consts)
    return dataclasses.replace(kernel, body=body, params=params, doc=None)


# bounded: (program hash, sizes, sms) -> live kernel
_LIVE: OrderedDict = OrderedDict()
_LIVE_MAX = 4096


def live(program, sizes: dict, sms: int | None = None):
    """The executed part of `program` (a `Program`) at `sizes`, as a `Program`; the
    program itself when nothing is removed but its docstring. Cached (bounded)."""
    key = (program.hash, tuple(sorted(sizes.items())), sms)
    hit = _LIVE.get(key)
    if hit is not None:
        _LIVE.move_to_end(key)
        return hit
    kernel = live_kernel(program.kernel, sizes, sms)
    if kernel == dataclasses.replace(program.kernel, doc=None, body=_no_asserts(program.kernel.body)):
        out = program   # nothing executed was removed: no second type check
    else:
        out = program.with_kernel(kernel)
    _LIVE[key] = (out, structural_hash(kernel))
    if len(_LIVE) > _LIVE_MAX:
        _LIVE.popitem(last=False)
    return _LIVE[key]


def _no_asserts(stmts) -> tuple:
    """`stmts` without the checker's `assert_tags` statements."""
    out = []
    for s in stmts:
        if isinstance(s, ir.ExprStmt) and s.value.fn == "assert_tags":
            continue
        if isinstance(s, ir.For):
            s = dataclasses.replace(s, body=_no_asserts(s.body))
        elif isinstance(s, ir.If):
            s = dataclasses.replace(s, body=_no_asserts(s.body), orelse=_no_asserts(s.orelse))
        out.append(s)
    return tuple(out)


def live_program(program, sizes: dict, sms: int | None = None):
    """The executed part of `program` at `sizes` (a `Program`)."""
    return live(program, sizes, sms)[0]


def live_key(program, sizes: dict, sms: int | None = None, unused_consts: bool = False
             ) -> str:
    """The structural hash of what `program` executes at `sizes`: equal for two programs
    that differ only in docstrings, comments, dead code and (unless `unused_consts`)
    unused constants."""
    if not unused_consts:
        return live(program, sizes, sms)[1]
    key = ("consts", program.hash, tuple(sorted(sizes.items())), sms)
    if key not in _LIVE:
        _LIVE[key] = (None, structural_hash(live_kernel(program.kernel, sizes, sms, True)))
        if len(_LIVE) > _LIVE_MAX:
            _LIVE.popitem(last=False)
    return _LIVE[key][1]


# ---------------------------------------------------------------- facts about executed code
def _definitions(kernel: ir.Kernel) -> dict[str, list]:
    """Every expression assigned to a name (loop variables: their iterator)."""
    defs: dict[str, list] = {}
    for n in walk(kernel):
        if isinstance(n, ir.Assign):
            for t in n.targets:
                defs.setdefault(t, []).append(n.value)
        elif isinstance(n, ir.For):
            defs.setdefault(n.var, []).append(n.iter)
    return defs


def slice_of(kernel: ir.Kernel, exprs) -> tuple[set[str], set[str]]:
    """Names and op names that `exprs` depend on, through every assignment (flow-insensitive)."""
    defs = _definitions(kernel)
    names, fns, todo = set(), set(), list(exprs)
    while todo:
        e = todo.pop()
        for n in walk(e):
            if isinstance(n, ir.Call):
                fns.add(n.fn)
            elif isinstance(n, ir.Name) and n.id not in names:
                names.add(n.id)
                todo.extend(defs.get(n.id, ()))
    return names, fns


def _index_exprs(kernel: ir.Kernel, fns=("load", "store", "atomic_add")) -> list:
    out = []
    for n in walk(kernel):
        if isinstance(n, ir.Call) and n.fn in fns:
            ref = n.arg("ref")
            if isinstance(ref, ir.Subscript):
                out.extend(ref.index)
    return out


def feeds_index(kernel: ir.Kernel, name: str) -> bool:
    """Whether `name` shapes, together with the program's position in the grid, the
    addresses the kernel loads and stores (a tile-order remapping does)."""
    names, fns = slice_of(kernel, _index_exprs(kernel))
    return name in names and "program_id" in fns


class _Unknown(Exception):
    pass


def _first_elements(kernel: ir.Kernel, env: dict, position: int) -> tuple:
    """The first element each store index addresses in the program (or first tile) at
    grid `position`, evaluated on integers: `arange` starts at 0, a loop over tiles that
    starts at the program's position is at its first trip. Raises _Unknown for anything
    else (a loaded value, a name defined twice)."""
    defs = _definitions(kernel)
    memo: dict = {}

    def ev(e):
        if isinstance(e, ir.Const) and isinstance(e.value, int):
            return e.value
        if isinstance(e, ir.Name):
            if e.id in env:
                return env[e.id]
            if e.id not in memo:
                d = defs.get(e.id, [])
                if len(d) != 1:
                    raise _Unknown(e.id)
                memo[e.id] = ev(d[0])
            return memo[e.id]
        if isinstance(e, ir.BinOp) and e.op in ("+", "-", "*", "//", "%"):
            a, b = ev(e.lhs), ev(e.rhs)
            if e.op in ("//", "%") and b == 0:
                raise _Unknown("division by zero")
            return {"+": a + b, "-": a - b, "*": a * b, "//": a // b if b else 0,
                    "%": a % b if b else 0}[e.op]
        if isinstance(e, ir.Subscript) and not isinstance(e.base, ir.Name) or \
                isinstance(e, ir.Subscript) and e.base.id not in {p.name for p in kernel.tensors}:
            return ev(e.base)      # a tile broadcast: x[:, None]
        if isinstance(e, ir.Call):
            if e.fn == "arange":
                return 0
            if e.fn == "program_id":
                return position if _axis_of(e) == 0 else 0
            if e.fn in ("range",):
                start = _range_args(e)[0]
                if "program_id" in {n.fn for n in walk(start) if isinstance(n, ir.Call)}:
                    return ev(start)
                raise _Unknown("a loop not over tiles")
            if e.fn in ("cdiv", "minimum", "maximum"):
                a, b = ev(e.arg("a")), ev(e.arg("b"))
                if e.fn == "cdiv":
                    if not b:
                        raise _Unknown("division by zero")
                    return -(-a // b)
                return min(a, b) if e.fn == "minimum" else max(a, b)
        raise _Unknown(type(e).__name__)

    out = []
    for n in walk(kernel):
        if isinstance(n, ir.Call) and n.fn in ("store", "atomic_add"):
            ref = n.arg("ref")
            if isinstance(ref, ir.Subscript):
                out.append(tuple(ev(i) for i in ref.index))
    return tuple(out)


def _axis_of(e: ir.Call):
    axis = e.arg("axis")
    return axis.value if isinstance(axis, ir.Const) else None


def order_depends_on(kernel: ir.Kernel, name: str, sizes: dict, probes: int = 64) -> bool | None:
    """Whether the output elements the first `probes` programs (or tiles) store move when
    constant `name` is 1 instead of its value: a tile-order remapping computed and used.
    None when the addresses cannot be worked out on integers."""
    consts = {p.name: p.default for p in kernel.params if p.kind == "const"}
    if name not in consts:
        return False
    env = {k: v for k, v in {**consts, **sizes}.items() if isinstance(v, int)}
    try:
        for position in range(probes):
            here = _first_elements(kernel, env, position)
            plain = _first_elements(kernel, {**env, name: 1}, position)
            if here != plain:
                return True
    except _Unknown:
        return None
    return False


def _launches(kernel: ir.Kernel):
    """(grid call, the top-level statements it launches), per `A.grid` of the kernel."""
    grid, stmts = None, []
    for s in kernel.body:
        if isinstance(s, ir.ExprStmt) and s.value.fn == "grid":
            if grid is not None:
                yield grid, stmts
            grid, stmts = s.value, []
        else:
            stmts.append(s)
    if grid is not None:
        yield grid, stmts


def persistent_loop(kernel: ir.Kernel) -> ir.For | None:
    """The loop over work tiles of a persistent launch: a runtime loop starting at the
    program's position and striding by the number of programs, holding a store, in a
    launch whose grid is sized by the SM count; None if the kernel has none."""
    for grid, stmts in _launches(kernel):
        if not any(isinstance(n, ir.Call) and n.fn == "num_sms" for n in walk(grid)):
            continue
        for n in (x for s in stmts for x in walk(s)):
            if isinstance(n, ir.For) and n.iter.fn == "range":
                start, _, step = _range_args(n.iter)
                _, start_fns = slice_of(kernel, [start])
                _, step_fns = slice_of(kernel, [step])
                if "program_id" in start_fns and step_fns & {"num_programs", "num_sms"} and \
                        any(isinstance(x, ir.Call) and x.fn in ("store", "atomic_add")
                            for x in walk(n)):
                    return n
    return None


def loop_work(kernel: ir.Kernel, sizes: dict, sms: int | None, target: ir.For,
              limit: int = 100_000) -> list[tuple[int, int]] | None:
    """(trips, entries) of loop `target` for each program of the launch holding it: the
    scalar code run on integers per program id (sizes, constants, `program_id`, the loops
    enclosing `target` iterated value by value), its trips summed over its entries. None
    when a bound the count needs is not an integer there (read off a tile, say) or past
    `limit` iterations in all. What a program executes, not what its text says: a
    stream-K program's share of the k steps, as its index arithmetic gives it."""
    def every(extents):
        if math.prod(extents) > limit:
            return None
        return itertools.product(*(range(n) for n in extents))
    return _work_at(kernel, sizes, sms, target, limit, every)


#: grid axes of at most this many programs are walked in full by `loop_trips_by_axis`
AXIS_WALK = 16


def loop_trips_by_axis(kernel: ir.Kernel, sizes: dict, sms: int | None, target: ir.For,
                       limit: int = 1 << 20) -> int | None:
    """The most trips of loop `target` in one program, over the programs that sit at 0 on
    every grid axis but one: an axis of at most `AXIS_WALK` programs walked in full (a
    split-K grid's split axis: each split's k share), a longer one at its first, second,
    middle and last program. What the programs execute, so a split declared by the grid
    but not taken by the loop's range is not counted as one. None where a bound is
    unknown there, the grid holds more than `limit` programs per axis, or past `limit`
    iterations."""
    def by_axis(extents):
        if max(extents, default=0) > limit or not all(extents):
            return None
        return sorted({tuple(v if i == axis else 0 for i in range(len(extents)))
                       for axis, n in enumerate(extents)
                       for v in (range(n) if n <= AXIS_WALK else (0, 1, n // 2, n - 1))})
    work = _work_at(kernel, sizes, sms, target, limit, by_axis)
    return None if work is None else max((trips for trips, _ in work), default=0)


def _work_at(kernel: ir.Kernel, sizes: dict, sms: int | None, target: ir.For, limit: int,
             choose) -> list[tuple[int, int]] | None:
    """(trips, entries) of loop `target` in the programs `choose(extents)` names (program
    ids of the launch holding it; None: too many), or None where the launch's grid or a
    bound the count needs is not known there."""
    env0 = _known(kernel, sizes)
    for grid, stmts in _launches(kernel):
        if not any(n is target for s in stmts for n in walk(s)):
            continue
        dims = _dims(grid, _Eval(dict(env0), None, sms))
        if dims is None or any(lo != hi or math.isinf(hi) for lo, hi in dims):
            return None
        extents = [int(hi) for _, hi in dims]
        pids = choose(extents)
        if pids is None:
            return None
        counter, out = _Work(target, limit), []
        for pid in pids:
            ev = _Eval(dict(env0), [(n, n) for n in extents], sms)
            ev.pids = pid
            try:
                out.append(counter.run(stmts, ev))
            except _Unknown:
                return None
        return out
    return None


class _Work:
    """Counts the trips of one loop in one program (`loop_work`)."""

    def __init__(self, target: ir.For, limit: int):
        self.target, self.budget = target, limit
        # what `holds` and `assigned` found for each statement of the kernel, by identity
        # (the kernel holds them while this counter lives): an inner loop's body is run
        # once per trip, and walking its tree again each trip was most of the cost
        self._holds: dict[int, bool] = {}
        self._assigned: dict[int, frozenset] = {}
        self._same: dict[int, bool] = {}

    def run(self, stmts, ev) -> tuple[int, int]:
        self.trips = self.entries = 0
        self.block(stmts, ev)
        return self.trips, self.entries

    def holds(self, s) -> bool:
        found = self._holds.get(id(s))
        if found is None:
            found = self._holds[id(s)] = any(n is self.target for n in walk(s))
        return found

    def assigned(self, s) -> frozenset:
        found = self._assigned.get(id(s))
        if found is None:
            found = self._assigned[id(s)] = frozenset(_assigned([s]))
        return found

    def same_each_trip(self, s: ir.For) -> bool:
        """Whether every trip of loop `s` (which holds the target) counts alike: what
        decides the count inside it (the bounds of the loops on the way to the target and
        the target's own, the conditions of the ifs on the way) reads neither `s`'s
        variable nor any name assigned inside `s`, so that it sees the same values on
        every trip (program ids are fixed for the one program followed). Then one trip,
        counted, stands for all: a persistent loop over thousands of small tiles is not
        walked tile by tile. A bound that a trip computes (stream-K's share of k steps,
        from the tile) makes it False, and the loop is walked."""
        found = self._same.get(id(s))
        if found is None:
            reads: set[str] = set()

            def visit(stmts) -> None:
                for t in stmts:
                    if isinstance(t, ir.For) and self.holds(t):
                        for x in _range_args(t.iter):
                            reads.update(_uses(x))
                        visit(t.body)
                    elif isinstance(t, ir.If) and self.holds(t):
                        reads.update(_uses(t.cond))
                        visit(t.body)
                        visit(t.orelse)
            visit(s.body)
            found = self._same[id(s)] = not reads & (self.assigned(s) | {s.var})
        return found

    def point(self, ev, e) -> int:
        lo, hi = ev(e)
        if lo != hi or math.isinf(lo):
            raise _Unknown()
        return int(lo)

    def block(self, stmts, ev) -> None:
        for s in stmts:
            if isinstance(s, ir.Assign):
                value = ev(s.value) if len(s.targets) == 1 else UNKNOWN
                for t in s.targets:
                    ev.env[t] = value
            elif isinstance(s, ir.For) and s is self.target:
                start, stop, step = (self.point(ev, x) for x in _range_args(s.iter))
                if step <= 0:
                    raise _Unknown()
                self.trips += max(0, -(-(stop - start) // step))
                self.entries += 1
                for name in self.assigned(s):
                    ev.env[name] = UNKNOWN
            elif isinstance(s, ir.For) and self.holds(s):
                if s.iter.fn != "range":
                    raise _Unknown()
                start, stop, step = (self.point(ev, x) for x in _range_args(s.iter))
                if step <= 0:
                    raise _Unknown()
                values = range(start, stop, step)
                # every trip counting alike (`same_each_trip`): the first one walked stands
                # for all, the iteration budget spent as walking every trip would spend it
                n = len(values) if len(values) > 1 and self.same_each_trip(s) else 1
                trips, entries, budget = self.trips, self.entries, self.budget
                for v in (values[:1] if n > 1 else values):
                    self.budget -= 1
                    if self.budget < 0:
                        raise _Unknown()
                    ev.env[s.var] = (v, v)
                    self.block(s.body, ev)
                if n > 1:
                    self.trips = trips + n * (self.trips - trips)
                    self.entries = entries + n * (self.entries - entries)
                    self.budget = budget - n * (budget - self.budget)
                    if self.budget < 0:
                        raise _Unknown()
                for name in self.assigned(s):
                    ev.env[name] = UNKNOWN
            elif isinstance(s, ir.If) and self.holds(s):
                cond = ev(s.cond)
                if cond == (1, 1):
                    self.block(s.body, ev)
                elif cond == (0, 0):
                    self.block(s.orelse, ev)
                else:
                    raise _Unknown()
            elif isinstance(s, (ir.For, ir.If)):
                for name in self.assigned(s):
                    ev.env[name] = UNKNOWN
class _StopAt(_Pruner):
    """The forward pass, remembering the interval of one loop's range on the way."""

    def __init__(self, ev: _Eval, loop: ir.For):
        super().__init__(ev)
        self.loop, self.found = loop, None

    def stmt(self, s) -> list:
        if s is self.loop and self.found is None:
            self.found = tuple(self.ev(x) for x in _range_args(s.iter))
        return super().stmt(s)


def persistent_work(kernel: ir.Kernel, sizes: dict, sms: int) -> int | None:
    """How many work items the persistent loop of `kernel` walks over all programs at
    `sizes` (its range's stop less its first start, over its stride of one program), or
    None where the kernel has no persistent loop or its range is not known exactly."""
    loop = persistent_loop(kernel)
    if loop is None:
        return None
    env = _known(kernel, sizes)
    walker = _StopAt(_Eval(env, None, sms), loop)
    walker.block(kernel.body)
    if walker.found is None:
        return None
    start, stop, _ = walker.found
    if stop[0] != stop[1] or math.isinf(stop[0]) or start[0] < 0:
        return None
    return max(0, int(stop[0]) - int(start[0]))   # program 0 starts at the lowest item


def depends_on_position(kernel: ir.Kernel, e) -> bool:
    """Whether scalar expression `e` varies with the program's position in the grid."""
    return "program_id" in slice_of(kernel, [e])[1]


__all__ = ["live_kernel", "live", "live_program", "live_key", "trips_at_most", "slice_of",
           "feeds_index", "order_depends_on", "persistent_loop", "persistent_work",
           "depends_on_position", "loop_work"]
