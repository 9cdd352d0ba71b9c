"""The symbolic checker: z3 proofs of the tag rules at the episode's sizes.

Modules, lowest first (each imports only modules above it in this list):
`values` (symbolic values, `merge`, `evaluate`), `solver` (variables, Triton's integer
division, intervals), `state` (loop frames, recorded writes), `tags` (elementwise tag union),
`coverage` (the exactly-once proof), `memory` (load, store, dot, assert_tags), `rules` (the
op table), `loops` (runtime loops), `whole` (whole-program checks), `checker` (`Checker`,
`check`).
"""

from .. import z3guard  # noqa: F401  (first: z3 objects freed by other threads, see there)
from .checker import QUERY_FLOOR_MS, Checker, check
from .state import Frame, Write

__all__ = ["QUERY_FLOOR_MS", "Checker", "Frame", "Write", "check"]
