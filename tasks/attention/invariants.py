"""Attention's invariant pack: online-softmax consistency, the exponent's base, the causal
mask and the GQA head map, on top of the core tag rules (`argus_env/check/SEMANTICS.md`);
the rules in full are in `INVARIANTS.md` beside this file.

Internal tags, named with "@" so they never meet a tensor's dimension names:

- `@mx`: a row maximum (`A.max`/`A.min` reduction) carries the *version* of the point where
  it was taken: the value of the innermost runtime loop's variable, 0 outside loops;
  `A.maximum` of two versions keeps the newer.
- `x - m` with `m` a maximum gives `@ref`: the values are exponents relative to that
  maximum; `m_old - m_new` of two maxima gives the rescale factor `@from`/`@to`.
- multiplying a value relative to version a (`@ref` = a) by a factor from a to b yields a
  value relative to b; a factor from a to b meeting a value relative to c != a is a
  **softmax** violation (the accumulator and the row sum must be rescaled by the factor of
  the same running-max change), and so is adding or dividing values relative to
  different maxima (an accumulator not rescaled, a row sum normalising another range).
- `@base2`: the value was scaled by log2(e) (a compile-time factor equal to log2(e) or to
  the softmax scale times log2(e)); `exp2` needs it, `exp` must not see it (**exp_base**).

A causal program's query and key positions are dims SQ and SK (**causal**: no element with
key > query may reach an exponent); a query head H meets only KV head H // GROUP
(**head_map**).
"""

from __future__ import annotations

import math

import numpy as np

from argus_env.check.concrete.values import Tag, first
from argus_env.check.pack import (INTERNAL, Conflict, InvariantClass, InvariantPack,
                                  register_pack)

try:  # the rules run inside the checker, which needs z3; the task also runs without it
    import z3
except ImportError:  # pragma: no cover - a machine that only measures
    z3 = None

LOG2E = 1.4426950408889634
SPECIAL = ("@ref", "@from", "@to", "@mx", "@base2")


def causal_pair(consts: dict) -> tuple[str, str] | None:
    """(query dim, key dim) when the program is causal: no key after its query may reach
    an exponent."""
    return ("SQ", "SK") if consts.get("CAUSAL") else None


def tag_relations(consts: dict) -> list:
    """GQA: a query head h meets only KV head h // GROUP."""
    group = int(consts.get("GROUP", 1) or 1)
    return [("H", "KVH", lambda h: h / group, "head_map")]


def version(ck) -> z3.ArithRef:
    """The point a maximum is taken at: the innermost runtime loop's value, else 0."""
    for f in reversed(ck.frames):
        if f.kind == "loop":
            return f.value if f.value is not None else f.start + f.var * f.step
    return z3.IntVal(0)


def on_reduce(ck, fn: str, out, present) -> None:
    """A row maximum of tagged values carries the version of the point it was taken at."""
    if out.tags:
        out.tags["@mx"] = (present, version(ck))


def newer(g0, v0, g, v) -> tuple:
    """Two maxima meet in `A.maximum`: the newer version wins, no conflict."""
    return (z3.Or(g0, g), z3.If(z3.And(g0, g), z3.If(v0 >= v, v0, v), z3.If(g0, v0, v)))


def on_subtract(ck, x, y, out, shape, what: str) -> None:
    """`x - y` where y (or both) are maxima: relative values or a rescale factor."""
    if "@mx" not in y.tags:
        return
    gy, vy = y.tags["@mx"]
    out.tags.pop("@mx", None)
    if "@mx" in x.tags:
        gx, vx = x.tags["@mx"]
        out.tags["@from"], out.tags["@to"] = (gx, vx), (gy, vy)
    else:
        out.tags["@ref"] = (gy, vy)


def on_multiply(ck, x, y, out, shape, what: str) -> None:
    """A value relative to version a times a factor from a to b: relative to b; and a
    compile-time factor holding log2(e) marks the values `@base2`."""
    _rescale(ck, x, y, out, shape, what)
    if scale_tag(ck, x.fval if y.tags else y.fval if x.tags else None):
        out.tags["@base2"] = (z3.BoolVal(True), z3.IntVal(1))


def _rescale(ck, x, y, out, shape, what: str) -> None:
    factor, value = (x, y) if "@from" in x.tags else (y, x) if "@from" in y.tags else (None, None)
    if factor is None:
        return
    (gf, vf), (gt, vt) = factor.tags["@from"], factor.tags["@to"]
    if "@ref" in value.tags:
        gr, vr = value.tags["@ref"]
        m = ck.find(z3.And(gf, gr, vf != vr), shape)
        if m is not None:
            ck.violate("softmax", "rescale", f"`{what}` rescales a value taken relative to the "
                       "maximum of one iteration by the factor of another iteration's change",
                       m, shape, expected={"max version": vf}, actual={"max version": vr})
        else:
            ck.proven(f"{what}: rescaled by the factor of its own maximum's change")
    for name in ("@from", "@to", "@mx"):
        out.tags.pop(name, None)
    out.tags["@ref"] = (gt, vt)


def conflict(ck, name: str) -> Conflict | None:
    """The class a disagreement of an internal tag breaks, and how it is named."""
    if name == "@ref":
        return Conflict("softmax", "max version",
                        " (values relative to different running maxima)")
    if name in ("@from", "@to"):
        return Conflict("softmax")
    if name == "@base2":
        return Conflict("exp_base", "log2(e) scaling")
    return None


def scale_tag(ck, factor: float | None) -> bool:
    """Whether multiplying by compile-time `factor` folds log2(e) into the values."""
    if factor is None or factor == 0:
        return False
    scale = (ck.kernel.consts.get("SCALE") or 1.0)
    return any(math.isclose(factor, c, rel_tol=1e-4) for c in (LOG2E, scale * LOG2E))


def check_exponent(ck, fn: str, x, shape, what: str) -> None:
    """exp_base for `exp`/`exp2`, and the causal mask before any exponent."""
    if x.tags and not all(n.startswith(INTERNAL) for n in x.tags):
        base2 = "@base2" in x.tags
        if fn == "exp2" and not base2:
            ck.violate("exp_base", fn, f"`{what}` takes exp2 of values not scaled by "
                       "log2(e): fold log2(e) into the softmax scale", ck.find(x.live(), shape),
                       shape, expected={"scale": "SCALE * log2(e)"}, actual={"scale": "SCALE"})
        elif fn == "exp" and base2:
            ck.violate("exp_base", fn, f"`{what}` takes exp of values scaled by log2(e): use "
                       "exp2, or drop log2(e) from the scale", ck.find(x.live(), shape), shape,
                       expected={"function": "exp2"}, actual={"function": "exp"})
        else:
            ck.proven(f"{fn}: exponent base matches the scale")
    pair = causal_pair(ck.kernel.consts)
    if pair and pair[0] in x.tags and pair[1] in x.tags:
        (gq, vq), (gk, vk) = x.tags[pair[0]], x.tags[pair[1]]
        m = ck.find(z3.And(gq, gk, vk > vq), shape)
        if m is not None:
            ck.violate("causal", fn, f"`{what}` exponentiates a score whose key comes after its "
                       "query: mask it before the exponent, or skip its block", m, shape,
                       expected={pair[1]: f"<= {pair[0]}"}, actual={pair[0]: vq, pair[1]: vk})
        else:
            ck.proven(f"{fn}: no key after its query reaches the exponent")


def check_relations(ck, out, shape, what: str) -> None:
    """The relations between tags that meet in a `dot` (GQA: KVH = H // GROUP)."""
    for a, b, fn, invariant in tag_relations(ck.kernel.consts):
        if a in out.tags and b in out.tags:
            (ga, va), (gb, vb) = out.tags[a], out.tags[b]
            want = fn(va)
            m = ck.find(z3.And(ga, gb, vb != want), shape)
            if m is not None:
                ck.violate(invariant, "dot", f"`{what}` combines {a}={{{a}}} with {b} other than "
                           f"the one it maps to".replace(f"{{{a}}}", "a query head"), m, shape,
                           expected={b: want}, actual={a: va, b: vb})
            else:
                ck.proven(f"{what}: {b} follows from {a}")


# ---------------------------------------------------------------- the concrete interpreter
# The same rules over one instance's numpy arrays (`argus_env.check.concrete`): a `Tag` has
# a value at every element and says where it is carried.

def c_version(it) -> int:
    """The point a maximum is taken at: the innermost runtime loop's value, else 0."""
    if it.runtime:
        return int(it.env[it.runtime[-1]].value)
    return 0


def c_on_reduce(it, fn: str, line: int, out, present) -> None:
    if out.tags:
        out.tags["@mx"] = Tag(np.full(out.shape, c_version(it), dtype=np.int64), present)


def c_newer(prev, t):
    both = prev.has & t.has
    val = np.where(both, np.maximum(prev.val, t.val), np.where(prev.has, prev.val, t.val))
    return Tag(val, prev.has | t.has)


def c_on_subtract(it, op: str, line: int, ops: list, out) -> None:
    x, y = ops
    if "@mx" not in y.tags:
        return
    out.tags.pop("@mx", None)
    if "@mx" in x.tags:
        out.tags["@from"], out.tags["@to"] = x.tags["@mx"], y.tags["@mx"]
    else:
        out.tags["@ref"] = y.tags["@mx"]


def c_on_multiply(it, op: str, line: int, ops: list, out) -> None:
    x, y = ops
    factor, value = (x, y) if "@from" in x.tags else (y, x) if "@from" in y.tags else (None, None)
    if factor is not None:
        f, to = factor.tags["@from"], factor.tags["@to"]
        if "@ref" in value.tags:
            r = value.tags["@ref"]
            it.checked("rescale", line, "softmax")
            el = first(f.has & r.has & (f.val != r.val)) if it.wants("softmax", line) else None
            if el is not None:
                it.violate("softmax", "rescale", line, "a value taken relative to the maximum "
                           "of one iteration is rescaled by the factor of another iteration's "
                           "change", element=el, tile=out,
                           expected={"max version": int(f.val[el])},
                           actual={"max version": int(r.val[el])})
        for name in ("@from", "@to", "@mx"):
            out.tags.pop(name, None)
        out.tags["@ref"] = to
    factor_value = x.fval if y.tags else y.fval if x.tags else None
    if scale_tag(it, factor_value):
        out.tags["@base2"] = Tag(np.ones(out.shape, dtype=np.int64), np.ones(out.shape, dtype=bool))


def c_check_exponent(it, fn: str, line: int, x) -> None:
    """exp_base and the causal mask, before an exponent."""
    data = [n for n in x.tags if not n.startswith(INTERNAL)]
    live = np.zeros(x.shape, dtype=bool)
    for n in data:
        live |= x.tags[n].has
    if data and live.any():
        base2 = "@base2" in x.tags
        it.checked(fn, line, "exp_base")
        if (fn == "exp2") != base2 and it.wants("exp_base", line):
            it.violate("exp_base", fn, line, f"{fn} of values " + (
                "not scaled by log2(e): fold log2(e) into the softmax scale" if fn == "exp2"
                else "scaled by log2(e): use exp2, or drop log2(e) from the scale"),
                element=first(live), tile=x,
                expected={"scale": "SCALE * log2(e)"} if fn == "exp2" else {"function": "exp2"},
                actual={"scale": "SCALE"} if fn == "exp2" else {"function": "exp"})
    pair = causal_pair(it.kernel.consts)
    if pair and pair[0] in x.tags and pair[1] in x.tags:
        q, k = x.tags[pair[0]], x.tags[pair[1]]
        it.checked(fn, line, "causal")
        el = first(q.has & k.has & (k.val > q.val)) if it.wants("causal", line) else None
        if el is not None:
            it.violate("causal", fn, line, f"{fn} of a score whose key comes after its query: "
                       "mask it before the exponent, or skip its block", element=el, tile=x,
                       expected={pair[1]: f"<= {pair[0]}"},
                       actual={pair[0]: int(q.val[el]), pair[1]: int(k.val[el])})


def c_check_relations(it, line: int, out) -> None:
    """GQA: where a query head and a KV head meet in a dot, KVH = H // GROUP."""
    for a, b, fn, invariant in tag_relations(it.kernel.consts):
        if a in out.tags and b in out.tags:
            ta, tb = out.tags[a], out.tags[b]
            it.checked("dot", line, invariant)
            want = fn(ta.val)
            want = np.floor(want).astype(np.int64) if isinstance(want, np.ndarray) else want
            el = first(ta.has & tb.has & (tb.val != want)) if it.wants(invariant, line) else None
            if el is not None:
                it.violate(invariant, "dot", line, f"a query head meets {b} other than the one "
                           "it maps to", element=el, tile=out,
                           expected={b: int(want[el])}, actual={a: int(ta.val[el]), b: int(tb.val[el])})


PACK = register_pack(InvariantPack(
    "attention",
    classes=(
        InvariantClass("causal", "a key after its query reaches the exponent unmasked"),
        InvariantClass("softmax", "online-softmax rescaling or normalisation inconsistent"),
        InvariantClass("exp_base", "exp2 without log2(e) folded into the scale"),
        InvariantClass("head_map", "a query head meets the wrong KV head (GQA)"),
    ),
    report_slots=8,  # room for three more classes without changing the observation
    binop={"-": on_subtract, "*": on_multiply},
    calls={"exp": check_exponent, "exp2": check_exponent},
    reduce={"max": on_reduce, "min": on_reduce},
    dot=(check_relations,),
    merge={"@mx": newer},
    conflict=conflict,
    concrete_ops={"-": c_on_subtract, "*": c_on_multiply},
    concrete_calls={"exp": c_check_exponent, "exp2": c_check_exponent},
    concrete_reduce={"max": c_on_reduce, "min": c_on_reduce},
    concrete_dot=(c_check_relations,),
    concrete_merge={"@mx": c_newer},
))
