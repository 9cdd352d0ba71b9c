"""Tags and coverage of elementwise combinations (SEMANTICS.md, "Op rules"): the union of
the operands' tags, where one name with two values is a conflict, and the multiset sum of
coverage. The task's pack may merge a tag of its own instead (`InvariantPack.merge`) or
report a conflict as one of its classes (`InvariantPack.conflict`)."""

from __future__ import annotations

import z3

from .order import marked, merge_final
from .values import SV, And, If, Or, ne

FALSE = z3.BoolVal(False)


def bcast(*shapes) -> tuple[int, ...]:
    """The broadcast shape of `shapes` (numpy rules)."""
    out: tuple[int, ...] = ()
    for s in shapes:
        n = max(len(out), len(s))
        a, b = (1,) * (n - len(out)) + out, (1,) * (n - len(s)) + s
        out = tuple(max(x, y) for x, y in zip(a, b))
    return out


def union_tags(ck, xs: list[SV], shape, what: str) -> dict:
    """Tags of an elementwise combination; same-named tags must agree (tag_conflict)."""
    pack = ck.pack
    out: dict = {}
    for x in xs:
        for name, (g, v) in x.tags.items():
            if name not in out:
                out[name] = (g, v)
                continue
            g0, v0 = out[name]
            if marked(name):  # the order rules' marks: where either says
                out[name] = merge_final(g0, v0, g, v)
                continue
            rule = pack.merge.get(name) if pack is not None else None
            if rule is not None:  # the pack's own way to combine two values of its tag
                out[name] = rule(g0, v0, g, v)
                continue
            if not (g0.eq(g) and v0.eq(v)):
                m = ck.find(And(g0, g, ne(v0, v)), shape)
                if m is not None:
                    c = pack.conflict(ck, name) if pack is not None and pack.conflict else None
                    label = (c.label if c is not None else "") or name
                    ck.violate(c.invariant if c is not None else "tag_conflict", what,
                               f"`{what}` meets two values of {label}"
                               + (c.note if c is not None else ""),
                               m, shape, expected={label: v0}, actual={label: v})
                else:
                    ck.proven(f"{what}: tag {name} agrees")
            out[name] = (Or(g0, g), If(g0, v0, v))
    return out


def add_cov(*covs) -> dict:
    """The multiset sum of coverage (summing partial sums)."""
    out: dict = {}
    for c in covs:
        for name, terms in c.items():
            out.setdefault(name, []).extend(terms)
    return out
