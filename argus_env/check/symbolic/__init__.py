"""The symbolic checker: z3 proofs of the tag rules at the episode's sizes.

Modules, lowest first (each imports only modules above it in this list):
`values` (symbolic values, `merge`, `evaluate`), `solver` (variables, Triton's integer
division, intervals), `state` (loop frames, recorded writes), `tags` (elementwise tag union),
`order` (final sums), `coverage` (the exactly-once proof), `memory` (load, store, dot,
assert_tags, coverage read back from workspaces), `rules` (the op table), `loops` (runtime
loops), `tiles` (tile maps on integers), `whole` (whole-program checks), `checker`
(`Checker`, `check`). `conditions` (the size conditions of `..regimes`, which need z3 too)
is re-exported for the entry point.
"""

from .. import z3guard  # noqa: F401  (first: z3 objects freed by other threads, see there)
from ..regimes import conditions
from .checker import QUERY_FLOOR_MS, Checker, check
from .state import Frame, Write

__all__ = ["QUERY_FLOOR_MS", "Checker", "Frame", "Write", "check", "conditions"]
