"""The best program known per shape: the fastest that ran in the task's GPU tables.

An agent's result means most next to the best kernel anyone has found for the same
problem, not only next to the library. `best_known(task, sizes, hardware)` is the fastest
row of `tasks/<task>/table_<gpu>*.csv` at the shape's anchor sizes that ran correctly on
the GPU, with what identifies it (program hash, configuration, table, when it was
recorded); the environment reports an episode's best against it (`info["regret"]`: best
found / best known, 1.0 meaning the best known was matched). Shapes the tables never
measured have no best known (None).
"""

from __future__ import annotations

import math
from functools import lru_cache
from pathlib import Path

from .recorded import read_table_rows, table_paths


@lru_cache(maxsize=16)
def _best_by_shape(paths: tuple[str, ...], dims: tuple[str, ...], _stamp: tuple) -> dict:
    # a program's last row, as priced; a malformed row is left out with a warning rather
    # than stopping every reset (pricing reads the tables strictly)
    rows, files, _ = read_table_rows(paths, dims, strict=False)
    best: dict[tuple, dict] = {}
    for full, row in rows.items():
        key = full[:-1]
        if row.get("ok") != "True":
            continue
        try:
            frac = float(row["ratio"])
            tflops = float(row["tflops"])
        except (KeyError, ValueError):
            continue
        if not (math.isfinite(frac) and frac > 0):
            continue
        if key not in best or frac > best[key]["frac_anchor"]:
            best[key] = {"frac_anchor": frac, "tflops": tflops, "ms": float(row["ms"]),
                         "program_hash": row.get("program_hash", ""),
                         "config": row.get("summary") or row.get("config", ""),
                         "table": files[full], "recorded": row.get("timestamp", ""),
                         "date": row.get("date", ""),
                         "shape": row.get("shape", "")}
    return best


def best_known(task, sizes: dict, hardware: str = "h200") -> dict | None:
    """The fastest correct program the task's `hardware` tables hold at `sizes` (its
    fraction of the library timed in the same run, TFLOP/s, program hash, configuration,
    table), or None when the tables never measured the shape."""
    paths = tuple(str(p) for p in table_paths(task, hardware))
    dims = tuple(getattr(task, "anchor_dims", ()))
    if not paths or not dims or any(d not in sizes for d in dims):
        return None
    stamp = tuple(Path(p).stat().st_mtime_ns for p in paths)
    found = _best_by_shape(paths, dims, stamp).get(tuple(int(sizes[d]) for d in dims))
    return dict(found) if found else None


def regret(best_frac: float, known: dict | None) -> float:
    """Best found / best known (fractions of the library), or NaN without a best known."""
    if not known or not known.get("frac_anchor") or not math.isfinite(best_frac):
        return math.nan
    return best_frac / known["frac_anchor"]


__all__ = ["best_known", "regret"]
