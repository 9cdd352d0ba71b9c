"""Numerics beside the check (`Evaluator.speculate`): the first reduced shape runs in the
worker while the parent checks; its answer counts only for a program the checker proves,
and the verdicts are those of the sequential path."""

from __future__ import annotations

import pytest

import argus_env  # noqa: F401
from argus_env.dsl.program import Program
from argus_env.envs.evaluate import Evaluator
from argus_env.measure.backends import ModelBackend
from argus_env.task import get_task

TASK = get_task("gemm")
SIZES = {"M": 100, "N": 72, "K": 80}
STORE = "A.store(c[rows, cols], A.cast(acc, A.bf16), mask=(rows < M, cols < N))"


def _evaluator(speculate) -> Evaluator:
    ev = Evaluator(TASK, ModelBackend("h200"), legality=False)
    ev.speculate = speculate
    return ev


def test_overlapped_numerics_give_the_sequential_verdict():
    program = TASK.program("baseline")
    answers = []
    for speculate in (False, True):
        ev = _evaluator(speculate)
        try:
            out = ev.evaluate(program, SIZES)
            assert out.report.ok and out.measured, (out.error, out.message)
            answers.append({k: out.correctness[k] for k in ("ok", "status", "shapes_checked")})
            assert ("numerics_start" in out.timings) == speculate
        finally:
            ev.close()
    assert answers[0] == answers[1] and answers[0]["ok"]


def test_a_rejected_program_is_never_scored_and_the_worker_goes_on():
    text = TASK.program("baseline").text
    assert STORE in text
    # a store without its mask: out of bounds on the ragged edge, which the checker refutes
    bad = Program.from_text(text.replace(STORE, "A.store(c[rows, cols], A.cast(acc, A.bf16))"))
    ev = _evaluator(True)
    worker = ev._numerics_workers(1)[0]
    replaced = worker.distrusted + worker.restarts
    try:
        out = ev.evaluate(bad, SIZES)
        assert not out.report.ok and out.report.violations
        assert out.correctness is None and out.measurement is None and out.error is None
        good = ev.evaluate(TASK.program("baseline"), SIZES)  # waits for the dropped run
        assert good.report.ok and good.correctness["ok"] and good.measured
        # the process that ran the refuted program (whose store may have corrupted its heap
        # without crashing it, or crashed it) was replaced before it ran another
        assert worker.distrusted + worker.restarts == replaced + 1
    finally:
        ev.close()


@pytest.mark.parametrize("load,expect", [(0.2, True), (50.0, False)])
def test_auto_overlaps_only_with_a_core_to_spare(monkeypatch, load, expect):
    import argus_env.envs.evaluate as evaluate
    monkeypatch.setattr(evaluate.os, "getloadavg", lambda: (load, load, load))
    monkeypatch.setattr(evaluate.os, "cpu_count", lambda: 2)
    ev = Evaluator(TASK, ModelBackend("h200"), correctness="none", legality=False)
    assert ev.speculate == "auto" and ev._overlap() is expect
    ev.speculate = False
    assert ev._overlap() is False
    assert Evaluator(TASK, ModelBackend("h200"), correctness="none", legality=False,
                     worker=object()).speculate is False


def test_the_compile_starts_beside_the_check_while_most_new_programs_are_proven():
    """`compile_early="adaptive"` (the default): the compile of a new program starts beside
    its check while at least half of the last new programs were proven, and after the
    check once most of them violated (a refuted program's compile would only take a core
    from the next check)."""
    text = TASK.program("baseline").text
    bad = Program.from_text(text.replace(STORE, "A.store(c[rows, cols], A.cast(acc, A.bf16))"))
    ev = Evaluator(TASK, ModelBackend("h200"), correctness="none", legality=False)
    try:
        assert ev.compile_early == "adaptive" and ev._compile_early()
        for m in (100, 101, 102):
            assert not ev.evaluate(bad, {**SIZES, "M": m}).report.ok
        assert not ev._compile_early()
        for m in (100, 101, 102, 103):
            assert ev.evaluate(TASK.program("baseline"), {**SIZES, "M": m}).report.ok
        assert ev._compile_early()
        ev.compile_early = False
        assert not ev._compile_early()
    finally:
        ev.close()
