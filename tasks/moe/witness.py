"""Counterexamples the routing step can produce.

A violation's model fixes values of the routing functions at the terms its query mentions
(and at those the postconditions' instances introduce): `facts_of` reads them, `realize`
builds a top-k choice whose arrays have them. The pack's `witness` hook attaches that
choice to every violation of a routed program (its `witness["routing"]`, rebuilt by
`realize.arrays`); a model no top-k choice realises is not a counterexample: the checker
asks again with its facts excluded (`exclude`, `Checker.solve_real`), and records the
obligation as undecided when none is realised.
"""

from __future__ import annotations

from .postconditions import axioms_and_terms, fns, refined, refinements, spec
from .realize import Facts, realize_or_core

try:
    import z3

    from argus_env.check.symbolic.values import evaluate
except ImportError:  # pragma: no cover - a machine that only measures
    z3 = evaluate = None

def facts_of(ck, model, constraints) -> Facts:
    """The routing values `model` gives at the routing terms of `constraints` (and at the
    block and expert of each position they read)."""
    r = spec(ck)
    f = Facts()
    if constraints is None:
        return _entries(ck, model)
    # the query's own terms and those of their instances (a position's block, its pair's
    # expert): the violation reads only the former; the latter place them in the layout
    _, terms = axioms_and_terms(ck, constraints, depth=2)
    for kind, t in terms:
        args = [evaluate(model, a) for a in t.children()]
        v = evaluate(model, t)
        if v is None or any(a is None for a in args):
            continue
        a = args[0]
        if kind == "sid" and 0 <= a < r.rows:
            f.sid[a] = v
        elif kind == "bexp" and 0 <= a < r.blocks:
            f.bexp[a] = v
        elif kind == "tid" and 0 <= a < r.tokens and 0 <= args[1] < r.topk:
            f.tid[(a, args[1])] = v
        elif kind == "inv" and 0 <= a < r.pad:
            f.inv[a] = v
    return f


def _entries(ck, model) -> Facts:
    """The facts of a model whose query is not known: its functions' explicit entries."""
    r, fs = spec(ck), fns(ck)
    f = Facts()
    for decl, kind in ((fs.sid, "sid"), (fs.bexp, "bexp"), (fs.tid, "tid"), (fs.inv, "inv")):
        try:
            interp = model.get_interp(decl)
        except z3.Z3Exception:
            interp = None
        for entry in (interp.as_list()[:-1] if interp is not None else []):
            vals = [evaluate(model, x) for x in entry]
            if any(v is None for v in vals):
                continue
            *args, v = vals
            if kind == "sid" and 0 <= args[0] < r.rows:
                f.sid[args[0]] = v
            elif kind == "bexp" and 0 <= args[0] < r.blocks:
                f.bexp[args[0]] = v
            elif kind == "tid" and 0 <= args[0] < r.tokens and 0 <= args[1] < r.topk:
                f.tid[tuple(args)] = v
            elif kind == "inv" and 0 <= args[0] < r.pad:
                f.inv[args[0]] = v
    return f


def realised(ck, model) -> dict | None:
    """The routing spec realising `model` (memoised per model), or None."""
    memo = ck.memo.setdefault("routing_realised", {})
    hit = memo.get(id(model))
    if hit is not None and hit[0] is model:
        return hit[1]
    facts = facts_of(ck, model, ck.query_of(model))
    found, core = realize_or_core(facts, spec(ck), ck.scope)
    memo[id(model)] = (model, found, core)
    return found


def exclude(ck, model):
    """The pack's `exclude` hook: None when a top-k choice realises `model`; else, for a
    query without them, the postconditions' second tier (`refinements`: true of every
    routing, so a query they make unsatisfiable has no counterexample); else the negation
    of the facts the model fixed that have no routing (a core of them where the counts
    problem found one; of those, the blocks' experts where there are some). Excluding more
    than the unrealisable facts narrows the search for a counterexample, never a proof: with
    none realised the obligation is undecided."""
    if realised(ck, model) is not None:
        return None
    constraints = ck.query_of(model)
    if constraints is not None and not refined(constraints):
        return refinements(ck, constraints), None
    facts = ck.memo["routing_realised"][id(model)][2]
    f = fns(ck)
    # the blocks' experts of the core alone where it has some: a layout whose pairs did not
    # fit is asked again with other blocks (wider than needed: a search, not a proof)
    eqs = [f.bexp(b) == v for b, v in facts.bexp.items()] or \
        [f.sid(p) == v for p, v in facts.sid.items()] + \
        [f.tid(t, k) == v for (t, k), v in facts.tid.items()] + \
        [f.inv(q) == p for q, p in facts.inv.items()]
    return [], (z3.Not(z3.And(*eqs)) if eqs else None)


def witness(ck, model, violation) -> dict | None:
    """The pack's `witness` hook: the top-k choice realising a violation's model (and the
    output element the violation names, where it names one), or None."""
    found = realised(ck, model)
    if found is None:
        return None
    out = {"routing": found, "num_sms": ck.num_sms}
    element = _output_element(ck, model, violation)
    if element is not None:
        out["output"] = element
    return out


def _output_element(ck, model, violation) -> list | None:
    """The element of the task's output the violation names: its own coordinates, or
    where the write of its statement puts the model's element."""
    r = spec(ck)
    if violation.tensor == r.output and violation.coords and None not in violation.coords:
        return [int(c) for c in violation.coords]
    w = next((w for w in ck.writes if w.stmt is ck.stmt and w.tensor == r.output), None)
    if w is None or not violation.element:
        return None
    coords = [evaluate(model, c) for c in w.coords]
    return coords if None not in coords else None
