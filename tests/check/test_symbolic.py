"""The symbolic checker: no false alarms on correct programs, every seeded bug caught."""

import json

import pytest

from argus_env.check import InvariantReport, check_program
from argus_env.check.report import GENERIC_DIM, INVARIANTS, SLOT
from argus_env.task import get_task

from corpus import CORPUS

TASK = get_task("gemm")
SIZES = [
    {"M": 100, "N": 72, "K": 80},        # ragged, smaller than one expert tile
    {"M": 260, "N": 520, "K": 136},      # partial swizzle group
    {"M": 16, "N": 4096, "K": 4096},     # decode-like
    {"M": 8192, "N": 8192, "K": 8192},
    {"M": 4096, "N": 14336, "K": 4096},
]


@pytest.mark.parametrize("sizes", SIZES, ids=lambda s: "x".join(map(str, s.values())))
@pytest.mark.parametrize("which", list(TASK.programs))
def test_no_false_alarms_on_task_programs(which, sizes):
    from argus_env.tasks.gemm.space import STREAMK
    # stream-K is offered for at most STREAM_K_WAVES waves of tiles (the mask refuses it
    # past that, where the checker's enumeration of its tile segments would outgrow its bound)
    masked = TASK.space.structure_reason(STREAMK, {"sizes": sizes}) if which == "streamk" else None
    if masked:
        pytest.skip(f"the mask refuses the stream-K program here: {masked}")
    report = check_program(TASK.program(which), sizes, TASK)
    assert report.ok, report.render()
    assert not report.notes, f"unproven checks on a correct program: {report.notes}"
    assert len(report.proven) >= 8, report.proven


@pytest.mark.parametrize("mutation", CORPUS, ids=lambda m: m.name)
def test_seeded_bug_is_caught_with_a_counterexample(mutation):
    prog = mutation.program()
    report = check_program(prog, mutation.sizes, TASK)
    assert mutation.expect <= report.kinds(), \
        f"{mutation.name}: expected {sorted(mutation.expect)}\n{report.render()}"
    first = next(v for v in report.violations if v.invariant in mutation.expect)
    assert first.line > 0 and first.source, first
    assert first.sizes == mutation.sizes, first.sizes
    if first.invariant not in ("bijection",):
        assert len(first.program_id) >= 1, f"no program instance named: {first.render()}"
    if first.invariant in ("ownership", "contraction", "pipeline", "assertion", "bounds"):
        assert first.element and first.expected and first.actual, first.render()
        assert first.expected != first.actual, first.render()


def test_corpus_is_large_and_varied():
    assert len(CORPUS) >= 30, len(CORPUS)
    kinds = set().union(*(m.expect for m in CORPUS))
    for needed in ("ownership", "contraction", "coverage", "exactly_once", "bounds",
                   "bijection", "pipeline", "assertion"):
        assert needed in kinds, f"no seeded bug for {needed}"


def test_counterexample_names_thread_and_register_of_the_mma_fragment():
    mut = next(m for m in CORPUS if m.name == "store-col-off-by-one")
    v = next(v for v in check_program(mut.program(), mut.sizes, TASK).violations
             if v.invariant == "ownership")
    assert v.thread is not None and 0 <= v.thread < 128, v.render()
    from argus_env.layout import fragment_layout
    lay = fragment_layout("wgmma", (64, 64), 4)
    assert lay.element_of(v.thread, v.register) == tuple(v.element), v.render()
    assert v.actual["N"] + 1 == v.expected["N"], v.render()


def test_report_serialises_encodes_and_renders():
    mut = next(m for m in CORPUS if m.name == "b-k-shifted")
    report = check_program(mut.program(), mut.sizes, TASK)
    again = InvariantReport.from_dict(json.loads(report.to_json()))
    assert again.to_dict() == report.to_dict()
    vec = report.encode()
    assert vec.shape == (GENERIC_DIM,), vec.shape
    assert vec[SLOT["count:contraction"]] > 0 and vec[SLOT["violation"]] == 1, vec
    assert vec[SLOT["first_class"]] == 1 + INVARIANTS.index(report.violations[0].invariant)
    text = report.render()
    assert "[contraction]" in text and "line" in text and "lane" in text, text


def test_check_program_computes_the_same_verdict_every_time():
    """No cache inside the checker (the evaluator keeps one): two calls are two checks
    with one verdict."""
    prog = TASK.program("baseline")
    a = check_program(prog, SIZES[0], TASK)
    b = check_program(prog, SIZES[0], TASK)
    assert a is not b and b.queries > 0
    assert (a.status, a.proven, a.notes) == (b.status, b.proven, b.notes)
