"""The deterministic backends: `model` (the analytic cost model on the target) and `table`
(measurements recorded on a GPU, shipped as data, with the model for what they lack)."""

from __future__ import annotations

import csv
import math
from pathlib import Path

from ..dsl.program import Program
from ..target import Target, as_target
from .features import KernelFeatures, extract
from .measurement import Backend, Measurement, recorded_anchor
from .model import estimate


class ModelBackend(Backend):
    """The analytic cost model on a hardware profile: exactly reproducible anywhere."""

    name = "model"

    def __init__(self, hardware: Target | str = "h200"):
        self.target = as_target(hardware)
        self.profile = self.target.profile

    def roofline(self, f: KernelFeatures) -> float:
        """TFLOP/s allowed by the compute ceiling and compulsory traffic."""
        ceiling = self.profile.bf16_tflops_achievable
        if f.min_bytes <= 0:
            return ceiling
        memory_ms = f.min_bytes / (self.profile.dram_tbps * 1e9)
        return min(ceiling, f.flops / memory_ms / 1e9)

    def anchor(self, task, sizes: dict, f: KernelFeatures) -> float:
        recorded = recorded_anchor(task, sizes, self.profile.name) \
            if self.profile.name.lower().startswith("h200") else None
        return recorded if recorded else 0.9 * self.roofline(f)

    def measure(self, program: Program, sizes: dict, task, features: KernelFeatures | None = None
                ) -> Measurement:
        f = features or extract(program, sizes, task, target=self.target)
        if getattr(task, "cost_model", None) is not None:  # a task with a model of its own
            own = task.cost_model(program, sizes, self.target)
            ok = own.get("bound") != "illegal" and math.isfinite(own["ms"]) and own["ms"] > 0
            error = "" if ok else ("; ".join(own.get("reasons") or ()) or
                                   "the cost model finds this configuration cannot run here")
            return Measurement("model", ok, own["ms"], own["tflops"], self.anchor(task, sizes, f),
                               self.roofline(f), error, details={"bound": own.get("bound"),
                                                          "profile": self.profile.name,
                                                          "config": str(own.get("features"))})
        est = estimate(f, self.target)
        m = Measurement("model", est.legal, est.ms, est.tflops, self.anchor(task, sizes, f),
                        self.roofline(f), "; ".join(est.reasons),
                        {"bound": est.bound, "breakdown": est.breakdown,
                         "profile": self.profile.name, "config": f.key()})
        return m


class TableBackend(Backend):
    """Measurements recorded on a named GPU, shipped as data: exactly reproducible on any
    machine. A configuration or shape the table lacks falls back to the model, and the
    measurement says so (`details["table_miss"]`)."""

    name = "table"

    def __init__(self, hardware: Target | str = "h200"):
        self.model = ModelBackend(hardware)
        self.target, self.profile = self.model.target, self.model.profile
        self.hardware = self.target.name
        self._tables: dict[str, dict] = {}

    def table(self, task) -> dict:
        """(M, N, K, program hash) -> row, for the task's table on this GPU. Keyed by the
        program itself: two programs with one configuration (a hand-pipelined variant,
        say) are different kernels."""
        if task.name not in self._tables:
            path = Path(task.anchors_file).parent / f"table_{self.hardware}.csv" \
                if getattr(task, "anchors_file", None) else None
            rows = {}
            # the main table, then any further ones (`table_<what>_<hardware>.csv`: a
            # separate recording, e.g. attention's program-structure knobs)
            paths = [path] + sorted(path.parent.glob(f"table_*_{self.hardware}.csv")) \
                if path is not None else []
            for p in paths:
                if not p.exists():
                    continue
                with p.open() as f:
                    for r in csv.DictReader(f):
                        key = tuple(int(r[d]) for d in task.anchor_dims) + (r["program_hash"],)
                        rows.setdefault(key, r)
            self._tables[task.name] = {"path": str(path), "rows": rows}
        return self._tables[task.name]

    def measure(self, program: Program, sizes: dict, task, features: KernelFeatures | None = None
                ) -> Measurement:
        f = features or extract(program, sizes, task, target=self.target)
        table = self.table(task)
        row = table["rows"].get(tuple(sizes[d] for d in task.anchor_dims) + (program.hash,))
        if row is None:
            m = self.model.measure(program, sizes, task, f)
            m.details.update(table_miss=True, table=table["path"])
            return m
        if row["ok"] != "True":
            return Measurement("table", False, error=f"recorded on the GPU: {row['error']}",
                               details={"status": row["error"].split(":")[0] or "error",
                                        "table": table["path"]})
        # the library's figure from the same run: `anchor_tflops` (any task), or
        # `cublas_tflops` in the GEMM table, which was recorded first
        anchor = row.get("anchor_tflops") or row.get("cublas_tflops")
        return Measurement("table", True, float(row["ms"]), float(row["tflops"]),
                           float(anchor) if anchor else math.nan, self.model.roofline(f),
                           details={"table": table["path"], "config": f.key(),
                                    "ratio": float(row["ratio"])})
