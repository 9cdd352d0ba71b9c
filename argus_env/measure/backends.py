"""Throughput backends behind one interface: `model` (analytic), `table`, `gpu`, `pool`.

A backend turns (program, problem sizes) into a `Measurement` (`measure/measurement.py`)
for one `Target`. `model` and `table` live in `measure/analytic.py`, `gpu` in
`measure/gpu_backend.py`, `pool` (Ray actors) in `measure/pool.py`; `make_backend` builds
any of them by name.
"""

from __future__ import annotations

from ..target import Target
from .analytic import ModelBackend, TableBackend
from .gpu_backend import GPUBackend
from .local import LOCAL_BACKENDS, make_local_backend
from .measurement import Backend, Measurement, recorded_anchor
from .pool import PoolBackend


def make_backend(name: str, hardware: Target | str = "h200", **options) -> Backend:
    """The backend `name` for `hardware` (a Target or a profile name)."""
    if name == "pool":  # Ray actors, one GPU each (argus_env/measure/pool.py)
        return PoolBackend(hardware, **options)
    if name in LOCAL_BACKENDS:
        return make_local_backend(name, hardware, **options)
    raise ValueError(f"unknown measurement backend {name!r}; use 'model', 'table', 'gpu' or 'pool'")


__all__ = ["Measurement", "Backend", "ModelBackend", "TableBackend", "GPUBackend",
           "PoolBackend", "make_backend", "recorded_anchor"]
