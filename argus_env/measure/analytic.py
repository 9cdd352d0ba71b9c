"""The deterministic backends: `model` (the analytic cost model on the target) and `table`
(measurements recorded on a GPU, shipped as data, with the model for what they lack).

Both price what a program executes (`argus_env.ir.live`). The table answers a program it
recorded, and any program that executes the same thing at the shape: one that differs only
in docstrings, comments or dead code takes the recorded row, a recorded
GPU failure (compile error, wrong numbers) included. The table's key keeps the constants
(the space's programs differ in unused ones, and the committed scores were made so)."""

from __future__ import annotations

import math
from collections import OrderedDict
from pathlib import Path

from ..dsl.program import Program
from ..ir import nodes as ir
from ..ir.live import live_key, live_program
from ..ir.rewrite import walk
from ..target import Target, as_target
from .features import KernelFeatures, extract
from .correction import (DEFAULT_ESTIMATOR, TreeCorrection, check_estimator, correction_for,
                         fit_id,
                         structure)
from .recorded import ConfigRecovery, expected_error, read_table_rows, table_paths
from .measurement import Backend, Measurement, recorded_anchor
from .model import estimate


#: where a model price's library figure comes from where no anchors file was recorded
#: for the GPU (`ModelBackend.anchor`): "measured", the library as the GPU's tables timed
#: it at the shape (0.9 x the roofline where they never timed the shape); "roofline",
#: always 0.9 x the roofline (how records made before the field were priced)
ANCHORS = ("measured", "roofline")
DEFAULT_ANCHOR = "measured"
LEGACY_ANCHOR = "roofline"


def check_anchor(model_anchor: str) -> str:
    if model_anchor not in ANCHORS:
        raise ValueError(f"model_anchor must be one of {', '.join(map(repr, ANCHORS))}, "
                         f"got {model_anchor!r}")
    return model_anchor


def row_anchor(row: dict) -> str | None:
    """The library's TFLOP/s a table row's run timed beside the program (`anchor_tflops`,
    or `cublas_tflops` in the GEMM table, which was recorded first), as written; None or
    "" where the row has none."""
    return row.get("anchor_tflops") or row.get("cublas_tflops")


def anchor_medians(rows: dict) -> dict:
    """{shape: median library TFLOP/s} over table `rows` ({shape + (hash,): row}) that
    carry the library's figure from their run (`row_anchor`)."""
    import statistics
    by: dict = {}
    for key, row in rows.items():
        try:
            v = float(row_anchor(row) or "nan")
        except ValueError:
            continue
        if math.isfinite(v) and v > 0:
            by.setdefault(key[:-1], []).append(v)
    return {shape: statistics.median(v) for shape, v in by.items()}


class ModelBackend(Backend):
    """The analytic cost model on a hardware profile: exactly reproducible anywhere."""

    name = "model"

    def __init__(self, hardware: Target | str = "h200", estimator: str = DEFAULT_ESTIMATOR,
                 fit: str | None = None, model_anchor: str = DEFAULT_ANCHOR):
        self.target = as_target(hardware)
        self.profile = self.target.profile
        # where the library's figure a model price is set against comes from (`anchor`)
        self.model_anchor = check_anchor(model_anchor)
        self._anchors: dict[str, dict] = {}
        # "corrected": the analytic time times the task's learned correction for this GPU,
        # where one is fitted and used (`measure/correction.py`); "analytic": the model alone
        self.estimator = check_estimator(estimator)
        if fit is not None and self.estimator != "corrected":
            raise ValueError(f"a correction fit prices with the correction; it needs "
                             f"estimator='corrected', not {self.estimator!r}")
        # a fit pinned by a record (`correction.fit_id`), else the current one
        self.fit = fit

    def roofline(self, f: KernelFeatures) -> float:
        """TFLOP/s allowed by the compute ceiling and compulsory traffic."""
        ceiling = self.profile.bf16_tflops_achievable
        if f.min_bytes <= 0:
            return ceiling
        memory_ms = f.min_bytes / (self.profile.dram_tbps * 1e9)
        return min(ceiling, f.flops / memory_ms / 1e9)

    def anchor(self, task, sizes: dict, f: KernelFeatures) -> float:
        """The library's TFLOP/s at `sizes` a model price is a fraction of: the task's
        recorded anchors file (H200); else, with `model_anchor="measured"`, the median
        of the library's figures this GPU's tables timed beside their rows at this shape;
        else 0.9 x the shape's roofline, an estimate (`anchor_source`)."""
        return self.anchor_source(task, sizes, f)[0]

    def anchor_source(self, task, sizes: dict, f: KernelFeatures) -> tuple[float, str]:
        """(`anchor`, where it came from: "recorded", "tables" or "roofline estimate")."""
        recorded = recorded_anchor(task, sizes, self.profile.name) \
            if self.profile.name.lower().startswith("h200") else None
        if recorded:
            return recorded, "recorded"
        if self.model_anchor == "measured":
            shape = tuple(int(sizes[d]) for d in task.anchor_dims) \
                if all(d in sizes for d in task.anchor_dims) else None
            timed = self.anchor_rows(task).get(shape) if shape is not None else None
            if timed:
                return timed, "tables"
        return 0.9 * self.roofline(f), "roofline estimate"

    def anchor_rows(self, task) -> dict:
        """{shape along `task.anchor_dims`: the median library TFLOP/s the GPU tables of
        this profile timed there}, from every row with the figure (`TableBackend` reads
        its own rows, a pinned snapshot included)."""
        if task.name not in self._anchors:
            paths = table_paths(task, self.profile.name.lower()) \
                if getattr(task, "anchors_file", None) else []
            rows = read_table_rows(paths, task.anchor_dims, strict=False)[0] if paths else {}
            self._anchors[task.name] = anchor_medians(rows)
        return self._anchors[task.name]

    def _cuda_cores(self, own: dict, task, sizes: dict) -> dict:
        """A task model's answer for a program without a dot: no faster than the task's
        FLOPs at the CUDA cores' peak."""
        floor_ms = task.flops(sizes) / (self.profile.fp32_tflops * 1e9)
        if own["ms"] >= floor_ms:
            return own
        return {**own, "ms": floor_ms, "tflops": task.flops(sizes) / floor_ms / 1e9,
                "bound": "compute"}

    def measure(self, program: Program, sizes: dict, task, features: KernelFeatures | None = None
                ) -> Measurement:
        f = features or extract(program, sizes, task, target=self.target)
        correction = self.correction(task)
        if getattr(task, "cost_model", None) is not None:  # a task with a model of its own
            own = task.cost_model(program, sizes, self.target)
            ok = own.get("bound") != "illegal" and math.isfinite(own["ms"]) and own["ms"] > 0
            corrected = self._corrected(own["ms"], own.get("features"), sizes, task, f,
                                        correction) if ok else None
            if corrected is not None:
                own = {**own, "ms": corrected["ms"], "tflops": task.flops(sizes) /
                       corrected["ms"] / 1e9}
            if ok and not _has_dot(program, sizes, task, self.target):
                own = self._cuda_cores(own, task, sizes)
            error = "" if ok else ("; ".join(own.get("reasons") or ()) or
                                   "the cost model finds this configuration cannot run here")
            anchor, source = self.anchor_source(task, sizes, f)
            return Measurement("model", ok, own["ms"], own["tflops"], anchor,
                               self.roofline(f), error, details={"bound": own.get("bound"),
                                                          "profile": self.profile.name,
                                                          "config": str(own.get("features")),
                                                          "anchor": source,
                                                          **self.estimate_note(task, corrected)})
        est = estimate(f, self.target)
        ms, tflops = est.ms, est.tflops
        corrected = self._corrected(ms, f, sizes, task, f, correction) if est.legal else None
        if corrected is not None:
            ms = corrected["ms"]
            tflops = f.flops / ms / 1e9
        anchor, source = self.anchor_source(task, sizes, f)
        m = Measurement("model", est.legal, ms, tflops, anchor,
                        self.roofline(f), "; ".join(est.reasons),
                        {"bound": est.bound, "breakdown": est.breakdown,
                         "profile": self.profile.name, "config": f.key(), "anchor": source,
                         **self.estimate_note(task, corrected)})
        return m

    def correction_inputs(self, program: Program, sizes: dict, task,
                          features: KernelFeatures | None = None) -> dict | None:
        """What the learned correction reads for `program` (`correction.structure`: the
        executed structure the analytic model priced, the sizes, the analytic log time),
        or None where the analytic model refuses the program. The fit
        (`measure/learned.py`) and the pricing above read the same inputs."""
        f = features or extract(program, sizes, task, target=self.target)
        if getattr(task, "cost_model", None) is not None:
            own = task.cost_model(program, sizes, self.target)
            if own.get("bound") == "illegal" or not (math.isfinite(own["ms"]) and own["ms"] > 0):
                return None
            return structure(own.get("features"), _int_sizes(sizes), own["ms"])
        est = estimate(f, self.target)
        if not est.legal or not (math.isfinite(est.ms) and est.ms > 0):
            return None
        return structure(f, _int_sizes(sizes), est.ms)

    def correction(self, task) -> TreeCorrection | None:
        """The learned correction this backend prices `task` with, or None."""
        if self.estimator != "corrected":
            return None
        return correction_for(task, self.profile.name.lower(), self.fit)

    def fit_of(self, task) -> str | None:
        """The fit (`correction.fit_id`) this backend prices `task` with, or None where it
        prices with the analytic model alone: what a record keeps (`hashes.correction`)."""
        c = self.correction(task)
        return fit_id(c.path) if c is not None and c.path is not None else None

    def _corrected(self, model_ms: float, structure_of, sizes: dict, task,
                   f: KernelFeatures, correction: TreeCorrection | None) -> dict | None:
        """The corrected time for an analytic `model_ms` (no faster than the roofline), or
        None without a correction."""
        if correction is None or not (math.isfinite(model_ms) and model_ms > 0):
            return None
        factor = correction.factor(structure(structure_of, _int_sizes(sizes), model_ms))
        roof = self.roofline(f)
        floor_ms = f.flops / roof / 1e9 if roof > 0 and f.flops > 0 else 0.0
        return {"ms": max(model_ms * factor, floor_ms), "analytic_ms": model_ms,
                "factor": factor, "source": correction.source,
                "expected_error": correction.expected_error}

    def estimate_note(self, task, corrected: dict | None = None) -> dict:
        """What every model-priced figure carries: that it is an estimate, and the model's
        error as measured against the GPU tables of this hardware (median and 90th
        percentile |log(model / measured)|, within-shape Spearman; `None` with a reason
        where no GPU of this kind was recorded for the task). A corrected figure
        (`corrected`: `_corrected`'s answer) carries the correction's held-out error, its
        factor and the analytic time it corrected."""
        if corrected is not None:
            return {"estimate": True, "estimator": "corrected",
                    "expected_error": corrected["expected_error"],
                    "correction": {k: corrected[k] for k in ("factor", "analytic_ms",
                                                             "source")}}
        err = expected_error(task, self.profile.name.lower())
        return {"estimate": True, "estimator": "analytic",
                "expected_error": err if err is not None else {
            "median_abs_log_error": None, "p90_abs_log_error": None,
            "note": f"the model's error is not recorded for {task.name} on "
                    f"{self.profile.name}: no GPU table of this kind was fitted"}}


def _int_sizes(sizes: dict) -> dict:
    return {k: v for k, v in sizes.items() if isinstance(v, int) and not isinstance(v, bool)}


def _live_sizes(program: Program, sizes: dict, task) -> dict:
    return task.program_sizes(program, sizes) if hasattr(task, "program_sizes") else sizes


def _own_programs(task) -> list[Program]:
    out = []
    for which in ("baseline", "expert"):
        try:
            out.append(task.program(which))
        except (KeyError, ValueError, FileNotFoundError, OSError):
            pass
    if hasattr(task, "space"):
        out.append(task.space.program(task.space.baseline()))
    return out


def _has_dot(program: Program, sizes: dict, task, target) -> bool:
    live = live_program(program, _live_sizes(program, sizes, task), target.sms)
    return any(isinstance(n, ir.Call) and n.fn == "dot" for n in walk(live.kernel))


# (task, hardware, SMs, shape) -> {live key: row}; configuration recovery per task
_EXECUTED: OrderedDict = OrderedDict()
_EXECUTED_MAX = 256
_RECOVERY: dict = {}


def format_snapshot(counts: dict) -> str:
    """{table file name: rows} as text, `name:rows` by name, `;`-separated."""
    return ";".join(f"{name}:{int(n)}" for name, n in sorted(counts.items()))


def parse_snapshot(snapshot: str | dict | None) -> dict | None:
    """A table snapshot ({file name: rows}) from `format_snapshot`'s text or a mapping;
    None for none. Raises ValueError for anything else."""
    if snapshot is None:
        return None
    if isinstance(snapshot, dict):
        items = list(snapshot.items())
    elif isinstance(snapshot, str):
        items = []
        for part in filter(None, snapshot.split(";")):
            name, sep, n = part.rpartition(":")
            if not sep or not name:
                raise ValueError(f"table snapshot {snapshot!r}: {part!r} is not name:rows")
            items.append((name, n))
    else:
        raise ValueError(f"a table snapshot is text or a mapping, got {type(snapshot).__name__}")
    out = {}
    for name, n in items:
        try:
            rows = int(n)
        except (TypeError, ValueError):
            raise ValueError(f"table snapshot: {name!r} has {n!r} rows, not a count") from None
        if rows < 0 or not isinstance(name, str) or "/" in name or not name.endswith(".csv"):
            raise ValueError(f"table snapshot: bad entry {name!r}: {n!r}")
        out[name] = rows
    return out


class TableBackend(Backend):
    """Measurements recorded on a named GPU, shipped as data: exactly reproducible on any
    machine. A configuration or shape the table lacks falls back to the model, and the
    measurement says so (`details["table_miss"]`)."""

    name = "table"

    def __init__(self, hardware: Target | str = "h200", estimator: str = DEFAULT_ESTIMATOR,
                 snapshot: str | dict | None = None, fit: str | None = None,
                 model_anchor: str = DEFAULT_ANCHOR):
        self.model = ModelBackend(hardware, estimator, fit, model_anchor)
        # the programs the tables lack are set against the library as these tables timed it
        self.model.anchor_rows = self._anchor_rows
        self.fit = self.model.fit
        self.estimator = self.model.estimator
        self.model_anchor = self.model.model_anchor
        self.target, self.profile = self.model.target, self.model.profile
        self.hardware = self.target.name
        self.snapshot = parse_snapshot(snapshot)
        self._tables: dict[str, dict] = {}

    def _paths(self, task) -> tuple[Path | None, list[Path]]:
        """The main table (named whether or not it exists) and the files there are: the
        main one, then any further recordings (`recorded.table_paths`)."""
        path = Path(task.anchors_file).parent / f"table_{self.hardware}.csv" \
            if getattr(task, "anchors_file", None) else None
        return path, table_paths(task, self.hardware)

    def table(self, task) -> dict:
        """(M, N, K, program hash) -> row, for the task's table on this GPU. Keyed by the
        program itself: two programs with one configuration (a hand-pipelined variant,
        say) are different kernels. With a `snapshot` ({file name: rows}), only each
        file's first rows as the snapshot counts them (the tables grow by appending, so
        that is the table as it was when the snapshot was taken; a file it does not name
        did not exist then). A program with several rows at a shape (timed again, e.g.
        after its anchor changed: `record_programs.py plan --retime`) is its last row."""
        if task.name not in self._tables:
            path, paths = self._paths(task)
            try:
                rows, _, counts = read_table_rows(paths, task.anchor_dims, self.snapshot)
            except ValueError as e:
                raise ValueError(f"{task.name} tables of {self.hardware}: {e}") from None
            self._tables[task.name] = {"path": str(path), "rows": rows, "counts": counts,
                                       "snapshot": format_snapshot(counts)}
        return self._tables[task.name]

    def _anchor_rows(self, task) -> dict:
        """`ModelBackend.anchor_rows` from the rows this backend reads (a snapshot's)."""
        table = self.table(task)
        if "anchors" not in table:
            table["anchors"] = anchor_medians(table["rows"])
        return table["anchors"]

    def snapshot_of(self, task) -> str:
        """The rows each of the task's table files holds as read (`table`), as the text
        a record keeps (`format_snapshot`): with it, `TableBackend(snapshot=...)` reads the
        same tables after they have grown."""
        return self.table(task)["snapshot"]

    def fit_of(self, task) -> str | None:
        """The correction fit the programs the tables lack are priced with (`ModelBackend`)."""
        return self.model.fit_of(task)

    def numerics_failures(self, task) -> dict:
        """{numerics class (`Task.numerics_class`): [(output elements, shape, error)]} of
        the rows the GPU found numerically wrong."""
        table = self.table(task)
        if "numerics" not in table:
            out: dict = {}
            for r in table["rows"].values():
                if r.get("ok") == "True" or not r.get("error", "").startswith("mismatch"):
                    continue
                cls = task.numerics_class(r.get("config", ""))
                if cls is None:
                    continue
                sizes = {d: int(r[d]) for d in task.size_names() if r.get(d, "") != ""}
                out.setdefault(cls, []).append(
                    (task.output_elements(sizes), r.get("shape", ""), r["error"]))
            table["numerics"] = out
        return table["numerics"]

    def inherited_failure(self, task, f: KernelFeatures, sizes: dict) -> Measurement | None:
        """The failure a program the tables lack inherits from its numerics class: the GPU
        found the class wrong at a shape whose output has at most as many elements as this
        one's (`Task.numerics_class`), so the model, which cannot see numerics, does not
        price it. None where no such row exists."""
        cls = task.numerics_class(f.key())
        if cls is None:
            return None
        elements = task.output_elements(sizes)
        seen = [x for x in self.numerics_failures(task).get(cls, []) if x[0] <= elements]
        if not seen:
            return None
        n, shape, error = min(seen)
        return Measurement("table", False, error=(
            f"not priced: programs of this numerics class ({cls}) were numerically wrong on "
            f"the GPU at {shape} ({n:,} output elements, this shape has {elements:,}): "
            f"{error}"), details={"status": "mismatch", "table": self.table(task)["path"],
                                  "table_miss": True, "inherited": {"class": cls,
                                                                    "shape": shape}})

    def executed(self, task, shape: tuple) -> dict:
        """{what a recorded program executes (`live_key`): its row} for the task's rows at
        `shape` (the anchor dims' values). The programs are the task's own (baseline,
        expert, the space's baseline) and those recovered from the rows' configurations,
        each kept only where its program hash confirms the recording. Cached for the most
        recent shapes."""
        key = (task.name, self.hardware, self.target.sms, shape, self.table(task)["snapshot"])
        hit = _EXECUTED.get(key)
        if hit is not None:
            _EXECUTED.move_to_end(key)
            return hit
        recover = _RECOVERY.setdefault(task.name, ConfigRecovery(task)) \
            if hasattr(task, "space") else None
        rows = {k[-1]: row for k, row in self.table(task)["rows"].items()
                if k[:len(shape)] == shape}
        out: dict = {}

        def add(program: Program, sizes: dict) -> None:
            row = rows.get(program.hash)   # the recorded program itself, confirmed
            if row is not None:
                out.setdefault(live_key(program, _live_sizes(program, sizes, task),
                                        self.target.sms, unused_consts=True), row)

        own = set()
        for row in rows.values():
            sizes = {d: int(row[d]) for d in task.size_names() if row.get(d, "") != ""}
            if tuple(sorted(sizes.items())) not in own:   # the task's own programs
                own.add(tuple(sorted(sizes.items())))
                for program in _own_programs(task):
                    add(task.bind(program, sizes), sizes)
            try:
                config = recover(row) if recover is not None else None
                if config is not None:
                    add(task.bind(task.space.program(config), sizes), sizes)
            except (ValueError, TypeError, KeyError):
                continue   # a row recorded for a configuration the space no longer has
        _EXECUTED[key] = out
        if len(_EXECUTED) > _EXECUTED_MAX:
            _EXECUTED.popitem(last=False)
        return out

    def measure(self, program: Program, sizes: dict, task, features: KernelFeatures | None = None
                ) -> Measurement:
        f = features or extract(program, sizes, task, target=self.target)
        table = self.table(task)
        shape = tuple(sizes[d] for d in task.anchor_dims)
        row = table["rows"].get(shape + (program.hash,))
        if row is None:   # the same executed program, written another way
            row = self.executed(task, shape).get(
                live_key(program, _live_sizes(program, sizes, task), self.target.sms,
                         unused_consts=True))
        if row is None:
            failed = self.inherited_failure(task, f, sizes)
            if failed is not None:
                return failed
            m = self.model.measure(program, sizes, task, f)
            m.details.update(table_miss=True, table=table["path"])
            return m
        if row["ok"] != "True":
            return Measurement("table", False, error=f"recorded on the GPU: {row['error']}",
                               details={"status": row["error"].split(":")[0] or "error",
                                        "table": table["path"]})
        anchor = row_anchor(row)   # the library's figure from the same run
        return Measurement("table", True, float(row["ms"]), float(row["tflops"]),
                           float(anchor) if anchor else math.nan, self.model.roofline(f),
                           details={"table": table["path"], "config": f.key(),
                                    "ratio": float(row["ratio"])})
