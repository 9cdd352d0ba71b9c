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

from .values import AXES, _free, _raw, free_names, int_var, simplify, sub, substitution

MAX_EXPAND = 64  # largest divisor range expanded into cases


@dataclass
class Var:
    """A z3 integer variable with its kind and (inclusive lower, exclusive upper) range."""

    expr: z3.ArithRef
    kind: str                   # "pid", "iter", "axis", "lane", "point"
    lo: int | None = 0
    hi: int | None = None
    twin: bool = False          # a copy made for a two-instance query


class _Twin(Var):
    """A copier's variable: its z3 term is made when first read (`Vars.copier` registers
    one for every variable of its kinds, and a query reads a few)."""

    def __init__(self, name: str, kind: str, lo: int | None, hi: int | None):
        self.name, self.kind, self.lo, self.hi, self.twin = name, kind, lo, hi, True
        self._expr = None

    @property
    def expr(self) -> z3.ArithRef:
        if self._expr is None:
            self._expr = int_var(self.name)
        return self._expr


class _Copy:
    """The renaming of `Vars.copier`: each variable of its kinds to its twin, in a term
    (a substitution of the twins of the variables the term has: the same term as one of
    all of them); `pairs`, every (variable, twin)."""

    def __init__(self, twins: dict):
        self._twins = twins               # variable's name -> (its Var, its twin's)
        self._names = frozenset(twins)
        self._subs: dict = {}             # names renamed -> their substitution

    def __call__(self, e):
        if e is None:
            return None
        if not isinstance(e, z3.ExprRef):
            return z3.substitute(e, *self.pairs)
        mine = free_names(e) & self._names
        if not mine:
            return e
        sub = self._subs.get(mine)
        if sub is None:
            sub = self._subs[mine] = substitution(
                [(self._twins[n][0].expr, self._twins[n][1].expr) for n in sorted(mine)])
        return sub(e)

    @property
    def pairs(self) -> list:
        return [(v.expr, twin.expr) for v, twin in self._twins.values()]


@dataclass
class Vars:
    """Every variable a symbolic execution creates, so formulas can be copied."""

    vars: dict[str, Var] = field(default_factory=dict)
    counter: itertools.count = field(default_factory=itertools.count)
    bounds: dict = field(default_factory=dict)  # memo of `interval`

    def fresh(self, prefix: str, kind: str, lo: int | None = 0, hi: int | None = None) -> z3.ArithRef:
        name = f"{prefix}!{next(self.counter)}"
        v = int_var(name)
        self.vars[name] = Var(v, kind, lo, hi)
        return v

    def info(self, v: z3.ExprRef) -> Var | None:
        return self.vars.get(v.decl().name()) if z3.is_const(v) else None

    def named(self, name: str) -> tuple[int | None, int | None] | None:
        """The range (lo, hi) of the variable called `name`, None for none (`interval`)."""
        v = self.vars.get(name)
        return (v.lo, v.hi) if v is not None else None

    def ranges(self) -> dict[str, tuple[int | None, int | None]]:
        return {n: (v.lo, v.hi) for n, v in self.vars.items()}

    def copier(self, suffix: str, kinds=("pid", "iter", "axis", "lane", "point")):
        """A function renaming every variable of `kinds` to a fresh twin (same range);
        its `pairs`, every (variable, twin). Every twin is registered here, in order; its
        term is made where a renamed term has it (`_Twin`)."""
        twins = {}
        suffix = f"{suffix}.{next(self.counter)}"
        for name, v in list(self.vars.items()):
            if v.kind in kinds and not v.twin:
                twin = self.vars[f"{name}{suffix}"] = _Twin(f"{name}{suffix}", v.kind, v.lo,
                                                           v.hi)
                twins[name] = (v, twin)
        return _Copy(twins)


def const_value(e) -> int | None:
    """The integer value of `e` when it is a numeral (after simplification)."""
    if isinstance(e, int):
        return e
    if e is None:
        return None
    v = numeral(e)
    return v if v is not None or not isinstance(e, z3.ExprRef) else numeral(simplify(e))


def numeral(e) -> int | None:
    """The value of an integer numeral (`z3.is_int_value`, `as_long`), read through z3's C
    accessors; None for any other term."""
    if not isinstance(e, z3.ArithRef):
        return None
    ref = e.ctx.ref()
    a = e.as_ast()
    if _ast_kind(ref, a) != z3.Z3_NUMERAL_AST or \
            _sort_kind(ref, _get_sort(ref, a)) != z3.Z3_INT_SORT:
        return None
    return int(_numeral_string(ref, a))


def interval(e: z3.ExprRef, vars: Vars, depth: int = 0) -> tuple[int, int] | None:
    """Inclusive bounds [lo, hi] of an integer expression, or None if unbounded. Each
    subterm's bounds are memoised (`vars.bounds`, by z3's id; the entry keeps the term it
    was reached from alive, and with it the subterm, so that no id is reused); the walk
    reads the subterms through z3's C accessors, no Python object per subterm."""
    key = e.get_id()
    hit = vars.bounds.get(key)
    if hit is None:
        ref = e.ctx
        return _interval(ref.ref(), ref, e.as_ast(), vars, depth, e)
    return hit[1]


#: the names of the tile axes `AXES`
_AXIS_NAMES = tuple(ax.decl().name() for ax in AXES)


class _Shaped:
    """`Vars` seen with the tile axes of one shape bounded (axis i in [0, shape[i])): the
    ranges `interval` reads, with a memo of its own per shape."""

    def __init__(self, vars: Vars, shape: tuple[int, ...], axes):
        self.vars = vars
        self.bounds = vars.bounds.setdefault(("shape", shape), ({}, None))[0]
        names = _AXIS_NAMES if axes is AXES else [ax.decl().name() for ax in axes]
        self.axes = dict(zip(names, shape))

    def named(self, name: str) -> tuple[int | None, int | None] | None:
        n = self.axes.get(name)
        return (0, n) if n is not None else self.vars.named(name)


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


def _interval(ctx, ref, a, vars, depth: int, root) -> tuple[int, int] | None:
    """`interval` of the term `a` (a C pointer of context `ctx`, `ref` its Python
    context), reached from `root`; memoised in `vars.bounds`."""
    key = _ast_id(ctx, a)
    hit = vars.bounds.get(key)
    if hit is not None:
        return hit[1]
    out = _interval_of(ctx, ref, a, vars, depth, root)
    vars.bounds[key] = (root, out)
    return out


def _interval_of(ctx, ref, a, vars, depth: int, root) -> tuple[int, int] | None:
    if depth > 60:
        return None
    kind = _ast_kind(ctx, a)
    if kind == z3.Z3_NUMERAL_AST:
        if _sort_kind(ctx, _get_sort(ctx, a)) == z3.Z3_INT_SORT:
            v = int(_numeral_string(ctx, a))
            return v, v
        return None
    if kind != z3.Z3_APP_AST:
        return None  # a quantifier or a bound variable
    n = _num_args(ctx, a)
    d = _app_decl(ctx, a)
    if n == 0:
        rng = vars.named(z3.z3._symbol2py(ref, _decl_name(ctx, d)))
        if rng is None or rng[0] is None or rng[1] is None:
            return None
        return rng[0], rng[1] - 1
    args = [_app_arg(ctx, a, i) for i in range(n)]
    kids = [_interval(ctx, ref, c, vars, depth + 1, root) for c in args]
    k = _decl_kind(ctx, d)
    if k == z3.Z3_OP_ITE:
        x, y = kids[1], kids[2]
        if x is None or y is None:
            return None
        minmax = _minmax_kind(ctx, *args)
        if minmax == "min":
            return min(x[0], y[0]), min(x[1], y[1])
        if minmax == "max":
            return max(x[0], y[0]), max(x[1], y[1])
        return min(x[0], y[0]), max(x[1], y[1])
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


def _minmax_kind(ctx, cond, x, y) -> str | None:
    """"min" for If(x <= y, x, y) (or x < y), "max" for If(x >= y, x, y), else None (the
    terms as C pointers of context `ctx`)."""
    if _ast_kind(ctx, cond) != z3.Z3_APP_AST or _num_args(ctx, cond) != 2:
        return None
    k = _decl_kind(ctx, _app_decl(ctx, cond))
    l, r = (_ast_id(ctx, _app_arg(ctx, cond, i)) for i in (0, 1))
    x, y = _ast_id(ctx, x), _ast_id(ctx, y)
    if l == x and r == y:
        return {z3.Z3_OP_LE: "min", z3.Z3_OP_LT: "min", z3.Z3_OP_GE: "max", z3.Z3_OP_GT: "max"}.get(k)
    if l == y and r == x:
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
    if not vs:
        return simplify(e), {}
    zero, one = z3.IntVal(0), z3.IntVal(1)
    ids = [v.get_id() for v in vs]
    c0 = simplify(substitution([(v, zero) for v in vs])(e))
    coeffs = {}
    for v, i in zip(vs, ids):
        at1 = substitution([(w, one if j == i else zero) for w, j in zip(vs, ids)])(e)
        c = const_value(simplify(sub(at1, c0)))
        if c is None:
            return None
        if c:
            coeffs[v.decl().name()] = (v, c)
    return c0, coeffs


def linear(e: z3.ExprRef, names) -> dict | None:
    """The coefficients of the variables called `names` in `e`, read off its syntax: `e`
    is sum(k_v * v) + r where r has none of them, through sums, differences, negations
    and products by integer numerals: {name: k} (k nonzero), or None where one of them
    occurs any other way (under a division, a remainder, a product of two such terms, a
    choice, a function). Exact: no simplifier, no guess."""
    ref = e.ctx.ref()
    names = frozenset(names)
    out: dict = {}

    def has(a) -> bool:
        return bool(_free(ref, e.ctx, a, e) & names)

    def walk(a, scale: int) -> bool:
        if not has(a):
            return True  # part of r
        if _ast_kind(ref, a) != z3.Z3_APP_AST:
            return False
        n = _num_args(ref, a)
        if n == 0:  # one of the variables
            name = z3.z3._symbol2py(e.ctx, _decl_name(ref, _app_decl(ref, a)))
            out[name] = out.get(name, 0) + scale
            return True
        op = _decl_kind(ref, _app_decl(ref, a))
        args = [_app_arg(ref, a, i) for i in range(n)]
        if op == z3.Z3_OP_ADD:
            return all(walk(x, scale) for x in args)
        if op == z3.Z3_OP_SUB:
            return walk(args[0], scale) and all(walk(x, -scale) for x in args[1:])
        if op == z3.Z3_OP_UMINUS:
            return walk(args[0], -scale)
        if op == z3.Z3_OP_MUL:
            factor, term = 1, None
            for x in args:
                if _ast_kind(ref, x) == z3.Z3_NUMERAL_AST and \
                        _sort_kind(ref, _get_sort(ref, x)) == z3.Z3_INT_SORT:
                    factor *= int(_numeral_string(ref, x))
                elif term is None and has(x):
                    term = x
                else:
                    return False  # a product of two terms, or by a non-numeral
            return term is not None and walk(term, scale * factor)
        return False

    if not walk(e.as_ast(), 1):
        return None
    return {k: v for k, v in out.items() if v}


_core = z3.z3core
_ast_id, _ast_kind = _raw(_core.Z3_get_ast_id), _raw(_core.Z3_get_ast_kind)
_num_args, _app_arg = _raw(_core.Z3_get_app_num_args), _raw(_core.Z3_get_app_arg)
_app_decl, _decl_name = _raw(_core.Z3_get_app_decl), _raw(_core.Z3_get_decl_name)
_decl_kind, _get_sort = _raw(_core.Z3_get_decl_kind), _raw(_core.Z3_get_sort)
_sort_kind, _numeral_string = _raw(_core.Z3_get_sort_kind), _core.Z3_get_numeral_string
