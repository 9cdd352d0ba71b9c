"""Throughput backends behind one interface: `model` (analytic), `table`, `gpu`.

A backend turns (program, problem sizes) into a `Measurement`: time, TFLOP/s, the
library anchor's TFLOP/s at the same shape, and where the numbers come from. The
environment and the benchmark runner only see this interface.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field
from pathlib import Path

from ..dsl.program import Program
from .features import KernelFeatures, extract


@dataclass
class Measurement:
    """One throughput figure with its provenance."""

    backend: str                  # "model", "table", "gpu"
    ok: bool
    ms: float = math.nan
    tflops: float = math.nan
    anchor_tflops: float = math.nan   # the library (cuBLAS, cuDNN, ...) at this shape
    roofline_tflops: float = math.nan
    error: str = ""
    details: dict = field(default_factory=dict)

    @property
    def frac_anchor(self) -> float:
        return self.tflops / self.anchor_tflops if self.ok and self.anchor_tflops > 0 else 0.0

    @property
    def frac_roofline(self) -> float:
        return self.tflops / self.roofline_tflops if self.ok and self.roofline_tflops > 0 else 0.0

    def to_dict(self) -> dict:
        d = asdict(self)
        d.update(frac_anchor=self.frac_anchor, frac_roofline=self.frac_roofline)
        return d


class Backend:
    name = "backend"
    deterministic = True

    def measure(self, program: Program, sizes: dict, task, features: KernelFeatures | None = None
                ) -> Measurement:
        raise NotImplementedError


def recorded_anchor(task, sizes: dict, gpu: str = "h200") -> float | None:
    """The library's TFLOP/s at `sizes` from the task's recorded anchors, if measured."""
    path = Path(getattr(task, "anchors_file", "")) if getattr(task, "anchors_file", None) else None
    if path is None or not path.exists():
        return None
    data = _anchors(str(path))
    key = "x".join(str(sizes[d]) for d in getattr(task, "anchor_dims", sorted(sizes)))
    return data.get(key)


_ANCHOR_CACHE: dict[str, dict] = {}


def _anchors(path: str) -> dict:
    if path not in _ANCHOR_CACHE:
        _ANCHOR_CACHE[path] = json.loads(Path(path).read_text())["tflops"]
    return _ANCHOR_CACHE[path]


class ModelBackend(Backend):
    """The analytic cost model on a hardware profile: exactly reproducible anywhere."""

    name = "model"

    def __init__(self, hardware: str = "h200"):
        from .model import load_profile
        self.profile = load_profile(hardware)

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
        from .model import estimate
        f = features or extract(program, sizes, task, num_sms=self.profile.sms)
        if getattr(task, "cost_model", None) is not None:  # a task with a model of its own
            own = task.cost_model(program, sizes, self.profile)
            ok = own.get("bound") != "illegal" and math.isfinite(own["ms"]) and own["ms"] > 0
            error = "" if ok else ("; ".join(own.get("reasons") or ()) or
                                   "the cost model finds this configuration cannot run here")
            return Measurement("model", ok, own["ms"], own["tflops"], self.anchor(task, sizes, f),
                               self.roofline(f), error, details={"bound": own.get("bound"),
                                                          "profile": self.profile.name,
                                                          "config": str(own.get("features"))})
        est = estimate(f, self.profile)
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

    def __init__(self, hardware: str = "h200"):
        self.model = ModelBackend(hardware)
        self.profile = self.model.profile
        self.hardware = hardware
        self._tables: dict[str, dict] = {}

    def table(self, task) -> dict:
        """(M, N, K, program hash) -> row, for the task's table on this GPU. Keyed by the
        program itself: two programs with one configuration (a hand-pipelined variant,
        say) are different kernels."""
        if task.name not in self._tables:
            import csv
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
        f = features or extract(program, sizes, task, num_sms=self.profile.sms)
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


def make_backend(name: str, hardware: str = "h200", **options) -> Backend:
    if name == "model":
        return ModelBackend(hardware)
    if name == "table":
        return TableBackend(hardware)
    if name == "gpu":
        from .gpu_backend import GPUBackend
        return GPUBackend(hardware, **options)
    if name == "pool":  # Ray actors, one GPU each (argus_env/measure/pool.py)
        from .pool import PoolBackend
        return PoolBackend(hardware, **options)
    raise ValueError(f"unknown measurement backend {name!r}; use 'model', 'table', 'gpu' or 'pool'")
