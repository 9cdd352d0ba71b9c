"""The invariant checker: tags, tag assertions, z3 proofs and concrete counterexamples.

The rules both interpreters follow are in `SEMANTICS.md` beside this file.
"""

from .report import INVARIANTS, InvariantReport, Violation  # noqa: F401
