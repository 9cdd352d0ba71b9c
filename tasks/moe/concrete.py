"""MoE's invariants in the concrete interpreter: the pack's rules evaluated over one real
routing (`argus_env.check.concrete`; the symbolic rules are in `invariants.py` and
`combine.py`, the relations in full in `INVARIANTS.md`).

The concrete checker runs every program instance at one small size on given `inputs`; for a
routed program these are the routing step's arrays (`sorted_ids`, `expert_ids`,
`topk_ids`, as `routing.align` builds them from a top-k choice, or `realize.arrays` from a
counterexample's spec). Where the symbolic rules ask a solver whether some routing
breaks a relation, these read the one routing given: `sid` is `sorted_ids`, `tid(q)` is
`topk_ids` at flat index q (`q = token * TOPK + slot`):

- **expert** (`concrete_dot`): a product element whose row is sorted position p (tag P)
  and whose weights are expert e's (tag E): `sid[p]` is padding or `tid(sid[p]) == e`;
- at a `store`/`atomic_add` of a value tagged P into a tensor without a P dim
  (`concrete_write`): no padding row passes the mask, in bounds or not (**padding**); the
  T and TOPK coordinates of each real row are `sid[p] // TOPK` and `sid[p] % TOPK`
  (**scatter**); a T or TOPK tag of the value (a top-k weight multiplied in) names the same
  pair (**combine**); a value reaching the task's output carries a TOPK tag or coverage
  at all (**combine**);
- two values of different TOPK meeting elementwise: **combine** (the pack's `conflict`
  hook, which both interpreters call);
- the fused combine (`concrete_outputs`): rows written into the output through the routing
  map are tallied per point (p, column), the row's sorted position and the output's other
  coordinates. For atomic adds, no real point added twice (**coverage**: a slot of an
  output element twice, naming both instances); for every routed write, every point whose
  position holds a pair added (**coverage**: the element never receives that slot, naming
  the instance whose mask dropped it, or none when no instance reached it; **bijection**
  when no pair's row reaches that column at all). The pack then settles the output's
  bijection and (atomic adds) its TOPK coverage, as `combine.settle` does symbolically.
"""

from __future__ import annotations

import numpy as np

from argus_env.check.concrete.interp import stmt_text
from argus_env.check.concrete.values import first, tagged
from argus_env.check.report import Violation

from . import routing
from .postconditions import spec

#: the key of the pack's record on the output's `TensorWrites.pack_records`
RECORD = "moe"


def routing_arrays(it) -> tuple[np.ndarray, np.ndarray]:
    """(sid, tid): `sorted_ids` over the P positions and `topk_ids` flattened by pair, from
    the check's `inputs` (once per check)."""
    memo = it.memo
    if "routing_arrays" not in memo:
        r = spec(it)
        sid = it.tensor_data(it.kernel.param(r.sorted_ids)).reshape(-1)
        tid = it.tensor_data(it.kernel.param(r.topk_ids)).reshape(-1)
        if sid.shape != (r.rows,) or tid.shape != (r.pad,):
            raise ValueError(f"moe: routing arrays of {sid.shape} positions and {tid.shape} "
                             f"pairs; the check's sizes need {r.rows} and {r.pad}")
        memo["routing_arrays"] = (sid, tid)
    return memo["routing_arrays"]


def _pairs(it, p: np.ndarray, has: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(inside, q): where a position tag is carried and inside [0, P), and the pair
    `sid[p]` there (PAD elsewhere)."""
    r = spec(it)
    sid, _ = routing_arrays(it)
    inside = has & (p >= 0) & (p < r.rows)
    q = np.where(inside, sid[np.clip(p, 0, r.rows - 1)], r.pad)
    return inside, q


# ---------------------------------------------------------------- expert
def on_dot(it, line: int, product) -> None:
    """expert: a sorted row p meets expert e's weights only if p's pair is routed to e."""
    r = spec(it)
    tp, te = product.tags.get(r.pos), product.tags.get(r.expert)
    if tp is None or te is None:
        return
    it.checked("dot", line, "expert")
    if not it.wants("expert", line):
        return
    _, tid = routing_arrays(it)
    inside, q = _pairs(it, tp.val, tp.has & te.has)
    real = inside & (q != r.pad)
    routed = np.where(real, tid[np.clip(q, 0, r.pad - 1)], -1)
    el = first(real & (routed != te.val))
    if el is None:
        return
    p, qq, e, got = int(tp.val[el]), int(q[el]), int(routed[el]), int(te.val[el])
    it.violate("expert", "dot", line, f"the row of sorted position {p} (pair {qq}, routed to "
               f"expert {e}) is multiplied by expert {got}'s weights", element=el,
               tile=product, expected={r.expert: e}, actual={r.expert: got})


# ---------------------------------------------------------------- rows leaving the layout
def on_write(it, op: str, line: int, ref, v, active) -> None:
    """padding, scatter and combine where rows leave the sorted layout; the fused
    combine's points of the output tallied."""
    r = spec(it)
    dims, name = ref.param.dims, ref.param.name
    inb = ref.in_bounds()
    weighted = r.slot in v.tags or r.slot in v.cov
    tp = v.tags.get(r.pos)
    if tp is None or r.pos in dims:
        if name == r.output:
            _record(it, ref).update(unrouted=True)
            if not weighted:
                _unweighted(it, op, line, ref, v, active & inb & tagged(v))
        return
    inside, q = _pairs(it, tp.val, tp.has)
    pad = inside & (q == r.pad)
    it.checked(op, line, "padding")
    el = first(active & pad) if it.wants("padding", line) else None
    if el is not None:
        it.violate("padding", op, line, f"a padding row (sorted position {int(tp.val[el])}) "
                   f"is written to `{name}`", element=el, tile=v,
                   expected={"pair": f"< {r.pad}"}, actual={"pair": r.pad}, tensor=name,
                   coords=ref.at(el))
    real = active & inb & inside & (q != r.pad)
    want = {r.token: q // r.topk, r.slot: q % r.topk}
    for dim in (r.token, r.slot):
        if dim not in dims:
            continue
        got = ref.coords[dims.index(dim)]
        it.checked(op, line, "scatter")
        el = first(real & (got != want[dim])) if it.wants("scatter", line) else None
        if el is not None:
            qq = int(q[el])
            it.violate("scatter", op, line, f"the row of sorted position {int(tp.val[el])} "
                       f"holds pair {qq} (token {qq // r.topk}, slot {qq % r.topk}) but is "
                       f"written to {dim}={int(got[el])} of `{name}`", element=el, tile=v,
                       expected={dim: int(want[dim][el])}, actual={dim: int(got[el])},
                       tensor=name, coords=ref.at(el))
    for dim in (r.slot, r.token):
        if dim not in v.tags or r.slot not in v.tags:
            continue
        t = v.tags[dim]
        it.checked(op, line, "combine")
        el = first(real & t.has & (t.val != want[dim])) if it.wants("combine", line) else None
        if el is not None:
            it.violate("combine", op, line, f"the row of pair {int(q[el])} is scaled by the "
                       f"top-k weight of {dim}={int(t.val[el])}, not its own "
                       f"{dim}={int(want[dim][el])}", element=el, tile=v,
                       expected={dim: int(want[dim][el])}, actual={dim: int(t.val[el])},
                       tensor=name, coords=ref.at(el))
    if name == r.output:
        if not weighted:
            _unweighted(it, op, line, ref, v, active & inb & tagged(v))
        _points(it, op, line, ref, tp.val, inside & (q != r.pad), active)


def _unweighted(it, op: str, line: int, ref, v, where: np.ndarray) -> None:
    r = spec(it)
    it.checked(op, line, "combine")
    el = first(where) if it.wants("combine", line) else None
    if el is not None:
        it.violate("combine", op, line, f"rows reach `{ref.param.name}` without a top-k weight "
                   f"(no element of `{r.slot}`-indexed weights was multiplied in)", element=el,
                   tile=v, expected={r.slot: "a weight"}, actual={r.slot: None},
                   tensor=ref.param.name, coords=ref.at(el))


# ---------------------------------------------------------------- the fused combine
def _record(it, ref) -> dict:
    """The pack's record of the output's writes in this launch (`TensorWrites.pack_records`)."""
    r = spec(it)
    tw = it.writes[ref.param.name]
    if RECORD not in tw.pack_records:
        keep = [i for i, d in enumerate(ref.param.dims) if d not in (r.token, r.slot)]
        shape = (r.rows,) + tuple(ref.extent[i] for i in keep)
        n = int(np.prod(shape))
        tw.pack_records[RECORD] = {"shape": shape, "keep": keep, "counts": np.zeros(n, np.int32),
                           "first": np.full(n, -1, np.int64), "again": np.full(n, -1, np.int64),
                           "masked": np.full(n, -1, np.int64),
                           "masked_at": np.full(n, -1, np.int64),
                           "again_at": np.full(n, -1, np.int64), "writes": [],
                           "unrouted": False, "atomic": True}
    return tw.pack_records[RECORD]


def _points(it, op: str, line: int, ref, p: np.ndarray, real: np.ndarray,
            active: np.ndarray) -> None:
    """Tally the points (p, other coordinates) this write adds at positions holding a
    pair; remember an instance that reached a point but whose mask dropped it."""
    rec = _record(it, ref)
    rec["atomic"] &= op == "atomic_add"
    keep, shape = rec["keep"], rec["shape"]
    cols = [ref.coords[i] for i in keep]
    ok = real.copy()
    for c, n in zip(cols, shape[1:]):
        ok &= (c >= 0) & (c < n)
    me = len(rec["writes"])
    rec["writes"].append({"program_id": list(it.pid), "names": it.names(), "line": line,
                          "op": op, "source": stmt_text(it.current) if it.current else "",
                          "tile": tuple(ref.shape)})
    flat = np.ravel_multi_index([np.clip(p, 0, shape[0] - 1)] +
                                [np.clip(c, 0, n - 1) for c, n in zip(cols, shape[1:])], shape)
    added = ok & active & ref.in_bounds()
    # a point added twice within one access counts twice, too
    idx, at, times = np.unique(flat[added], return_index=True, return_counts=True)
    at = np.flatnonzero(added)[at]   # the tile element first adding each point
    counts, first_w, again = rec["counts"], rec["first"], rec["again"]
    was = counts[idx]
    counts[idx] = was + times
    first_w[idx[was == 0]] = me
    twice = (was + times >= 2) & (again[idx] < 0)
    again[idx[twice]] = me
    rec["again_at"][idx[twice]] = at[twice]
    dropped = ok & ~active
    if dropped.any():
        miss, at = flat[dropped], np.flatnonzero(dropped)
        fresh = rec["masked"][miss] < 0
        rec["masked"][miss[fresh]] = me
        rec["masked_at"][miss[fresh]] = at[fresh]


def settle(sh, tensor: str, tw) -> frozenset:
    """The pack's `concrete_outputs` hook: for the output written with routed rows only,
    every point whose position holds a pair added once (atomic adds) and at all; returns
    the obligations settled ("written", and TOPK for atomic adds)."""
    r = spec(sh)
    rec = tw.pack_records.get(RECORD)
    if tensor != r.output or r.pos in sh.kernel.param(tensor).dims or rec is None \
            or rec["unrouted"] or not rec["writes"]:
        return frozenset()
    sid, _ = sh.memo["routing_arrays"]
    shape = rec["shape"]
    real = np.broadcast_to((sid != r.pad).reshape((-1,) + (1,) * (len(shape) - 1)), shape)
    real = real.reshape(-1)
    counts = rec["counts"]
    line = rec["writes"][0]["line"]
    op = rec["writes"][0]["op"]
    sh.rec.checked(op, line, "coverage")
    sh.rec.checked(op, line, "bijection")
    if rec["atomic"]:
        twice = real & (counts >= 2)
        if twice.any() and sh.rec.wants("coverage", line):
            _twice(sh, tensor, rec, int(np.argmax(twice)), sid)
    missing = real & (counts == 0)
    if missing.any():
        k = int(np.argmax(missing))
        _missing(sh, tensor, rec, k, sid)
        col = np.unravel_index(k, shape)[1:]
        reached = (real & (counts > 0)).reshape(shape[0], -1)
        j = int(np.ravel_multi_index(col, shape[1:])) if col else 0
        if not reached[:, j].any() and sh.rec.wants("bijection", line):
            w = rec["writes"][0]
            t = int(sid[np.unravel_index(k, shape)[0]]) // r.topk
            sh.rec.add(Violation(
                "bijection", op, line, f"no program instance writes column "
                f"{list(map(int, col))} of `{tensor}`: `{tensor}[{t}, ...]` (and every "
                "token's element there) has no writer", source=w["source"],
                sizes=dict(sh.sizes), tensor=tensor, coords=_coords(sh, rec, k, sid),
                expected={"writes": ">= 1"}, actual={"writes": 0}))
    return frozenset({"written", r.slot} if rec["atomic"] else {"written"})


def _coords(sh, rec: dict, k: int, sid: np.ndarray) -> tuple:
    """The output element point k lands on: its pair's token and slot, the other coords."""
    r = spec(sh)
    at = np.unravel_index(k, rec["shape"])
    q = int(sid[at[0]])
    dims = sh.kernel.param(r.output).dims
    rest = iter(int(c) for c in at[1:])
    return tuple(q // r.topk if d == r.token else q % r.topk if d == r.slot else next(rest)
                 for d in dims)


def _twice(sh, tensor: str, rec: dict, k: int, sid: np.ndarray) -> None:
    r = spec(sh)
    p = int(np.unravel_index(k, rec["shape"])[0])
    q = int(sid[p])
    w1, w2 = rec["writes"][rec["first"][k]], rec["writes"][rec["again"][k]]
    coords = _coords(sh, rec, k, sid)
    sh.rec.add(Violation(
        "coverage", w2["op"], w2["line"], f"`{tensor}{list(coords)}` adds slot {q % r.topk} "
        f"twice: the row of sorted position {p} (pair {q}) is added by program "
        f"{tuple(w1['program_id'])} and again by program {tuple(w2['program_id'])}",
        source=w2["source"], sizes=dict(sh.sizes), program_id=tuple(w2["program_id"]),
        names=dict(w2["names"]), tensor=tensor, coords=coords,
        element=tuple(int(i) for i in np.unravel_index(int(rec["again_at"][k]), w2["tile"])),
        expected={f"times {r.slot}={q % r.topk}": 1}, actual={f"times {r.slot}={q % r.topk}": 2},
        other={"program_id": w1["program_id"], "line": w1["line"], "names": w1["names"],
               "position": p, "pair": q}))


def _missing(sh, tensor: str, rec: dict, k: int, sid: np.ndarray) -> None:
    r = spec(sh)
    p = int(np.unravel_index(k, rec["shape"])[0])
    q = int(sid[p])
    coords = _coords(sh, rec, k, sid)
    m = int(rec["masked"][k])
    w = rec["writes"][m] if m >= 0 else rec["writes"][0]
    if not sh.rec.wants("coverage", w["line"]):
        return
    how = (f"program {tuple(w['program_id'])} reaches it, but the write's mask drops it"
           if m >= 0 else "no program instance reaches it (a branch or the tile loop "
           "skips it)")
    sh.rec.add(Violation(
        "coverage", w["op"], w["line"], f"`{tensor}{list(coords)}` never receives slot "
        f"{q % r.topk}: the row of sorted position {p} (pair {q}): {how}",
        source=w["source"], sizes=dict(sh.sizes),
        program_id=tuple(w["program_id"]) if m >= 0 else (),
        names=dict(w["names"]) if m >= 0 else {},
        element=tuple(int(i) for i in np.unravel_index(int(rec["masked_at"][k]), w["tile"]))
        if m >= 0 else (),
        tensor=tensor, coords=coords, expected={r.slot: f"[0, {r.topk})"},
        actual={f"missing {r.slot}": q % r.topk}, other={"position": p, "pair": q}))


# ---------------------------------------------------------------- routings to run on
def routing_inputs(ids, r) -> dict:
    """The concrete check's `inputs` for top-k choice `ids` ([T, TOPK] distinct experts per
    token): the routing step's own arrays (`routing.align`) at the program's block size."""
    import torch
    ids = torch.as_tensor(ids, dtype=torch.int32)
    sorted_ids, expert_ids = routing.align(ids, r.experts, r.block, r.rows)
    return {r.topk_ids: ids, r.sorted_ids: sorted_ids, r.expert_ids: expert_ids}


def sample_routings(r, seeds=(0,)) -> dict:
    """Named top-k choices to run a routed program on: seeded router logits, balanced and
    skewed (`routing.router_logits`); every token on experts 0..TOPK-1 (one expert takes
    every token's first slot: the longest runs); pairs dealt round robin (every expert used
    when T * TOPK >= E, the shortest runs). Runs that do not fill whole blocks of BM come
    with every one of them unless T is a multiple of BM."""
    import torch
    out = {}
    for seed in seeds:
        for skew in (0.0, routing.SKEW):
            g = torch.Generator().manual_seed(seed)
            _, ids = routing.topk(routing.router_logits(r.tokens, r.experts, skew, g), r.topk)
            out[f"seed{seed}-{'skewed' if skew else 'balanced'}"] = ids
    out["one-expert"] = torch.arange(r.topk, dtype=torch.int32).repeat(r.tokens, 1)
    out["round-robin"] = (torch.arange(r.pad) % r.experts).to(torch.int32).reshape(r.tokens, r.topk)
    return out


__all__ = ["on_dot", "on_write", "routing_arrays", "routing_inputs", "sample_routings", "settle"]
