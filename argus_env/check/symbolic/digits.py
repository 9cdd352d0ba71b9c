"""Digits of an index divided by a tile count: the tile maps of all sizes made linear.

Proven for all sizes at once (`Checker.for_all`), a persistent or one-dimensional grid
reads its tile from one index `v` through divisions by a tile count: `v // tn` and
`v % tn` (row-major), `v // (GROUP_M * tn)` and `v % (GROUP_M * tn) // group_m`
(grouped), `v % tq` and `v // tq` (query blocks over heads), with `tn = cdiv(N, BN)` a
term of the sizes and `v` ranging over `[0, tm * tn)`. z3 decides such formulas
(nonlinear integer arithmetic) only by luck: most queries on a grouped map end `unknown`.

Where every symbolic divisor of `v` is `k * F` for one term `F` (shown at least 1 for
every size in range, `positive`) and constants `k` each dividing the next, `v` has
digits: v = F*u + b with 0 <= b < F, and u = sum_j W_j*d_j in the mixed radix of the
constants (W_0 = 1 < W_1 < ... the k's; every digit but the top one bounded). Then,
exactly (Euclidean division, F >= 1):

- v // (k*F) = u // k = sum over W_j >= k of (W_j/k)*d_j,
- v %  (k*F) = F*(u % k) + b, a variable of its own with its range [0, k*F) and its
  definition sum over W_j < k of W_j*(F*d_j) + b,
- v < F*Y  iff  u < Y,  and  v >= F*Y  iff  u >= Y (Y any term; Y = 0 included),
- elsewhere v = W_top*(F*d_top) + v % (W_top*F).

A product F*d of a bounded digit is a variable with one case per value of d (linear).
Three more steps keep the formula linear: a quotient of a term of the sizes by a constant
(`cdiv(N, 256)`) becomes a variable with its definition (the same models); every product
of two non-numeral terms left (F*d_top, a grid's `tm * tn`) becomes an application of an
uninterpreted function (with, for F*d_top, the facts d >= 0 -> F*d >= d and d <= 0 ->
F*d <= d, true of every product); and an if-then-else whose cases are numerals or
remainders by numerals (a division by a bounded divisor, one case per value) is stated
to lie between their bounds. The uninterpreted products forget what multiplication is
beyond those facts: the rewritten formula has every model of the original (the digits of
its `v`, the values of its products) and possibly more. The checker therefore takes only
its `unsat` (`Checker._digits_unsat`): the original is then unsatisfiable too; a model,
or no answer, sends the query on to the default solver as before.
"""

from __future__ import annotations

import z3
from z3 import z3core as _core
from z3.z3 import _to_expr_ref
from z3.z3consts import Z3_APP_AST as _APP

#: the most variables given digits in one formula
MAX_VARS = 8
#: a bounded digit whose product with F is written as cases has at most this many values
MAX_CASES = 64


def _factors(e) -> tuple[int, list] | None:
    """`e` as (numeral k, non-numeral factors) of a product (a lone term: (1, [e]))."""
    if z3.is_int_value(e):
        return e.as_long(), []
    if z3.is_app(e) and e.decl().kind() == z3.Z3_OP_MUL:
        k, fs = 1, []
        for c in e.children():
            sub = _factors(c)
            if sub is None:
                return None
            k *= sub[0]
            fs += sub[1]
        return k, fs
    return 1, [e]


def _apps(f, kinds) -> list:
    """Each application in `f` (outside quantifiers) whose operation is one of `kinds`,
    once, in a walk's order. The walk reads the terms through z3's C accessors (no Python
    object per subterm: the formulas of a tile map have thousands)."""
    ctx = f.ctx
    ref = ctx.ref()
    out, seen, todo = [], set(), [f.as_ast()]
    while todo:
        a = todo.pop()
        key = _core.Z3_get_ast_id(ref, a)
        if key in seen:
            continue
        seen.add(key)
        if _core.Z3_get_ast_kind(ref, a) != _APP:
            continue
        n = _core.Z3_get_app_num_args(ref, a)
        if _core.Z3_get_decl_kind(ref, _core.Z3_get_app_decl(ref, a)) in kinds:
            out.append(_to_expr_ref(a, ctx))
        todo.extend(_core.Z3_get_app_arg(ref, a, i) for i in reversed(range(n)))
    return out


def _key(fs) -> tuple:
    return tuple(sorted(f.get_id() for f in fs))


def _is_var(e) -> bool:
    return z3.is_const(e) and z3.is_int(e) and not z3.is_int_value(e) \
        and e.decl().kind() == z3.Z3_OP_UNINTERPRETED


def digits_form(f: z3.BoolRef, positive, fixed) -> tuple | None:
    """(`f` with each index divided by multiples of one tile count written in its digits
    (module docstring), [(index name, its top digit)]), or None when no variable
    qualifies. `positive(F)`: whether term
    F is at least 1 wherever the sizes are in range; `fixed(name)`: whether a variable is
    one the digits may not be taken of (the sizes F is made of)."""
    found: dict = {}   # var id -> [var, F key, F factors, {k}, [nodes]]
    bad: set = set()
    for x in _apps(f, (z3.Z3_OP_IDIV, z3.Z3_OP_MOD)):
        if x.num_args() != 2 or not _is_var(x.arg(0)) or z3.is_int_value(x.arg(1)):
            continue
        v, fk = x.arg(0), _factors(x.arg(1))
        if fk is None or fk[0] < 1 or not fk[1] or fixed(v.decl().name()):
            bad.add(v.get_id())
            continue
        key = _key(fk[1])
        hit = found.setdefault(v.get_id(), [v, key, fk[1], set(), []])
        if hit[1] != key:
            bad.add(v.get_id())
        hit[3].add(fk[0])
        hit[4].append((x, fk[0], x.decl().kind() == z3.Z3_OP_IDIV))
    cands = [h for k, h in found.items() if k not in bad][:MAX_VARS]
    ctx = f.ctx
    pairs, extra, tops_of = [], [], []
    mul = z3.Function("radix*", z3.IntSort(ctx), z3.IntSort(ctx), z3.IntSort(ctx))
    for v, key, fs, ks, nodes in cands:
        F = fs[0] if len(fs) == 1 else z3.Product(*fs)
        if any(_mentions_var(F, c[0]) for c in cands):
            continue
        if not positive(F):
            continue
        weights = sorted(ks | {1})
        if any(b % a for a, b in zip(weights, weights[1:])):
            continue
        name = v.decl().name()
        b = z3.Int(f"{name}#low", ctx)
        ds = [z3.Int(f"{name}#digit{j}", ctx) for j in range(len(weights))]
        tops = [weights[j + 1] // weights[j] if j + 1 < len(weights) else None
                for j in range(len(weights))]
        extra += [b >= 0, b < F]
        for d, top in zip(ds, tops):
            if top is not None:
                extra += [d >= 0, d < top]
        fd = []  # F * d_j, linear where d_j is bounded
        for d, top in zip(ds, tops):
            if top is not None and top <= MAX_CASES:
                p = z3.Int(f"{d.decl().name()}*", ctx)
                # F*d as its bounds at each value of d (the values follow): a bound on d
                # bounds the product without a split over d's values
                extra += [z3.Implies(d == c, p == c * F) for c in range(top)]
                extra += [z3.Implies(d <= c, p <= c * F) for c in range(top - 1)]
                extra += [z3.Implies(d >= c, p >= c * F) for c in range(1, top)]
                fd.append(p)
            else:
                p = F * d  # made uninterpreted with the other products (`_linear_products`)
                extra += [z3.Implies(d >= 0, p >= d), z3.Implies(d <= 0, p <= d),
                          z3.Implies(d == 0, p == 0)]
                fd.append(p)
        u = z3.Sum(*[w * d for w, d in zip(weights, ds)]) if len(ds) > 1 else ds[0]
        # the low parts v % (W*F) = sum over W_j < W of W_j*(F*d_j) + b, one variable each
        # (with its range [0, W*F)): two indices with equal top digits and equal low
        # parts are equal without taking the low part apart
        low = {1: b}
        for j in range(1, len(weights)):
            w = weights[j]
            lw = z3.Int(f"{name}#mod{w}", ctx)
            extra += [lw == weights[j - 1] * fd[j - 1] + low[weights[j - 1]],
                      lw >= 0, lw < w * F]
            low[w] = lw
        whole = weights[-1] * fd[-1] + low[weights[-1]]
        tops_of.append((name, ds[-1]))
        for node, k, quotient in nodes:
            if quotient:
                parts = [(w // k) * d for w, d in zip(weights, ds) if w >= k]
                pairs.append((node, z3.Sum(*parts) if len(parts) > 1 else parts[0]))
            else:
                pairs.append((node, low[k]))
        pairs += _comparisons(f, v, key, u)
        pairs.append((v, whole))
    if not pairs:
        return None
    out = _size_quotients(z3.And(z3.substitute(f, *pairs), *extra), fixed)
    out = _linear_products(out, mul)
    return z3.And(out, *_case_bounds(out)), tops_of


def twins(tops) -> list:
    """Pairs of top digits of two copies of one index (`v` and `v~2.5`, the two
    instances of a two-instance query)."""
    by: dict = {}
    for name, d in tops:
        by.setdefault(name.split("~")[0], []).append(d)
    return [(ds[0], d) for ds in by.values() for d in ds[1:]]


def selectors(f) -> list:
    """(term, values, conditions) of each term T that the conditions `T == c` of `f`'s
    if-then-else terms compare with two or more numerals c (a division by a bounded
    divisor, one case per value): the cases to split a query on, most values first."""
    found: dict = {}
    for x in _apps(f, (z3.Z3_OP_ITE,)):
        c = x.arg(0)
        if z3.is_app(c) and c.decl().kind() == z3.Z3_OP_EQ:
            a, b = c.arg(0), c.arg(1)
            if z3.is_int_value(a) and not z3.is_int_value(b):
                a, b = b, a
            if z3.is_int_value(b) and not z3.is_int_value(a) and z3.is_int(a):
                hit = found.setdefault(a.get_id(), [a, set(), []])
                hit[1].add(b.as_long())
                hit[2].append(c)
    out = [(t, sorted(vs), atoms) for t, vs, atoms in found.values() if len(vs) >= 2]
    return sorted(out, key=lambda tv: -len(tv[1]))


def _case_bounds(f) -> list:
    """For each if-then-else term whose every case is a numeral or a remainder by a
    positive numeral (a division by a grouped order's `group_m`, one case per value),
    the bounds of its value: facts true of every model, which spare the solver a split
    over the cases to learn them."""
    memo: dict = {}

    def bounds(x):
        key = x.get_id()
        if key not in memo:
            memo[key] = None
            if z3.is_int_value(x):
                memo[key] = (x.as_long(), x.as_long())
            elif z3.is_app(x) and x.decl().kind() == z3.Z3_OP_MOD \
                    and z3.is_int_value(x.arg(1)) and x.arg(1).as_long() > 0:
                memo[key] = (0, x.arg(1).as_long() - 1)
            elif z3.is_app(x) and x.decl().kind() == z3.Z3_OP_ITE:
                a, b = bounds(x.arg(1)), bounds(x.arg(2))
                if a is not None and b is not None:
                    memo[key] = (min(a[0], b[0]), max(a[1], b[1]))
        return memo[key]

    out = []
    for x in _apps(f, (z3.Z3_OP_ITE,)):
        if z3.is_int(x):
            b = bounds(x)
            if b is not None:
                out += [x >= b[0], x <= b[1]]
    return out


def _size_quotients(f, fixed):
    """`f` with each quotient of a term of the sizes by a positive constant (a tile
    count `cdiv(N, 256)`) a variable t with its definition c*t <= e < c*t + c: the same
    models (t is the quotient), and the solver meets the count as one variable."""
    pairs, extra = [], []
    for x in _apps(f, (z3.Z3_OP_IDIV,)):
        if not z3.is_int_value(x.arg(1)) or x.arg(1).as_long() <= 0:
            continue
        names = _var_names(x.arg(0))
        if names and all(fixed(n) for n in names):
            c = x.arg(1).as_long()
            t = z3.Int(f"quotient#{x.get_id()}", f.ctx)
            pairs.append((x, t))
            extra += [c * t <= x.arg(0), x.arg(0) < c * t + c]
    return z3.And(z3.substitute(f, *pairs), *extra) if pairs else f


def _var_names(e) -> set | None:
    """Names of the integer variables of arithmetic term `e`, or None where it has any
    other leaf (a function application, a Boolean)."""
    out, seen, todo = set(), set(), [e]
    while todo:
        x = todo.pop()
        if x.get_id() in seen:
            continue
        seen.add(x.get_id())
        if z3.is_int_value(x):
            continue
        if _is_var(x):
            out.add(x.decl().name())
            continue
        if not z3.is_app(x) or x.decl().kind() not in _ARITH:
            return None
        todo.extend(x.children())
    return out


_ARITH = (z3.Z3_OP_ADD, z3.Z3_OP_SUB, z3.Z3_OP_MUL, z3.Z3_OP_UMINUS, z3.Z3_OP_IDIV,
          z3.Z3_OP_MOD)


def _linear_products(f, mul):
    """`f` with every product of two or more non-numeral factors left (a grid's
    `min(num_sms, tm * tn)`, say) an application of the uninterpreted `mul`: a formula
    of linear arithmetic with every model of `f` (the products' values) and maybe more."""
    pairs = []
    for x in _apps(f, (z3.Z3_OP_MUL,)):
        fk = _factors(x)
        if fk is not None and len(fk[1]) >= 2:
            term = _product(mul, fk[1])
            pairs.append((x, term if fk[0] == 1 else fk[0] * term))
    return z3.substitute(f, *pairs) if pairs else f


def _product(mul, factors):
    """The uninterpreted product of `factors`, in one order whatever theirs (by their
    text: two instances' copies of a product order alike, so that equal factors give
    equal products)."""
    fs = sorted(factors, key=lambda e: e.sexpr())
    term = fs[0]
    for g in fs[1:]:
        term = mul(term, g)
    return term


def _mentions_var(e, v) -> bool:
    todo, seen = [e], set()
    while todo:
        x = todo.pop()
        if x.get_id() in seen:
            continue
        seen.add(x.get_id())
        if x.eq(v):
            return True
        if z3.is_app(x):
            todo.extend(x.children())
    return False


_SWAP = {z3.Z3_OP_LT: z3.Z3_OP_GT, z3.Z3_OP_GT: z3.Z3_OP_LT,
         z3.Z3_OP_LE: z3.Z3_OP_GE, z3.Z3_OP_GE: z3.Z3_OP_LE}


def _comparisons(f, v, key, u) -> list:
    """Atoms `v < F*Y` and `v >= F*Y` (either way round; Y = 0 too) as `u < Y`, `u >= Y`."""
    out = []
    for x in _apps(f, tuple(_SWAP)):
        kind = x.decl().kind()
        if x.num_args() != 2:
            continue
        lhs, rhs = x.arg(0), x.arg(1)
        if rhs.eq(v) and not lhs.eq(v):
            lhs, rhs, kind = rhs, lhs, _SWAP[kind]
        if lhs.eq(v) and kind in (z3.Z3_OP_LT, z3.Z3_OP_GE):
            y = _quotient(rhs, key)
            if y is not None:
                out.append((x, u < y if kind == z3.Z3_OP_LT else u >= y))
    return out


def _quotient(e, key):
    """Y where `e` is F*Y (F the product of the factors `key`), or 0 for the numeral 0."""
    if z3.is_int_value(e) and e.as_long() == 0:
        return e
    fk = _factors(e)
    if fk is None:
        return None
    k, fs = fk
    rest = list(fs)
    for fid in key:
        hit = next((i for i, x in enumerate(rest) if x.get_id() == fid), None)
        if hit is None:
            return None
        rest.pop(hit)
    parts = rest
    if not parts:
        return z3.IntVal(k, e.ctx)
    y = parts[0] if len(parts) == 1 else z3.Product(*parts)
    return y if k == 1 else k * y
