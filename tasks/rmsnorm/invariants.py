"""RMSNorm's invariant pack: each row is normalised by its own row's statistic.

The other invariant of the task is core: every output element carries coverage of H over
[0, H), each feature once (`RMSNormTask.store_coverage`), so a reduction that skips or
repeats a feature tile is a **coverage** violation at the store.

A sum over the features (`A.sum` whose result covers H) is a row statistic. Its row moves
from the tag T to the internal tag `@stat` (named with "@" so it never meets a tensor's
dims), so that where a statistic scales row data (`*` or `/` with an operand tagged T)
the pack compares the two rows: a statistic of row s scaling row t != s is a
**row_stat** violation (a neighbour's statistic broadcast to this row), with the
counterexample instance and element. Rows meeting in any other way stay core tag
conflicts. The concrete interpreter has no such rule: there the same program shows a
core tag_conflict of T.
"""

from __future__ import annotations

try:  # the rules run inside the checker, which needs z3; the task also runs without it
    import z3
except ImportError:  # pragma: no cover - a machine that only measures
    z3 = None

from argus_env.check.pack import InvariantClass, InvariantPack, register_pack

ROW, FEATURE = "T", "H"
STAT = "@stat"  # the row a statistic was reduced from


def on_reduce(ck, fn: str, out, present) -> None:
    """A sum over the features of a row: the statistic remembers its row as `@stat`."""
    if fn == "sum" and FEATURE in out.cov and ROW in out.tags:
        out.tags[STAT] = out.tags.pop(ROW)


def on_scale(ck, x, y, out, shape, what: str) -> None:
    """A statistic scaling row data: both must be of one row."""
    for stat, data in ((x, y), (y, x)):
        if STAT not in stat.tags or ROW not in data.tags:
            continue
        (gs, vs), (gd, vd) = stat.tags[STAT], data.tags[ROW]
        m = ck.find(z3.And(gs, gd, vs != vd), shape)
        if m is not None:
            ck.violate("row_stat", what, f"`{what}` scales a row by another row's statistic",
                       m, shape, expected={ROW: vd}, actual={ROW: vs})
        else:
            ck.proven(f"{what}: each row scaled by its own statistic")


PACK = register_pack(InvariantPack(
    "rmsnorm",
    classes=(InvariantClass("row_stat", "a row is normalised by another row's statistic"),),
    report_slots=4,  # room for two more classes without changing the observation
    binop={"*": on_scale, "/": on_scale},
    reduce={"sum": on_reduce},
))
