"""What the GPU recorded, read without fitting anything: the tables' paths, the
configuration a row names (parsed, never evaluated), and the cost models' recorded error
(`tasks/<task>/model_error_<gpu>.json`, written by `benchmarks/fit_cost_model.py`).

Both the cost models (`measure/analytic.py`: a table row by the program it recovers, the
expected error every estimate carries) and the fitting (`measure/learned.py`) read these.
"""

from __future__ import annotations

import ast
import dataclasses
import itertools
import json
from functools import lru_cache
from pathlib import Path

#: names of configuration fields in tables recorded before a field was renamed: the
#: field it became and how its value maps (None: no longer a field of its own)
LEGACY_FIELDS = {"tma_loads": ("tma", None), "tma_store": None,
                 "atomic_output": ("combine", {True: "atomic", False: None}),
                 # named (after atomic_output) only where a reduction pass holds
                 "reduce_pass": ("combine", {True: "reduce", False: None})}


def table_paths(task, hardware: str = "h200") -> list[Path]:
    """The task's tables for `hardware`: the main one, then any further recordings."""
    if not getattr(task, "anchors_file", None):
        return []
    main = Path(task.anchors_file).parent / f"table_{hardware}.csv"
    return [p for p in [main, *sorted(main.parent.glob(f"table_*_{hardware}.csv"))] if p.exists()]


def read_table_rows(paths, dims, snapshot: dict | None = None,
                    strict: bool = True) -> tuple[dict, dict, dict]:
    """The rows of a task's table files (`table_paths`), keyed by the sizes along `dims`
    and the program hash: a program with several rows at a shape (timed again, e.g. after
    its anchor changed) is its last row, the one rule every reader of the tables follows.
    With a `snapshot` ({file name: rows}), only each file's first rows as it counts them
    (the tables grow by appending), and a file it names must exist and hold them.
    Returns (rows, files, counts): `files` names the file each kept row came from,
    `counts` the rows read per file name. A row without its sizes or program hash is
    refused by file and line; with `strict=False` it is left out with a warning instead
    (a reader that must not stop an environment over one bad row: the best known)."""
    import csv
    rows, files, counts = {}, {}, {}
    for p in map(Path, paths):
        limit = None if snapshot is None else snapshot.get(p.name, 0)
        n = 0
        with p.open() as f:
            for line, r in enumerate(csv.DictReader(f), start=2):
                if limit is not None and n >= limit:
                    break
                n += 1
                try:
                    key = tuple(int(r[d]) for d in dims) + (r["program_hash"],)
                except (KeyError, TypeError, ValueError) as e:
                    why = (f"{p}:{line}: a row without its sizes {list(dims)} and "
                           f"program_hash ({e!r})")
                    if strict:
                        raise ValueError(why) from None
                    import warnings
                    warnings.warn(f"{why}: left out", stacklevel=2)
                    continue
                rows[key], files[key] = r, p.name
        if limit is not None and n < limit:
            raise ValueError(f"{p}: {n} rows, but the table snapshot {snapshot} counts "
                             f"{limit}: the table was cut or rewritten, not appended to, so "
                             "the snapshot cannot be read back")
        counts[p.name] = n
    if snapshot is not None:
        names = {Path(p).name for p in paths}
        for name, limit in snapshot.items():
            if limit and name not in names:
                raise ValueError(f"table snapshot: {name} ({limit} rows) is not among the "
                                 "tables read")
    return rows, files, counts


def _literal(text: str):
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return {"True": True, "False": False, "None": None}.get(text, text)


def parse_config_text(text: str) -> dict | None:
    """Field values from a row's configuration text: `Name(k=v, ...)` (a dataclass's repr)
    or `k=v,k=v`; None for free text (a summary). Parsed, never evaluated."""
    text = text.strip()
    try:
        node = ast.parse(text, mode="eval").body
    except SyntaxError:
        node = None
    if isinstance(node, ast.Call) and not node.args:
        try:
            return {kw.arg: ast.literal_eval(kw.value) for kw in node.keywords}
        except ValueError:
            return None
    if "=" in text and " " not in text.replace(", ", ","):
        pairs = [p.split("=", 1) for p in text.split(",") if p]
        if all(len(p) == 2 for p in pairs):
            return {k.strip(): _literal(v.strip()) for k, v in pairs}
    return None


def _config_from_fields(space, values: dict):
    base = space.baseline()
    names = {f.name for f in dataclasses.fields(base)}
    kw = {}
    for key, value in values.items():
        if key in names:
            kw[key] = value
        elif key in LEGACY_FIELDS:
            to = LEGACY_FIELDS[key]
            if to is not None:
                field, mapping = to
                kw[field] = mapping.get(value, value) if mapping else value
        else:
            return None
    return dataclasses.replace(base, **kw)


def config_from_text(space, text: str):
    """The configuration a row's text names (`parse_config_text`), fields it predates at
    their defaults; None for free text or a field the space does not have."""
    fields = parse_config_text(text or "")
    if fields is None:
        return None
    try:
        return _config_from_fields(space, fields)
    except (TypeError, ValueError):
        return None


class ConfigRecovery:
    """Configurations from row texts, for one task: field lists parsed, summaries looked up
    among the space's configurations (built once, on the first summary)."""

    def __init__(self, task):
        self.task, self.space = task, task.space
        self._by_summary: dict | None = None

    def by_summary(self, text: str):
        if self._by_summary is None:
            self._by_summary = {}
            base = self.space.baseline()
            if hasattr(base, "summary"):
                # every transformation's values and the baseline's own
                fields = self.space.field_values()
                for values in itertools.product(*(v for _, v in fields)):
                    c = dataclasses.replace(base, **{f: v for (f, _), v in zip(fields, values)})
                    self._by_summary.setdefault(c.summary(), c)
        return self._by_summary.get(text)

    def __call__(self, row: dict):
        fields = parse_config_text(row.get("config", ""))
        if fields is not None:
            return _config_from_fields(self.space, fields)
        return self.by_summary(row.get("summary") or row.get("config", ""))


def error_file(task, hardware: str = "h200") -> Path | None:
    if not getattr(task, "anchors_file", None):
        return None
    return Path(task.anchors_file).parent / f"model_error_{hardware}.json"


@lru_cache(maxsize=32)
def _recorded(path: str) -> dict | None:
    p = Path(path)
    return json.loads(p.read_text()) if p.exists() else None


def expected_error(task, hardware: str = "h200") -> dict | None:
    """The analytic model's recorded error for `task` on `hardware`: median and 90th
    percentile |log(model / measured)|, within-shape Spearman, how many programs, or None
    when none was recorded.

    Where random legal walks the tables never held were timed on that GPU
    (`record_programs.py evaluate --record-error`, the file's `heldout_walks`), those
    figures are the expected error (`basis: "held-out walks"`): they are what an agent's
    model-priced programs meet, while the fit on the tables' own rows
    (`basis: "recorded rows"`, kept under `on_recorded_rows`) sees only the programs
    someone chose to record, and understates it."""
    path = error_file(task, hardware)
    data = _recorded(str(path)) if path is not None else None
    if not data or "analytic" not in data:
        return None
    a = data["analytic"]
    rows = {"median_abs_log_error": a["median_abs_log_error"],
            "p90_abs_log_error": a["p90_abs_log_error"],
            "spearman_within_shape": a["spearman_within_shape"],
            "programs": a["programs"], "recorded": data.get("created"),
            "source": f"{path.parent.name}/{path.name}", "basis": "recorded rows"}
    walks = data.get("heldout_walks")
    if not walks or walks.get("median_abs_log_error") is None:
        return rows
    return {"median_abs_log_error": walks["median_abs_log_error"],
            "p90_abs_log_error": walks["p90_abs_log_error"],
            "spearman_within_shape": walks["spearman_within_shape"],
            "programs": walks["model_priced_with_live"], "recorded": walks.get("created"),
            "source": f"{path.parent.name}/{path.name}", "basis": "held-out walks",
            "on_recorded_rows": {k: rows[k] for k in ("median_abs_log_error",
                                                     "p90_abs_log_error",
                                                     "spearman_within_shape", "programs")}}


def record_heldout_error(task, hardware: str, figures: dict) -> Path | None:
    """Write one task's held-out walk figures (`figures`: the task's entry of a
    `record_programs.py evaluate` result, with its provenance) into its model-error file
    as `heldout_walks`, keeping the rest of the file. Returns the file, or None where the
    task has no model-error file to hold it (nothing fitted on that GPU's tables)."""
    path = error_file(task, hardware)
    if path is None or not path.exists():
        return None
    data = json.loads(path.read_text())
    data["heldout_walks"] = figures
    path.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
    _recorded.cache_clear()
    return path


__all__ = ["ConfigRecovery", "LEGACY_FIELDS", "config_from_text", "error_file", "expected_error",
           "record_heldout_error",
           "parse_config_text", "table_paths"]
