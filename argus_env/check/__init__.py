"""The invariant checker: tags, tag assertions, z3 proofs and concrete counterexamples.

    report = check_program(program, {"M": 4096, "N": 4096, "K": 4096}, task)
    report.ok, report.violations[0].render(), report.encode()

The rules both interpreters follow are in `SEMANTICS.md` beside this file: `symbolic`
proves them with z3 at the given sizes without enumerating the problem; `concrete`
enumerates every program instance at small sizes (the cross-check and the replay of
counterexamples). A task adds its own invariants through its pack (`pack.py`).

Modules, lowest first (none imports a module below it): `pack` (invariant classes and the
task hooks), `report` (violations, reports, the observation layout), `regimes` (size
conditions), the packages `symbolic` and `concrete`, and this entry point (which loads
`symbolic`, and with it z3, on the first symbolic check).
"""

from __future__ import annotations

from .concrete import check_concrete
from .pack import InvariantClass, InvariantPack, register_pack  # noqa: F401
from .report import (INVARIANTS, CheckTimeout, CheckUnsupported, InvariantReport,  # noqa: F401
                     Obligation, ReportLayout, Violation)


def check_program(program, sizes: dict, task=None, method: str = "symbolic",
                  deadline: float | None = None, **options) -> InvariantReport:
    """The invariant report of `program` at problem `sizes` (computed afresh: the caller
    keeps any cache). `deadline` (a `time.monotonic()` instant, symbolic method only)
    bounds the check: past it `CheckTimeout` is raised. An interrupted check raises
    `KeyboardInterrupt` rather than giving a verdict."""
    if method == "symbolic":
        # z3 loads on the first proof, not with the package: a task declares its pack
        # (`pack.py`) on machines that only measure and have no z3
        from .symbolic import check
        return check(program, sizes, task, deadline=deadline, **options)
    if method == "concrete":
        return check_concrete(program, sizes, task, **options)
    raise ValueError(f"unknown check method {method!r}; use 'symbolic' or 'concrete'")
