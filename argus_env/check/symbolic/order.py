"""Order invariants: a reduction that has been finished is not added to any more.

A value covering a name by a sum (its coverage over K, say) becomes *final* for that name where an op that only makes sense after the last
contribution is applied to it:

- it is normalised: `x / y` or `x * y` where both carry a sum over the name (an online
  softmax's `acc / l_i`, a mean divided by its own count);
- it is rounded to storage precision: `A.cast(x, A.bf16)` (or `f16`) of a sum.

Finality is an internal tag, `@final:<name>`, whose value is the line that finalised the
element; it moves with the element like any tag (elementwise ops, loops, branches) and
is dropped by `dot`, whose result is a new reduction of its operands. Adding coverage of
the name to a final element — `acc + p`, `A.dot(a, b, acc)` — is an **order** violation:
the sum goes on after the value was normalised (or rounded), so every later contribution
meets a value already divided by a partial total, and nearly every output is wrong while
coverage still counts each index once. A value stored to memory and loaded back is a new
element (a workspace of normalised partials may be combined by a later launch).
"""

from __future__ import annotations

from dataclasses import replace

import z3

from ..pack import FINAL, JUNK, NARROW_FLOATS as NARROW, SUMS, reduced_names
from .values import SV, And, Cov, If, Or, evaluate


def sums(v: SV) -> set[str]:
    """Names `v` covers by a sum (not by a max or min), its own terms or, for an
    accumulator's entry value in a loop body, the earlier iterations' (`@sums:`)."""
    return {n for n, ts in v.cov.items() if n != JUNK and any(t.kind == "sum" for t in ts)} | \
        {n[len(SUMS):] for n in v.tags if n.startswith(SUMS)}


def marked(name: str) -> bool:
    """An internal tag of these rules: they merge without conflict, a dot drops them
    from its operands."""
    return name.startswith(FINAL) or name.startswith(SUMS)


def reduced(ck) -> frozenset:
    """The names whose order is checked (`pack.reduced_names`), once per check."""
    names = ck.memo.get("order_names")
    if names is None:
        required = ck.task.store_coverage_for(ck.kernel.consts) if ck.task is not None else {}
        names = ck.memo["order_names"] = reduced_names(ck.kernel, required)
    return names


def finalise(ck, out: SV, names, how: str) -> None:
    """Mark `out` final for `names` where it carries data (mutates `out.tags`)."""
    names = set(names) & reduced(ck)
    if not names:
        return
    live = out.live()
    if out.cov:
        live = Or(live, *[t.dom for n, ts in out.cov.items() if n != JUNK for t in ts])
    line = ck._line()
    ck.memo.setdefault("final_how", {})[line] = how
    for n in sorted(names):
        out.tags[FINAL + n] = (live, z3.IntVal(line))


def check_added(ck, base: SV, added: dict[str, list[Cov]], shape, what: str) -> None:
    """`added` coverage terms are summed into `base`: none may reach a name `base` is
    final for, at an element where both hold."""
    for tag, (g, line) in list(base.tags.items()):
        if not tag.startswith(FINAL):
            continue
        name = tag[len(FINAL):]
        terms = [t for t in added.get(name, []) if t.kind == "sum"] \
            if name in reduced(ck) else []
        if not terms:
            continue
        m = ck.find(And(g, Or(*[t.dom for t in terms])), shape)
        if m is None:
            ck.proven(f"{what}: no contribution over {name} after it was finalised")
            continue
        at = evaluate(m, line)
        how = ck.memo.get("final_how", {}).get(at, "finalised")
        ck.violate("order", what, f"`{what}` adds to its reduction over {name} a value "
                   f"already {how} at line {at}: a sum must be complete before it is "
                   "normalised or rounded", m, shape,
                   expected={f"{name} contributions after line {at}": 0},
                   actual={f"{name} contributions after line {at}": ">= 1"}, frag=base.frag)


def merge_final(g0, v0, g, v) -> tuple:
    """Two final marks of one name meet: the element is final where either says so."""
    return Or(g0, g), If(g0, v0, v)


def drop_final(v: SV) -> SV:
    """`v` without its marks (a dot's operands: the result is a new reduction)."""
    if not any(marked(n) for n in v.tags):
        return v
    return replace(v, tags={n: t for n, t in v.tags.items() if not marked(n)})


__all__ = ["FINAL", "NARROW", "SUMS", "check_added", "drop_final", "finalise", "marked", "merge_final",
           "sums"]
