"""Tile maps worked out on integers: the tile origins a write's instances reach, and the
write nearest to an element no instance writes.

`origins` enumerates a block-form write's instances (program ids, then the iterations of
each enclosing loop, whose bounds are integers once the outer variables are) and evaluates
its tile origin at each: where the counting proof of `whole._count_tiles` cannot count
the instances (a grid-stride loop whose stride is not the grid, say), the set of origins
decides "every tile written" without a quantified query. It gives up (None) past `limit`
instances or on a value it cannot evaluate (data read from memory).

`nearest` names, for an element nobody writes, the instance and tile element of a write
closest to it (least L1 distance between coordinates): a counterexample of the bijection
invariant then shows where the tile map went, not only what it missed.
"""

from __future__ import annotations

import itertools
import math

import z3

from ..isolated import back
from .values import axis_ranges, evaluate

#: most instances `origins` enumerates
LIMIT = 4096


def _int(e, pairs) -> int | None:
    v = z3.simplify(z3.substitute(e, *pairs)) if pairs else z3.simplify(e)
    return v.as_long() if z3.is_int_value(v) else None


def _true(e, pairs) -> bool | None:
    v = z3.simplify(z3.substitute(e, *pairs)) if pairs else z3.simplify(e)
    return True if z3.is_true(v) else False if z3.is_false(v) else None


def instances(ck, w, limit: int = LIMIT):
    """Substitutions naming each instance of write `w` (program ids and loop iterations,
    with a grid-stride loop's linear index), or None when they cannot be enumerated."""
    if None in ck.grid or math.prod(max(n, 1) for n in ck.grid) > limit:
        return None
    out = [[]]
    for p, n in zip(ck.pids, ck.grid):
        out = [pairs + [(p, z3.IntVal(i))] for pairs in out for i in range(max(n, 1))]
    for f in w.frames:
        if f.kind != "loop":
            continue
        grown = []
        for pairs in out:
            start, stop, step = (_int(x, pairs) for x in (f.start, f.stop, f.step))
            if None in (start, stop, step) or step <= 0:
                return None
            trips = max(0, -(-(stop - start) // step))
            if len(grown) + trips > limit:
                return None
            for t in range(trips):
                extra = [(f.var, z3.IntVal(t))]
                if f.value is not None and z3.is_const(f.value) and not f.value.eq(f.var):
                    extra.append((f.value, z3.IntVal(start + t * step)))  # linear index
                grown.append(pairs + extra)
            if len(grown) > limit:
                return None
        out = grown
    return out


def _judged(ck, w, limit: int) -> list | None:
    """`instances` of write `w`, each with its path constraints evaluated on integers
    (True, False, or None where one does not reduce: a constraint on tile elements);
    cached on the write."""
    memo = getattr(w, "_judged", None)
    if memo is not None and memo[0] >= limit:
        return memo[1] if memo[1] is None or len(memo[1]) <= limit else None
    insts = instances(ck, w, limit)
    judged = None if insts is None else [(pairs, [_true(c, pairs) for c in w.path])
                                         for pairs in insts]
    w._judged = (limit, judged)
    return judged


def live_instances(ck, w, limit: int = LIMIT) -> list | None:
    """`instances` of write `w` less those its path excludes on integers (a constraint
    that does not reduce to true or false, one on tile elements say, keeps the instance)."""
    judged = _judged(ck, w, limit)
    if judged is None:
        return None
    return [pairs for pairs, on in judged if False not in on]


def origin_at(bases, pairs) -> tuple | None:
    """A tile origin's integers at one instance (`pairs`), or None where not integers."""
    o = tuple(_int(b, pairs) for b in bases)
    return None if None in o else o


def origins(ck, w, bases, limit: int = LIMIT) -> set[tuple] | None:
    """The tile origins the instances of block-form write `w` reach where its path holds,
    or None when that cannot be worked out on integers."""
    judged = _judged(ck, w, limit)
    if judged is None:
        return None
    reached = set()
    for pairs, on in judged:
        if None in on:
            return None
        if not all(on):
            continue
        o = tuple(_int(b, pairs) for b in bases)
        if None in o:
            return None
        reached.add(o)
    return reached


def missing_origin(sizes, blocks, reached: set[tuple]) -> tuple | None:
    """The first tile origin of a tensor of `sizes` in tiles of `blocks` not in `reached`."""
    for o in itertools.product(*[range(0, n, b) for n, b in zip(sizes, blocks)]):
        if o not in reached:
            return o
    return None


def nearest(ck, ws, y) -> tuple | None:
    """(model, write) of the element written closest to `y` (L1 distance of coordinates),
    or None when no write has a live element or the query is undecided.

    The least distance is found by bisection on one incremental solver (a live element
    first, then `distance <= d` for halving d): z3's optimiser took up to hundreds of
    milliseconds on these small problems. Every model is a live element of the write;
    where a bound is left undecided the closest one found so far is named."""
    best = None
    for w in ws:
        cons = list(w.path) + axis_ranges(w.shape) + [w.live]
        names = frozenset().union(*[ck._var_names([c]) for c in cons + list(w.coords)])
        dist = sum(z3.If(c >= v, c - v, v - c) for c, v in zip(w.coords, y))
        # in the check's own z3 context, as every query of the check (`isolated`)
        s = ck.scope.solver(simple=True)
        s.add(ck.scope.into([*cons, *ck._links(names)]))
        dist = dist.translate(ck.scope.ctx) if isinstance(dist, z3.ExprRef) else dist
        m = _check(ck, s)
        if m is None:
            continue
        d, lo = evaluate(m, dist), 0
        while d is not None and lo < d:
            mid = (lo + d) // 2
            s.push()
            s.add(dist <= mid)
            closer = _check(ck, s, keep_unknown=True)
            s.pop()
            if closer is False:  # undecided: keep the closest found
                break
            if closer is None:
                lo = mid + 1
            else:
                m, d = closer, evaluate(closer, dist)
        if d is not None and (best is None or d < best[0]):
            best = (d, m, w)
    return None if best is None else (back(best[1]), best[2])


def _check(ck, s, keep_unknown: bool = False):
    """The model of one query of `nearest` (counted), None when there is none; False when
    undecided and `keep_unknown`, else None then too."""
    s.set("timeout", ck.query_timeout_ms())
    ck.report.queries += 1
    r = s.check()
    if r == z3.sat:
        return s.model()
    if r == z3.unknown and ("interrupted" in s.reason_unknown() or
                            "canceled" in s.reason_unknown()):
        raise KeyboardInterrupt(f"invariant check interrupted ({s.reason_unknown()})")
    return False if r == z3.unknown and keep_unknown else None


__all__ = ["LIMIT", "instances", "live_instances", "origin_at", "missing_origin", "nearest", "origins"]
