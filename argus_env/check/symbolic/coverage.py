"""The exactly-once coverage proof: coverage terms form exactly the range [lo, hi).

`exactly_once(...)` proves it in three steps: nothing outside the range, no index twice
(two copies of the bound variables), nothing missing (a witness built by mixed-radix
decomposition of the missing index, then confirmed; where the witnesses miss a point
some term covers, coverage with every binding of the terms' few bound variables spelled
out, `enumerated`). Where the completeness rests on an
assumption the task's pack names (`InvariantPack.assumed_complete`: a host routing step),
a missing witness is a note instead of an undecided obligation.
"""

from __future__ import annotations

import itertools

import z3

from .solver import Var, affine, const_value, in_range
from .values import (And, Cov, Not, Or, axis_ranges, depends_on, eq, evaluate, free_names,
                     int_var, substitution, unique)


def exactly_once(ck, terms: list[Cov], lo, hi, context: list, shape, name: str, op: str,
                 frag=None, defaults=None, scope=None, groups=None) -> None:
    """`groups` (optional) splits the completeness step by the checked instance: pairs
    (equalities naming one instance, the picks of each term that may cover its element),
    one query each; every instance the context allows must share its element's
    coordinates with one group's instance (`whole._coverage_groups`).

    The three steps' conditions are made first; where the completeness step is one
    query, the disjunction of every step's condition is asked once of the fast try
    (`Checker.refuted`): unsatisfiable, all three hold (most reductions: one query
    instead of three). Anything else asks each step as it is, in order."""
    ctx = list(context) + axis_ranges(shape)
    outside = []
    for term in terms:
        lo_n, hi_n = const_value(lo), const_value(hi)
        if lo_n is not None and hi_n is not None and \
                in_range(ck, [term.idx - lo_n], [hi_n - lo_n], shape):
            continue  # within [lo, hi) by the ranges of its variables: no query
        outside.append((term, [term.dom, Or(term.idx < lo, term.idx >= hi)]))
    sums = [t for t in terms if t.kind == "sum"]
    twice = []
    for i, t1 in enumerate(sums):
        for t2 in sums[i:]:
            used = free_ids([t2.dom, t2.idx])
            # second copies keep their variables' names with one suffix, so that a
            # grid-stride loop's link (linear index = pid + t * step) still applies to them
            suffix = f"~b{next(ck.vars.counter)}"
            r2 = [(b, _twin(ck, b, suffix)) for b in unique(t2.bound)
                  if b.decl().name() in used]
            dom2, idx2 = z3.substitute(t2.dom, *r2) if r2 else t2.dom, \
                z3.substitute(t2.idx, *r2) if r2 else t2.idx
            distinct = Or(*[b != c for b, c in r2]) if t1 is t2 else z3.BoolVal(True)
            twice.append((t1, [t1.dom, dom2, t1.idx == idx2, distinct]))
    x = ck.vars.fresh(f"missing_{name}", "point", None, None)
    sym = bool(ck.for_all)
    plain = [_some_lane(ck, w) for t in terms
             for w in _witnesses(t, x, defaults or {}, symbolic=sym)]
    shapes = [_shapes(t, x, defaults or {}) for t in terms]
    queries = []
    for inst, chosen in groups if groups is not None else [((), None)]:
        covered = list(plain)
        for i, (t, sh) in enumerate(zip(terms, shapes)):
            picks = t.picks if chosen is None else chosen[i]
            covered += [_some_lane(ck, w) for w in _at_picks(sh, picks)]
        pins = [v == value for v, value in inst]
        gap = [Not(Or(*covered))] if covered else []
        queries.append((ctx + pins + [x >= lo, x < hi] + gap, pins + gap))
    if len(queries) == 1:
        conds = [c for _, c in outside] + [c for _, c in twice] + \
            [[x >= lo, x < hi] + queries[0][1]]
        if len(conds) > 1 and ck.refuted(ctx + [Or(*[And(*c) for c in conds])]):
            ck.proven(f"{op}: {name} covered exactly once")
            return
    for term, cond in outside:
        m = ck.solve(ctx + cond)
        if m is not None:
            ck.violate("coverage", op, f"the reduction over {name} includes {name}="
                       f"{evaluate(m, term.idx)}, outside [{evaluate(m, lo)}, {evaluate(m, hi)})", m, shape,
                       expected={name: f"[{evaluate(m, lo)}, {evaluate(m, hi)})"},
                       actual={name: term.idx}, frag=frag, scope=scope)
            return
    for t1, cond in twice:
        m = ck.solve(ctx + cond)
        if m is not None:
            ck.violate("coverage", op, f"the reduction over {name} accumulates "
                       f"{name}={evaluate(m, t1.idx)} twice", m, shape,
                       expected={f"times {name}={evaluate(m, t1.idx)}": 1},
                       actual={f"times {name}={evaluate(m, t1.idx)}": 2}, frag=frag,
                       scope=scope)
            return
    m = None
    # one tile at a time: the context is the same in every query, so a tile whose query is
    # unsatisfiable is shown so by one incremental solver (`Checker.unsat_each`); the
    # others are asked as they are, in order, for the first model
    shown = ck.unsat_each(ctx + [x >= lo, x < hi], [g for _, g in queries]) \
        if len(queries) > 1 else [False] * len(queries)
    for (query, _), unsat in zip(queries, shown):
        if unsat:
            continue
        m = ck.solve(query)
        if m is not None:
            break
    if m is None:
        ck.proven(f"{op}: {name} covered exactly once")
        return
    if _missing(ck, terms, ctx, x, m, name, lo, hi, shape, op, frag, scope):
        return
    # the witnesses missed a point some term covers: where every term has few bindings,
    # coverage itself is a formula without quantifiers (`enumerated`), and the query for
    # a point it misses is exact
    covered = enumerated(ck, terms, x)
    if covered is not None:
        m = ck.solve(ctx + [x >= lo, x < hi, Not(covered)])
        if m is None:
            ck.proven(f"{op}: {name} covered exactly once (every binding enumerated)")
            return
        if _missing(ck, terms, ctx, x, m, name, lo, hi, shape, op, frag, scope):
            return
    if (note := _assumption(ck, name)) is not None:
        ck.report.notes.append(f"line {ck._line()}: {note}")
    else:
        ck.undecided(f"completeness of the reduction over {name}",
                     "a point looked uncovered but no term was shown to miss it")


def _missing(ck, terms, ctx, x, m, name, lo, hi, shape, op, frag, scope) -> bool:
    """Whether model `m`'s point x is confirmed missing (then reported): with its
    instance, element and x fixed, no term covers x at all."""
    bound = {b.get_id() for t in terms for b in t.bound} | {x.get_id()}
    fixed = []
    for v in ck.vars.vars.values():
        if v.kind in ("pid", "iter", "axis", "point") and v.expr.get_id() not in bound:
            value = evaluate(m, v.expr)
            if value is not None:
                fixed.append(eq(v.expr, value))
    xv = evaluate(m, x)
    anyc = Or(*[And(t.dom, t.idx == xv) for t in terms]) if terms else z3.BoolVal(False)
    if ck.solve(ctx + fixed + [anyc]) is not None:
        return False
    ck.violate("coverage", op, f"the reduction over {name} never includes {name}={xv}",
               m, shape, expected={name: f"[{evaluate(m, lo)}, {evaluate(m, hi)})"},
               actual={f"missing {name}": xv}, frag=frag, scope=scope)
    return True


#: most bindings of one term `enumerated` spells out
ENUMERATED = 64


def enumerated(ck, terms: list[Cov], x) -> z3.BoolRef | None:
    """That some term covers x, without quantifiers: for each term, one case per binding
    of the bound variables its domain and index mention (and of the lanes its guards
    read existentially, `any...`), each over the range it was made with. None where a
    variable has no finite range or a term more than `ENUMERATED` bindings. A binding
    outside those ranges is left out: the formula implies coverage (a proof of
    completeness with it stands), and a point it misses is confirmed missing
    (`_missing`) before it is reported."""
    cases = []
    for t in terms:
        names = free_names(t.dom) | free_names(t.idx)
        vs = [b for b in unique(t.bound) if b.decl().name() in names]
        vs += [v.expr for n, v in ck.vars.vars.items() if n in names and n.startswith("any")]
        ranges, count = [], 1
        for v in unique(vs):
            info = ck.vars.info(v)
            if info is None or info.lo is None or info.hi is None:
                return None
            count *= max(info.hi - info.lo, 0)
            if count > ENUMERATED:
                return None
            ranges.append((v, range(info.lo, info.hi)))
        body = And(t.dom, t.idx == x)
        for values in itertools.product(*[r for _, r in ranges]):
            pairs = [(v, z3.IntVal(c)) for (v, _), c in zip(ranges, values)]
            cases.append(substitution(pairs)(body) if pairs else body)
    return Or(*cases) if cases else z3.BoolVal(False)


def _assumption(ck, name: str) -> str | None:
    """The pack's note when the completeness of coverage of `name` is assumed."""
    rule = ck.pack.assumed_complete if ck.pack is not None else None
    return rule(ck, name) if rule is not None else None


def _twin(ck, v, suffix: str):
    """A fresh copy of variable `v` named `v` + `suffix`, with `v`'s kind and range."""
    info = ck.vars.info(v)
    name = v.decl().name() + suffix
    twin = int_var(name)
    ck.vars.vars[name] = Var(twin, info.kind if info else "lane", info.lo if info else None,
                             info.hi if info else None, True)
    return twin


def _some_lane(ck, formula):
    """Guards say a tag is present where *some* lane of a reduction contributes (an
    existential lane variable); inside a witness, which is negated, that must stay an
    existential: bind those lane variables with Exists."""
    lanes = [v.expr for n, v in ck.vars.vars.items()
             if n in free_names(formula) and n.startswith("any")]
    return z3.Exists(lanes, formula) if lanes else formula


def free_ids(exprs) -> set[str]:
    """Names of the variables occurring in `exprs`."""
    return set().union(*[free_names(e) for e in exprs])


def _witnesses(term: Cov, x, defaults: dict, symbolic: bool = False) -> list[z3.BoolRef]:
    """`term` covers x at the bound variables a mixed-radix decomposition of x picks;
    variables with equal coefficients are tried in every order (a few at most). With
    `symbolic` (sizes proven for all values), a coefficient may be a term of the sizes (a
    split-K program's `k_per_split`): it is taken as the largest, and x is divided by it
    (the digits form of `Checker._digits_unsat` makes that query linear)."""
    dec = affine(term.idx, list(term.bound))
    if dec is None and symbolic:
        return _symbolic_witnesses(term, x, defaults)
    if dec is None:
        return []
    c0, coeffs = dec
    ranked = sorted(coeffs.values(), key=lambda vc: -abs(vc[1]))
    if any(c <= 0 for _, c in ranked):
        return []
    groups = [list(g) for _, g in itertools.groupby(ranked, key=lambda vc: vc[1])]
    orders = [[]]
    for g in groups:
        perms = list(itertools.permutations(g))[:6]
        orders = [o + list(p) for o in orders for p in perms][:24]
    return [_witness(term, x, defaults, c0, order) for order in orders]


def _symbolic_witnesses(term: Cov, x, defaults: dict) -> list[z3.BoolRef]:
    """The witness of `_witnesses` for an index c0 + sum(c_v * v) whose coefficients are
    constants or terms free of the bound variables: the symbolic ones first (in the
    order met), then the constants, largest first. A guess only: the solver confirms it
    (a wrong one costs a proof, never makes one)."""
    bound = unique(term.bound)
    zero = [(v, z3.IntVal(0)) for v in bound]
    c0 = z3.simplify(z3.substitute(term.idx, *zero)) if zero else term.idx
    names = {v.decl().name() for v in bound}
    sym, const = [], []
    for v in bound:
        if not depends_on(term.idx, v):
            continue
        at1 = z3.substitute(term.idx, *[(w, z3.IntVal(1 if w.eq(v) else 0)) for w in bound])
        c = z3.simplify(at1 - c0)
        n = const_value(c)
        if n is not None:
            if n <= 0:
                return []
            const.append((v, n))
        elif free_names(c) & names:
            return []
        else:
            sym.append((v, c))
    if not sym:
        return []
    order = sym + sorted(const, key=lambda vc: -vc[1])
    return [_witness(term, x, defaults, c0, order)]


def linear_in(e, v) -> int | None:
    """The coefficient of `v` in `e` when `e` moves by one constant per unit of `v`, the
    other variables held symbolic (sampled at 0, 1, 2 and 5), else None. Used only to
    choose witnesses, which the solver then confirms: a wrong guess costs a proof, never
    makes one."""
    at = [z3.simplify(z3.substitute(e, (v, z3.IntVal(i)))) for i in (0, 1, 2, 5)]
    c = const_value(z3.simplify(at[1] - at[0]))
    if c is None:
        return None
    if any(const_value(z3.simplify(y - at[0])) != c * i for i, y in zip((2, 5), at[2:])):
        return None
    return c


def affine_index(term: Cov) -> bool:
    """Whether the term's index moves linearly in each bound variable it depends on."""
    return all(linear_in(term.idx, b) is not None for b in unique(term.bound)
               if depends_on(term.idx, b))


def _shapes(term: Cov, x, defaults: dict):
    """For a term with enumerated writers (`Cov.picks`) whose index is not affine in some
    bound variables (a stream-K program's k offset is a maximum over its program id):
    (those variables, the witnesses built with them left free), the index being affine in
    the rest (a k loop, a lane); None for any other term."""
    if not term.picks:
        return None
    bound = unique(term.bound)
    inner = [b for b in bound if depends_on(term.idx, b) and linear_in(term.idx, b) is None]
    if not inner:
        return None
    ids = {b.get_id() for b in inner}
    free = Cov(tuple(b for b in bound if b.get_id() not in ids), term.dom, term.idx,
               term.kind, tuple((v, e) for v, e in term.defaults if v.get_id() not in ids))
    return ids, _witnesses(free, x, {k: v for k, v in defaults.items() if k not in ids})


def _at_picks(shapes, picks) -> list[z3.BoolRef]:
    """The witnesses of `_shapes` taken at each enumerated writer instance."""
    if shapes is None or not picks:
        return []
    ids, forms = shapes
    seen, out = set(), []
    for pick in picks:
        pairs = tuple((v, n) for v, n in pick if v.get_id() in ids)
        key = tuple((v.get_id(), n.as_long()) for v, n in pairs)
        if len(pairs) != len(ids) or key in seen:
            continue
        seen.add(key)
        for w in forms:
            at = z3.simplify(z3.substitute(w, *pairs))
            if not z3.is_false(at):
                out.append(at)
    return out


def _witness(term: Cov, x, defaults: dict, c0, order) -> z3.BoolRef:
    pairs, rest = [], x - c0
    for v, c in order:
        pick = rest / c
        pairs.append((v, pick))
        rest = rest - c * pick
    used = {v.get_id() for v, _ in pairs}
    hints = {**defaults, **{v.get_id(): e for v, e in term.defaults}}
    pairs += [(b, hints[b.get_id()]) for b in term.bound
              if b.get_id() not in used and b.get_id() in hints]
    sub = (lambda e: z3.substitute(e, *pairs)) if pairs else (lambda e: e)
    body = And(sub(term.dom), sub(term.idx) == x)
    # a bound variable the decomposition does not pin down ranges over its values: some
    # value of it covers x (else the witness would ask for one arbitrary value of it)
    fixed = {v.get_id() for v, _ in pairs}
    names = free_names(body)
    rest = [b for b in unique(term.bound) if b.get_id() not in fixed and b.decl().name() in names]
    return z3.Exists(rest, body) if rest else body
