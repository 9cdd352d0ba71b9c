"""Runtime loops in the symbolic checker.

A loop `for v in A.range(start, stop, step)` gets an iteration counter `t` (a z3
variable, `t >= 0` and `start + t*step < stop`), and its body is interpreted once for a
symbolic `t`: one pass proves the body for every iteration at once.

Values carried around the loop need their value at iteration `t`. A first, quiet pass
runs the body with a placeholder for each carried name and classifies what comes out:

- accumulator: the body feeds the old value into the new one (`acc = A.dot(x, y, acc)`,
  `acc = acc * alpha + p`): its tags must not change between iterations, and its coverage
  after the loop is the union of the body's contributions over all iterations (inside the
  body an accumulator's entry coverage is left empty, so the body computes exactly one
  iteration's contribution);
- induction variable: `v = v + c` with `c` independent of `v`: `v0 + t*c`;
- carried value: the new value does not read the old one (a prefetched tile): at `t` it
  is the body's value from `t - 1`, or the initial value at `t = 0`;
- anything else is forgotten (an unknown value without tags).

The second pass interprets the body for real with those entry values.
"""

from __future__ import annotations

from dataclasses import replace

import z3

from ...ir.rewrite import assigned as _assigned
from ...ir import nodes as ir
from ...ir.printer import print_expr
from ..pack import INTERNAL, JUNK, SUMS
from ..report import CheckUnsupported
from . import floats
from .rules import _bits, _refutable, no_wrap
from .solver import const_value, interval
from .state import Frame
from .values import (SV, And, Cov, Not, Or, add, axis_ranges, depends_on, ge, is_int, lt, merge,
                     mul, ne, sub, substitution)

MARK = "\x00entry"  # placeholder tag: present in a result that read the carried value


def run_loop(ck, s: ir.For) -> None:
    bounds = _bounds(ck, s.iter)
    start, stop, step = (b.val for b in bounds)
    if s.iter.fn != "static_range":
        _runs_as_modelled(ck, s, *bounds)
    t = ck.vars.fresh(f"t_{s.var}", "iter", 0, _max_trips(ck, start, stop, step))

    def valid(tt):
        return And(ge(tt, 0), lt(add(start, mul(tt, step)), stop))

    linear = _grid_stride(ck, start, stop, step, t, valid)
    cons = [valid(t)] if linear is None else [linear >= 0, linear < stop]
    def at(e):
        """Substitution pairs moving the body's formulas to iteration e."""
        pairs = [(t, e)]
        if linear is not None:
            pairs.append((linear, start + e * step))
        return pairs
    frame = Frame("loop", cons, t, s.var, start, stop, step,
                  value=linear if linear is not None else start + t * step, at=at)
    body_names = _assigned(s.body)
    carried = [n for n in sorted(body_names) if n in ck.env]
    init = {n: ck.env[n] for n in carried}
    before = dict(ck.env)

    # the classifying pass is needed only when something is carried around the loop
    holders = {n: _placeholder(ck, n, init[n]) for n in carried}
    out1 = _pass(ck, s, frame, {n: h for n, (h, _) in holders.items()},
                 quiet=True) if carried else {}
    kinds = {n: _classify(out1[n], init[n]) for n in carried}
    entry = {}
    for n in carried:
        kind, extra = kinds[n]
        entry[n] = _entry(ck, kind, extra, init[n], out1[n], t, at, valid, merge)
        if kind == "acc":  # what it holds of floats at iteration t (`floats.loop_entry`)
            holder, first = holders[n]
            floats.with_facts(entry[n], floats.loop_entry(init[n], out1[n], holder, first,
                                                          t, at))
    out2 = _pass(ck, s, frame, entry, quiet=False)
    if not ck.quiet:
        for n in carried:
            if kinds[n][0] == "acc":
                _tags_invariant(ck, n, out2[n], at, valid)

    # after the loop: the number of iterations run, and the exit values
    count = _count(ck, s, start, stop, step, valid)
    ck.env = {k: v for k, v in before.items()}
    for n in carried:
        kind, extra = kinds[n]
        ck.env[n] = _exit(ck, kind, extra, init[n], out2[n], t, at, count, valid, merge)


def _runs_as_modelled(ck, s: ir.For, start: SV, stop: SV, step: SV) -> None:
    """The loop the GPU runs is the one modelled: where it is entered (start < stop), the
    step is at least 1 (a step of 0 never ends, and the model's iteration count would
    then be a contradiction, under which everything after the loop is vacuously true),
    and its counter, incremented past the last iteration, does not wrap (`stop - 1 +
    step` inside its width: else the loop goes on from a negative value). Otherwise the
    program is refused (`CheckUnsupported`)."""
    what = print_expr(s.iter)
    b = interval(step.val, ck.vars)
    if b is None or b[0] < 1:
        cond = z3.And(start.val < stop.val, step.val < 1)
        if _refutable(ck, cond, (), f"step of `{what}`", start.val, stop.val, step.val) \
                is not None:
            raise CheckUnsupported(f"`{what}` has a step below 1 where it runs at these "
                                   "sizes: the loop would not end", ck._line())
    if not (stop.ctime and step.ctime):
        no_wrap(ck, stop.val - 1 + step.val, (), _bits(stop, step),
                f"{what} (its last increment)")


def _grid_stride(ck, start, stop, step, t, valid):
    """For `A.range(A.program_id(a), stop, A.num_programs(a))` (a persistent grid), the
    pair (program id, iteration) is one linear index v = pid + t*step in [0, stop).
    The body sees the loop variable as that v, constrained only by 0 <= v < stop: the
    pairs (pid, t) map one-to-one onto those v, so distinct instances are distinct v and
    a formula that never mentions pid or t needs nothing else. The link v = pid + t*step
    is added to a query only when it mentions pid or t (`Checker.solve`). This keeps the
    solver's work on persistent tile maps as small as on a plain grid."""
    s = const_value(step)
    # the index's range, 0 <= v < stop, is stated on the loop's path; as the variable's
    # range it also bounds the terms built from it (`solver.interval`): a swizzle's
    # group size min(tiles_m - first_m, GROUP_M) divides as the constants it can be,
    # not as a term (nonlinear, and slower the larger the sizes)
    hi = interval(stop, ck.vars)
    hi = max(hi[1], 1) if hi is not None else None
    for axis, pid in enumerate(ck.pids):
        if not z3.simplify(start).eq(pid):
            continue
        if s is not None and s == ck.grid[axis] and s:
            v = ck.vars.fresh(f"linear", "iter", 0, hi)
            ck.linear.append((pid, t, v, s, [v == pid + t * s, valid(t)]))
            return v
        if s is None and ck.grid[axis] is None and \
                z3.simplify(step).eq(z3.simplify(ck.grid_terms[axis])):
            # the stride is the launch's extent, which depends on a size: the same pairing
            v = ck.vars.fresh(f"linear", "iter", 0, hi)
            ck.linear.append((pid, t, v, step, [v == pid + t * step, valid(t)]))
            return v
    return None


def _max_trips(ck, start, stop, step) -> int | None:
    """An upper bound on the iteration count from interval bounds, to keep the division
    expansion of `solver` applicable to expressions of the iteration counter."""
    a, b, c = interval(start, ck.vars), interval(stop, ck.vars), interval(step, ck.vars)
    if a is None or b is None or c is None or c[0] <= 0:
        return None
    return max(0, -(-(b[1] - a[0]) // c[0])) + 1


def _count(ck, s: ir.For, start, stop, step, valid):
    """The number of iterations: a closed form for a constant step, else a variable
    pinned down by a constraint on the enclosing path."""
    c = const_value(step)
    if c is not None and c > 0:
        return z3.If(stop > start, ck.div(stop - start + (c - 1), z3.IntVal(c)), 0)
    count = ck.vars.fresh(f"n_{s.var}", "iter", 0, None)
    exit_cons = Or(And(count == 0, Not(valid(0))),
                      And(count >= 1, valid(count - 1), Not(valid(count))))
    (ck.frames[-1].cons if ck.frames else ck.base).append(exit_cons)
    return count


def _bounds(ck, it: ir.Call) -> tuple[SV, SV, SV]:
    """The loop's start, stop and step, each an integer."""
    if it.fn == "static_range":
        return SV((), z3.IntVal(0), ctime=True), _int(ck, it.arg("n")), SV((), z3.IntVal(1), ctime=True)
    return tuple(_int(ck, it.arg(a)) for a in ("start", "stop", "step"))


def _int(ck, e: ir.Expr) -> SV:
    v = ck.expr(e)
    if v.val is None or not z3.is_int(v.val):
        raise NotImplementedError(f"check: `{print_expr(e)}` is not an integer")
    return v


def _pass(ck, s: ir.For, frame, entry: dict, quiet: bool) -> dict:
    saved = dict(ck.env)
    ck.quiet += quiet
    ck.env.update(entry)
    ck.env[s.var] = SV((), frame.value)
    inner = replace(frame, cons=list(frame.cons), carried=set(entry))
    ck.frames.append(inner)
    try:
        ck.block(s.body)
    finally:
        ck.frames.pop()
        ck.quiet -= quiet
    out = {n: ck.env[n] for n in entry}
    ck.env = saved
    ck.stmt = s
    return out


def _placeholder(ck, name: str, init: SV) -> tuple[SV, z3.BoolRef]:
    val = None
    if init.val is not None:
        val = z3.Bool(f"entry_{name}!{id(init)}") if z3.is_bool(init.val) else \
            ck.vars.fresh(f"entry_{name}", "point", None, None)
    # the initial value's tags stand in for the entry value's (a prefetched tile keeps its
    # kind of tags); its coverage does not, so an accumulator's contributions stay apart
    # (MARK is detected by its presence; its guard is False so it never makes data live)
    tags = {**init.tags, MARK: (z3.BoolVal(False), z3.IntVal(0))}
    facts, first = floats.placeholder_facts(init, f"{name}!{next(ck.vars.counter)}")
    return floats.with_facts(SV(init.shape, val, tags, {}, False, init.frag), facts), first


def _classify(out: SV, init: SV):
    if MARK in out.tags:
        return "acc", None
    if out.val is not None and init.val is not None and _mentions_entry(out.val):
        if is_int(out.val):
            diff = z3.simplify(out.val - _entry_var(out.val))
            if not _mentions_entry(diff):
                return "ind", diff
        return "havoc", None
    return "carry", None


def _mentions_entry(e) -> bool:
    return _entry_var(e) is not None


def _entry_var(e):
    todo = [e]
    while todo:
        x = todo.pop()
        if z3.is_const(x) and x.decl().name().startswith("entry_"):
            return x
        todo.extend(x.children())
    return None


def _strip(v: SV) -> SV:
    return replace(v, tags={n: g for n, g in v.tags.items() if n != MARK})


def _acc_cov(ck, out: SV, at, upto, valid) -> dict:
    """The body's contributions over iterations t' < upto, as coverage terms."""
    cov = {}
    for name, terms in out.cov.items():
        for term in terms:
            tp = ck.vars.fresh("tp", "iter", 0, None)
            to = substitution(at(tp))
            cov.setdefault(name, []).append(Cov(
                term.bound + (tp,), And(to(term.dom), valid(tp), lt(tp, upto)),
                to(term.idx), term.kind, tuple((v, to(e)) for v, e in term.defaults)))
    return cov


def _entry(ck, kind, extra, init: SV, out: SV, t, at, valid, merge) -> SV:
    if kind == "ind" and not depends_on(extra, t):
        return SV(init.shape, init.val + t * extra, init.tags, init.cov)
    if kind == "carry":
        shifted = out.map(substitution(at(sub(t, 1))))
        return replace(merge(t == 0, init, shifted), carried=True)
    if kind == "acc":
        # entry tags: the previous iteration's; entry coverage is left empty, so that the
        # body's result holds exactly this iteration's contribution (read at the exit)
        shifted = _strip(out).map(substitution(at(sub(t, 1))))
        v = merge(t == 0, init, replace(shifted, cov={}))
        # it holds the sums of the iterations before (and the initial value's), which the
        # order rules must see though the terms stay out of the body
        sums = dict.fromkeys(n for v_ in (out, init) for n, ts in v_.cov.items()
                             if n != JUNK and any(c.kind == "sum" for c in ts))  # in order
        tags = dict(v.tags)
        for n in sums:
            live = shifted.live()  # where the iteration before left data
            tags[SUMS + n] = (init.live() if n in init.cov else And(t >= 1, live),
                              z3.IntVal(0))
        return replace(v, tags=tags, cov={}, carried=False, frag=out.frag or init.frag)
    return _havoc(ck, init)


def _exit(ck, kind, extra, init: SV, out: SV, t, at, count, valid, merge) -> SV:
    if kind == "ind" and not depends_on(extra, t):
        return SV(init.shape, init.val + count * extra, init.tags, init.cov)
    if kind == "carry":
        last = out.map(substitution(at(sub(count, 1))))
        return merge(count == 0, init, last)
    if kind == "acc":
        last = _strip(out).map(substitution(at(sub(count, 1))))
        v = merge(count == 0, init, replace(last, cov={}))
        v.cov = {n: list(ts) for n, ts in init.cov.items()}
        for n, terms in _acc_cov(ck, out, at, count, valid).items():
            v.cov.setdefault(n, []).extend(terms)
        return replace(v, frag=out.frag or init.frag)
    return _havoc(ck, init)


def _havoc(ck, init: SV) -> SV:
    val = None
    if init.val is not None and is_int(init.val):
        val = ck.vars.fresh("unknown", "point", None, None)
    return floats.with_facts(SV(init.shape, val), floats.unknown())


def _tags_invariant(ck, name: str, out: SV, at, valid) -> None:
    """An accumulator's tags (its row and column, say) are the same in every iteration."""
    t1 = ck.vars.fresh("t1", "iter", 0, None)
    t2 = ck.vars.fresh("t2", "iter", 0, None)
    at1, at2 = substitution(at(t1)), substitution(at(t2))
    for tag, (g, v) in _strip(out).tags.items():
        if tag.startswith(INTERNAL):  # a pack's own tags (versions of running maxima)
            continue
        v1, v2 = at1(v), at2(v)
        if v1.eq(v2):  # the same in every iteration: `v1 != v2` is false, no query
            continue
        g1, g2 = at1(g), at2(g)
        model = ck.find(And(valid(t1), valid(t2), g1, g2, ne(v1, v2)), out.shape)
        if model is not None:
            ck.violate("tag_conflict", "accumulate", f"accumulator `{name}` receives tag "
                       f"{tag} of different positions in different iterations", model,
                       out.shape, expected={tag: v1}, actual={tag: v2}, frag=out.frag)


__all__ = ["run_loop", "axis_ranges"]
