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
        return _symbolic()(program, sizes, task, deadline=deadline, **options)
    if method == "concrete":
        return check_concrete(program, sizes, task, **options)
    raise ValueError(f"unknown check method {method!r}; use 'symbolic' or 'concrete'")


def _symbolic(part: str = "check"):
    """The symbolic checker's entry point (`check`), or its size conditions
    (`conditions`). z3 loads on the first proof, not with the package: a task declares its
    pack (`pack.py`) on machines that only measure and have no z3."""
    from . import symbolic
    return getattr(symbolic, part)


#: every size proven for all values at once ranges over [1, 2**30]: index arithmetic stays
#: inside 32 bits with room for a tile past the end
FOR_ALL_RANGE = (1, 2**30 + 1)
#: such a proof covers the sizes at which every tensor has fewer elements than this (its
#: integer arithmetic is proven not to wrap there only: `B * H` wraps at B = 2**30)
ELEMENTS_FOR_ALL = 2**31
#: the solver's limit per query of such a proof: a query it cannot settle quickly falls
#: back to the episode's sizes instead of holding the step
FOR_ALL_TIMEOUT_MS = 400


def for_all_names(program, task) -> tuple[tuple[str, ...], str]:
    """The sizes `program` can be proven for all values of (the task's `for_all_sizes`
    that the program has), and why none when there are none."""
    names = tuple(n for n in getattr(task, "for_all_sizes", ()) if n in program.kernel.sizes)
    if not names:
        return (), "the task proves its programs at the episode's sizes only"
    conds = _symbolic("conditions")(program.kernel)
    if conds:
        return (), (f"the program tests its sizes (`{conds[0].text}`, line {conds[0].line}): "
                    "it is checked at each size")
    return names, ""


def for_all_covers(program, task, sizes: dict) -> bool:
    """Whether a proof of `program` for all sizes (`check_for_all_sizes`) covers `sizes`:
    each of the task's varying sizes in `FOR_ALL_RANGE`, and every tensor with fewer than
    `ELEMENTS_FOR_ALL` elements there."""
    lo, hi = FOR_ALL_RANGE
    if any(not lo <= sizes.get(n, 0) < hi for n in getattr(task, "for_all_sizes", ())):
        return False
    extents = program.kernel.extents(sizes)
    for p in program.kernel.tensors:
        n = 1
        for d in p.dims:
            n *= int(extents.get(d, 0))
        if n >= ELEMENTS_FOR_ALL:
            return False
    return True


def check_for_all_sizes(program, sizes: dict, task=None, deadline: float | None = None,
                        **options) -> tuple[InvariantReport | None, str]:
    """The invariants of `program` proven for every value of the task's varying sizes at
    once (`Task.for_all_sizes`, each in `FOR_ALL_RANGE`; the other sizes as in `sizes`):
    (report, "") when the proof went through — the report's status `proven` holds for all
    those sizes, and a violation's `sizes` are its counterexample's —, or (None, why) when
    the program is outside that fragment or the proof stayed undecided (then check it at
    each size). Never a proof from an undecided query."""
    names, why = for_all_names(program, task)
    if not names:
        return None, why
    try:
        report = _symbolic()(program, sizes, task, deadline=deadline,
                       for_all={n: FOR_ALL_RANGE for n in names},
                       for_all_elements=ELEMENTS_FOR_ALL,
                       timeout_ms=options.pop("timeout_ms", FOR_ALL_TIMEOUT_MS), **options)
    except CheckUnsupported as e:
        return None, f"not in the fragment proven for all sizes: {e}"
    if report.status == "undecided":
        o = report.undecided[0]
        return None, f"undecided for all sizes: {o.what} (line {o.line}): {o.reason}"
    if report.violations:
        # a counterexample for all sizes stands only where the check at its own sizes
        # finds the same class of violation (a query the all-sizes fragment answers with
        # a weaker fact can give a model no concrete size realises)
        v = report.violations[0]
        at = {**sizes, **{k: int(x) for k, x in v.sizes.items() if k in names}}
        try:
            again = _symbolic()(program, at, task, deadline=deadline, **options)
        except CheckUnsupported as e:  # such as integers that wrap at those sizes
            return None, (f"undecided for all sizes: a {v.invariant} counterexample at "
                          + ", ".join(f"{k}={x}" for k, x in at.items() if k in names)
                          + f" is not checked at those sizes: {e}")
        if v.invariant not in again.kinds():
            return None, (f"undecided for all sizes: a {v.invariant} counterexample at "
                          + ", ".join(f"{k}={x}" for k, x in at.items() if k in names)
                          + f" is not one when checked at those sizes ({again.status})")
    lo, hi = FOR_ALL_RANGE
    report.notes.append(f"for all {', '.join(names)} in [{lo}, {hi - 1}]"
                        f" (every tensor fewer than {ELEMENTS_FOR_ALL} elements)"
                        + (f" (the other sizes as given: " + ", ".join(
                            f"{k}={v}" for k, v in sizes.items() if k not in names) + ")"
                           if any(k not in names for k in sizes) else ""))
    return report, ""
