"""Whole-program checks over the recorded writes.

- exactly_once: no element is written by two program instances (or two iterations, or
  two elements of one tile) unless every write is an atomic add;
- bijection: every element of an output tensor is written. Proven without enumerating
  the tensor: the writes are tiles `base + axis` (block form), the tile origins are
  aligned and in range, the map from program instances to origins is injective, the
  masks keep every in-bounds element, and there are as many instances as tiles (for all
  sizes at once, `_counted_for_all`: the counts as terms of the sizes);
- coverage at stores: the task's required coverage (a matrix product: every element of `c` sums
  K over [0, K) exactly once), combined over the atomic contributions of all writers
  (the proof itself is `coverage.exactly_once`).

A task's pack may settle an output's bijection or store coverage itself
(`InvariantPack.outputs`: rows scattered through a host routing map, whose completeness
rests on the host step's postconditions); it proves them with the helpers at the end of
this module: `exactly_once_map` (no point of a write's own coordinates, e.g. its sorted
row, twice) and `every_point_written` (every point a predicate requires has a live writer:
a counting proof over the tile map without the write's branch conditions, else one
quantified query, then one query for a required point whose writer's branch or mask drops
it).
"""

from __future__ import annotations

import ast
import itertools
import math
from dataclasses import replace

import z3

from . import tiles
from .coverage import affine_index, exactly_once
from .solver import affine, const_value, interval, linear
from .values import (AXES, And, Cov, Not, Or, _app_arg, _app_decl, _ast_id, _ast_kind,
                     _decl_kind, _num_args, axis_ranges, depends_on, evaluate, free_names,
                     mod, ne, unique)


# ---------------------------------------------------------------- writes
def check_writes(ck) -> None:
    # an element no instance writes holds a wrong value, while one written twice with data
    # of its own position (ownership is proven first) holds a right one: the bijection
    # comes first, so that a report's first counterexample names an element that is wrong
    outputs = ck.program.info.outputs
    settle = ck.pack.outputs if ck.pack is not None else None
    settled = {}
    for tensor in outputs:
        ws = [w for w in ck.writes if w.tensor == tensor]
        settled[tensor] = frozenset(settle(ck, tensor, ws)) if ws and settle is not None \
            else frozenset()
        if ws and "written" not in settled[tensor]:
            _bijection(ck, tensor, ws)
    for w in ck.writes:
        if not w.atomic:
            for w2 in ck.writes:
                if w2.tensor == w.tensor:
                    _exactly_once_write(ck, w, w2)
    cov = ck.task.store_coverage_for(ck.kernel.consts) if ck.task is not None else {}
    for tensor, required in (cov or {}).items():
        ws = [w for w in ck.writes if w.tensor == tensor]
        dims = ck.kernel.param(tensor).dims
        for w in ws:
            where = dict(zip(dims, w.coords))
            for name, (lo_s, hi_s) in required.items():
                if name in settled.get(tensor, ()):
                    continue
                _store_coverage(ck, w, ws, name, _size_expr(lo_s, ck.size_terms, where),
                                _size_expr(hi_s, ck.size_terms, where))


def _differ(ck, w, c1, c2) -> z3.BoolRef:
    """Two copies of write `w`'s instance are different instances: some program id or
    loop iteration differs (for a grid-stride loop, its linear index v = pid + t*step)."""
    parts = [c1(v) != c2(v) for v in _differ_vars(ck, w)]
    return Or(*parts) if parts else z3.BoolVal(False)


def _differ_vars(ck, w) -> list:
    """The variables `_differ` compares: the program ids and loop iterations of `w`'s
    instance, a grid-stride loop's linear index for its program id and iteration."""
    inst = list(ck.pids) + _instance_vars(w)
    out = []
    for pid, t, v, _, _ in ck.linear:
        if any(t.eq(x) for x in inst):
            out.append(v)
            inst = [x for x in inst if not (x.eq(t) or x.eq(pid))]
    return out + inst


#: the kinds of variables a two-instance query copies (`Vars.copier`)
_COPIED = ("pid", "iter", "lane", "point")


def _pinned(ck, bases, vs, kinds=_COPIED) -> bool:
    """Whether two instances with equal tile origins `bases` agree on every variable of
    `vs`, read off the origins' syntax (`solver.linear`, no query): each of `vs` is, with a
    nonzero coefficient, the one variable a two-instance query copies in some origin
    (`k * u + r`, r free of them; `kinds`, those the query copies), so equal origins give
    equal `u`. Exact where it says so (the query asking for two such instances that
    differ is unsatisfiable); False where the origins do not show it (then the query
    decides)."""
    copied = [n for n, v in ck.vars.vars.items() if v.kind in kinds]
    pinned = set()
    for b in bases:
        if not isinstance(b, z3.ExprRef):
            continue
        form = linear(b, copied)
        if form is not None and len(form) == 1:
            pinned.update(form)
    return all(v.decl().name() in pinned for v in vs)


def _instance_vars(w) -> list:
    return [f.var for f in w.frames if f.kind == "loop"]


def block_form(ck, w):
    """(bases, blocks) when every coordinate of write `w` is `base + X_a` for its own tile
    axis a with an aligned base (`base % extent == 0`), else None. Cached on the write."""
    if getattr(w, "_block", False) is not False:
        return w._block
    rng = axis_ranges(w.shape)
    bases, blocks, axes = [], [], []
    for c in w.coords:
        found = None
        if not any(_mentions(c, AXES[i]) for i in range(len(w.shape))):
            found = (c, 1, None)  # a scalar index: a block of one along this dim
        for a in range(len(w.shape) if found is None else 0):
            if a in axes:
                continue
            if _through_data(c, AXES[a]):
                # the axis reaches the index only through loaded data (a scatter's row
                # `sorted_ids[p] // TOPK`): no proof rests on it being a tile axis there,
                # and asking costs a hard satisfiable query; the write is taken as no
                # block form (the proofs that need none are exact too)
                continue
            base = z3.substitute(c, (AXES[a], z3.IntVal(0)))
            if not any(_mentions(base, AXES[i]) for i in range(len(w.shape))) and \
                    ck.solve(w.path + rng + [c != base + AXES[a]], decide=True) is None:
                found = (base, w.shape[a], a)
                break
        if found is None:
            w._block = None
            return None
        bases.append(found[0])
        blocks.append(found[1])
        axes.append(found[2])
    misaligned = Or(*[ne(mod(b, n), 0) for b, n in zip(bases, blocks)])
    w._block = None if ck.solve(w.path + [misaligned], decide=True) is not None \
        else (bases, blocks)
    w._axes = axes  # the tile axis of each coordinate (None: a scalar index)
    return w._block


def _through_data(e, v) -> bool:
    """Whether variable `v` occurs in `e` and only inside arguments of uninterpreted
    functions (integer data loaded from memory). The walk reads the terms through z3's C
    accessors (no Python object per subterm)."""
    ref = e.ctx.ref()
    vid = v.get_id()
    seen, todo, inside = set(), [(e.as_ast(), False)], False
    while todo:
        a, under = todo.pop()
        key = (_ast_id(ref, a), under)
        if key in seen:
            continue
        seen.add(key)
        kind = _ast_kind(ref, a)
        if kind != z3.Z3_APP_AST and kind != z3.Z3_NUMERAL_AST:
            return False  # a quantifier or a bound variable: not judged here
        n = _num_args(ref, a)
        if not n:  # a constant
            if key[0] == vid:
                if not under:
                    return False
                inside = True
            continue
        data = _decl_kind(ref, _app_decl(ref, a)) == z3.Z3_OP_UNINTERPRETED
        todo.extend((_app_arg(ref, a, i), under or data) for i in range(n))
    return inside


def _exactly_once_tiles(ck, w) -> None:
    """Two instances of one block-form write: same tile origin and a common live element."""
    bases, _ = w._block
    if getattr(w, "_origins_distinct", False):  # proven by the same query (`_instances`)
        ck.stmt = w.stmt
        ck.proven(f"{w.tensor}: each element written once")
        w._injective = True
        return
    if _pinned(ck, bases, _differ_vars(ck, w)):  # no two instances share a tile origin
        ck.stmt = w.stmt
        ck.proven(f"{w.tensor}: each element written once (the tile origins pin the "
                  "instance)")
        w._injective = True
        return
    c2 = ck.vars.copier("~2", kinds=_COPIED)
    differ = _differ(ck, w, lambda v: v, c2)
    same_tile = w.path + [c2(p) for p in w.path] + [differ] + [b == c2(b) for b in bases]
    m = ck.solve(same_tile, decide=True)  # no two instances share a tile origin: done
    if m is not None:  # else: do they share an element both write?
        m = ck.solve_real(same_tile + axis_ranges(w.shape) + [w.live, c2(w.live)])
    ck.stmt = w.stmt
    if m is None:
        ck.proven(f"{w.tensor}: each element written once")
        w._injective = True
        return
    w._injective = False
    other = {"program_id": [evaluate(m, c2(p)) for p in ck.pids], "line": w.stmt.loc.line}
    coords = tuple(evaluate(m, c) for c in w.coords)
    ck.violate("exactly_once", w.stmt.value.fn, f"`{w.tensor}{list(coords)}` is written by "
               f"two program instances (the other: program {tuple(other['program_id'])}) "
               "without an atomic add", m, w.shape, tensor=w.tensor, coords=coords, other=other,
               scope=w.names)


def _apart(ck, w, w2) -> bool:
    """Two writes of aligned tiles of one block shape whose instances, enumerated on
    integers (`tiles.origins`), reach no tile origin in common: no element is both's."""
    if block_form(ck, w) is None or block_form(ck, w2) is None or w._block[1] != w2._block[1]:
        return False
    o1 = tiles.origins(ck, w, w._block[0])
    o2 = tiles.origins(ck, w2, w2._block[0]) if o1 is not None else None
    return o2 is not None and not (o1 & o2)


def _two_writes(ck, w, w2) -> tuple[list, object, object]:
    """Two instances (copies ~1 and ~2) of writes `w` and `w2` live at one element: the
    constraints, and the two copiers. Where `w` is `w2`, the instances differ."""
    same = w is w2
    c1, c2 = ck.vars.copier("~1"), ck.vars.copier("~2")
    distinct = z3.BoolVal(True)
    if same:
        # the instances as `_differ` names them: a grid-stride loop's (program id,
        # iteration) by its linear index, one-to-one with the pair (`loops._grid_stride`),
        # so that the solver need not invert v = pid + t*step to tell them apart
        diffs = [c1(v) != c2(v) for v in _differ_vars(ck, w)] + \
            [c1(AXES[i]) != c2(AXES[i]) for i in range(len(w.shape))]
        distinct = Or(*diffs) if diffs else z3.BoolVal(False)
    cons = [c1(p) for p in w.path] + [c2(p) for p in w2.path]
    cons += [c1(r) for r in axis_ranges(w.shape)] + [c2(r) for r in axis_ranges(w2.shape)]
    cons += [c1(w.live), c2(w2.live), distinct]
    cons += [c1(a) == c2(b) for a, b in zip(w.coords, w2.coords)]
    return cons, c1, c2


def _exactly_once_write(ck, w, w2) -> None:
    same = w is w2
    if same and block_form(ck, w) is not None:
        return _exactly_once_tiles(ck, w)
    if id(w2) in _distinct_from(w):  # already proven, by the same query (`_distinct_elements`)
        ck.stmt = w.stmt
        ck.proven(f"{w.tensor}: each element written once")
        return
    if not same and _apart(ck, w, w2):
        ck.stmt = w.stmt
        ck.proven(f"{w.tensor}: no element written by two statements (their tiles, enumerated)")
        return
    cons, c1, c2 = _two_writes(ck, w, w2)
    m = ck.solve_real(cons)
    ck.stmt = w.stmt
    if m is None:
        ck.proven(f"{w.tensor}: each element written once")
        return
    other = {"program_id": [evaluate(m, c2(p)) for p in ck.pids],
             "element": [evaluate(m, c2(AXES[i])) for i in range(len(w2.shape))],
             "line": w2.stmt.loc.line}
    coords = tuple(evaluate(m, c1(c)) for c in w.coords)
    ck.violate("exactly_once", "store", f"`{w.tensor}{list(coords)}` is written by two "
               f"program instances (the other: program {tuple(other['program_id'])}, "
               f"element {tuple(other['element'])}, line {other['line']}) without an atomic "
               "add", m, w.shape, tensor=w.tensor, coords=coords, other=other, view=c1,
               scope=w.names)


def _bijection(ck, tensor: str, ws: list) -> None:
    """Every element of output `tensor` is written: proven by counting for block-form
    writes, or by the tile origins their instances reach worked out on integers; else
    refuted by an element shown unwritten (named with the write nearest to it), else left
    undecided."""
    ck.stmt = ws[0].stmt
    dims = ck.kernel.param(tensor).dims
    if any(d in ck.for_all for d in dims):
        return _bijection_for_all(ck, tensor, ws)
    sizes = [ck.extents[d] for d in dims]
    candidates = [tuple(c) for c in itertools.product(*[(0, n - 1) for n in sizes])]
    reason, definitive = _count_tiles(ck, tensor, ws, sizes, candidates)
    if reason is None:
        ck.proven(f"{tensor}: every element written (bijective tile map)")
        return
    if definitive is not None and definitive[1] is not None:  # a masked element, named
        message, model, coords, w = definitive
        ck.violate("bijection", w.stmt.value.fn, message, model, w.shape,
                   tensor=tensor, coords=coords)
        return
    verdict, y = _by_origins(ck, ws, sizes)
    if verdict == "proven":
        ck.proven(f"{tensor}: every element written (the tile origins reached, enumerated)")
        return
    if verdict is None:
        y = next((y for y in dict.fromkeys(candidates) if _unwritten(ck, ws, y)), None)
    if y is None and definitive is None and _distinct_elements(ck, ws, sizes):
        ck.proven(f"{tensor}: every element written (as many distinct elements as the "
                  "tensor has)")
        return
    if y is None and definitive is None:
        verdict, y = _covered(ck, ws, sizes)
        if verdict == "proven":
            ck.proven(f"{tensor}: every element written (each has a writer)")
            return
    if y is not None or definitive is not None:
        _unwritten_violation(ck, tensor, ws, y, definitive)
        return
    ck.undecided(f"every element of `{tensor}` written (bijection)",
                 f"neither the counting proof ({reason}) nor the covering query settled it")


def _bijection_for_all(ck, tensor: str, ws: list) -> None:
    """Every element written, for all the sizes proven at once: each write whose tile
    origin is affine in its instance's variables names, for an element y, the instance and
    tile element that hold it (mixed radix, as the completeness of a reduction does); one
    query asks for an element none of them covers. Refuted only where the element is shown
    unwritten at the counterexample's sizes; otherwise undecided."""
    dims = ck.kernel.param(tensor).dims
    sizes = [ck.extent_terms[d] for d in dims]
    how = _counted_for_all(ck, ws, sizes)
    if how is not None:
        ck.proven(f"{tensor}: every element written, for all sizes ({how})")
        return
    ys = [ck.vars.fresh(f"y{i}", "point", 0, None) for i in range(len(dims))]
    covered = []
    for w in ws:
        if block_form(ck, w) is None:
            continue
        pairs, rest = _writer_of(ck, w, ys)
        hit = list(w.path) + axis_ranges(w.shape) + [w.live] + \
            [c == y for c, y in zip(w.coords, ys)]
        # no grid-stride link: its linear index stands for its (program id, iteration)
        # pairs one-to-one, so a value of it in range is an instance
        body = z3.substitute(And(*hit), *pairs) if pairs else And(*hit)
        names = free_names(body)
        rest = [v for v in rest if v.decl().name() in names]
        covered.append(z3.Exists(rest, body) if rest else body)
    if not covered:
        ck.undecided(f"every element of `{tensor}` written (bijection, all sizes)",
                     "no write is of aligned tiles")
        return
    inside = [And(y >= 0, y < n) for y, n in zip(ys, sizes)]
    m = ck.solve(ck.base_sizes + inside + [Not(Or(*covered))],
                 f"every element of `{tensor}` written (all sizes)")
    if m is None:
        if not any(o.what.startswith(f"every element of `{tensor}`") for o in ck.report.undecided):
            ck.proven(f"{tensor}: every element written, for all sizes")
        return
    y = tuple(evaluate(m, v) for v in ys)
    fixed = [ck.size_terms[n] == evaluate(m, ck.size_terms[n]) for n in ck.for_all]
    if all(ck.solve(fixed + w.path + axis_ranges(w.shape) + [w.live] +
                    [c == v for c, v in zip(w.coords, y)], decide=True) is None for w in ws):
        ck.violate("bijection", ws[0].stmt.value.fn, f"no program instance writes "
                   f"`{tensor}{list(y)}`", m, (), tensor=tensor, coords=y,
                   expected={"writes": ">= 1"}, actual={"writes": 0})
        return
    ck.undecided(f"every element of `{tensor}` written (bijection, all sizes)",
                 "an element the tile map's closed form misses has another writer")


def _counted_for_all(ck, ws, sizes) -> str | None:
    """Every element written, for all sizes at once, by counting (quantifier-free queries
    only, where the covering query of `_bijection_for_all` quantifies over a tile map the
    solver cannot invert, a grouped or persistent order dividing by a tile count). The
    writes (one, or several at one instance: an epilogue in column subtiles) are aligned
    tiles whose offsets from the first write's are constants; together, per instance,
    they span one *coarse tile* of extents B' from origin `o` (the least offset). Then:

    1. units: each program id no grid-stride loop consumes (its grid extent), each
       grid-stride loop `range(pid, stop, num_programs)` (its linear index, over
       [0, stop): the (program id, iteration) pairs one-to-one, the grid at least 1), each
       loop of constant bounds (its trip count); the path is nothing but their ranges
       and the sizes' (no branch, no other constraint);
    2. the units the origin depends on reach as many values as there are coarse tiles,
       prod(cdiv(S, B')), for every size (the same term once simplified); every other unit
       reaches at least one value;
    3. every origin lies inside the tensor, aligned to B';
    4. distinct values of the units it depends on give distinct origins (no two share a
       coarse tile);
    5. every element of a coarse tile inside the tensor is a live element of some write at
       that instance.

    By 2-4 the origins are exactly the coarse tiles (an injective map between finite sets
    of one size is onto), and by 5 each element of each is written. Returns how, or None
    where a step does not apply or is not proven (then the covering query decides); a
    failed or undecided step leaves no obligation behind."""
    if any(block_form(ck, w) is None for w in ws):
        return None
    w0 = ws[0]
    if any(w.frames != w0.frames or len(w.path) != len(w0.path) or
           any(not a.eq(b) for a, b in zip(w.path, w0.path)) for w in ws[1:]):
        return None
    bases0 = w0._block[0]
    offsets = []
    for w in ws:
        off = [const_value(z3.simplify(b - b0)) for b, b0 in zip(w._block[0], bases0)]
        if None in off:
            return None
        offsets.append(off)
    lo = [min(o[d] for o in offsets) for d in range(len(sizes))]
    coarse = [max(o[d] + w._block[1][d] for o, w in zip(offsets, ws)) - lo[d]
              for d in range(len(sizes))]
    origin = [z3.simplify(b + l) if l else b for b, l in zip(bases0, lo)]
    units = _units_for_all(ck, w0)
    if units is None:
        return None
    names = frozenset().union(*[free_names(o) for o in origin])
    mine = [u for u in units if u[2] & names]
    before = list(ck.report.undecided)

    def unsat(cons, what) -> bool:
        # only a decided `unsat` counts; an undecided step is no obligation of the program
        ok = ck.solve(cons, what, decide=True) is None and len(ck.report.undecided) == len(before)
        ck.report.undecided[:] = before
        return ok

    for u in units:
        if u not in mine and not _at_least(ck, u[1], 1):
            return None
    count = z3.IntVal(1)
    for u in mine:
        if not _at_least(ck, u[1], 1):
            return None
        count = count * u[1]
    tiles = z3.IntVal(1)
    for n, b in zip(sizes, coarse):
        tiles = tiles * ((n + (b - 1)) / b if b > 1 else n)
    if not z3.simplify(count).eq(z3.simplify(tiles)) and \
            not unsat(ck.base_sizes + [count != tiles], "as many instances as tiles"):
        return None
    path = w0.path
    outside = Or(*[Or(o < 0, o >= n) for o, n in zip(origin, sizes)])
    if not unsat(path + [outside], "every tile origin inside the tensor"):
        return None
    if len(ws) > 1 or lo != [0] * len(lo):
        misaligned = Or(*[o % b != 0 for o, b in zip(origin, coarse) if b > 1])
        if not unsat(path + [misaligned], "tile origins aligned"):
            return None
    c2 = ck.vars.copier("~c", kinds=("pid", "iter", "lane", "point"))
    differ = Or(*[c2(u[0]) != u[0] for u in mine]) if mine else z3.BoolVal(False)
    injective = unsat(path + [c2(p) for p in path] + [differ] +
                      [o == c2(o) for o in origin], "distinct tiles per instance")
    if not injective:
        return None
    for w in ws:  # each write's origin is the coarse one shifted by a constant
        if len(mine) == len(units):
            w._origins_distinct = True  # the first query of `_exactly_once_tiles`
        if not any(any(x[2].eq(u[0]) for x in ck.linear) for u in mine):
            # the program ids and loop counters the origin depends on are the ones it
            # names (the query of `_tile_pins`: equal origins, the same values of them)
            w._pins = [u[0] for u in mine]
    zs = [ck.vars.fresh(f"z{d}", "point", 0, b) for d, b in enumerate(coarse)]
    inside = [And(z >= 0, z < b) for z, b in zip(zs, coarse)]
    inside += [o + z < n for o, z, n in zip(origin, zs, sizes)]
    held = []
    for w, off in zip(ws, offsets):
        at = [z - (o - l) for z, o, l in zip(zs, off, lo)]
        pairs = [(AXES[a], x) for a, x in zip(w._axes, at) if a is not None]
        live = z3.substitute(w.live, *pairs) if pairs else w.live
        held.append(And(*[And(x >= 0, x < n) for x, n in zip(at, w._block[1])], live))
    if not unsat(path + inside + [Not(Or(*held))], "every element of a tile written"):
        return None
    # coarse tiles of distinct origins are disjoint (aligned to B'), and within one the
    # writes' boxes [o_k - o, o_k - o + B_k) are apart: then two writes share no element
    boxes = [[(o - l, o - l + n) for o, l, n in zip(off, lo, w._block[1])]
             for w, off in zip(ws, offsets)]
    for i, w in enumerate(ws):
        for j in range(i + 1, len(ws)):
            if any(a[1] <= b[0] or b[1] <= a[0] for a, b in zip(boxes[i], boxes[j])):
                _distinct_from(w).add(id(ws[j]))
                _distinct_from(ws[j]).add(id(w))
    return (f"{len(ws)} writes' " if len(ws) > 1 else "") + \
        "tiles counted: as many instances as tiles, each inside, no two alike, none masked"


def _units_for_all(ck, w) -> list | None:
    """(variable, extent term, names) of each unit of write `w`'s instances
    (`_counted_for_all`), or None where its path is more than their ranges."""
    allowed = list(ck.base_sizes)
    units, consumed = [], set()
    for f in w.frames:
        if f.kind != "loop":
            return None
        lin = next((x for x in ck.linear if x[1].eq(f.var)), None)
        if lin is not None:
            pid, t, v, step, _ = lin
            if not z3.simplify(f.start).eq(pid):
                return None
            axis = next(i for i, p in enumerate(ck.pids) if p.eq(pid))
            if not _at_least(ck, ck.grid_terms[axis], 1):
                return None
            consumed.add(axis)
            allowed += [v >= 0, v < f.stop]
            units.append((v, f.stop, frozenset(x.decl().name() for x in (v, pid, t))))
            continue
        start, stop, step = (const_value(x) for x in (f.start, f.stop, f.step))
        if None in (start, stop, step) or step <= 0:
            return None
        allowed.append(And(f.var >= 0, f.start + f.var * f.step < f.stop))
        units.append((f.var, z3.IntVal(max(0, -(-(stop - start) // step))),
                      frozenset([f.var.decl().name()])))
    for i, (pid, g) in enumerate(zip(ck.pids, ck.grid_terms)):
        allowed += [pid >= 0, pid < (g if ck.grid[i] is None else ck.grid[i])]
        if i not in consumed:
            units.append((pid, g, frozenset([pid.decl().name()])))
    if any(not any(c.eq(a) for a in allowed) for c in w.path):
        return None
    return units


def _at_least(ck, term, n: int) -> bool:
    """Whether integer `term` (of the sizes) is at least n for every size in range."""
    v = const_value(term)
    if v is not None:
        return v >= n
    b = interval(term, ck.vars)
    if b is not None and b[0] >= n:
        return True
    before = list(ck.report.undecided)
    ok = ck.solve(ck.base_sizes + [term < n], "a positive extent", decide=True) is None \
        and len(ck.report.undecided) == len(before)
    ck.report.undecided[:] = before
    return ok


def _writer_of(ck, w, ys) -> tuple[list, list]:
    """(substitutions, the rest): for element `ys`, the instance and tile element of
    block-form write `w` whose tile holds it, where a coordinate `base + X` has its base
    affine in the instance's variables (positive coefficients, each variable in one
    coordinate): read off by mixed radix. The variables no coordinate pins down so (a
    program id split by `//` and `%` over two dims, a swizzle) are left to the solver, to
    be quantified existentially."""
    bases, _ = w._block
    inst = list(ck.pids) + [f.var for f in w.frames if f.kind == "loop"]
    inst += [f.value for f in w.frames if f.kind == "loop" and f.value is not None
             and z3.is_const(f.value) and not f.value.eq(f.var)]
    inst += [l[0] for l in ck.linear] + [l[1] for l in ck.linear]
    pairs, used = [], set()
    for c, b, y in zip(w.coords, bases, ys):
        mine = [v for v in inst if depends_on(b, v)]
        axis = [i for i in range(len(w.shape)) if depends_on(c, AXES[i])]
        dec = affine(b, mine)
        if dec is None or len(axis) > 1:
            continue
        c0, coeffs = dec
        ranked = sorted(coeffs.values(), key=lambda vc: -vc[1])
        if len(ranked) != len(mine) or any(k <= 0 for _, k in ranked) or \
                any(v.decl().name() in used for v, _ in ranked):
            continue
        if ck.solve(list(w.path) + [b != c0 + sum(k * v for v, k in ranked)],
                    decide=True) is not None:
            continue  # not affine after all (`bh % H` at 0 and 1 looks like `bh`)
        rest = y - c0
        for v, k in ranked:
            used.add(v.decl().name())
            pick = rest / k
            pairs.append((v, pick))
            rest = rest - k * pick
        if axis:
            used.add(AXES[axis[0]].decl().name())
            pairs.append((AXES[axis[0]], rest))
    left = [v for v in dict.fromkeys(inst + list(AXES[:len(w.shape)]))
            if v.decl().name() not in used]
    return pairs, left


def _by_origins(ck, ws, sizes) -> tuple[str | None, tuple | None]:
    """("proven", None) when the block-form writes' instances, enumerated, reach every
    tile origin and no mask hides an element of a tile; ("refuted", origin) for a tile
    origin none reaches; (None, None) when that cannot be worked out on integers."""
    if any(block_form(ck, w) is None for w in ws):
        return None, None
    blocks = ws[0]._block[1]
    if any(w._block[1] != blocks for w in ws):
        return None, None
    reached = set()
    for w in ws:
        got = tiles.origins(ck, w, w._block[0])
        if got is None:
            return None, None
        reached |= got
    missing = tiles.missing_origin(sizes, blocks, reached)
    if missing is not None:
        return "refuted", missing
    for w in ws:  # every tile is some instance's: an element is lost only to a mask
        inb = And(*[And(x >= 0, x < n) for x, n in zip(w.coords, sizes)])
        if ck.solve(w.path + axis_ranges(w.shape) + [inb, Not(w.live)],
                    decide=True) is not None:
            return None, None
    return "proven", None


def _unwritten_violation(ck, tensor: str, ws, y, definitive) -> None:
    """A bijection violation at unwritten element `y` (or, where only the counting says a
    tile is missing, with its reason), named by the write nearest to it."""
    op = ws[0].stmt.value.fn
    why = f"{definitive[0]}; " if definitive is not None else ""
    if y is None:
        ck.violate("bijection", op, definitive[0], None, (), tensor=tensor, coords=())
        return
    near = tiles.nearest(ck, ws, y)
    if near is None:
        ck.violate("bijection", op, f"{why}no program instance writes `{tensor}{list(y)}`",
                   None, (), tensor=tensor, coords=y, expected={"writes": ">= 1"},
                   actual={"writes": 0})
        return
    m, w = near
    at = [evaluate(m, c) for c in w.coords]
    ck.stmt = w.stmt
    ck.violate("bijection", w.stmt.value.fn, f"{why}no program instance writes "
               f"`{tensor}{list(y)}`; the nearest element written is `{tensor}{at}`, by this "
               "instance", m, w.shape, tensor=tensor, coords=y, expected={"writes": ">= 1"},
               actual={"writes": 0}, scope=w.names)


def _distinct_elements(ck, ws, sizes) -> bool:
    """Every element written, by counting, for writes that are not aligned tiles (a
    gather over several dims from one tile axis): the writes' (instance, tile element)
    pairs, counted from the grid and loop bounds, are at least as many as the tensor's
    elements; every pair is live and inside the tensor; no two pairs (of one write or two)
    reach one element. An injective map into the tensor from a set at least its size is
    onto it. Quantifier-free queries, where `_covered` asks one quantified query whose
    time z3's search varies by orders of magnitude. False when any part fails or is
    undecided (then nothing of it is reported, and `_covered` decides)."""
    total = 0
    for w in ws:
        n = _count(ck, w, drop=[], guarded=True)
        if n is None:
            return False
        total += n * math.prod(w.shape)
    if total < math.prod(sizes):
        return False
    before = list(ck.report.undecided)

    def unsat(cons) -> bool:
        # None from `solve` is also an undecided query: only a decided one counts here
        if ck.solve(cons, "every element written (counted)") is None and \
                len(ck.report.undecided) == len(before):
            return True
        ck.report.undecided[:] = before  # what this proof leaves open, `_covered` asks
        return False

    for w in ws:
        outside = Or(*[Or(c < 0, c >= n) for c, n in zip(w.coords, sizes)])
        if not unsat(w.path + axis_ranges(w.shape) + [Or(Not(w.live), outside)]):
            return False
    pairs = []
    for i, w in enumerate(ws):
        for w2 in ws[i:]:
            if not unsat(_two_writes(ck, w, w2)[0]):
                return False
            pairs.append((w, w2))
    for w, w2 in pairs:  # the exactly-once check asks the same query (`_exactly_once_write`)
        _distinct_from(w).add(id(w2))
        _distinct_from(w2).add(id(w))
    return True


def _distinct_from(w) -> set:
    """The writes (ids) no live element of write `w` shares an element with, as proven."""
    if getattr(w, "_distinct", None) is None:
        w._distinct = set()
    return w._distinct


def _covered(ck, ws, sizes) -> tuple[str, tuple | None]:
    """Every element has a writer, for writes that are not aligned tiles (a gather over
    several dims from one tile axis): one query `exists y in the tensor such that no
    (instance, element) of any write reaches y`, the write's variables quantified
    existentially under the negation. A grid-stride loop's linear index stands for its
    (program id, iteration) pairs one-to-one, as in `Checker.solve`: the link is added
    only where the coordinates or the mask mention the program id or the iteration."""
    ys = [z3.Int(f"unwritten{i}!{next(ck.vars.counter)}") for i in range(len(sizes))]
    cases = []
    for w in ws:
        hit = [w.live] + [c == y for c, y in zip(w.coords, ys)]
        body = list(w.path) + axis_ranges(w.shape) + hit
        body += ck._links(frozenset().union(*[free_names(c) for c in hit]))
        mine = {str(y) for y in ys}
        names = sorted(frozenset().union(*[free_names(c) for c in body]) - mine)
        cases.append(z3.Exists([z3.Int(n) for n in names], And(*body)) if names
                     else And(*body))
    r, m = ck.ask([*[And(y >= 0, y < n) for y, n in zip(ys, sizes)], Not(Or(*cases))],
                  f"every element of `{ws[0].tensor}` written")
    if r == z3.unsat:
        return "proven", None
    if r == z3.sat:
        return "refuted", tuple(m.eval(y, model_completion=True).as_long() for y in ys)
    return "unknown", None


def _unwritten(ck, ws, y) -> bool:
    """No instance of any write in `ws` writes element `y` (a quantifier-free query)."""
    for w in ws:
        m = ck.solve(w.path + axis_ranges(w.shape) +
                     [w.live] + [c == v for c, v in zip(w.coords, y)], decide=True)
        if m is not None:
            return False
    return True


def _count_tiles(ck, tensor, ws, sizes, candidates):
    """The counting proof for writes whose coordinates are aligned tiles `base + X` of one
    block shape: no two (write, instance) pairs share a tile, none masks an element of its
    tile, none lies outside, and together there are as many as tiles. Returns (None, None)
    when proven, else (reason, definitive violation or None); adds elements worth probing
    to `candidates`."""
    if any(block_form(ck, w) is None for w in ws):
        return "its indices are not aligned tiles `base + arange`", None
    blocks = ws[0]._block[1]
    if any(w._block[1] != blocks for w in ws):
        return "write statements with different tile shapes", None
    tiles = math.prod(-(-s // n) for s, n in zip(sizes, blocks))
    count, injective, hole, outside = 0, True, None, None
    for i, w in enumerate(ws):
        c, inj = _instances(ck, w)
        count = None if count is None or c is None else count + c
        # two writes' tile origins enumerated apart on integers (`_apart`) need no query
        injective = injective and inj and all(_apart(ck, w, w2) or _disjoint(ck, w, w2)
                                              for w2 in ws[i + 1:])
        inb = And(*[And(x >= 0, x < n) for x, n in zip(w.coords, sizes)])
        h = ck.solve_real(w.path + axis_ranges(w.shape) + [inb, Not(w.live)])
        if h is not None and hole is None:
            hole = (h, w, tuple(evaluate(h, x) for x in w.coords))
            candidates.append(hole[2])
        bases = w._block[0]
        outside = outside or ck.solve(w.path + [Or(*[Or(b < 0, b >= n)
                                                        for b, n in zip(bases, sizes)])],
                                      decide=True)
    if hole is not None and injective:
        h, w, coords = hole
        return "masked element", (f"`{tensor}{list(coords)}` lies inside the tensor but "
                                  "the only instance whose tile holds it masks it off", h, coords, w)
    if count is None:
        return "instance count unknown", None
    if hole is None and outside is None and injective and count >= tiles:
        return None, None
    if count < tiles or (count == tiles and (outside is not None or not injective)):
        why = (f"{count} program instances for {tiles} tiles" if count < tiles else
               "a tile lies outside the tensor" if outside is not None else
               "two instances write the same tile")
        return why, (f"some tile of `{tensor}` is never written: {why}, and each instance "
                     f"writes one tile", None, (), ws[0])
    return "more instances than tiles", None


def _instances(ck, w, guarded: bool = True) -> tuple[int | None, bool]:
    """How many instances reach write `w`, and whether they write distinct tiles; with
    `guarded` False, every instance of its grid and loops, whatever its branches decide."""
    bases = w._block[0]
    inst = [p for p in ck.pids] + _instance_vars(w)
    for pid, t, v, _, _ in ck.linear:  # a grid-stride loop's instances are its linear index
        if any(t.eq(x) for x in inst):
            inst = [x for x in inst if not (x.eq(t) or x.eq(pid))] + [v]
    used = [v for v in inst if any(_mentions(b, v) for b in bases)]
    count = _count(ck, w, drop=[v for v in inst if not any(v.eq(u) for u in used)],
                   guarded=guarded)
    injective = getattr(w, "_injective", None) if guarded else None
    path = w.path if guarded else unguarded(w)
    if (injective is None or len(used) < len(inst)) and \
            _pinned(ck, bases, used, _COPIED + ("axis",)):
        injective = True  # no two instances share a tile origin, by the origins' syntax
        if guarded and len(used) == len(inst):
            w._origins_distinct = True
    elif injective is None or len(used) < len(inst):
        c1, c2 = ck.vars.copier("~1"), ck.vars.copier("~2")
        differ = Or(*[c1(v) != c2(v) for v in used]) if used else z3.BoolVal(False)
        before = len(ck.report.undecided)
        injective = ck.solve([c1(p) for p in path] + [c2(p) for p in path] + [differ] +
                             [c1(b) == c2(b) for b in bases], decide=True) is None
        if injective and guarded and len(used) == len(inst) and \
                len(ck.report.undecided) == before:
            # decided: no two instances share a tile origin, the first query of
            # `_exactly_once_tiles` (there the instances differ in any of `inst`)
            w._origins_distinct = True
    return count, injective


def _disjoint(ck, w1, w2) -> bool:
    """No instance of write w1 and instance of write w2 share a tile origin."""
    c1, c2 = ck.vars.copier("~1"), ck.vars.copier("~2")
    return ck.solve([c1(p) for p in w1.path] + [c2(p) for p in w2.path] +
                    [c1(a) == c2(b) for a, b in zip(w1._block[0], w2._block[0])],
                    decide=True) is None


def _mentions(e, v) -> bool:
    return depends_on(e, v)


def _count(ck, w, drop: list, guarded: bool = True) -> int | None:
    """Program instances (times loop iterations) reaching the write, from the grid and
    loop bounds; None when a bound depends on the instance in an unrecognised way, or (with
    `guarded`) when a branch encloses the write."""
    factors = {("pid", i): n for i, n in enumerate(ck.grid)}
    drop = [d for d in drop if not any(d.eq(v) for _, _, v, _, _ in ck.linear)]
    for p in drop:
        for i, q in enumerate(ck.pids):
            if p.eq(q):
                factors.pop(("pid", i), None)
    for f in w.frames:
        if f.kind != "loop":
            if guarded:
                return None
            continue
        if any(f.var.eq(d) for d in drop):
            continue
        start, stop, step = (const_value(x) for x in (f.start, f.stop, f.step))
        axis = next((i for i, p in enumerate(ck.pids)
                     if _mentions(f.start, p) and const_value(f.start - p) is not None), None)
        if axis is not None and step == ck.grid[axis] and stop is not None:
            offset = const_value(f.start - ck.pids[axis])  # grid-stride over [offset, stop)
            factors[("pid", axis)] = max(stop - offset, 0) if offset >= 0 else None
        elif None not in (start, stop, step) and step > 0:
            factors[("loop", id(f))] = max(0, -(-(stop - start) // step))
        else:
            return None
    return None if None in factors.values() else math.prod(factors.values())


def _store_coverage(ck, w, ws, name: str, lo: int, hi: int) -> None:
    ck.stmt = w.stmt
    rng = axis_ranges(w.shape)
    if not w.atomic:
        terms = w.value.cov.get(name)
        if not terms:
            # a constant (no data at all, e.g. `acc * 0.0`) is no reduction either
            m = ck.solve_real(w.path + rng + [w.live])
            if m is not None:
                what = "is not" if w.value.tagged else "carries no data, so it is not"
                ck.violate("coverage", "store", f"the value stored to `{w.tensor}` {what} "
                           f"a reduction over {name}", m, w.shape, scope=w.names)
            return
        exactly_once(ck, terms, lo, hi, w.path + [w.live], w.shape, name, "store", w.value.frag,
                     scope=w.names)
        return
    terms, defaults, sources = [], {}, []
    for w2 in ws:
        if not w2.atomic:
            continue
        c = ck.vars.copier("~a")
        for orig, twin in c.pairs:
            defaults[twin.get_id()] = orig
        bound = tuple(twin for _, twin in c.pairs)
        glue = And(*[c(p) for p in w2.path], *[c(r) for r in axis_ranges(w2.shape)],
                      c(w2.live), *[c(a) == b for a, b in zip(w2.coords, w.coords)],
                      *([c(v) == v for v in _tile_pins(ck, w)] if w2 is w else []))
        mine = [Cov(tuple(unique([c(b) for b in t.bound] + list(bound))), And(glue, c(t.dom)),
                    c(t.idx), t.kind, tuple((c(v), c(e)) for v, e in t.defaults))
                for t in w2.value.cov.get(name, [])]
        if any(not affine_index(t) for t in mine):
            picks = _writer_picks(ck, w2, c)
            mine = [replace(t, picks=picks) for t in mine]
        terms += mine
        sources += [(w2, c)] * len(mine)
    groups = _coverage_groups(ck, w, terms, sources) if any(t.picks for t in terms) else None
    exactly_once(ck, terms, lo, hi, w.path + [w.live], w.shape, name, "atomic_add",
                 w.value.frag, defaults, scope=w.names, groups=groups)


def _coverage_groups(ck, w, terms, sources) -> list | None:
    """The completeness of an atomic combine checked one tile at a time: for each tile
    origin the live instances of write `w` reach (enumerated on integers), one of them
    (equalities naming it) and, per term, the enumerated writers whose tile has that
    origin (no other can write its elements: aligned tiles of one block shape). None
    where the writes are not aligned tiles of one shape or are not enumerable."""
    if block_form(ck, w) is None:
        return None
    checked = tiles.live_instances(ck, w)
    if checked is None:
        return None
    reps = {}
    for pairs in checked:
        o = tiles.origin_at(w._block[0], pairs, w)
        if o is None:
            return None
        reps.setdefault(o, pairs)
    by_term = []
    for t, (w2, copy) in zip(terms, sources):
        if not t.picks:
            by_term.append({})
            continue
        if block_form(ck, w2) is None or w2._block[1] != w._block[1]:
            return None
        bases = [copy(b) for b in w2._block[0]]
        by = {}
        for pick in t.picks:
            o = tiles.origin_at(bases, pick)
            if o is None:
                return None
            by.setdefault(o, []).append(pick)
        by_term.append(by)
    return [(tuple(pairs), tuple(tuple(by.get(o, ())) for by in by_term))
            for o, pairs in reps.items()]


def _writer_picks(ck, w, copy) -> tuple:
    """The live instances of atomic write `w` enumerated on integers (`tiles.live_instances`),
    as pairs of its copied variables and their values (`Cov.picks`), or () past the
    enumeration's limit: the completeness of a reduction whose index is not affine in the
    writer's variables (stream-K's k offsets) is then shown one writer at a time."""
    insts = tiles.live_instances(ck, w)
    if insts is None:
        return ()
    twins = {v.get_id(): twin for v, twin in copy.pairs}
    return tuple(tuple((twins[v.get_id()], value) for v, value in pairs
                       if v.get_id() in twins) for pairs in insts)


def _tile_pins(ck, w) -> list:
    """The instance variables that write `w`'s tile origin determines (a swizzled program
    id, say, but not the split of a split-K grid): where two of its instances write one
    element, those variables are equal. Stated to the solver only where proven here
    (aligned tiles `base + X`: one element, one origin; then no two values of the
    variables give one origin), it spares the coverage queries the swizzle's inversion."""
    pins = getattr(w, "_pins", None)
    if pins is not None:
        return pins
    w._pins = []
    if block_form(ck, w) is None:
        return w._pins
    bases = w._block[0]
    inst = list(ck.pids) + _instance_vars(w)
    mine = [v for v in inst if any(depends_on(b, v) for b in bases)]
    if mine:
        c1, c2 = ck.vars.copier("~p1"), ck.vars.copier("~p2")
        same = [c1(b) == c2(b) for b in bases]
        differ = Or(*[c1(v) != c2(v) for v in mine])
        if ck.solve([c1(p) for p in w.path] + [c2(p) for p in w.path] + same + [differ],
                    "a tile origin names one instance", decide=True) is None:
            w._pins = mine
    return w._pins


def _size_expr(text: str, sizes: dict, coords: dict | None = None):
    """Evaluate a coverage bound like "K", "0" or "min(pos(SQ) + 1, SK)" over problem sizes
    and the destination's coordinates (a tiny safe evaluator; the result may be a z3 term)."""
    def ev(n):
        if isinstance(n, ast.Expression):
            return ev(n.body)
        if isinstance(n, ast.Constant) and isinstance(n.value, int):
            return n.value
        if isinstance(n, ast.Name) and n.id in sizes:
            return sizes[n.id]
        if isinstance(n, ast.BinOp) and type(n.op) in (ast.Add, ast.Sub, ast.Mult, ast.FloorDiv):
            a, b = ev(n.left), ev(n.right)
            return {ast.Add: lambda: a + b, ast.Sub: lambda: a - b, ast.Mult: lambda: a * b,
                    ast.FloorDiv: lambda: a / b if isinstance(a, z3.ExprRef) else a // b}[type(n.op)]()
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and not n.keywords:
            if n.func.id == "pos" and len(n.args) == 1 and isinstance(n.args[0], ast.Name) \
                    and coords is not None and n.args[0].id in coords:
                return coords[n.args[0].id]
            if n.func.id == "min" and len(n.args) == 2:
                a, b = ev(n.args[0]), ev(n.args[1])
                return z3.If(a <= b, a, b) if isinstance(a, z3.ExprRef) or isinstance(b, z3.ExprRef) \
                    else min(a, b)
        raise ValueError(f"bound {text!r}: only sizes, integers, + - * //, min() and pos(DIM)")
    return ev(ast.parse(text, mode="eval"))


# ---------------------------------------------------------------- writes through a map
def guards(w) -> list:
    """The conditions of the branches enclosing write `w`."""
    return [f.cons[0] for f in w.frames if f.kind == "if" and f.cons]


def unguarded(w) -> list:
    """`w`'s path without its branch conditions: every instance of its grid and loops."""
    gs = guards(w)
    return [c for c in w.path if not any(c.eq(g) for g in gs)]


def exactly_once_map(ck, w, w2=None, extra=()):
    """Two distinct (instance, element) pairs of writes `w` and `w2` (`w` itself by
    default) that reach the same point of their `coords` while both are live: (model, view
    of the first, view of the second), or None when there are none. `coords` may be any map
    of the writes (a pack's own coordinates); when they are aligned tiles of one write,
    "two instances with one tile origin" is asked first (nothing else can share a point)."""
    extra = list(extra)
    if (w2 is None or w2 is w) and block_form(ck, w) is not None:
        bases, _ = w._block
        c2 = ck.vars.copier("~2", kinds=("pid", "iter", "lane", "point"))
        tile = w.path + [c2(p) for p in w.path] + [_differ(ck, w, lambda v: v, c2)] + \
            [b == c2(b) for b in bases]
        if ck.solve(tile + extra, decide=True) is None:
            return None
        m = ck.solve_real(tile + axis_ranges(w.shape) + [w.live, c2(w.live)] + extra)
        return None if m is None else (m, lambda e: e, c2)
    w2 = w if w2 is None else w2
    cons, c1, c2 = _two_writes(ck, w, w2)
    m = ck.solve_real(cons + extra)
    return None if m is None else (m, c1, c2)


def every_point_written(ck, ws, extents, required, extra=()):
    """Every point y of the box [0, extents) with `required(y)` is the coordinates
    (`w.coords`) of a live element of some write w of `ws`, proven in two parts:

    1. some instance's element reaches y, whatever the branches around the write decide:
       for one write of aligned tiles, by counting the values its grid and loops reach
       (`_tiles_cover`), else by one quantified query;
    2. that element is live where y is required: no instance and element reaching a
       required point has its branch conditions or its mask false there.

    Returns ("proven", None, None); ("missing", model, ys): a required point (the terms
    `ys` in the model) no instance reaches; ("dropped", model, w): an instance of w (the
    model's) reaches a required point at the model's element but drops it;
    ("undecided", None, reason)."""
    extra = list(extra)
    verdict, m, why = _tiles_cover(ck, ws, extents, required, extra)
    if verdict == "missing":
        return verdict, m, why
    if verdict is None:
        ys = [z3.Int(f"unreached{i}!{next(ck.vars.counter)}") for i in range(len(extents))]
        cases = []
        for w in ws:
            body = unguarded(w) + axis_ranges(w.shape) + [c == y for c, y in zip(w.coords, ys)]
            body += ck._links(frozenset().union(*[free_names(c) for c in body]))
            names = sorted(frozenset().union(*[free_names(c) for c in body]) -
                           {str(y) for y in ys})
            cases.append(z3.Exists([z3.Int(n) for n in names], And(*body)) if names
                         else And(*body))
        box = [And(y >= 0, y < n) for y, n in zip(ys, extents)]
        before = len(ck.report.undecided)
        m = ck.solve_real(box + [required(ys), Not(Or(*cases))] + extra,
                          f"every required point of `{ws[0].tensor}` reached ({why})")
        if m is not None:
            return "missing", m, ys
        if len(ck.report.undecided) > before:
            return "undecided", None, why
    for w in ws:
        inbox = [And(c >= 0, c < n) for c, n in zip(w.coords, extents)]
        m = ck.solve_real(unguarded(w) + axis_ranges(w.shape) + inbox +
                          [required(w.coords), Not(And(*guards(w), w.live))] + extra)
        if m is not None:
            return "dropped", m, w
    return "proven", None, None


def _tiles_cover(ck, ws, extents, required, extra):
    """Whether one write's aligned tiles reach every required point, by counting:
    ("proven", None, None), ("missing", model, coords) or (None, None, why not).

    The write's *units* are what tells its instances' tiles apart: a grid-stride loop's
    linear index (it reaches [offset, stop)), a loop `range(pid + c, stop, s)` with
    s <= the grid's extent (its value, reaching every integer of [c, stop)), a loop of
    constant bounds (its iteration), a program id no loop consumes. When distinct unit
    values have distinct tile origins (and equal ones equal origins), every origin is
    inside the box, and there are as many values as tiles, every tile is reached. With
    fewer, a lone grid-stride index is a closed form: its formulas give the tile of every
    index up to the number of tiles (a bijection, checked the same way), and a required
    point in a tile of an index the loop does not reach is missing (one query without
    quantifiers)."""
    if len(ws) != 1 or block_form(ck, ws[0]) is None:
        return None, None, "not one write of aligned tiles"
    w = ws[0]
    bases, blocks = w._block
    tiles = math.prod(-(-s // n) for s, n in zip(extents, blocks))
    units = _units(ck, w, bases)
    if units is None:
        return None, None, "its loops are not over tiles"
    path = unguarded(w)
    if ck.solve(path + [Or(*[Or(b < 0, b >= n) for b, n in zip(bases, extents)])],
                decide=True) is not None:
        return None, None, "a tile origin outside the tensor"
    if not _one_to_one(ck, path, units, bases):
        return None, None, "two unit values share a tile"
    count = math.prod(n for _, n, _, _ in units)
    if count >= tiles:
        return "proven", None, None
    if len(units) != 1 or units[0][2] != "stride":
        return None, None, f"{count} unit values for {tiles} tiles"
    v, _, _, (lo, hi) = units[0]
    pid, t = next((x[0], x[1]) for x in ck.linear if x[2].eq(v))
    if any({pid.decl().name(), t.decl().name()} & free_names(b) for b in bases):
        return None, None, f"{count} unit values for {tiles} tiles"  # not a function of v
    ext = _without_loop(ck, w, path, v) + [v >= 0, v < tiles]
    if ck.solve(ext + [Or(*[Or(b < 0, b >= n) for b, n in zip(bases, extents)])],
                decide=True) is not None or not _one_to_one(ck, ext, units, bases):
        return None, None, f"{count} unit values for {tiles} tiles"
    m = ck.solve_real(ext + axis_ranges(w.shape) + [Or(v < lo, v >= hi), required(w.coords)]
                      + extra)
    return ("missing", m, w.coords) if m is not None else ("proven", None, None)


def _without_loop(ck, w, path, v) -> list:
    """`path` without the constraints of the grid-stride loop whose linear index is `v`:
    its range, and those of its program id and iteration (which the solver would link
    back to `v`, `Checker._links`)."""
    cons = [c for f in w.frames if f.kind == "loop" and f.value is not None and f.value.eq(v)
            for c in f.cons]
    pid, t = next((x[0], x[1]) for x in ck.linear if x[2].eq(v))
    names = {pid.decl().name(), t.decl().name()}
    return [c for c in path if not any(c.eq(x) for x in cons) and not names & free_names(c)]


def _units(ck, w, bases) -> list | None:
    """(unit, values reached, kind, (lo, hi)) for each unit the tile origins mention."""
    units, consumed = [], set()
    for f in w.frames:
        if f.kind != "loop":
            continue
        lin = next((x for x in ck.linear if x[1].eq(f.var)), None)
        stop, step = const_value(f.stop), const_value(f.step)
        if lin is not None:
            pid, _, v, _, _ = lin
            offset = const_value(f.start - pid)
            if offset is None or stop is None:
                return None
            consumed.add(next(i for i, p in enumerate(ck.pids) if p.eq(pid)))
            units.append((v, max(0, stop - offset), "stride", (offset, stop), v))
            continue
        axis = next((i for i, p in enumerate(ck.pids) if _mentions(f.start, p)
                     and const_value(f.start - p) is not None), None)
        if axis is not None and step is not None and 1 <= step <= ck.grid[axis] \
                and stop is not None:
            c = const_value(f.start - ck.pids[axis])
            consumed.add(axis)
            units.append((f.value, max(0, stop - c), "dense", (c, stop), f.var))
            continue
        start = const_value(f.start)
        if None in (start, stop, step) or step <= 0:
            return None
        units.append((f.var, max(0, -(-(stop - start) // step)), "iter", (0, None), f.var))
    units += [(p, n, "pid", (0, n), p) for i, (p, n) in enumerate(zip(ck.pids, ck.grid))
              if i not in consumed]
    kept = [u[:4] for u in units if any(_mentions(b, u[4]) for b in bases)]
    if any(u[1] < 1 for u in units if u[:4] not in kept):
        return None  # a unit the origins ignore reaches nothing: no instance at all
    return kept


def _one_to_one(ck, path, units, bases) -> bool:
    """Distinct unit values have distinct tile origins, and (where a unit is a loop's
    value, not a variable) equal values equal origins."""
    c1, c2 = ck.vars.copier("~1"), ck.vars.copier("~2")
    both = [c1(p) for p in path] + [c2(p) for p in path]
    same_units = And(*[c1(u) == c2(u) for u, _, _, _ in units]) if units else z3.BoolVal(True)
    same_bases = And(*[c1(b) == c2(b) for b in bases])
    if ck.solve(both + [Not(same_units), same_bases], decide=True) is not None:
        return False
    if any(kind == "dense" for _, _, kind, _ in units):
        return ck.solve(both + [same_units, Not(same_bases)], decide=True) is None
    return True
