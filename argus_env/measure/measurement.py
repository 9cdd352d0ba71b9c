"""The interface every throughput backend implements, and the figure it returns.

A backend turns (program, problem sizes) into a `Measurement`: time, TFLOP/s, the
library anchor's TFLOP/s at the same shape, and where the numbers come from. Every
backend is built for one `Target` (`backend.target`); the environment and the benchmark
runner only see this interface.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field
from functools import lru_cache
from pathlib import Path
from types import MappingProxyType
from typing import Mapping

from ..dsl.program import Program
from ..target import HardwareProfile, Target
from .features import KernelFeatures


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
    """Measures programs on `target` (a `Target`; `profile` is its hardware profile)."""

    name = "backend"
    deterministic = True
    target: Target
    profile: HardwareProfile

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


# a read-only view (a mapping proxy) of a shipped anchors file, keyed by its path; bounded
@lru_cache(maxsize=64)
def _anchors(path: str) -> Mapping:
    return MappingProxyType(json.loads(Path(path).read_text())["tflops"])
