"""Op rules of the concrete tag interpreter, one function per DSL op (SEMANTICS.md, "Op rules").

Each rule takes the interpreter and the call (or operator) node and returns a `Val`; a tile
op is a few numpy ops over arrays of the tile's shape. Rules are a table keyed by op name,
as in Triton's `semantic.py`; `CALL_RULES` misses an op -> the interpreter fails naming it.
Memory ops (`load`) live in `memory`, `dot` in `dot`; the task's pack may add a rule after
any elementwise op (`InvariantPack.concrete_ops`).
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from ...dsl.errors import DSLError
from ...ir import nodes as ir
from ..fragments import transposed
from ..pack import FINAL
from .order import check_added, finalise, normalised, rounded
from . import floats
from .floats import junk_of
from .values import (Cov, Tag, Val, bcast, bshape, cov_select, cov_sum, cov_to,
                              cov_union, describe, first, onehot, scalar, summary, tagged, widen)


class ConcreteError(DSLError):
    """The concrete interpreter cannot run this program (an op without a rule, an index
    computed from floating-point data, a missing integer input, ...)."""

    kind = "concrete"


# ---------------------------------------------------------------- integer arithmetic
def trunc_div(a, b):
    """Integer division truncating toward zero, as Triton (and C) do."""
    if np.any(np.asarray(b) == 0):
        raise ConcreteError("integer division by zero")
    q = np.abs(a) // np.abs(b)
    return np.where((np.asarray(a) < 0) != (np.asarray(b) < 0), -q, q)


def trunc_mod(a, b):
    return a - b * trunc_div(a, b)


VALUE_FNS: dict[str, Callable] = {
    "+": np.add, "-": np.subtract, "*": np.multiply, "//": trunc_div, "%": trunc_mod,
    "&": np.bitwise_and, "|": np.bitwise_or, "^": np.bitwise_xor, "<<": np.left_shift,
    ">>": np.right_shift, "<": np.less, "<=": np.less_equal, ">": np.greater,
    ">=": np.greater_equal, "==": np.equal, "!=": np.not_equal,
    "minimum": np.minimum, "maximum": np.maximum,
    "cdiv": lambda a, b: trunc_div(a + b - 1, b),
}
#: Ops whose results sum the operands' partial sums: their multisets add (SEMANTICS.md).
ADDITIVE = ("+", "-")


# ---------------------------------------------------------------- elementwise
def merge_tags(it, op: str, line: int, ops: list[Val]) -> dict[str, Tag]:
    """Union of the operands' tags; the same name with two values at one element is a
    **tag_conflict**. Operands are already broadcast to one shape."""
    out: dict[str, Tag] = {}
    for v in ops:
        for name, t in v.tags.items():
            if name not in out:
                out[name] = t
                continue
            if name.startswith(FINAL):  # final where either operand is
                prev = out[name]
                out[name] = Tag(np.where(prev.has, prev.val, t.val), prev.has | t.has)
                continue
            pack = it.sh.pack
            rule = pack.concrete_merge.get(name) if pack is not None else None
            if rule is not None:  # the pack's own way to combine two values of its tag
                out[name] = rule(out[name], t)
                continue
            c = pack.conflict(it, name) if pack is not None and pack.conflict else None
            inv, label = (c.invariant, c.label or name) if c is not None else ("tag_conflict", name)
            it.checked(op, line, inv)
            prev = out[name]
            both = prev.has & t.has
            el = first(both & (prev.val != t.val)) if it.wants(inv, line) else None
            if el is not None:
                it.violate(inv, op, line,
                           f"`{op}` meets two values of {label} at one element"
                           + (c.note if c is not None else ""),
                           element=el, tile=ops[0], expected={label: int(prev.val[el])},
                           actual={label: int(t.val[el])})
            out[name] = Tag(np.where(prev.has, prev.val, t.val), prev.has | t.has)
    return out


def _keep_cov(it, op: str, line: int, ops: list[Val], shape) -> dict[str, Cov]:
    """`*`, `/` and other non-additive ops: one operand's coverage is kept; two operands
    with coverage of one name must agree (else **coverage**: normalised with a different
    range)."""
    out: dict[str, Cov] = {}
    for v in ops:
        for name, c in v.cov.items():
            if name not in out:
                out[name] = c
                continue
            it.checked(op, line, "coverage")
            prev = out[name]
            lo, hi = min(prev.lo, c.lo), max(prev.hi, c.hi)
            a, b = widen(cov_to(prev, shape), lo, hi), widen(cov_to(c, shape), lo, hi)
            ha, hb = a.any(-1), b.any(-1)
            el = first(ha & hb & (a != b).any(-1))
            if el is not None:
                it.violate("coverage", op, line, f"`{op}` combines values whose {name} "
                           "coverage differs (normalised with a different range)",
                           element=el, tile=ops[0], expected={name: describe(a[el], lo)},
                           actual={name: describe(b[el], lo)})
            out[name] = Cov(lo, np.where(ha[..., None], a, b))
    return out


def elementwise(it, op: str, line: int, vals: list[Val], value) -> Val:
    """The common rule of arithmetic, comparisons, `minimum`/`maximum`, unary math."""
    shape = bshape(*(v.shape for v in vals))
    ops = [bcast(v, shape) for v in vals]
    value = None if value is None else np.asarray(value)   # numpy returns scalars for 0-d
    v = it.probe_at(op, line)
    if v is not None:
        it.capture({"operands": [summary(o, v.element) for o in ops]})
    tags = merge_tags(it, op, line, ops)
    names = {n for o in ops for n in o.cov}
    if op in ADDITIVE:
        for o in ops:  # a sum goes on: no operand may be final for a name the other adds
            for other in ops:
                if other is not o:
                    check_added(it, op, line, o, other, Val(shape))
        cov = {n: cov_sum([o.cov[n] for o in ops if n in o.cov], shape) for n in names}
    else:
        cov = _keep_cov(it, op, line, ops, shape)
    sets = {n: cov_union([o.cset[n] for o in ops if n in o.cset], shape)
            for n in {n for o in ops for n in o.cset}}
    layout = next((o.layout for o in vals if o.layout and o.shape == shape), None)
    out = Val(shape, value, tags, cov, sets, layout, junk=_junk(ops, shape))
    if len(vals) == 2 and all(v.fval is not None for v in vals) and op in ("+", "-", "*", "/"):
        a, b = (v.fval for v in vals)  # compile-time float arithmetic (softmax scales)
        out.fval = {"+": a + b, "-": a - b, "*": a * b, "/": a / b if b else None}[op]
    if op in ("*", "/") and len(ops) == 2:  # normalised by its own total
        finalise(it, out, line, normalised(ops))
    rule = it.sh.pack.concrete_ops.get(op) if it.sh.pack is not None else None
    if rule is not None:
        rule(it, op, line, ops, out)
    return out


def _junk(ops: list[Val], shape) -> np.ndarray | None:
    """Where any operand holds junk (`floats`): it goes on in every elementwise result."""
    parts = [o.junk for o in ops if o.junk is not None]
    if not parts:
        return None
    return np.logical_or.reduce([np.broadcast_to(p, shape) for p in parts])


def _float_facts(op: str, a: Val, b: Val, out: Val) -> None:
    """The facts `floats` keeps of `a <op> b` (mutates `out`); a comparison of a float
    with a constant is true where the float is known beyond it."""
    shape = out.shape
    fa, fb = floats.of(a, shape), floats.of(b, shape)
    if out.fval is not None:
        out.ff = floats.constant(out.fval, shape)
    elif op in ("+", "-"):
        out.ff = floats.add(fa, fb, op == "-")
    elif op == "*":
        out.ff = floats.mul(fa, fb, a.fval, b.fval)
    elif op == "/":
        out.ff = floats.div(fa, fb, b.fval)
    elif op in ("<", "<=", ">", ">=") and out.value is None and a.value is None:
        out.value = floats.compare(op, fa, b.fval)
    elif op not in ("<", "<=", ">", ">=", "==", "!="):
        out.ff = floats.unknown(shape)


def known(vals: list[Val]) -> bool:
    return all(v.value is not None for v in vals)


def binop(it, e: ir.BinOp) -> Val:
    a, b = it.val(e.lhs), it.val(e.rhs)
    value = None
    if e.op != "/" and known([a, b]):
        value = VALUE_FNS[e.op](a.value, b.value)
    out = elementwise(it, e.op, e.loc.line, [a, b], value)
    _float_facts(e.op, a, b, out)
    return out


def unaryop(it, e: ir.UnaryOp) -> Val:
    x = it.val(e.operand)
    value = None
    if x.value is not None:
        if e.op == "-":
            value = -x.value
        elif x.value.dtype == bool or e.op == "not":
            value = np.logical_not(x.value)
        else:
            value = np.invert(x.value)
    if e.op == "-":  # a compile-time float negated: its value too
        return x.moved(value=value, carried=False, ff=floats.neg(floats.of(x)),
                       fval=-x.fval if x.fval is not None else None)
    return x.moved(value=value, carried=False)


def _call_elementwise(fn: str, params: tuple[str, ...], keeps_value: bool):
    def rule(it, e: ir.Call) -> Val:
        vals = [it.val(e.arg(p)) for p in params]
        value = None
        if fn in VALUE_FNS and known(vals):
            value = VALUE_FNS[fn](*(v.value for v in vals))
        elif keeps_value and known(vals):  # abs of an integer
            value = np.abs(vals[0].value)
        out = elementwise(it, fn, e.loc.line, vals, value)
        if fn in ("minimum", "maximum"):
            out.ff = floats.minmax(fn, *(floats.of(v, out.shape) for v in vals))
        elif fn == "abs":
            out.ff = floats.math_call("abs", floats.of(vals[0], out.shape))
        return out
    return rule


def where(it, e: ir.Call) -> Val:
    """Tags and coverage from `x` where `cond` holds and from `y` elsewhere."""
    c, x, y = (it.val(e.arg(p)) for p in ("cond", "x", "y"))
    shape = bshape(c.shape, x.shape, y.shape)
    c, x, y = bcast(c, shape), bcast(x, shape), bcast(y, shape)
    cond = it.known(c, "where: condition")
    value = np.where(cond, x.value, y.value) if known([x, y]) else None
    tags = {}
    for name in {**x.tags, **y.tags}:
        tx, ty = x.tags.get(name), y.tags.get(name)
        val = np.where(cond, (tx or ty).val, (ty or tx).val)
        no = np.zeros(shape, dtype=bool)
        tags[name] = Tag(val, np.where(cond, tx.has if tx else no, ty.has if ty else no))
    cov = {n: cov_select(cond, x.cov.get(n), y.cov.get(n), shape) for n in {**x.cov, **y.cov}}
    sets = {n: cov_select(cond, x.cset.get(n), y.cset.get(n), shape) for n in {**x.cset, **y.cset}}
    junk = None if x.junk is None and y.junk is None else \
        np.where(cond, floats.junk_of(x, shape), floats.junk_of(y, shape))
    return Val(shape, value, tags, cov, sets, x.layout or y.layout,
               ff=floats.select(cond, floats.of(x, shape), floats.of(y, shape)), junk=junk)


# ---------------------------------------------------------------- constructors, moves
def _shape(it, e: ir.Expr) -> tuple[int, ...]:
    got = it.eval(e)
    items = got if isinstance(got, tuple) else (got,)
    return tuple(int(it.known(v, "tile shape")) for v in items)


def _fill(it, shape: tuple[int, ...], fill, dtype: ir.Expr) -> Val:
    name = dtype.name if isinstance(dtype, ir.Symbol) else "f32"
    if name in ("f16", "bf16", "f32", "f64") or fill is None:
        return Val(shape, ff=floats.constant(float(fill), shape) if fill is not None
                   else floats.unknown(shape))
    kind = bool if name == "i1" else np.int64
    return Val(shape, np.full(shape, fill, dtype=kind))


def zeros(it, e: ir.Call) -> Val:
    return _fill(it, _shape(it, e.arg("shape")), 0, e.arg("dtype"))


def full(it, e: ir.Call) -> Val:
    v = it.val(e.arg("value"))
    dtype = e.arg("dtype")
    floaty = (dtype.name if isinstance(dtype, ir.Symbol) else "f32") in ("f16", "bf16", "f32",
                                                                         "f64")
    fill = (v.fval if floaty else None) if v.value is None else v.value.item()
    return _fill(it, _shape(it, e.arg("shape")), fill, e.arg("dtype"))


def arange(it, e: ir.Call) -> Val:
    n = int(it.known(it.val(e.arg("n")), "arange length"))
    return Val((n,), np.arange(n, dtype=np.int64))


def cast(it, e: ir.Call) -> Val:
    """Conversion keeps tags, coverage and the fragment layout; only the value changes."""
    x, dtype = it.val(e.arg("x")), e.arg("dtype")
    name = dtype.name if isinstance(dtype, ir.Symbol) else "f32"
    value = None
    if x.value is not None and name == "i1":
        value = x.value != 0
    elif x.value is not None and name in ("i32", "i64"):
        value = x.value.astype(np.int64)
    ff = floats.cast(floats.of(x), name) if x.ff is not None and name not in ("i1", "i32", "i64") \
        else x.ff
    return finalise(it, x.moved(value=value, tags=dict(x.tags), ff=ff), e.loc.line,
                    rounded(x, name))


def float_unary(it, e: ir.Call) -> Val:
    x = it.val(e.arg("x"))
    rule = it.sh.pack.concrete_calls.get(e.fn) if it.sh.pack is not None else None
    if rule is not None:
        rule(it, e.fn, e.loc.line, x)
    out = elementwise(it, e.fn, e.loc.line, [x], None)
    out.ff = floats.math_call(e.fn, floats.of(x))
    return out


def trans(it, e: ir.Call) -> Val:
    x = it.val(e.arg("x"))
    tc = lambda c: Cov(c.lo, c.counts.transpose(1, 0, 2))  # noqa: E731
    return x.moved(shape=x.shape[::-1], value=None if x.value is None else x.value.T,
                   tags={n: Tag(t.val.T, t.has.T) for n, t in x.tags.items()},
                   cov={n: tc(c) for n, c in x.cov.items()},
                   cset={n: tc(c) for n, c in x.cset.items()}, layout=transposed(x.layout),
                   ff=None if x.ff is None else x.ff.map(lambda a: a.T),
                   junk=None if x.junk is None else x.junk.T)


def tag(it, e: ir.Call) -> Val:
    """`A.tag(x, name=e)`: every element gets tag `name` = e. A name `x` already carries
    with another value is a **tag_conflict** (reading "adds" as a union, as elsewhere)."""
    x = it.val(e.arg("x"))
    extra = []
    for name, expr in e.tags:
        v = it.fit(it.val(expr), x.shape, f"tag: {name}", e.loc.line)
        val = np.asarray(it.known(v, f"tag {name}"), dtype=np.int64)
        extra.append(Val(x.shape, tags={name: Tag(val, np.ones(x.shape, dtype=bool))}))
    v = it.probe_at("tag", e.loc.line)
    if v is not None:
        it.capture({"operands": [summary(o, v.element) for o in (x, *extra)]})
    return x.moved(tags=merge_tags(it, "tag", e.loc.line, [x, *extra]))


# ---------------------------------------------------------------- reductions
def varies(val: np.ndarray, axis: int) -> bool:
    """Whether a tag's value changes along `axis` (masked elements included, see
    `values`)."""
    return bool(np.any(val != np.take(val, [0], axis=axis)))


def reduce(it, e: ir.Call) -> Val:
    """Names varying along `axis` become coverage (multiset for sum, set for max/min);
    constant names stay tags. Only tagged elements contribute."""
    x, ax = it.val(e.arg("x")), int(it.known(it.val(e.arg("axis")), "axis"))
    w = tagged(x)
    shape = x.shape[:ax] + x.shape[ax + 1:]
    tags, cov, sets = {}, {}, {n: _lane_sum(c, w, ax, True) for n, c in x.cset.items()}
    own = {n: _lane_sum(c, w, ax, e.fn != "sum") for n, c in x.cov.items()}
    (cov if e.fn == "sum" else sets).update(own)
    for name, t in x.tags.items():
        if not varies(t.val, ax):
            tags[name] = Tag(np.take(t.val, 0, axis=ax), (w & t.has).any(axis=ax))
            continue
        weight = w & t.has
        if not weight.any():
            continue
        lo, hi = int(t.val[weight].min()), int(t.val[weight].max()) + 1
        counts = onehot(t.val, weight, lo, hi - lo).sum(axis=ax)
        c = Cov(lo, np.rint(counts).astype(np.int32))
        target = cov if e.fn == "sum" else sets
        target[name] = (cov_sum if e.fn == "sum" else cov_union)(
            [c] + ([target[name]] if name in target else []), shape)
    fn = {"sum": np.sum, "max": np.max, "min": np.min}[e.fn]
    value = None if x.value is None else fn(x.value, axis=ax)
    fx = floats.of(x)
    junk = junk_of(x).any(axis=ax)
    summed = [t.has for t in x.tags.values() if varies(t.val, ax)]
    if e.fn == "sum" and summed:  # a lane without the summed indices adds nothing
        junk = junk | (~np.logical_and.reduce(summed) & ~fx.zero).any(axis=ax)
    out = Val(shape, value, tags, cov, sets, ff=floats.reduced(e.fn, fx, ax),
              junk=junk if junk.any() else None)
    rule = it.sh.pack.concrete_reduce.get(e.fn) if it.sh.pack is not None else None
    if rule is not None:  # where some reduced lane carries data
        rule(it, e.fn, e.loc.line, out, w.any(axis=ax))
    return out


def _lane_sum(c: Cov, w: np.ndarray, ax: int, as_set: bool) -> Cov:
    counts = (c.counts * w[..., None]).sum(axis=ax)
    return Cov(c.lo, (counts > 0).astype(np.int32) if as_set else counts.astype(np.int32))


# ---------------------------------------------------------------- grid scalars
def program_id(it, e: ir.Call) -> Val:
    axis = int(it.known(it.val(e.arg("axis")), "axis"))
    return scalar(it.pid[axis] if axis < len(it.pid) else 0)


def num_programs(it, e: ir.Call) -> Val:
    axis = int(it.known(it.val(e.arg("axis")), "axis"))
    return scalar(it.grid[axis] if axis < len(it.grid) else 1)


def num_sms(it, e: ir.Call) -> Val:
    return scalar(it.num_sms)


def covers(it, e: ir.Call) -> Val:
    raise ConcreteError("A.covers is a tag relation; use it only inside A.assert_tags",
                        e.loc.line)


CALL_RULES: dict[str, Callable] = {
    "program_id": program_id, "num_programs": num_programs, "num_sms": num_sms,
    "cdiv": _call_elementwise("cdiv", ("a", "b"), False),
    "minimum": _call_elementwise("minimum", ("a", "b"), False),
    "maximum": _call_elementwise("maximum", ("a", "b"), False),
    "abs": _call_elementwise("abs", ("x",), True),
    **{n: float_unary for n in ("exp", "exp2", "log", "log2", "sqrt", "sigmoid")},
    "arange": arange, "zeros": zeros, "full": full, "cast": cast, "trans": trans,
    "where": where, "tag": tag, "sum": reduce, "max": reduce, "min": reduce, "covers": covers,
}
