"""The backends that measure in this process, by name: what `make_backend` builds for
`model`, `table` and `gpu`, and what each actor of a measurement pool holds."""

from __future__ import annotations

from ..target import Target
from .analytic import ModelBackend, TableBackend
from .gpu_backend import GPUBackend
from .measurement import Backend

LOCAL_BACKENDS = {"model": ModelBackend, "table": TableBackend, "gpu": GPUBackend}


def make_local_backend(name: str, hardware: Target | str = "h200", **options) -> Backend:
    if name not in LOCAL_BACKENDS:
        raise ValueError(f"unknown measurement backend {name!r}; use one of "
                         f"{', '.join(repr(n) for n in LOCAL_BACKENDS)}")
    allowed = {"gpu": None, "model": {"estimator", "fit", "model_anchor"},
               "table": {"estimator", "snapshot", "fit", "model_anchor"}}[name]
    if allowed is not None and set(options) - allowed:
        raise ValueError(f"the {name!r} backend takes only {sorted(allowed)}, got "
                         f"{sorted(options)}")
    return LOCAL_BACKENDS[name](hardware, **options)
