"""The fused combine, proven: rows of the sorted layout added into the output through the
routing map, every (token, slot) pair's row once at every column.

A write of a value tagged with sorted position p (tag P) into the output, which has no P
dim, is a routed write: the relations at the write (`invariants.on_write`) already prove
that the row of p goes to the token of its pair `sid(p)` and carries that pair's top-k
weight. What is left are the output's whole-program obligations, settled here for the
core (`InvariantPack.outputs`):

- exactly once: no (sorted position, column) point is added by two program instances (or
  two elements, or two statements). Since `sid` is injective on pairs, two contributions
  to one output element with one slot would be one position added twice: so each slot is
  added at most once to each element (`whole.exactly_once_map` over the write's points
  (p, column), a two-instance query, aligned tiles first);
- complete: every point (p, column) whose position holds a pair is added by a live
  element (`whole.every_point_written`: counting over the tile map without the branch
  `if e >= 0`, then no instance drops a pair's row by its branch or mask). Every pair has
  a position (the postconditions), so every output element receives each of its token's
  TOPK slots, and has a writer.

A refutation names the output element that ends wrong: a slot added twice (**coverage**,
with both instances), a slot never added (**coverage**; also **bijection** when no row at
all reaches that column), each with a model the routing realises (the checker's
`solve_real` with the pack's `exclude`).
"""

from __future__ import annotations

from dataclasses import replace

from .postconditions import fns, spec

try:
    import z3

    from argus_env.check.symbolic.values import AXES, axis_ranges, evaluate
    from argus_env.check.symbolic.whole import every_point_written, exactly_once_map, guards
except ImportError:  # pragma: no cover - a machine that only measures
    z3 = None


def settle(ck, tensor: str, ws: list) -> frozenset:
    """The pack's `outputs` hook: for the output written with routed rows only, prove
    its bijection and (for atomic adds) its coverage of TOPK; returns what it settled."""
    r = spec(ck)
    dims = ck.kernel.param(tensor).dims
    if tensor != r.output or r.pos in dims:
        return frozenset()
    routed = [w for w in ws if r.pos in w.value.tags]
    if not routed or len(routed) < len(ws):
        return frozenset()
    keep = [i for i, d in enumerate(dims) if d not in (r.token, r.slot)]
    extents = [r.rows] + [ck.sizes[dims[i]] for i in keep]
    points = [replace(w, coords=[ck.fix_lanes(w.value.tags[r.pos][1])] +
                      [w.coords[i] for i in keep], tensor=f"{tensor}@{r.pos}") for w in routed]
    atomic = all(w.atomic for w in routed)
    if atomic:
        _once(ck, tensor, points)
    _complete(ck, tensor, points, extents)
    return frozenset({"written", r.slot} if atomic else {"written"})


def _pair(ck, model, p, view=lambda e: e):
    """(position, pair, token, slot) of sorted position term p in a model."""
    r, f = spec(ck), fns(ck)
    q = f.sid(view(p))
    return (evaluate(model, view(p)), evaluate(model, q), evaluate(model, q / r.topk),
            evaluate(model, q % r.topk))


def _programs(ck, model, view) -> list:
    """The program ids of one copy of the instance variables in a model (a grid-stride
    loop's program id from its linear index)."""
    out = [evaluate(model, view(p)) for p in ck.pids]
    for pid, _, v, step, _ in ck.linear:
        lin = evaluate(model, view(v))
        i = next(j for j, x in enumerate(ck.pids) if x.eq(pid))
        if lin is not None and str(view(pid)) not in {str(d) for d in model.decls()}:
            out[i] = lin % step
    return out


def _once(ck, tensor: str, points: list) -> None:
    """No (position, column) point added twice: else a slot of an element twice."""
    r = spec(ck)
    for i, w in enumerate(points):
        for w2 in points[i:]:
            ck.stmt = w.stmt
            found = exactly_once_map(ck, w, None if w2 is w else w2)
            if found is None:
                ck.proven(f"{w.stmt.value.fn} {tensor}: each pair's row added once at each "
                          f"column ({r.slot} exactly once)")
                continue
            m, v1, v2 = found
            p, q, t, k = _pair(ck, m, w.coords[0], v1)
            d = evaluate(m, v1(w.coords[1])) if len(w.coords) > 1 else None
            first, second = _programs(ck, m, v1), _programs(ck, m, v2)
            other = {"program_id": second, "line": w2.stmt.loc.line,
                     "element": [evaluate(m, v2(x)) for x in _axes(w2)],
                     "names": {n: evaluate(m, v2(e)) for n, e in w2.names.items()}}
            ck.violate("coverage", w.stmt.value.fn, f"`{tensor}[{t}, {d}]` adds slot {k} "
                       f"twice: the row of sorted position {p} (pair {q}) is added by program "
                       f"{tuple(first)} and again by program {tuple(second)}", m, w.shape,
                       expected={f"times {r.slot}={k}": 1}, actual={f"times {r.slot}={k}": 2},
                       view=v1, tensor=tensor, coords=(t, d), other=other, scope=w.names)


def _axes(w) -> list:
    return list(AXES[:len(w.shape)])


def _complete(ck, tensor: str, points: list, extents: list) -> None:
    """Every position holding a pair is added at every column by a live element."""
    r, f = spec(ck), fns(ck)

    def real(ys):
        return z3.And(ys[0] >= 0, ys[0] < r.rows, f.sid(ys[0]) != r.pad)
    ck.stmt = points[0].stmt
    verdict, m, where = every_point_written(ck, points, extents, real)
    op = points[0].stmt.value.fn
    if verdict == "proven":
        ck.proven(f"{op} {tensor}: every pair's row added at every column ({r.slot} "
                  "complete, every element written)")
        return
    if verdict == "undecided":
        return
    if verdict == "missing":
        p, q, t, k = _pair(ck, m, where[0])
        d = evaluate(m, where[1]) if len(where) > 1 else None
        before = len(ck.report.violations)
        ck.violate("coverage", op, f"`{tensor}[{t}, {d}]` never receives slot {k}: no program "
                   f"instance reaches the row of sorted position {p} (pair {q}) at column {d}",
                   m, (), expected={r.slot: f"[0, {r.topk})"}, actual={f"missing {r.slot}": k},
                   tensor=tensor, coords=(t, d))
        if len(ck.report.violations) > before:  # no instance writes it: none to name
            v = ck.report.violations[-1]
            v.program_id, v.names = (), {}
        return
    w = where
    ck.stmt = w.stmt
    p, q, t, k = _pair(ck, m, w.coords[0])
    d = evaluate(m, w.coords[1]) if len(w.coords) > 1 else None
    skipped = [g for g in guards(w) if evaluate(m, g) is False]
    how = "a branch around the write is not taken there" if skipped else \
        "the write's mask drops it"
    ck.violate("coverage", op, f"`{tensor}[{t}, {d}]` never receives slot {k}: this instance "
               f"reaches the row of sorted position {p} (pair {q}) at column {d}, but {how}",
               m, w.shape, expected={r.slot: f"[0, {r.topk})"}, actual={f"missing {r.slot}": k},
               tensor=tensor, coords=(t, d), scope=w.names)
    if d is not None:
        _column(ck, tensor, points, d, t)


def _column(ck, tensor: str, points: list, d: int, t: int) -> None:
    """bijection when no pair's row reaches column d at all (the element has no writer)."""
    r, f = spec(ck), fns(ck)
    for w in points:
        p = w.coords[0]
        if ck.solve(w.path + axis_ranges(w.shape) +
                    [w.live, w.coords[1] == d, p >= 0, p < r.rows, f.sid(p) != r.pad],
                    decide=True) is not None:
            return
    ck.violate("bijection", points[0].stmt.value.fn, f"no program instance writes column {d} "
               f"of `{tensor}`: `{tensor}[{t}, {d}]` (and every token's element there) has no "
               "writer", None, (), tensor=tensor, coords=(t, d),
               expected={"writes": ">= 1"}, actual={"writes": 0})
