"""Op rules of the symbolic checker, one function per op, keyed by name (SEMANTICS.md).

Memory ops and `dot` are in `memory`; the task's pack adds its rules for binary operators
(`InvariantPack.binop`), elementwise math calls (`calls`) and reductions (`reduce`)."""

from __future__ import annotations

from dataclasses import replace

import z3

from ...dsl.dtypes import DTYPES
from ...ir import nodes as ir
from ...ir.printer import print_expr
from ..fragments import transposed
from ..report import CheckUnsupported
from .memory import assert_tags, dot, load, write
from .order import NARROW, check_added, finalise, sums
from .solver import Var, _Shaped, const_value, interval, numeral
from .tags import FALSE, add_cov, bcast, union_tags
from . import floats
from ..pack import JUNK
from .values import (AXES, SV, And, Cov, If, Not, Or, add, align, axis_ranges, depends_on,
                     eq, evaluate, free_names, ge, gt, is_int, le, lt, merge_facts, move_axes,
                     mul, ne, simplify, sub, subst, substitution, truth)

# ---------------------------------------------------------------- leaves and operators
def expr_rule(ck, e: ir.Expr) -> SV:
    if isinstance(e, ir.Const):
        v = e.value
        if isinstance(v, bool):
            return SV((), z3.BoolVal(v), ctime=True)
        if isinstance(v, int):
            return SV((), z3.IntVal(v), ctime=True)
        out = SV((), None, origin="None" if v is None else repr(v),
                 fval=v if isinstance(v, float) else None)
        return floats.with_facts(out, floats.constant(v)) if isinstance(v, float) else out
    if isinstance(e, ir.Name):
        if e.id not in ck.env:
            raise NotImplementedError(f"check: `{e.id}` has no symbolic value")
        return ck.env[e.id]
    if isinstance(e, (ir.Symbol, ir.TupleExpr, ir.Slice)):
        return SV((), None, origin=ck.text(e))
    if isinstance(e, ir.BinOp):
        return binop(ck, e)
    if isinstance(e, ir.UnaryOp):
        x = ck.expr(e.operand)
        val = None
        if x.val is not None:
            if e.op == "-" and is_int(x.val):
                val = -x.val
                if not x.ctime:
                    no_wrap(ck, val, x.shape, _bits(x), print_expr(e))
            elif e.op in ("not", "~") and z3.is_bool(x.val):
                val = Not(x.val)
        out = replace(x, val=val)
        if e.op != "-":
            return out
        # a compile-time float negated (`-SCALE`): its value too, not only its facts
        return floats.with_facts(replace(out, fval=-x.fval if x.fval is not None else None),
                                 floats.neg(x))
    if isinstance(e, ir.Subscript):
        return expand(ck, e)
    if isinstance(e, ir.Call):
        rule = CALLS.get(e.fn)
        if rule is None:
            raise NotImplementedError(f"check: op A.{e.fn} has no symbolic rule")
        return rule(ck, e)
    raise NotImplementedError(f"check: no rule for {type(e).__name__}")


def _arith(ck, op: str, a, b):
    if a is None or b is None:
        return None
    if z3.is_bool(a) and z3.is_bool(b):
        return {"&": z3.And, "|": z3.Or, "^": z3.Xor, "==": lambda x, y: x == y,
                "!=": lambda x, y: x != y}.get(op, lambda x, y: None)(a, b)
    if z3.is_bool(a) or z3.is_bool(b):
        a = z3.If(a, 1, 0) if z3.is_bool(a) else a
        b = z3.If(b, 1, 0) if z3.is_bool(b) else b
    if op in ("&", "|", "^", "<<", ">>"):
        return _bitwise(op, a, b)
    fns = {"+": lambda: add(a, b), "-": lambda: sub(a, b), "*": lambda: mul(a, b),
           "//": lambda: ck.div(a, b), "%": lambda: ck.mod(a, b), "<": lambda: lt(a, b),
           "<=": lambda: le(a, b), ">": lambda: gt(a, b), ">=": lambda: ge(a, b),
           "==": lambda: eq(a, b), "!=": lambda: ne(a, b)}
    return fns[op]() if op in fns else None


def _bitwise(op: str, a, b):
    """Integer bit operations: folded when both operands are known integers; a shift by a
    known amount 0..62 is a multiplication or a floor division by a power of two (an
    arithmetic shift); anything else is an unknown value (None)."""
    x, y = const_value(a), const_value(b)
    if x is not None and y is not None and (op not in ("<<", ">>") or 0 <= y <= 62):
        return z3.IntVal({"&": x & y, "|": x | y, "^": x ^ y, "<<": x << y,
                          ">>": x >> y}[op])
    if op in ("<<", ">>") and y is not None and 0 <= y <= 62:
        return a * (1 << y) if op == "<<" else a / (1 << y)  # z3's `/`: floor for b > 0
    return None


def binop(ck, e: ir.BinOp) -> SV:
    x, y = ck.expr(e.lhs), ck.expr(e.rhs)
    fx, fy = scalar_value(x), scalar_value(y)  # before broadcasting makes them tiles
    shape = bcast(x.shape, y.shape)
    x, y = align(x, shape), align(y, shape)
    fx = x.fval if fx is None else fx
    fy = y.fval if fy is None else fy
    what = ck.text(e)
    tags = union_tags(ck, [x, y], shape, what) if x.tags and y.tags else {**x.tags, **y.tags}
    if e.op in ("+", "-"):
        check_added(ck, x, y.cov, shape, what)  # a sum goes on: neither side may be final
        check_added(ck, y, x.cov, shape, what)
        cov = add_cov(x.cov, y.cov)
    else:
        cov = add_cov(y.cov, {n: t for n, t in x.cov.items() if n not in y.cov})
    if e.op == "*" and 0 in (fx, fy):
        # times a zero known at these sizes (a literal, or a scalar computed from the
        # problem sizes): no data flows, whatever the tags were
        tags, cov = {}, {}
    ctime = x.ctime and y.ctime  # Python integers in the generated code: exact
    _int_rules(ck, e.op, x, y, shape, what)
    val = _arith(ck, e.op, x.val, y.val)
    if not ctime and e.op in ("+", "-", "*", "<<"):
        no_wrap(ck, val, shape, _bits(x, y), what)
    out = SV(shape, val, dict(tags), cov, x.carried or y.carried,
             x.frag or y.frag, fval=_ffold(e.op, fx, fy), ctime=ctime,
             wide=_wide(x) or _wide(y))
    _float_facts(ck, e, x, y, fx, fy, out)
    if e.op in ("*", "/") and cov:  # normalised by its own total: final for those names
        finalise(ck, out, sums(x) & sums(y), f"normalised by `{ck.text(e.rhs)}`")
    rule = ck.pack.binop.get(e.op) if ck.pack is not None else None
    if rule is not None:
        rule(ck, x, y, out, shape, what)
    return out


def _float_facts(ck, e: ir.BinOp, x: SV, y: SV, fx, fy, out: SV) -> None:
    """The facts `floats` keeps of `x <op> y` (mutates `out`); a comparison of a float
    with a constant is true where the float is known beyond it (a running maximum that
    moved from its -1e30 start), else unknown."""
    if out.fval is not None:
        floats.with_facts(out, floats.constant(out.fval))
    elif e.op in ("+", "-"):
        floats.with_facts(out, floats.add(x, y, e.op == "-"))
    elif e.op == "*":
        floats.with_facts(out, floats.mul(x, y, fx, fy))
    elif e.op == "/":
        floats.with_facts(out, floats.div(x, y, fy))
    elif e.op in ("<", "<=", ">", ">=") and out.val is None and x.val is None:
        above = e.op in (">", ">=")
        bound = x.high if above else x.low
        if fy is not None and bound is not None and bound[1] > abs(fy):
            out.val = Or(bound[0], ck.vars_bool(f"cmp_{e.loc.line}"))
    elif e.op not in ("<", "<=", ">", ">=", "==", "!="):
        floats.with_facts(out, floats.unknown())


# ---------------------------------------------------------------- integer widths
#: the values an integer of each width holds (i1: a boolean, 0 or 1, as Triton reads it)
INT_RANGE = {1: (0, 2), 32: (-2**31, 2**31), 64: (-2**63, 2**63)}


def _wide(x: SV) -> bool:
    """Whether `x` is a 64-bit integer in the generated code: marked so, or a compile-time
    constant past 32 bits (Triton makes such a constant an int64)."""
    if x.wide:
        return True
    c = const_value(x.val) if x.ctime and x.val is not None and is_int(x.val) else None
    return c is not None and not INT_RANGE[32][0] <= c < INT_RANGE[32][1]


def _bits(x: SV, y: SV | None = None) -> int:
    """The width Triton computes an integer op of `x` (and `y`) in: i1 for two booleans
    (`(r < 2) + (r < 3)` wraps to 0 there), i64 when an operand is, else i32."""
    sides = [x] if y is None else [x, y]
    if all(s.val is not None and z3.is_bool(s.val) for s in sides):
        return 1
    return 64 if any(_wide(s) for s in sides) else 32


def _inputs(ck, *terms) -> list:
    """The ranges of the inputs in `terms` that the checker leaves unbounded: integer data
    (`data_<tensor>(...)`) and scalar parameters, each within its dtype."""
    out, seen, todo = [], set(), [t for t in terms if t is not None]
    while todo:
        t = todo.pop()
        if not z3.is_app(t) or t.get_id() in seen:
            continue
        seen.add(t.get_id())
        name = t.decl().name()
        param = None
        if name.startswith("data_") and t.num_args():
            param = ck.kernel.param(name[len("data_"):])
        elif name.startswith("scalar_") and not t.num_args():
            param = ck.kernel.param(name[len("scalar_"):])
        if param is not None and is_int(t):
            lo, hi = INT_RANGE[64 if param.dtype == "i64" else 32]
            out.append(z3.And(t >= lo, t < hi))
        todo.extend(t.children())
    return out


def _refutable(ck, cond, shape, what: str, *terms):
    """A model of `cond` at some instance and element where this point runs, or None: no
    such instance, or the query was undecided (recorded as such: the report is then not
    proven). Proven for all sizes: at the sizes the proof covers (`Checker.size_caps`)."""
    facts = [*ck.path(), *axis_ranges(shape), *_inputs(ck, *terms), *ck.element_facts, cond]
    return ck.solve(facts, what, decide=True)


class _IntView(_Shaped):
    """The variables' ranges for integer widths: the tile axes bounded by `shape`, and
    each size proven for all values at most its cap (`Checker.size_caps`)."""

    def __init__(self, ck, shape):
        super().__init__(ck.vars, tuple(shape), AXES)
        self.caps = ck.size_caps
        if self.caps:
            self.bounds = {}  # the caps' own memo

    def info(self, v):
        i = super().info(v)
        cap = self.caps.get(v.decl().name()) if i is not None and i.kind == "size" else None
        if cap is not None and i.hi is not None:
            i = Var(i.expr, i.kind, i.lo, min(i.hi, cap + 1), i.twin)
        return i


def no_wrap(ck, val, shape, bits: int, what: str) -> None:
    """Triton's integers wrap: an i32 `+`, `-`, `*` or `<<` past 2**31 gives another
    number, which the checker (whose integers are unbounded) would not follow. Every
    such result, at every instance and element where it is computed (masked or not),
    lies in its width's range, or the program is refused (`CheckUnsupported`). Compile-
    time constants are Python integers in the generated code and are not asked."""
    if ck.quiet or val is None or not is_int(val):
        return
    lo, hi = INT_RANGE[bits]
    b = interval(val, _IntView(ck, shape))
    if b is not None and lo <= b[0] and b[1] < hi:
        return
    m = _refutable(ck, z3.Or(val < lo, val >= hi), shape, f"{bits}-bit range of `{what}`",
                   val)
    if m is not None:
        got = evaluate(m, val)
        raise CheckUnsupported(
            f"integer overflow: `{what}` can leave the {bits}-bit range at these sizes"
            + (f" (it reaches {got})" if got is not None else "") + "; the generated "
            "code computes it in "
            + ("i1 (a boolean)" if bits == 1 else f"i{bits}") + " and wraps it, which the "
            "invariant checker does not follow: cast an operand to A.i64 or keep the "
            "value in range", ck._line())


def _sized(ck, val) -> bool:
    """Whether `val` is made of problem sizes and constants only (no program id, index,
    loop variable or data): such a value is a compile-time constant of the GPU's kernel
    where a size is 1 (Triton specialises an integer argument equal to 1)."""
    sizes = {t.decl().name() for n, t in ck.size_terms.items() if n in ck.for_all}
    return free_names(z3.simplify(val)) <= sizes


def _int_rules(ck, op: str, x: SV, y: SV, shape, what: str) -> None:
    """The rules of Triton's integer division and shifts the checker's value assumes.
    `//` and `%` truncate at run time (`solver.tdiv`), but divide compile-time values
    with Python's floor, and an operand made of sizes only is compile-time on the GPU
    where a size is 1: there the dividend must be non-negative and the divisor positive
    (floor and truncation agree); a divisor is never 0 (undefined on the GPU). A shift
    amount lies within the width."""
    a, b = x.val, y.val
    if a is None or b is None or not (is_int(a) or z3.is_bool(a)) \
            or not (is_int(b) or z3.is_bool(b)) or ck.quiet:
        return
    a = z3.If(a, 1, 0) if z3.is_bool(a) else a
    b = z3.If(b, 1, 0) if z3.is_bool(b) else b
    view = _IntView(ck, shape)
    if op in ("//", "%"):
        ib = interval(b, view)
        if ib is None or ib[0] <= 0 <= ib[1]:
            if _refutable(ck, b == 0, shape, f"nonzero divisor of `{what}`", b) is not None:
                raise CheckUnsupported(f"`{what}` can divide by zero at these sizes (undefined "
                                       "on the GPU)", ck._line())
        if _sized(ck, a) and _sized(ck, b):
            ia = interval(a, view)
            if ia is not None and ib is not None and ia[0] >= 0 and ib[0] >= 1:
                return
            if _refutable(ck, z3.Or(a < 0, b < 1), shape, f"signs of `{what}`", a, b) \
                    is not None:
                raise CheckUnsupported(
                    f"`{what}` divides a negative number (or by one) at these sizes: Triton "
                    "truncates toward zero at run time but divides compile-time values with "
                    "Python's floor, and a problem size equal to 1 is compile-time on the "
                    "GPU; keep the operands non-negative", ck._line())
    elif op in ("<<", ">>"):
        bits = _bits(x, y)
        ib = interval(b, view)
        if ib is not None and 0 <= ib[0] and ib[1] < bits:
            return
        if _refutable(ck, z3.Or(b < 0, b >= bits), shape, f"shift amount of `{what}`", b) \
                is not None:
            raise CheckUnsupported(f"`{what}` shifts by an amount outside 0..{bits - 1} "
                                   "(undefined on the GPU)", ck._line())


def scalar_value(x: SV) -> float | None:
    """The number a scalar holds at the checked sizes, if known: a float constant, or an
    integer or boolean scalar whose formula simplifies to a literal (the problem sizes are
    concrete, so `131 // M` or `M <= 130` are numbers here). Tiles have none."""
    if x.shape != ():
        return None
    if x.fval is not None:
        return x.fval
    if x.val is None:
        return None
    v = simplify(x.val)
    n = numeral(v)
    if n is not None:
        return float(n)
    t = truth(v)
    return None if t is None else 1.0 if t else 0.0


def _ffold(op: str, a, b):
    """Compile-time float arithmetic (scales such as SCALE * log2(e))."""
    if a is None or b is None:
        return None
    try:
        return {"+": a + b, "-": a - b, "*": a * b, "/": a / b}.get(op)
    except ZeroDivisionError:
        return None


def expand(ck, e: ir.Subscript) -> SV:
    """`x[:, None]`: keep axes with `:`, insert unit axes with None."""
    x = ck.expr(e.base)
    mapping, shape, axis = {}, [], 0
    for i, idx in enumerate(e.index):
        if isinstance(idx, ir.Slice):
            mapping[axis] = i
            shape.append(x.shape[axis])
            axis += 1
        else:
            shape.append(1)
    return move_axes(x, mapping, tuple(shape))


# ---------------------------------------------------------------- op calls
def _program_id(ck, e):
    # an axis the grid does not launch has one program: id 0 (as in Triton)
    axis = ck.const(e.arg("axis"))
    return SV((), ck.pids[axis] if axis < len(ck.pids) else z3.IntVal(0))


def _num_programs(ck, e):
    axis = ck.const(e.arg("axis"))
    return SV((), ck.grid_terms[axis] if axis < len(ck.grid_terms) else z3.IntVal(1))


def _num_sms(ck, e):
    return SV((), z3.IntVal(ck.num_sms))


def _cdiv(ck, e):
    x, y = ck.expr(e.arg("a")), ck.expr(e.arg("b"))
    a, b = ck.int_of(e.arg("a")), ck.int_of(e.arg("b"))
    ctime = x.ctime and y.ctime
    top = SV((), a + b - 1, wide=_wide(x) or _wide(y))  # `tl.cdiv(a, b)`: (a + b - 1) // b
    if not ctime:
        no_wrap(ck, top.val, (), _bits(x, y), print_expr(e))
    _int_rules(ck, "//", top, y, (), print_expr(e))
    return SV((), ck.div(a + b - 1, b), ctime=ctime, wide=_wide(x) or _wide(y))


def _minmax(ck, e):
    x, y = ck.expr(e.arg("a")), ck.expr(e.arg("b"))
    fx, fy = scalar_value(x), scalar_value(y)
    shape = bcast(x.shape, y.shape)
    x, y = align(x, shape), align(y, shape)
    val = None
    if x.val is not None and y.val is not None:
        val = z3.If(x.val <= y.val, x.val, y.val) if e.fn == "minimum" else \
            z3.If(x.val >= y.val, x.val, y.val)
    fval = None if fx is None or fy is None else (min if e.fn == "minimum" else max)(fx, fy)
    out = SV(shape, val, union_tags(ck, [x, y], shape, e.fn), add_cov(x.cov, y.cov),
             x.carried or y.carried, fval=fval, wide=_wide(x) or _wide(y))
    return floats.with_facts(out, floats.minmax(e.fn, x, y))


def _arange(ck, e):
    n = ck.const(e.arg("n"))
    return SV((n,), AXES[0])


def _shape(ck, e) -> tuple[int, ...]:
    t = e.arg("shape")
    elts = t.elts if isinstance(t, ir.TupleExpr) else (t,)
    return tuple(ck.const(x) for x in elts)


def _fill(ck, e):
    dtype = DTYPES[e.arg("dtype").name]
    value = 0 if e.fn == "zeros" else ck.expr(e.arg("value")).val
    val = None
    if dtype.is_int:
        val = z3.IntVal(value) if isinstance(value, int) else value
        if val is not None and not isinstance(value, int):  # converted to the tile's dtype
            no_wrap(ck, val, (), dtype.bits, print_expr(e))
    out = SV(_shape(ck, e), val, wide=dtype.bits == 64)
    if dtype.is_int:
        return out
    fill = 0.0 if e.fn == "zeros" else scalar_value(ck.expr(e.arg("value")))
    return floats.with_facts(out, floats.constant(fill) if fill is not None
                             else floats.unknown())


def _same(ck, e):
    x = ck.expr(e.arg("x"))
    rule = ck.pack.calls.get(e.fn) if ck.pack is not None else None
    if rule is not None:
        rule(ck, e.fn, x, x.shape, ck.text(e))
    return floats.with_facts(replace(x, val=None, fval=None), floats.math_call(e.fn, x))


def _abs(ck, e):
    x = ck.expr(e.arg("x"))
    val = z3.If(x.val >= 0, x.val, -x.val) if x.val is not None and is_int(x.val) else None
    if val is not None and not x.ctime:
        no_wrap(ck, val, x.shape, _bits(x), print_expr(e))
    return floats.with_facts(replace(x, val=val), floats.math_call("abs", x))


def _cast(ck, e):
    x = ck.expr(e.arg("x"))
    dtype = DTYPES[e.arg("dtype").name]
    val = x.val if x.val is not None and dtype.is_int and is_int(x.val) else None
    if val is not None and dtype.bits < 64:  # a narrowing cast keeps the low bits
        no_wrap(ck, val, x.shape, dtype.bits, print_expr(e))
    fval = scalar_value(x) if not dtype.is_int else None  # `A.cast(M <= 130, A.f32)`
    out = replace(x, val=val, fval=fval, tags=dict(x.tags), ctime=False,
                  wide=dtype.is_int and dtype.bits == 64)
    if dtype.name in NARROW:  # a sum rounded to storage precision is complete
        finalise(ck, out, sums(x), f"rounded to {dtype.name}")
    facts = floats.cast(x, dtype.name) if not dtype.is_int else None
    return floats.with_facts(out, facts) if facts else out


def _trans(ck, e):
    x = ck.expr(e.arg("x"))
    return replace(move_axes(x, {0: 1, 1: 0}, x.shape[::-1]), frag=transposed(x.frag))


def _where(ck, e):
    c, x, y = ck.expr(e.arg("cond")), ck.expr(e.arg("x")), ck.expr(e.arg("y"))
    shape = bcast(c.shape, x.shape, y.shape)
    c, x, y = align(c, shape), align(x, shape), align(y, shape)
    cond = c.val if c.val is not None and z3.is_bool(c.val) else \
        ck.vars_bool(f"cond_{e.loc.line}")
    known = z3.simplify(cond)
    if z3.is_true(known) or z3.is_false(known):  # decided at these sizes: that side only
        return x if z3.is_true(known) else y
    tags = {}
    for n in dict.fromkeys([*x.tags, *y.tags]):  # in order, not a set's (string hashing)
        gx, vx = x.tags.get(n, (FALSE, None))
        gy, vy = y.tags.get(n, (FALSE, None))
        # where only one side carries the tag, its guard says where: keep its value plain
        value = vx if vy is None else vy if vx is None else If(cond, vx, vy)
        tags[n] = (Or(And(cond, gx), And(Not(cond), gy)), value)
    cov = add_cov({n: [t.guard(cond) for t in ts] for n, ts in x.cov.items()},
                  {n: [t.guard(Not(cond)) for t in ts] for n, ts in y.cov.items()})
    val = If(cond, x.val, y.val) if x.val is not None and y.val is not None and \
        x.val.sort() == y.val.sort() else None
    out = SV(shape, val, tags, cov, x.carried or y.carried, x.frag or y.frag,
             wide=_wide(x) or _wide(y))
    return merge_facts(cond, x, y, out)


def _tag(ck, e):
    x = ck.expr(e.arg("x"))
    tags = dict(x.tags)
    for name, te in e.tags:
        v = align(ck.expr(te), x.shape).val
        if v is None or not is_int(v):
            raise NotImplementedError(f"check: tag {name} must be an integer")
        tags[name] = (z3.BoolVal(True), v)
    return replace(x, tags=tags)


def _reduce(ck, e):
    x = ck.expr(e.arg("x"))
    axis = ck.const(e.arg("axis"))
    # the same value reduced again (`A.max(s, 1)` written twice) is the same result: one
    # existential lane for both, so that "some lane carries it" cannot differ between them
    memo = ck.memo.setdefault("reductions", {})
    hit = memo.get((id(x), axis, e.fn))
    if hit is not None and hit[0] is x:
        out = hit[1]
        return replace(out, tags=dict(out.tags), cov={n: list(t) for n, t in out.cov.items()})
    out = _reduce_new(ck, e, x, axis)
    memo[(id(x), axis, e.fn)] = (x, out)
    return replace(out, tags=dict(out.tags), cov={n: list(t) for n, t in out.cov.items()})


def _reduce_new(ck, e, x, axis):
    lane = ck.vars.fresh("lane", "lane", 0, x.shape[axis])
    anyl = ck.vars.fresh("anylane", "lane", 0, x.shape[axis])
    pairs = [(AXES[axis], lane)] + [(AXES[i], AXES[i - 1]) for i in range(axis + 1, len(x.shape))]
    x2 = x.map(substitution(pairs))
    shape = x.shape[:axis] + x.shape[axis + 1:]
    live = And(x2.live(), lane >= 0, lane < x.shape[axis])
    kind = "sum" if e.fn == "sum" else "max"
    # a sum adds up the operands' own coverage over the reduced lanes: each lane is a
    # further bound variable of a term (a sum of partial sums over K covers what they
    # cover); max and min pick one lane, whose coverage is the result's (lane left free)
    tags = {}
    cov = {n: [Cov(t.bound + (lane,), And(t.dom, lane >= 0, lane < x.shape[axis]), t.idx,
                   t.kind, t.defaults) if kind == "sum" and t.kind == "sum" else t for t in ts]
           for n, ts in x2.cov.items()}
    summed = []
    for n, (g, v) in x2.tags.items():
        if depends_on(v, lane):
            cov.setdefault(n, []).append(Cov((lane,), And(live, g), v, kind))
            summed.append(g)
        else:
            # present where some lane of the reduced axis carries it
            tags[n] = (And(subst(g, [(lane, anyl)]), anyl >= 0, anyl < x.shape[axis]),
                       subst(v, [(lane, anyl)]))
    nz = floats.nonzero(x2)
    if kind == "sum" and summed and not all(floats.implies(nz, g) for g in summed):
        # a lane without the summed indices adds a value of no data unless it is zero
        cov.setdefault(JUNK, []).append(floats.junk(
            lane, And(Not(ck.fix_lanes(And(*summed))), nz), x.shape[axis]))
    out = SV(shape, None, tags, cov, x.carried, None)
    lane0 = substitution([(AXES[axis], z3.IntVal(0))] + pairs[1:])  # the first lane's
    floats.with_facts(out, floats.reduced(e.fn, x, lane0, x.shape[axis]))
    rule = ck.pack.reduce.get(e.fn) if ck.pack is not None else None
    if rule is not None:  # where some reduced lane carries data
        rule(ck, e.fn, out, And(subst(live, [(lane, anyl)]), anyl >= 0, anyl < x.shape[axis]))
    return out


def _covers(ck, e):
    raise NotImplementedError("A.covers belongs inside A.assert_tags")


CALLS = {
    "program_id": _program_id, "num_programs": _num_programs, "num_sms": _num_sms,
    "cdiv": _cdiv, "minimum": _minmax, "maximum": _minmax, "arange": _arange,
    "zeros": _fill, "full": _fill, "load": load, "dot": dot, "trans": _trans,
    "exp": _same, "exp2": _same, "log": _same, "log2": _same, "sqrt": _same,
    "sigmoid": _same, "abs": _abs, "max": _reduce, "min": _reduce, "sum": _reduce,
    "where": _where, "cast": _cast, "tag": _tag, "covers": _covers,
}


def effect(ck, call: ir.Call) -> None:
    """An op called as a statement: store, atomic_add, assert_tags."""
    if call.fn in ("store", "atomic_add"):
        write(ck, call)
    elif call.fn == "assert_tags":
        assert_tags(ck, call)
    else:
        raise NotImplementedError(f"check: A.{call.fn} as a statement has no rule")
