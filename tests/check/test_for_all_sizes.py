"""Proofs for all problem sizes at once (`check_for_all_sizes`): the task's varying sizes
are z3 variables over [1, 2**30]; a proof holds for every value, an undecided query is no
proof, and a program outside the fragment is checked size by size."""

from __future__ import annotations

import pytest

from argus_env.check import FOR_ALL_RANGE, check_for_all_sizes, check_program
from argus_env.dsl.program import Program
from argus_env.envs.evaluate import Evaluator
from argus_env.measure.analytic import ModelBackend
from argus_env.task import get_task

import corpus
import corpus_attention

GEMM, ATTENTION, RMSNORM, MOE = (get_task(t) for t in ("gemm", "attention", "rmsnorm", "moe"))

PROVEN = [(GEMM, "baseline", GEMM.shapes[0].sizes), (GEMM, "prefetch", GEMM.shapes[0].sizes),
          (RMSNORM, "baseline", RMSNORM.shapes[0].sizes), (RMSNORM, "expert", RMSNORM.shapes[0].sizes)]
PROVEN += [(ATTENTION, w, c.sizes) for w in ("baseline", "expert") for c in ATTENTION.shapes[:2]]


@pytest.mark.parametrize("task,which,sizes", PROVEN,
                         ids=lambda x: x if isinstance(x, str) else getattr(x, "name", None))
def test_task_programs_are_proven_for_all_sizes(task, which, sizes):
    report, why = check_for_all_sizes(task.bind(task.program(which), sizes), sizes, task)
    assert report is not None, why
    assert report.status == "proven", report.render()
    assert report.notes[-1].startswith(f"for all {', '.join(task.for_all_sizes)}")


MUTATIONS = [(GEMM, m) for m in corpus.CORPUS] + [(ATTENTION, m) for m in corpus_attention.CORPUS]


@pytest.mark.parametrize("task,mutation", MUTATIONS, ids=lambda x: getattr(x, "name", None))
def test_no_seeded_bug_is_proven_for_all_sizes(task, mutation):
    """Soundness: each corpus program is wrong at its corpus sizes, so no proof for all
    sizes may cover it; a refutation's counterexample sizes show a violation of the same
    class when checked at exactly those sizes."""
    prog = mutation.program()
    report, why = check_for_all_sizes(prog, mutation.sizes, task)
    if report is None:
        assert why, "a fallback says why"
        return
    assert not report.ok, f"{mutation.name} proven for all sizes:\n{report.render()}"
    v = report.violations[0]
    again = check_program(task.bind(prog, v.sizes) if task is ATTENTION else prog, v.sizes, task)
    assert v.invariant in again.kinds(), (v.render(), again.render())


def test_a_program_that_tests_its_sizes_is_checked_size_by_size():
    """`A.where(M <= 130, ...)` switches behaviour at a size: no proof for all sizes."""
    text = GEMM.program("baseline").text.replace(
        "acc = A.dot(a_tile, b_tile, acc)",
        "acc = A.dot(a_tile, b_tile, acc) * A.where(M <= 130, 1.0, 0.0)")
    report, why = check_for_all_sizes(Program.from_text(text), GEMM.shapes[0].sizes, GEMM)
    assert report is None and "tests its sizes" in why and "M <= 130" in why, why


def test_a_task_without_varying_sizes_and_an_undecided_proof_fall_back():
    moe = MOE.shapes[0].sizes
    report, why = check_for_all_sizes(MOE.program("expert"), moe, MOE)
    assert report is None and "episode's sizes only" in why
    report, why = check_for_all_sizes(GEMM.program("splitk"), GEMM.shapes[0].sizes, GEMM)
    assert report is None and why.startswith("undecided for all sizes"), why


def test_the_environment_reuses_one_proof_across_shapes():
    """A program met at a second shape is proven for all sizes once; a third shape takes
    that proof without a check of its own; the verdicts are the per-shape ones."""
    ev = Evaluator(GEMM, ModelBackend("h200"), correctness="none", legality=False)
    try:
        prog = GEMM.program("baseline")
        shapes = [c.sizes for c in GEMM.shapes[:3]]
        first = ev.evaluate(prog, shapes[0])
        second = ev.evaluate(prog, shapes[1])
        third = ev.evaluate(prog, shapes[2])
        assert first.report.ok and second.report.ok and third.report.ok
        assert not any(n.startswith("for all") for n in first.report.notes)
        assert second.report.notes[-1].startswith("for all M, N, K")
        assert third.report is second.report  # one proof, no third check
        lo, hi = FOR_ALL_RANGE
        assert all(lo <= s[n] < hi for s in shapes for n in "MNK")
    finally:
        ev.close()


def test_a_proof_is_not_reused_where_a_fixed_size_differs():
    ev = Evaluator(ATTENTION, ModelBackend("h200"), correctness="none", legality=False)
    try:
        a, b = ATTENTION.shapes[0].sizes, dict(ATTENTION.shapes[0].sizes)
        b["SQ"] = b["SK"] = 1024  # same fixed sizes: proven for all
        c = {**a, "H": 16, "KVH": 16}  # another head count: its own proof
        prog = ATTENTION.bind(ATTENTION.program("expert"), a)
        ev.evaluate(prog, a)
        second = ev.evaluate(prog, b)
        third = ev.evaluate(prog, c)
        assert second.report.notes[-1].startswith("for all B, SQ, SK")
        assert third.report is not second.report
    finally:
        ev.close()


def test_a_counterexample_for_all_sizes_stands_only_where_its_sizes_show_it(monkeypatch):
    """A violation the all-sizes query reports is checked again at its own sizes; where
    that check finds no violation of its class, the answer is no proof and no refutation
    (checked size by size), never a reported bug."""
    import dataclasses

    from argus_env.check import symbolic
    from argus_env.check.report import Violation
    real = symbolic.check
    sizes = dict(GEMM.shapes[0].sizes)
    program = GEMM.bind(GEMM.program("baseline"), sizes)

    def with_a_false_counterexample(prog, at, task=None, **kw):
        report = real(prog, at, task, **kw)
        if "for_all" in kw:   # as if the all-sizes query had found a model
            fake = Violation("coverage", "store", 1, "a made-up counterexample",
                             sizes={"M": 3, "N": 5, "K": 7})
            report = dataclasses.replace(report, violations=[fake])
        return report

    monkeypatch.setattr(symbolic, "check", with_a_false_counterexample)
    report, why = check_for_all_sizes(program, sizes, GEMM)
    assert report is None
    assert "coverage counterexample at M=3, N=5, K=7 is not one" in why
    assert "proven" in why   # the check at those sizes
