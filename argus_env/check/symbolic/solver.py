"""z3 plumbing for the symbolic checker: variables with ranges, Triton's integer division,
interval bounds, and copies of a formula for two program instances.

Problem sizes are concrete integers by default (the shape of the episode), so index
arithmetic stays linear: division and remainder by a constant are linear in z3. Division
by a term whose value is one of a few constants (a grouped swizzle's `min(rows_left,
GROUP_M)`) is expanded into one case per value, which keeps queries linear and fast.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

import z3

from .values import AXES, substitution

MAX_EXPAND = 64  # largest divisor range expanded into cases


@dataclass
class Var:
    """A z3 integer variable with its kind and (inclusive lower, exclusive upper) range."""

    expr: z3.ArithRef
    kind: str                   # "pid", "iter", "axis", "lane", "point"
    lo: int | None = 0
    hi: int | None = None
    twin: bool = False          # a copy made for a two-instance query


@dataclass
class Vars:
    """Every variable a symbolic execution creates, so formulas can be copied."""

    vars: dict[str, Var] = field(default_factory=dict)
    counter: itertools.count = field(default_factory=itertools.count)
    bounds: dict = field(default_factory=dict)  # memo of `interval`

    def fresh(self, prefix: str, kind: str, lo: int | None = 0, hi: int | None = None) -> z3.ArithRef:
        name = f"{prefix}!{next(self.counter)}"
        v = z3.Int(name)
        self.vars[name] = Var(v, kind, lo, hi)
        return v

    def info(self, v: z3.ExprRef) -> Var | None:
        return self.vars.get(v.decl().name()) if z3.is_const(v) else None

    def ranges(self) -> dict[str, tuple[int | None, int | None]]:
        return {n: (v.lo, v.hi) for n, v in self.vars.items()}

    def copier(self, suffix: str, kinds=("pid", "iter", "axis", "lane", "point")):
        """A function renaming every variable of `kinds` to a fresh twin (same range)."""
        pairs = []
        suffix = f"{suffix}.{next(self.counter)}"
        for name, v in list(self.vars.items()):
            if v.kind in kinds and not v.twin:
                twin = z3.Int(f"{name}{suffix}")
                self.vars[f"{name}{suffix}"] = Var(twin, v.kind, v.lo, v.hi, True)
                pairs.append((v.expr, twin))

        copy = substitution(pairs)
        copy.pairs = pairs
        return copy


def const_value(e) -> int | None:
    """The integer value of `e` when it is a numeral (after simplification)."""
    if isinstance(e, int):
        return e
    if e is None:
        return None
    s = z3.simplify(e) if not z3.is_int_value(e) else e
    return s.as_long() if z3.is_int_value(s) else None


def interval(e: z3.ExprRef, vars: Vars, depth: int = 0) -> tuple[int, int] | None:
    """Inclusive bounds [lo, hi] of an integer expression, or None if unbounded."""
    key = e.get_id()
    if key not in vars.bounds:
        vars.bounds[key] = (e, _interval(e, vars, depth))  # keep e alive: ids are reused
    return vars.bounds[key][1]


class _Shaped:
    """`Vars` seen with the tile axes of one shape bounded (axis i in [0, shape[i])): the
    ranges `interval` reads, with a memo of its own per shape."""

    def __init__(self, vars: Vars, shape: tuple[int, ...], axes):
        self.vars = vars
        self.bounds = vars.bounds.setdefault(("shape", shape), ({}, None))[0]
        self.axes = {ax.decl().name(): n for ax, n in zip(axes, shape)}

    def info(self, v):
        if z3.is_const(v) and v.decl().name() in self.axes:
            return Var(v, "axis", 0, self.axes[v.decl().name()])
        return self.vars.info(v)


def in_range(ck, coords, extents, shape) -> bool:
    """Whether every coordinate lies in [0, extent) for every value of the variables it is
    made of, by their ranges (`interval`, the tile axes bounded by `shape`): a proof of
    bounds without a solver query; False when that does not show it."""
    view = _Shaped(ck.vars, tuple(shape), AXES)
    for c, n in zip(coords, extents):
        n = const_value(n)
        b = interval(c, view) if n is not None else None
        if b is None or b[0] < 0 or b[1] >= n:
            return False
    return True


def _interval(e: z3.ExprRef, vars: Vars, depth: int) -> tuple[int, int] | None:
    if depth > 60:
        return None
    if z3.is_int_value(e):
        v = e.as_long()
        return v, v
    if z3.is_const(e):
        info = vars.info(e)
        if info is None or info.lo is None or info.hi is None:
            return None
        return info.lo, info.hi - 1
    kids = [interval(c, vars, depth + 1) for c in e.children()] if z3.is_app(e) else []
    k = e.decl().kind() if z3.is_app(e) else None
    if k == z3.Z3_OP_ITE:
        a, b = kids[1], kids[2]
        if a is None or b is None:
            return None
        cond, x, y = e.children()
        kind = _minmax_kind(cond, x, y)
        if kind == "min":
            return min(a[0], b[0]), min(a[1], b[1])
        if kind == "max":
            return max(a[0], b[0]), max(a[1], b[1])
        return min(a[0], b[0]), max(a[1], b[1])
    if any(c is None for c in kids):
        return None
    if k == z3.Z3_OP_ADD:
        return sum(c[0] for c in kids), sum(c[1] for c in kids)
    if k == z3.Z3_OP_SUB:
        lo, hi = kids[0]
        for c in kids[1:]:
            lo, hi = lo - c[1], hi - c[0]
        return lo, hi
    if k == z3.Z3_OP_UMINUS:
        return -kids[0][1], -kids[0][0]
    if k == z3.Z3_OP_MUL:
        lo, hi = kids[0]
        for c in kids[1:]:
            prods = [lo * c[0], lo * c[1], hi * c[0], hi * c[1]]
            lo, hi = min(prods), max(prods)
        return lo, hi
    if k in (z3.Z3_OP_IDIV, z3.Z3_OP_DIV) and kids[1][0] > 0:
        (a0, a1), (b0, b1) = kids
        cands = [a0 // b0, a0 // b1, a1 // b0, a1 // b1]
        return min(cands), max(cands)
    if k == z3.Z3_OP_MOD and kids[1][0] > 0:
        return 0, kids[1][1] - 1
    return None


def _minmax_kind(cond, x, y) -> str | None:
    """"min" for If(x <= y, x, y) (or x < y), "max" for If(x >= y, x, y), else None."""
    if not z3.is_app(cond) or len(cond.children()) != 2:
        return None
    k = cond.decl().kind()
    l, r = cond.children()
    if l.eq(x) and r.eq(y):
        return {z3.Z3_OP_LE: "min", z3.Z3_OP_LT: "min", z3.Z3_OP_GE: "max", z3.Z3_OP_GT: "max"}.get(k)
    if l.eq(y) and r.eq(x):
        return {z3.Z3_OP_LE: "max", z3.Z3_OP_LT: "max", z3.Z3_OP_GE: "min", z3.Z3_OP_GT: "min"}.get(k)
    return None


def _nonneg(e, vars: Vars) -> bool:
    b = interval(e, vars)
    return b is not None and b[0] >= 0


def tdiv(a, b, vars: Vars, positive=None):
    """Triton's integer division (truncating toward zero) as a z3 term."""
    return _divmod("div", a, b, vars, positive)


def tmod(a, b, vars: Vars, positive=None):
    """Triton's remainder (sign of the dividend) as a z3 term."""
    return _divmod("mod", a, b, vars, positive)


def _divmod(op: str, a, b, vars: Vars, positive=None):
    """`positive(b)` proves b >= 1 where the program runs (a solver query); with it, a
    divisor of few possible values becomes one linear case per value."""
    c = const_value(b)
    if c is not None and c != 0:
        return _by_const(op, a, c, vars)
    rng = interval(b, vars)
    if rng is not None and rng[1] >= 1 and rng[1] - max(rng[0], 1) < MAX_EXPAND:
        lo, hi = max(rng[0], 1), rng[1]
        if lo == rng[0] or (positive is not None and positive(b)):
            out = _by_const(op, a, hi, vars)
            for v in range(lo, hi):
                out = z3.If(b == v, _by_const(op, a, v, vars), out)
            return out
    # nonlinear: z3 may still decide; keep Triton's truncation
    q = a / b if op == "div" else a % b
    return q if _nonneg(a, vars) and _nonneg(b, vars) else _trunc_fix(op, a, b)


def _by_const(op: str, a, c: int, vars: Vars):
    if _nonneg(a, vars) and c > 0:
        return a / c if op == "div" else a % c
    return _trunc_fix(op, a, c)


def _trunc_fix(op: str, a, b):
    """Truncating division from z3's Euclidean one, for any signs."""
    absb = z3.If(b >= 0, b, -b) if not isinstance(b, int) else abs(b)
    absa = z3.If(a >= 0, a, -a)
    q = absa / absb
    if op == "div":
        same = (a >= 0) == (b >= 0) if not isinstance(b, int) else (a >= 0) if b > 0 else (a < 0)
        return z3.If(same, q, -q)
    r = absa % absb
    return z3.If(a >= 0, r, -r)


def affine(e: z3.ArithRef, vs: list[z3.ArithRef]) -> tuple[int, dict] | None:
    """`e` as c0 + sum(c_v * v) over `vs` with integer coefficients (other variables held
    fixed), read off by substitution; None if a coefficient is not a constant. The caller
    verifies the decomposition where it matters."""
    zero = [(v, z3.IntVal(0)) for v in vs]
    c0 = z3.simplify(z3.substitute(e, *zero)) if zero else z3.simplify(e)
    coeffs = {}
    for v in vs:
        at1 = z3.substitute(e, *[(w, z3.IntVal(1 if w.eq(v) else 0)) for w in vs])
        c = const_value(z3.simplify(at1 - c0))
        if c is None:
            return None
        if c:
            coeffs[v.decl().name()] = (v, c)
    return c0, coeffs
