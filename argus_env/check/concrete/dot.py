"""`A.dot` in the concrete interpreter (SEMANTICS.md, "Op rules").

Output element `(i, j)` sums the lanes `l` where `a[i, l]` and `b[l, j]` are both tagged.
Lane-wise questions are answered with small matrix products over the tile instead of loops:
"does any contributing lane carry tag n" is `(ta & has) @ tb > 0`, and the coverage of a
contracted name is a one-hot encoding of its values summed over lanes by `tensordot`.
"""

from __future__ import annotations

import numpy as np

from ...ir import nodes as ir
from ...ir.rewrite import walk
from ..fragments import mma_policy
from . import floats
from .ops import merge_tags, varies
from .order import check_added, drop_final
from .values import Cov, Tag, Val, cov_sum, cov_union, first, onehot, summary, tagged

F32 = np.float32


def policy(it, e: ir.Call, block_m: int) -> str:
    """The accumulator's fragment policy: the `mma` argument, else what Triton picks."""
    mma = e.arg("mma")
    if isinstance(mma, ir.Symbol):
        return mma.name
    policy = mma_policy(it.sh.target, it.num_warps, block_m)
    return policy if policy in ("wgmma", "mma_v2") else "blocked"


def dot(it, e: ir.Call) -> Val:
    """Check the contraction, then build the result: constant names stay tags, names
    varying with the lane become coverage, and `acc` is added."""
    # the operands' own finished reductions are data to this new one
    a, b = drop_final(it.val(e.arg("a"))), drop_final(it.val(e.arg("b")))
    acc_e = e.arg("acc")
    acc = None if acc_e is None or (isinstance(acc_e, ir.Const) and acc_e.value is None) \
        else it.val(acc_e)
    line, layout = e.loc.line, policy(it, e, a.shape[0])
    shape = (a.shape[0], b.shape[1])
    inv = "pipeline" if _prefetched(it, e, a, b) else "contraction"
    ta, tb = tagged(a), tagged(b)
    it.checked("dot", line, inv)
    if it.wants(inv, line):
        _check_operands(it, e, inv, a, b, ta, tb, Val(shape, layout=layout))
    product = _contract(a, b, ta, tb)
    product.layout = layout
    for rule in it.sh.pack.concrete_dot if it.sh.pack is not None else ():
        rule(it, line, product)
    out = product
    if acc is not None:
        acc = acc.moved(layout=layout)
        check_added(it, "dot", line, acc, product, Val(shape, layout=layout))
        tags = merge_tags(it, "dot", line, [acc, product])
        cov = {n: cov_sum([v.cov[n] for v in (acc, product) if n in v.cov], shape)
               for n in {**acc.cov, **product.cov}}
        sets = {n: cov_union([v.cset[n] for v in (acc, product) if n in v.cset], shape)
                for n in {**acc.cset, **product.cset}}
        out = Val(shape, None, tags, cov, sets, layout)
    out.ff = floats.contracted(floats.of(a), floats.of(b), shape, a.shape[-1],
                               None if acc is None else floats.of(acc, shape))
    junk = _junk(a, b)
    if acc is not None and acc.junk is not None:
        junk = junk | np.broadcast_to(acc.junk, shape)
    out.junk = junk if junk.any() else None
    _probe(it, line, a, b, acc, product, out)
    return out


def _junk(a: Val, b: Val) -> np.ndarray:
    """Output elements a lane of no data adds to (`floats`): a lane where a contracted
    name is missing on either side and neither operand is zero, or an operand's own junk
    times a nonzero element of the other. A zero makes the product zero only against a
    value within the bound (0 * inf is NaN): where an operand doubts, lanes are read per
    output element."""
    fa, fb = floats.of(a), floats.of(b)
    da, db = fa.maylow | fa.mayhigh, fb.maylow | fb.mayhigh
    if da.any() or db.any():
        return _junk3(a, b, fa, fb, da, db)
    nza, nzb = ~fa.zero, ~fb.zero
    out = np.zeros((a.shape[0], b.shape[1]), dtype=bool)
    for name in [n for n in a.tags if n in b.tags]:
        ha, hb = a.tags[name].has, b.tags[name].has
        if not (varies(a.tags[name].val, 1) or varies(b.tags[name].val, 0)):
            continue
        out |= ((nza & ~ha).astype(F32) @ nzb.astype(F32)) > 0
        out |= (nza.astype(F32) @ (nzb & ~hb).astype(F32)) > 0
    if a.junk is not None:
        out |= (np.asarray(a.junk, dtype=F32) @ nzb.astype(F32)) > 0
    if b.junk is not None:
        out |= (nza.astype(F32) @ np.asarray(b.junk, dtype=F32)) > 0
    return out


def _junk3(a: Val, b: Val, fa, fb, da, db) -> np.ndarray:
    """`_junk` per (row, lane, column), where an operand doubts."""
    nza = (~fa.zero)[:, :, None] | db[None, :, :]
    nzb = (~fb.zero)[None, :, :] | da[:, :, None]
    out = np.zeros((a.shape[0], b.shape[1]), dtype=bool)
    for name in [n for n in a.tags if n in b.tags]:
        ha, hb = a.tags[name].has, b.tags[name].has
        if not (varies(a.tags[name].val, 1) or varies(b.tags[name].val, 0)):
            continue
        miss = ~np.asarray(ha, dtype=bool)[:, :, None] | ~np.asarray(hb, dtype=bool)[None, :, :]
        out |= (nza & nzb & miss).any(axis=1)
    if a.junk is not None:
        out |= (np.asarray(a.junk, dtype=bool)[:, :, None] & nzb).any(axis=1)
    if b.junk is not None:
        out |= (nza & np.asarray(b.junk, dtype=bool)[None, :, :]).any(axis=1)
    return out


def _prefetched(it, e: ir.Call, a: Val, b: Val) -> bool:
    """Whether an operand is loop-carried (SEMANTICS.md, "dot": a hand-pipelined prefetch):
    it holds the value a loop-carried name had when the iteration began (also through an
    alias, `a_tile = a_next`), or its expression reads a name the enclosing loops carry
    (a prefetch buffer consumed in the iteration that refills it)."""
    if a.carried or b.carried:
        return True
    carried = frozenset().union(*it.loops)
    return any(isinstance(n, ir.Name) and n.id in carried
               for side in ("a", "b") for n in walk(e.arg(side)))


def _probe(it, line: int, a: Val, b: Val, acc: Val | None, product: Val,
           out: Val) -> None:
    v = it.probe_at("dot", line)
    if v is None:
        return
    i, j = v.element
    lane = int(v.other.get("lane", 0))
    it.capture({"lane": lane, "a": summary(a, (i, lane)), "b": summary(b, (lane, j)),
                "acc": None if acc is None else summary(acc, (i, j)),
                "product": summary(product, (i, j)), "result": summary(out, (i, j))})


def _check_operands(it, e: ir.Call, inv: str, a: Val, b: Val, ta: np.ndarray,
                    tb: np.ndarray, out: Val) -> None:
    """Every tag name both operands carry must agree on every contributing lane."""
    line = e.loc.line
    common = [n for n in a.tags if n in b.tags]
    if not common:
        el = first((ta.astype(F32) @ tb.astype(F32)) > 0)
        if el is not None:
            i, j = el
            lane = int(np.argmax(ta[i] & tb[:, j]))
            it.violate(inv, "dot", line, "dot: the operands share no tag name, so nothing "
                       "says that the elements it multiplies belong together", element=el,
                       tile=out, expected=summary(a, (i, lane))["tags"],
                       actual=summary(b, (lane, j))["tags"], other={"lane": lane})
        return
    for name in common:
        ta_n, tb_n = a.tags[name], b.tags[name]
        ha, hb = ta & ta_n.has, tb & tb_n.has
        bad = ha[:, :, None] & hb[None] & (ta_n.val[:, :, None] != tb_n.val[None])
        found = first(bad)
        if found is None:
            continue
        i, lane, j = found
        va, vb = int(ta_n.val[i, lane]), int(tb_n.val[lane, j])
        what = ("the loop-carried (prefetched) operand is not the slice consumed with it: "
                if inv == "pipeline" else "")
        it.violate(inv, "dot", line, f"dot: {what}lane {lane} multiplies a[{i}, {lane}] "
                   f"with {name}={va} by b[{lane}, {j}] with {name}={vb}", element=(i, j),
                   tile=out, expected={name: va}, actual={name: vb},
                   other={"lane": lane, "a_element": [i, lane], "b_element": [lane, j]})
        return


def _contract(a: Val, b: Val, ta: np.ndarray, tb: np.ndarray) -> Val:
    """The product's tags and coverage (without `acc`)."""
    shape = (a.shape[0], b.shape[1])
    fa, fb = ta.astype(F32), tb.astype(F32)
    tags, cov, sets = {}, {}, {}
    for name in dict.fromkeys([*a.tags, *b.tags]):
        at, bt = a.tags.get(name), b.tags.get(name)
        if (at is not None and varies(at.val, 1)) or (bt is not None and varies(bt.val, 0)):
            c = _contracted(at, bt, ta, tb, fb)
            if c is not None:
                cov[name] = c
        else:
            tags[name] = _kept(at, bt, fa, fb, shape)
    for side, own in (("a", a), ("b", b)):
        for kind, out in (("cov", cov), ("cset", sets)):
            for name, c in getattr(own, kind).items():
                part = _lane_sum(c, side, ta, tb, fa, fb)
                out[name] = cov_sum([part] + ([out[name]] if name in out else []), shape)
    sets = {n: cov_union([c], shape) for n, c in sets.items()}
    return Val(shape, None, tags, cov, sets)


def _kept(at: Tag | None, bt: Tag | None, fa, fb, shape) -> Tag:
    """A name constant along the lanes: its value at any lane, where some lane carries it."""
    parts = []
    if at is not None:
        parts.append(Tag(np.broadcast_to(at.val[:, :1], shape), ((fa * at.has) @ fb) > 0))
    if bt is not None:
        parts.append(Tag(np.broadcast_to(bt.val[:1, :], shape), (fa @ (fb * bt.has)) > 0))
    if len(parts) == 1:
        return parts[0]
    pa, pb = parts
    return Tag(np.where(pa.has, pa.val, pb.val), pa.has | pb.has)


def _contracted(at: Tag | None, bt: Tag | None, ta, tb, fb) -> Cov | None:
    """Counts of a contracted name's values over the contributing lanes: `a`'s value where
    `a` carries the name, else `b`'s. A name both operands carry is counted only at lanes
    where both carry it (a masked-off score that picked up its row's maximum carries data,
    but no key)."""
    if at is not None and bt is not None:
        tb = tb & bt.has
        ta = ta & at.has
        fb = tb.astype(F32)
    no = np.zeros_like(ta)
    wa = ta & at.has if at is not None else no                # a gives the value
    ma = ta & ~at.has if at is not None else ta               # a tagged, without the name
    wb = tb & bt.has if bt is not None else np.zeros_like(tb)  # b gives it there
    use_b = bool(ma.any() and wb.any())
    if not use_b and at is not None and not varies(at.val, 0):
        fast = _per_lane(at.val[0], wa, tb)
        if fast is not None:
            return fast
    bounds = []
    if wa.any():
        bounds += [int(at.val[wa].min()), int(at.val[wa].max())]
    if use_b:
        bounds += [int(bt.val[wb].min()), int(bt.val[wb].max())]
    if not bounds:
        return None
    lo, n = min(bounds), max(bounds) + 1 - min(bounds)
    counts = np.zeros((ta.shape[0], tb.shape[1], n), dtype=F32)
    if wa.any():
        counts += np.matmul(fb.T[None], onehot(at.val, wa, lo, n))   # per row i: (j, l) @ (l, r)
    if use_b:
        counts += np.tensordot(ma.astype(F32), onehot(bt.val, wb, lo, n), axes=([1], [0]))
    return Cov(lo, np.rint(counts).astype(np.int32))


def _per_lane(vals: np.ndarray, wa: np.ndarray, tb: np.ndarray) -> Cov | None:
    """The common case (a matrix product's K): the value depends on the lane alone and differs between
    lanes, so each lane owns one count slot and no summing is needed."""
    lanes = wa.any(axis=0) & tb.any(axis=1)
    used = vals[lanes]
    if used.size == 0 or np.unique(used).size != used.size:
        return None
    lo = int(used.min())
    counts = np.zeros((wa.shape[0], tb.shape[1], int(used.max()) + 1 - lo), dtype=np.int32)
    counts[:, :, used - lo] = wa[:, lanes][:, None, :] & tb[lanes, :].T[None, :, :]
    return Cov(lo, counts)


def _lane_sum(c: Cov, side: str, ta, tb, fa, fb) -> Cov:
    """An operand's own coverage summed over the contributing lanes."""
    if side == "a":
        part = np.matmul(fb.T[None], (c.counts * ta[..., None]).astype(F32))
    else:
        part = np.tensordot(fa, c.counts * tb[..., None], axes=([1], [0]))
    return Cov(c.lo, np.rint(part).astype(np.int32))
