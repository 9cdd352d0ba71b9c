"""The order invariant in the concrete interpreter (`symbolic/order.py` states it): an
element whose sum over a name was normalised by its own total or rounded to a narrow
float is final for that name (the internal tag `@final:<name>`, valued by the line that
finalised it); adding coverage of the name to it is an **order** violation."""

from __future__ import annotations

import numpy as np

from ..pack import FINAL, NARROW_FLOATS, reduced_names
from .values import Tag, Val, first


def reduced(it) -> frozenset:
    """The names whose order is checked (`pack.reduced_names`), once per run."""
    if it.sh.order_names is None:
        it.sh.order_names = reduced_names(it.kernel, it.sh.task_cov)
    return it.sh.order_names


def finalise(it, out: Val, line: int, has: dict[str, np.ndarray]) -> Val:
    """`out` marked final for each name of `has` where `has[name]` holds (mutates tags)."""
    names = reduced(it)
    for name, where in has.items():
        if name in names and where.any():
            out.tags[FINAL + name] = Tag(np.full(out.shape, line, dtype=np.int64), where)
    return out


def normalised(ops: list[Val]) -> dict[str, np.ndarray]:
    """Names both operands of `x * y` or `x / y` cover by a sum, and where both do."""
    a, b = ops
    return {n: a.cov[n].counts.any(-1) & b.cov[n].counts.any(-1)
            for n in a.cov if n in b.cov}


def rounded(x: Val, dtype: str) -> dict[str, np.ndarray]:
    """Names `x` covers by a sum, where it does, when it is rounded to `dtype`."""
    if dtype not in NARROW_FLOATS:
        return {}
    return {n: c.counts.any(-1) for n, c in x.cov.items()}


def check_added(it, op: str, line: int, base: Val, added: Val, tile: Val) -> None:
    """`added`'s coverage is summed into `base`: not where `base` is final for the name."""
    for tag, t in base.tags.items():
        if not tag.startswith(FINAL):
            continue
        name = tag[len(FINAL):]
        c = added.cov.get(name)
        if c is None or name not in reduced(it):
            continue
        it.checked(op, line, "order")
        el = first(np.broadcast_to(t.has, tile.shape) &
                   np.broadcast_to(c.counts.any(-1), tile.shape))
        if el is not None and it.wants("order", line):
            at = int(np.broadcast_to(t.val, tile.shape)[el])
            it.violate("order", op, line, f"`{op}` adds to its reduction over {name} a value "
                       f"already finalised (normalised or rounded) at line {at}",
                       element=el, tile=tile,
                       expected={f"{name} contributions after line {at}": 0},
                       actual={f"{name} contributions after line {at}": ">= 1"})


def drop_final(v: Val) -> Val:
    """`v` without final marks (a dot's operand: the result is a new reduction)."""
    if not any(n.startswith(FINAL) for n in v.tags):
        return v
    return v.moved(tags={n: t for n, t in v.tags.items() if not n.startswith(FINAL)})


__all__ = ["check_added", "drop_final", "finalise", "normalised", "rounded"]
