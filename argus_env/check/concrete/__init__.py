"""The concrete checker: every program instance run at one small size, with numpy.

Modules, lowest first (each imports only modules above it): `values` (per-element tags,
coverage and integer values), `ops` (elementwise ops, reductions, `ConcreteError`), `dot`,
`memory` (load, store, the write record), `interp` (one instance's run), `run`
(`check_concrete`, `replay`).
"""

from .ops import ConcreteError
from .run import check_concrete, instances, loop_carried, replay, size_expr

__all__ = ["ConcreteError", "check_concrete", "instances", "loop_carried", "replay",
           "size_expr"]
