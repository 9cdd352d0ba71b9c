"""The invariant checker: tags, tag assertions, z3 proofs and concrete counterexamples.

    report = check_program(program, {"M": 4096, "N": 4096, "K": 4096}, task)
    report.ok, report.violations[0].render(), report.encode()

The rules both interpreters follow are in `SEMANTICS.md` beside this file: `symbolic`
proves them with z3 at the given sizes without enumerating the problem; `concrete`
enumerates every program instance at small sizes (the cross-check and the replay of
counterexamples).
"""

from __future__ import annotations

from collections import OrderedDict

from .report import (INVARIANTS, CheckTimeout, CheckUnsupported, InvariantReport,  # noqa: F401
                     Obligation, Violation)

_CACHE: OrderedDict = OrderedDict()
CACHE_SIZE = 512


def check_program(program, sizes: dict, task=None, method: str = "symbolic",
                  deadline: float | None = None, **options) -> InvariantReport:
    """The invariant report of `program` at problem `sizes`, cached by program hash.
    `deadline` (a `time.monotonic()` instant, symbolic method only) bounds the check: past
    it `CheckTimeout` is raised and nothing is cached. An `undecided` report is not cached
    either (with more time the solver may decide), and an interrupted check raises
    `KeyboardInterrupt` rather than giving a verdict."""
    key = (program.hash, tuple(sorted(sizes.items())), getattr(task, "name", None), method,
           tuple(sorted(options.items())))
    if key in _CACHE:
        _CACHE.move_to_end(key)
        return _CACHE[key]
    if method == "symbolic":
        from .symbolic import check
        report = check(program, sizes, task, deadline=deadline, **options)
    elif method == "concrete":
        from .concrete import check_concrete
        report = check_concrete(program, sizes, task, **options)
    else:
        raise ValueError(f"unknown check method {method!r}; use 'symbolic' or 'concrete'")
    if report.status == "undecided":
        return report
    _CACHE[key] = report
    if len(_CACHE) > CACHE_SIZE:
        _CACHE.popitem(last=False)
    return report
