"""Mixed-radix digits for the integer division and remainder of a query (`radix_form`).

A tile map such as a grouped swizzle reads one index `v` through divisions and remainders
by constants (`v // 512 * 8 + v % 8`, `v % 512 // 8`). z3 decides such formulas by
branching on the quotients, and the work grows with the constants (with the problem's
size: a two-instance query on a persistent matmul's tile map at 16384^3 cost z3's SMT
core about 15 times its work at 1024^3). Where the constants dividing `v` form a chain (each divides the next:
8 | 512), `v` has one set of mixed-radix digits: v = 512*Q + 8*d1 + d0 with 0 <= d0 < 8
and 0 <= d1 < 64, and every quotient and remainder of `v` by a constant of the chain is a
sum of digits (v // 8 = 64*Q + d1, v % 512 = 8*d1 + d0, v % 512 // 8 = d1): the formula
becomes linear, and its size no longer shows in the work. Where the constants do not all
form one chain (a grouped order's short last group divides `v` by its own row count too:
`v % 15` beside `v % 16` and `v // 256`), a chain among them (`_chain`) gives the digits, and
the other divisions stay as they are, of `v`, which the digits equal: z3 is left only the
few cases those divisions take once the digits bound them.

The rewritten formula states v = 512*Q + 8*d1 + d0 and the digits' ranges, and replaces
only the terms it rewrote exactly (Euclidean division by a positive constant, which is
z3's): a model of the original formula gives one of the rewritten formula (the digits of
its `v`) and back, so the two are satisfiable together. The checker asks it only to prove
(`Checker.ask`: its `unsat` is the answer, anything else goes to the default solver).
"""

from __future__ import annotations

import z3
from z3 import z3core as _core
from z3.z3 import _to_expr_ref
from z3.z3consts import Z3_APP_AST as _APP

#: the most variables given digits in one formula (the rewrite is a Python walk)
MAX_VARS = 8


def radix_form(f: z3.BoolRef) -> z3.BoolRef | None:
    """`f` with the divisions and remainders by constants of single variables written in
    those variables' mixed-radix digits (module docstring), or None when there are none."""
    nodes = _divmods(f)
    chains: dict = {}  # variable id -> (variable, {divisor})
    for n, var in nodes:
        chains.setdefault(var.get_id(), (var, set()))[1].add(n.arg(1).as_long())
    digits = {}  # variable id -> (variable, its linear form over digits, digit ranges)
    ctx = f.ctx
    for key, (var, divisors) in list(chains.items())[:MAX_VARS]:
        cs = _chain(divisors)
        name = var.decl().name()
        weights = [1] + cs  # d0 (weight 1) ... then Q with the largest divisor's weight
        form, ranges = {}, []
        for i, w in enumerate(weights):
            d = z3.Int(f"{name}#radix{i}", ctx)
            top = weights[i + 1] // w if i + 1 < len(weights) else None
            form[d.get_id()] = (d, w, top)
            if top is not None:
                ranges += [d >= 0, d < top]
        digits[key] = (var, form, ranges)
    if not digits:
        return None
    memo: dict = {}
    pairs = []
    for n, var in nodes:
        if var.get_id() not in digits:
            continue
        form = digits[var.get_id()][1]
        lin = _linear(n, var, form, memo)
        if lin is not None:
            pairs.append((n, _term(lin, form, ctx)))
    if not pairs:
        return None
    ties = []
    for var, form, ranges in digits.values():
        ties.append(var == _term(({k: w for k, (_, w, _) in form.items()}, 0), form, ctx))
        ties += ranges
    return z3.And(z3.substitute(f, *pairs), *ties)


def _chain(divisors) -> list:
    """A chain (each divides the next) among `divisors`, ascending: from each divisor
    down, every smaller one that divides the last taken; the longest of those (ties: the
    larger top). Every divisor, where they all form one."""
    best = []
    for top in sorted(divisors, reverse=True):
        cs = [top]
        for d in sorted(divisors, reverse=True):
            if d < cs[-1] and cs[-1] % d == 0:
                cs.append(d)
        if len(cs) > len(best):
            best = cs
    return best[::-1]


def _divmods(f) -> list:
    """(node, variable) for each `x div c` and `x mod c` in `f` (c a positive numeral, x an
    integer term of one variable `v` and numerals), outside quantifiers, in a walk's order.
    The walk reads the terms through z3's C accessors (no Python object per subterm)."""
    ctx = f.ctx.ref()
    out, seen, todo = [], set(), [f.as_ast()]
    free: dict = {}
    while todo:
        a = todo.pop()
        key = _core.Z3_get_ast_id(ctx, a)
        if key in seen:
            continue
        seen.add(key)
        if _core.Z3_get_ast_kind(ctx, a) != _APP:
            continue
        n = _core.Z3_get_app_num_args(ctx, a)
        kind = _core.Z3_get_decl_kind(ctx, _core.Z3_get_app_decl(ctx, a))
        if n == 2 and kind in (z3.Z3_OP_IDIV, z3.Z3_OP_MOD):
            e = _to_expr_ref(a, f.ctx)
            if z3.is_int_value(e.arg(1)) and e.arg(1).as_long() > 0:
                vs = _vars(e.arg(0), free)
                if vs is not None and len(vs) == 1:
                    out.append((e, next(iter(vs.values()))))
        todo.extend(_core.Z3_get_app_arg(ctx, a, i) for i in reversed(range(n)))
    return out


def _vars(e, memo) -> dict | None:
    """The integer constants of arithmetic term `e` by id, or None when it has any other
    kind of leaf (a function application, a Boolean, an if-then-else)."""
    key = e.get_id()
    if key in memo:
        return memo[key]
    out: dict | None = {}
    if z3.is_int_value(e):
        pass
    elif z3.is_const(e):
        out = {key: e} if z3.is_int(e) else None
    elif z3.is_app(e) and e.decl().kind() in _ARITH:
        for c in e.children():
            sub = _vars(c, memo)
            if sub is None:
                out = None
                break
            out.update(sub)
    else:
        out = None
    memo[key] = out
    return out


_ARITH = (z3.Z3_OP_ADD, z3.Z3_OP_SUB, z3.Z3_OP_MUL, z3.Z3_OP_UMINUS, z3.Z3_OP_IDIV,
          z3.Z3_OP_MOD)


def _linear(e, var, form, memo):
    """`e` (a term of `var` and numerals) as (coefficients by digit id, constant) over the
    digits `form` of `var`, or None where a division or remainder is not exact on them."""
    key = e.get_id()
    if key in memo:
        return memo[key]
    out = None
    if z3.is_int_value(e):
        out = ({}, e.as_long())
    elif z3.is_const(e):
        out = ({k: w for k, (_, w, _) in form.items()}, 0) if e.eq(var) else None
    elif z3.is_app(e):
        k = e.decl().kind()
        kids = [_linear(c, var, form, memo) for c in e.children()]
        if all(x is not None for x in kids):
            if k == z3.Z3_OP_ADD:
                out = _combine(kids, [1] * len(kids))
            elif k == z3.Z3_OP_SUB:
                out = _combine(kids, [1] + [-1] * (len(kids) - 1))
            elif k == z3.Z3_OP_UMINUS:
                out = _combine(kids, [-1])
            elif k == z3.Z3_OP_MUL:
                consts = [x[1] for x in kids if not x[0]]
                terms = [x for x in kids if x[0]]
                if len(terms) <= 1:
                    factor = 1
                    for c in consts:
                        factor *= c
                    out = _combine(terms, [factor]) if terms else ({}, factor)
            elif k in (z3.Z3_OP_IDIV, z3.Z3_OP_MOD) and not kids[1][0] and kids[1][1] > 0:
                out = _divide(kids[0], kids[1][1], form, k == z3.Z3_OP_IDIV)
    memo[key] = out
    return out


def _combine(parts, factors):
    coeffs, const = {}, 0
    for (cs, c0), f in zip(parts, factors):
        const += f * c0
        for k, v in cs.items():
            coeffs[k] = coeffs.get(k, 0) + f * v
    return {k: v for k, v in coeffs.items() if v}, const


def _divide(lin, c, form, quotient):
    """`lin div c` or `lin mod c` when lin = c*H + L with 0 <= L < c for every value of the
    digits (H's coefficients are multiples of c; L's digits are bounded, its coefficients
    and constant non-negative): then the quotient is H and the remainder L; else None."""
    coeffs, const = lin
    high, low = {}, {}
    for k, v in coeffs.items():
        (high if v % c == 0 else low)[k] = v
    hc, lc = (const, 0) if const % c == 0 else (0, const)
    top = lc
    for k, v in low.items():
        bound = form[k][2]
        if bound is None or v < 0:
            return None  # an unbounded digit (the top one) or a negative coefficient
        top += v * (bound - 1)
    if lc < 0 or top >= c:
        return None
    if quotient:
        return {k: v // c for k, v in high.items()}, hc // c
    return low, lc


def _term(lin, form, ctx):
    """A linear form over the digits `form` as a z3 term."""
    coeffs, const = lin
    parts = [form[k][0] if v == 1 else v * form[k][0] for k, v in coeffs.items()]
    if const or not parts:
        parts.append(z3.IntVal(const, ctx))
    return parts[0] if len(parts) == 1 else z3.Sum(*parts)
