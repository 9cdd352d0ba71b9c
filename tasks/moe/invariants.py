"""MoE's invariant pack: the invariants of routed programs, on top of the core tag rules
(`argus_env/check/SEMANTICS.md`; the rules in full are in `INVARIANTS.md` beside this file).

A routed program reads index arrays a routing step wrote: `sorted_ids[p]`, the (token, slot)
pair at sorted position p, `expert_ids[b]`, the expert of block b, and `topk_ids`. The
checker does not know their contents: a load of integer data is an uninterpreted function of
its coordinates (`Checker.uf`). What it may assume are the routing step's
*postconditions* (`postconditions.py`), added to every solver query as instances at the
terms the query mentions (no quantifiers): each position holds padding or a pair of its
block's expert, once; each pair has a position; blocks in expert order, padding at the end
of each expert's run, empty blocks last; and what follows from every token taking TOPK
distinct experts (ranks, how many blocks can be used).

With them, the task's relations between tags are checked where data meets:

- **expert** (at `dot`): an element whose row is sorted position p (tag P) meets expert e's
  weights (tag E) only if p's pair is routed to e (or p is padding);
- **scatter** (at a store leaving the sorted row space): the row of position p is written to
  the token and slot of its pair `sid(p)`, the inverse of the sorting permutation;
- **padding** (same place): no padding row is written;
- **combine** (same place): a top-k weight in the value (tags T, TOPK) is the weight of p's
  own pair; a value reaching the task's output carries a top-k weight at all; two weights of
  different slots never meet (a conflict of tag TOPK).

Rows added into the output through the routing map are proven whole (`combine.py`, the
`outputs` hook): each pair's row once at each column (so each slot of each output element
exactly once) and every pair's row at all (so every slot, and every element has a writer).
Every counterexample comes with a top-k choice whose arrays realise it (`witness.py`,
`realize.py`, the `witness` hook); `replay.py` runs it under the Triton interpreter. The
concrete checker evaluates the same relations over one real routing given as its
`inputs` (`concrete.py`: the `concrete_dot`, `concrete_write` and `concrete_outputs`
hooks).
"""

from __future__ import annotations

from argus_env.check.pack import Conflict, InvariantClass, InvariantPack, register_pack

from . import concrete
from .combine import settle
from .postconditions import Routing, axioms, fns, routing_of, spec  # noqa: F401
from .witness import exclude, witness

try:  # the rules run inside the checker, which needs z3; the task also runs without it
    import z3

    from argus_env.check.symbolic.values import And, div, eq, evaluate, ge, lt, mod, ne
    from argus_env.check.symbolic.values import call as applied
except ImportError:  # pragma: no cover - a machine that only measures
    z3 = evaluate = And = None


# ---------------------------------------------------------------- relations
def conflict(ck, name: str) -> Conflict | None:
    """Two values of the slot tag meeting: two top-k weights of different slots."""
    return Conflict("combine") if name == spec(ck).slot else None


def on_dot(ck, out, shape, what: str) -> None:
    """expert: a sorted row p meets expert e's weights only if p's pair is routed to e."""
    r = spec(ck)
    if r.pos not in out.tags or r.expert not in out.tags:
        return
    f = fns(ck)
    (gp, p), (g_e, e) = out.tags[r.pos], out.tags[r.expert]
    q = applied(f.sid, p)
    routed = applied(f.tid, div(q, r.topk), mod(q, r.topk))
    m = ck.find(And(gp, g_e, ge(p, 0), lt(p, r.rows), ne(q, r.pad), ne(routed, e)), shape)
    if m is None:
        ck.proven(f"{what}: each sorted row meets its own expert's weights")
        return
    ck.violate("expert", "dot", f"`{what}` multiplies the row of sorted position "
               f"{evaluate(m, p)} (pair {evaluate(m, q)}, routed to expert {evaluate(m, routed)}) by expert "
               f"{evaluate(m, e)}'s weights", m, shape, expected={r.expert: routed},
               actual={r.expert: e}, frag="mma")


def on_write(ck, a, value, call):
    """padding, scatter and combine where rows leave the sorted layout; returns the value,
    with the slot each atomically added row contributes as coverage of TOPK."""
    r = spec(ck)
    dims = a.tensor.dims
    op, name = call.fn, a.tensor.name
    if r.pos not in value.tags or r.pos in dims:
        if name == r.output and value.tagged and r.slot not in value.tags \
                and r.slot not in value.cov:
            _unweighted(ck, a, value, op, r)
        return value
    f = fns(ck)
    gp, p = value.tags[r.pos]
    p = ck.fix_lanes(p)
    q = applied(f.sid, p)
    live = And(a.live, a.inbounds, gp, ge(p, 0), lt(p, r.rows))
    # a padding row whose write the mask lets through, in bounds or not
    padding = And(a.live, gp, ge(p, 0), lt(p, r.rows), eq(q, r.pad))
    real = And(live, ne(q, r.pad))
    token, slot = div(q, r.topk), mod(q, r.topk)
    scatter = [(dim, want, a.coords[dims.index(dim)])
               for dim, want in ((r.token, token), (r.slot, slot)) if dim in dims]
    weights = [(dim, want, *value.tags[dim]) for dim, want in ((r.slot, slot), (r.token, token))
               if dim in value.tags and r.slot in value.tags]
    unweighted = name == r.output and r.slot not in value.tags and r.slot not in value.cov
    # one query for all of them (where none holds, as in a correct program), else each
    if ck.none_of([padding] + [And(real, ne(got, want)) for _, want, got in scatter] +
                  [And(real, g, ne(v, want)) for _, want, g, v in weights] +
                  ([And(a.live, a.inbounds, value.live())] if unweighted else []), a.shape):
        for dim, _, _ in scatter:
            ck.proven(f"{op} {name}: each row goes to the {dim} of its pair")
        return value
    m = ck.find(padding, a.shape)
    if m is not None:
        ck.violate("padding", op, f"a padding row (sorted position {evaluate(m, p)}) is written to "
                   f"`{name}`", m, a.shape, expected={"pair": f"< {r.pad}"},
                   actual={"pair": q}, tensor=name, coords=tuple(evaluate(m, c) for c in a.coords))
    for dim, want, got in scatter:
        m = ck.find(And(real, ne(got, want)), a.shape)
        if m is None:
            ck.proven(f"{op} {name}: each row goes to the {dim} of its pair")
            continue
        ck.violate("scatter", op, f"the row of sorted position {evaluate(m, p)} holds pair "
                   f"{evaluate(m, q)} (token {evaluate(m, token)}, slot {evaluate(m, slot)}) but "
                   f"is written to {dim}={evaluate(m, got)} of `{name}`", m, a.shape,
                   expected={dim: want}, actual={dim: got}, tensor=name,
                   coords=tuple(evaluate(m, c) for c in a.coords))
    for dim, want, g, v in weights:
        m = ck.find(And(real, g, ne(v, want)), a.shape)
        if m is not None:
            ck.violate("combine", op, f"the row of pair {evaluate(m, q)} is scaled by the top-k "
                       f"weight of {dim}={evaluate(m, v)}, not its own {dim}={evaluate(m, want)}", m,
                       a.shape, expected={dim: want}, actual={dim: v}, tensor=name,
                       coords=tuple(evaluate(m, c) for c in a.coords))
    if unweighted:
        _unweighted(ck, a, value, op, r)
    return value


def _unweighted(ck, a, value, op: str, r: Routing) -> None:
    m = ck.find(And(a.live, a.inbounds, value.live()), a.shape)
    if m is not None:
        ck.violate("combine", op, f"rows reach `{a.tensor.name}` without a top-k weight (no "
                   f"element of `{r.slot}`-indexed weights was multiplied in)", m, a.shape,
                   expected={r.slot: "a weight"}, actual={r.slot: None},
                   tensor=a.tensor.name, coords=tuple(evaluate(m, c) for c in a.coords))


PACK = register_pack(InvariantPack(
    "moe",
    classes=(
        InvariantClass("expert", "a token row meets another expert's weights"),
        InvariantClass("scatter", "a result is written to a token it did not come from"),
        InvariantClass("combine", "the combine weight is not the token's top-k weight for "
                       "the slot"),
        InvariantClass("padding", "a padding row from block alignment is stored"),
    ),
    report_slots=8,  # room for three more classes without changing the observation
    dot=(on_dot,),
    write=(on_write,),
    conflict=conflict,
    axioms=axioms,
    outputs=settle,
    exclude=exclude,
    witness=witness,
    # the same relations over one real routing (`concrete.py`), for the concrete checker
    concrete_dot=(concrete.on_dot,),
    concrete_write=(concrete.on_write,),
    concrete_outputs=concrete.settle,
))
