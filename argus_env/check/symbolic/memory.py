"""Rules that touch tensors or contract tiles: load, store/atomic_add, dot, assert_tags.
The task's pack checks its relations at every `dot` result (`InvariantPack.dot`) and at
every write (`InvariantPack.write`, which may also add coverage to the written value)."""

from __future__ import annotations

from dataclasses import dataclass

import z3

from ...ir import nodes as ir
from ...ir.printer import print_expr
from ..pack import JUNK
from ..report import CheckUnsupported
from . import floats
from .floats import TRUE as TRUE_
from .coverage import exactly_once
from .order import check_added, drop_final
from .solver import affine, const_value, in_range
from .state import Write
from .tags import FALSE, add_cov, union_tags
from .values import (AXES, SV, And, Cov, If, Not, Or, align, depends_on, div, eq, evaluate,
                     free_names, ge, int_val, is_int, lt, move_axes, mul, ne, sub, subst,
                     substitution, unique)


@dataclass
class Access:
    """`t[i0, ..., in]` with its mask: what one element of the access touches."""

    tensor: ir.Param
    coords: list[z3.ArithRef]
    shape: tuple[int, ...]
    live: z3.BoolRef            # the element is accessed (mask holds; in bounds for TMA)
    inbounds: z3.BoolRef
    index_tags: list[SV]


def access(ck, call: ir.Call) -> Access:
    ref = call.arg("ref")
    tensor = ck.kernel.param(ref.base.id)
    idx = [ck.expr(i) for i in ref.index]
    ortho = max(len(v.shape) for v in idx) <= 1
    coords, placed = [], []
    if ortho:
        shape = tuple(n for v in idx for n in v.shape)
        axis = 0
        for v in idx:
            if v.shape:
                v = move_axes(v, {0: axis}, shape)
                axis += 1
            placed.append(v)
    else:
        shape = ()
        for v in idx:
            shape = tuple(max(a, b) for a, b in zip((1,) * (max(len(shape), len(v.shape)) - len(shape)) + shape,
                                                  (1,) * (max(len(shape), len(v.shape)) - len(v.shape)) + v.shape))
        placed = [align(v, shape) for v in idx]
    coords = [v.val for v in placed]
    if any(c is None or not is_int(c) for c in coords):
        raise NotImplementedError(f"check: an index of `{tensor.name}` is not an integer")
    sizes = [ck.extent_terms[d] for d in tensor.dims]
    inb = And(*[And(ge(c, 0), lt(c, n)) for c, n in zip(coords, sizes)])
    tma = _flag(call, "tma")
    live = inb if tma else _mask(ck, call.arg("mask"), idx, placed, shape, ortho)
    return Access(tensor, coords, shape, live, inb, [v for v in placed if v.tags])


def _mask(ck, m: ir.Expr | None, idx, placed, shape, ortho) -> z3.BoolRef:
    if m is None or (isinstance(m, ir.Const) and m.value is None):
        return z3.BoolVal(True)
    if isinstance(m, ir.TupleExpr):
        parts, axis = [], 0
        for part, v in zip(m.elts, idx):
            if not (isinstance(part, ir.Const) and part.value is None):
                mv = ck.expr(part)
                if ortho and v.shape and mv.shape:
                    mv = move_axes(mv, {0: axis}, shape)
                part = align(mv, shape).val
                if part is not None and z3.is_bool(part):  # an unknown mask masks nothing
                    parts.append(part)
            axis += bool(v.shape) and ortho
        return And(*parts) if parts else z3.BoolVal(True)
    v = align(ck.expr(m), shape).val
    return v if v is not None and z3.is_bool(v) else z3.BoolVal(True)


def _flag(call: ir.Call, name: str) -> bool:
    v = call.arg(name)
    return isinstance(v, ir.Const) and v.value is True


def _bounds(ck, a: Access, op: str) -> None:
    if not ck.quiet and in_range(ck, a.coords, [ck.extent_terms[d] for d in a.tensor.dims],
                                 a.shape):
        # every coordinate within its extent by the ranges of the variables it is made
        # of (`solver.interval`): no element of any instance is outside, masked or not
        ck.proven(f"{op} {a.tensor.name}: in bounds")
        return
    m = ck.find(And(a.live, Not(a.inbounds)), a.shape)
    if m is None:
        ck.proven(f"{op} {a.tensor.name}: in bounds")
        return
    dims = a.tensor.dims
    ck.violate("bounds", op, f"`{a.tensor.name}` is accessed outside its bounds and the "
               "access is not masked", m, a.shape,
               expected={d: f"0..{ck.extents[d] - 1}" if d not in ck.for_all else
                         f"0..{evaluate(m, ck.size_terms[d]) - 1}" for d in dims},
               actual={d: c for d, c in zip(dims, a.coords)},
               tensor=a.tensor.name, coords=tuple(evaluate(m, c) for c in a.coords))


def load(ck, call: ir.Call) -> SV:
    a = access(ck, call)
    if not _flag(call, "tma"):
        _bounds(ck, a, "load")
    tags = {d: (a.live, c) for d, c in zip(a.tensor.dims, a.coords)}
    for v in a.index_tags:
        for n, (g, val) in v.tags.items():
            tags.setdefault(n, (And(a.live, g), val))
    val = None
    _zero_fill(ck, call, a)
    if a.tensor.dtype.startswith("i"):
        data = ck.uf(a.tensor.name, len(a.coords))(*a.coords)
        other = call.arg("other")
        # `other` is a compile-time number (the type check's rule): its value, converted
        # to the tensor's dtype (a float truncates toward zero); none: a zero fill
        fill = 0
        if other is not None and not (isinstance(other, ir.Const) and other.value is None):
            o = ck.expr(other)
            fill = const_value(o.val) if o.val is not None and is_int(o.val) else \
                int(z3.is_true(z3.simplify(o.val))) if o.val is not None else \
                int(o.fval) if o.fval is not None else None
            if fill is None:
                raise NotImplementedError(f"check: `other` of `{print_expr(call)}` has no "
                                          "integer value")
        val = If(a.live, data, int_val(fill))
    out = SV(a.shape, val, tags, carried_coverage(ck, a), wide=a.tensor.dtype == "i64")
    # a masked-off float element is the zero fill (`_zero_fill` refuses any other)
    floats.with_facts(out, floats.data(None if val is not None else Not(a.live)))
    if val is None:  # what a finished launch wrote there: its doubts come back
        for w in ck.memory:
            if w.tensor == a.tensor.name and (w.value.maylow is not None or
                                              w.value.mayhigh is not None or w.value.mag > 0):
                floats.with_facts(out, dict(maylow=TRUE_, mayhigh=TRUE_,
                                            mag=max(out.mag, w.value.mag)))
    return out


def _zero_fill(ck, call: ir.Call, a) -> None:
    """A masked float load fills what it does not read with `other`, which the checker,
    tracking no float, takes as a zero fill (a `dot` or a sum adds nothing of it). Another
    fill (`other=1.0`) would add itself to every masked lane of a reduction, unseen: wrong
    at a size whose tiles are partial (K = 1000 with BK = 16) and right at reduced shapes
    whose tiles are whole. Refused (`CheckUnsupported`)."""
    other, mask = call.arg("other"), call.arg("mask")
    if a.tensor.dtype.startswith("i") or other is None or mask is None or \
            any(isinstance(x, ir.Const) and x.value is None for x in (other, mask)):
        return
    o = ck.expr(other)
    value = o.fval if o.fval is not None else const_value(o.val) if o.val is not None and \
        z3.is_int(o.val) else None
    if value is None or value != 0:
        raise CheckUnsupported(
            f"`{print_expr(call)}` fills masked-off elements with `{print_expr(other)}`: the "
            "invariant checker tracks no float and takes a masked load's fill as 0 (a dot "
            "or a sum adds nothing of it): load with other=0.0", ck._line())


#: kinds of variables that name a writer's instance and element (bound in carried terms)
_INSTANCE = ("pid", "iter", "lane")


def carried_coverage(ck, a: Access) -> dict[str, list]:
    """Coverage read back from memory: an element that a finished launch wrote (a
    workspace of partial sums, say) covers what its writers' values covered. The term of
    a writer's value becomes a term over the writer too: its instance (program ids, loop
    iterations) and tile element are further bound variables, joined to the loaded element
    by equal coordinates. Summed over every writer, so an element written twice covers its
    indices twice, and one never written covers nothing; where exactly-once writes hold
    there is one writer per element and this is its coverage. Tags do not travel: a value
    written to a tensor carries its coordinates as tags (ownership), and so does the load."""
    out: dict[str, list] = {}
    for w in ck.memory:
        if w.tensor != a.tensor.name or not w.value.cov:
            continue
        axes = [ck.vars.fresh(f"w{i}", "lane", 0, n) for i, n in enumerate(w.shape)]
        ren = [(AXES[i], x) for i, x in enumerate(axes)]

        def mv(e, ren=ren):
            return subst(e, ren)
        coords = [mv(c) for c in w.coords]
        glue = And(*[mv(p) for p in w.path],
                      *[And(ge(x, 0), lt(x, n)) for x, n in zip(axes, w.shape)],
                      mv(w.live), a.live, *[eq(c, d) for c, d in zip(coords, a.coords)])
        mine = None
        for name, terms in w.value.cov.items():
            for t in terms:
                t = t.map(mv)
                names = free_names(glue) | free_names(t.dom) | free_names(t.idx)
                inst = [ck.vars.vars[n].expr for n in sorted(names)
                        if n in ck.past_vars and not n.startswith("any")
                        and ck.vars.vars[n].kind in _INSTANCE]
                bound = tuple(unique(list(t.bound) + axes + inst))
                if mine is None:
                    mine = _writer_at(coords, a.coords, [v for v in bound if not
                                                         any(v.eq(b) for b in t.bound)])
                out.setdefault(name, []).append(
                    Cov(bound, And(glue, t.dom), t.idx, t.kind, t.defaults + mine))
    return out


def _writer_at(coords, at, writer) -> tuple:
    """The writer's variables at the element `at`, where its coordinates are affine in
    them with positive coefficients (a tile origin `pid * BM` plus an element `X`): read
    off by mixed radix, largest coefficient first. Hints for the completeness proof, which
    confirms whatever it uses; () where a coordinate is not of that form."""
    pairs = []
    for c, target in zip(coords, at):
        dec = affine(c, writer)
        if dec is None:
            continue
        c0, coeffs = dec
        ranked = sorted(coeffs.values(), key=lambda vc: -abs(vc[1]))
        if any(k <= 0 for _, k in ranked):
            continue
        rest = sub(target, c0)
        for v, k in ranked:
            if any(v.eq(p) for p, _ in pairs):
                break
            pick = div(rest, k) if k != 1 else rest
            pairs.append((v, pick))
            rest = sub(rest, mul(int_val(k), pick)) if type(k) is int else rest - k * pick
    return tuple(pairs)


def write(ck, call: ir.Call) -> None:
    a = access(ck, call)
    tma = _flag(call, "tma")
    if not tma:
        _bounds(ck, a, call.fn)
    value = align(ck.expr(call.arg("value")), a.shape)
    for d, c in zip(a.tensor.dims, a.coords):
        if d not in value.tags:
            continue
        g, v = value.tags[d]
        m = ck.find(And(a.live, a.inbounds, g, ne(v, c)), a.shape)
        if m is None:
            ck.proven(f"{call.fn} {a.tensor.name}: tag {d} owns its destination")
            continue
        ck.violate("ownership", call.fn, f"the element stored to `{a.tensor.name}` carries "
                   f"tag {d} of another position", m, a.shape, expected={d: c}, actual={d: v},
                   frag=value.frag, tensor=a.tensor.name,
                   coords=tuple(evaluate(m, x) for x in a.coords))
    _no_junk(ck, a, value, call)
    for rule in ck.pack.write if ck.pack is not None else ():
        value = rule(ck, a, value, call)
    if not ck.quiet:
        ck.writes.append(Write(a.tensor.name, a.coords, And(a.live, a.inbounds), value,
                               call.fn == "atomic_add", tma, a.shape, ck.path(),
                               list(ck.frames), ck.stmt, ck.scalars()))


def _no_junk(ck, a: Access, value: SV, call: ir.Call) -> None:
    """No stored element holds a contribution of no data (`floats.JUNK`): a reduction
    lane where the operands carry none of the contracted indices and neither is zero
    (`A.where(mask, tile, 1.0)` into a dot, a causal mask filled with 0 before `exp`)."""
    terms = value.cov.get(JUNK, [])
    if not terms:
        return
    m = ck.find(And(a.live, a.inbounds, Or(*[t.dom for t in terms])), a.shape)
    if m is None:
        ck.proven(f"{call.fn} {a.tensor.name}: no contribution of masked-off elements")
        return
    ck.violate("coverage", call.fn, f"the element stored to `{a.tensor.name}` includes "
               "products of masked-off elements that are not zero: a reduction lane "
               "carrying none of the contracted indices adds its value (a fill other than "
               "0, or a masked score that is not -inf-like before `exp`)", m, a.shape,
               expected={"contributions without an index": 0},
               actual={"contributions without an index": ">= 1"}, frag=value.frag,
               tensor=a.tensor.name, coords=tuple(evaluate(m, c) for c in a.coords))


def dot(ck, call: ir.Call) -> SV:
    # the operands' own finished reductions are data to this new one
    a, b = drop_final(ck.expr(call.arg("a"))), drop_final(ck.expr(call.arg("b")))
    m, k, n = a.shape[0], a.shape[1], b.shape[1]
    lane = ck.vars.fresh("l", "lane", 0, k)
    anyl = ck.vars.fresh("anyl", "lane", 0, k)
    a2 = a.map(substitution([(AXES[1], lane)]))
    b2 = b.map(substitution([(AXES[0], lane)]))
    lr = [ge(lane, 0), lt(lane, k)]
    live = And(a2.live(), b2.live())
    shape = (m, n)
    shared = sorted(set(a2.tags) & set(b2.tags))
    kind = "pipeline" if a.carried or b.carried else "contraction"
    what = ck.text(call)
    if a2.tags and b2.tags and not shared:
        model = ck.find(live, shape, lr)
        if model is not None:
            ck.violate("contraction", "dot", f"`{what}` contracts operands with no common "
                       f"index: lhs has {sorted(a2.tags)}, rhs has {sorted(b2.tags)}",
                       model, shape)
    contracted = []
    for name in shared:
        (ga, va), (gb, vb) = a2.tags[name], b2.tags[name]
        model = ck.find(And(live, ga, gb, ne(va, vb)), shape, lr)
        if model is not None:
            msg = (f"`{what}` multiplies lhs element with {name}={evaluate(model, va)} by rhs "
                   f"element with {name}={evaluate(model, vb)} at lane {evaluate(model, lane)}")
            if kind == "pipeline":
                msg += " (a loop-carried operand holds a different slice than the one "
                msg += "consumed with it)"
            ck.violate(kind, "dot", msg, model, shape, expected={name: va}, actual={name: vb},
                       frag="mma")
        else:
            ck.proven(f"dot: {name} contracted consistently")
        if depends_on(va, lane) or depends_on(vb, lane):
            contracted.append(name)
    some = [(lane, anyl)]
    tags = {}
    for side, other in ((a2, b2), (b2, a2)):
        for name, (g, v) in side.tags.items():
            if name in contracted or name in tags:
                continue
            # present where some lane contributes (a lane within the contraction)
            tags[name] = (And(subst(And(g, other.live()), some), ge(anyl, 0), lt(anyl, k)),
                          subst(v, some))
    # a lane adds an index of a contracted name where both operands carry that name there
    # (a masked-off score that picked up its row's maximum carries data, but no key)
    cov = {name: [Cov((lane,), And(live, a2.tags[name][0], b2.tags[name][0], ge(lane, 0),
                                      lt(lane, k)), a2.tags[name][1], "sum")]
           for name in contracted}
    # an operand's zero makes the product zero only where the other is within the bound
    # (0 * inf, 0 * NaN are NaN): nza is where a's zero does not, nzb the same of b
    nza, nzb = floats.nonzero_against(a2, b2), floats.nonzero_against(b2, a2)
    # a lane where the contracted indices are missing adds a product of no data, unless
    # an operand is zero there (a masked-off fill, exp of a -1e30 fill); none where each
    # operand is nonzero only where it carries them (masked loads), by construction
    if contracted and not all(floats.implies(nza, a2.tags[n][0]) and
                              floats.implies(nzb, b2.tags[n][0]) for n in contracted):
        # (read at lane 0 of the operands' own reductions: "some lane contributes" is
        # read existentially, and negated here it would be read for every lane)
        data = ck.fix_lanes(And(*[And(a2.tags[n][0], b2.tags[n][0]) for n in contracted]))
        cov[JUNK] = [floats.junk(lane, And(Not(data), nza, nzb), k)]
    for side, other in ((a2, b2), (b2, a2)):  # junk an operand holds, times the other
        for t in side.cov.get(JUNK, []):
            cov.setdefault(JUNK, []).append(
                Cov(t.bound + (lane,), And(t.dom, nza if other is a2 else nzb, ge(lane, 0),
                                           lt(lane, k)), t.idx, "sum"))
    acc = call.arg("acc")
    frag = call.arg("mma").name if isinstance(call.arg("mma"), ir.Symbol) else "mma"
    out = floats.with_facts(SV(shape, None, tags, cov, False, frag), floats.contracted(a, b, k))
    for rule in ck.pack.dot if ck.pack is not None else ():
        rule(ck, out, shape, what)
    if acc is not None and not (isinstance(acc, ir.Const) and acc.value is None):
        c = align(ck.expr(acc), shape)
        # the accumulator's own doubts go on (an inf in it stays inf)
        floats.with_facts(out, floats.contracted(a, b, k, c))
        check_added(ck, c, out.cov, shape, what)  # accumulating into a finished sum
        out.tags = union_tags(ck, [c, out], shape, what) if c.tags else out.tags
        out.cov = add_cov(c.cov, out.cov)
    return out


def assert_tags(ck, call: ir.Call) -> None:
    x = ck.expr(call.arg("x"))
    what = ck.text(call.arg("x"))
    anydata = Or(x.live(), *[t.dom for n, ts in x.cov.items() if n != JUNK for t in ts]) \
        if x.cov else x.live()
    for name, rel in call.tags:
        if isinstance(rel, ir.Call) and rel.fn == "covers":
            lo, hi = (align(ck.expr(rel.arg(p)), x.shape).val for p in ("lo", "hi"))
            if not all(b is not None and is_int(b) for b in (lo, hi)):
                raise NotImplementedError(f"check: the range of `{print_expr(rel)}` is not "
                                          "an integer range it can follow")
            if name not in x.cov:
                ck.violate("coverage", "assert_tags", f"`{what}` is not a reduction over "
                           f"{name}", ck.find(anydata, x.shape), x.shape)
                continue
            exactly_once(ck, x.cov[name], lo, hi, ck.path() + [anydata], x.shape, name,
                         "assert_tags", x.frag)
            continue
        target = align(ck.expr(rel), x.shape).val
        if target is None or not is_int(target):
            raise NotImplementedError(f"check: tag {name}=`{print_expr(rel)}` of A.assert_tags "
                                      "is not an integer it can follow")
        if name not in x.tags:
            ck.violate("assertion", "assert_tags", f"`{what}` carries no tag {name}",
                       ck.find(anydata, x.shape), x.shape)
            continue
        g, v = x.tags[name]
        model = ck.find(And(g, ne(v, target)), x.shape)
        if model is None:
            ck.proven(f"assert_tags: {name}")
            continue
        ck.violate("assertion", "assert_tags", f"`{what}` has tag {name} different from "
                   f"{print_expr(rel)}", model, x.shape, expected={name: target},
                   actual={name: v}, frag=x.frag)


__all__ = ["access", "load", "write", "dot", "assert_tags", "FALSE"]
