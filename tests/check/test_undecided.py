"""An undecided proof is not a proof.

A solver query that answers `unknown` (its time limit, a theory it cannot decide, an
interruption) leaves its obligation undecided: the report's status is `undecided`, it is not
`ok`, it names the obligation and its line, it is never remembered, the observation encodes it,
and the environment scores it like a violation (the program is never run). A step's budget
too small for a query refuses the check instead of running it with a useless limit, and
Ctrl-C during a query is an interruption, not a verdict.
"""

from __future__ import annotations

import os
import signal
import threading
import time

import gymnasium as gym
import numpy as np
import pytest

import argus_env  # noqa: F401
from argus_env.check import CheckTimeout, InvariantReport, check_program
from argus_env.check.report import GENERIC_DIM, SLOT
from argus_env.check.symbolic import QUERY_FLOOR_MS, Checker
from argus_env.dsl import Program
from argus_env.task import get_task

TASK = get_task("gemm")
BIG = {"M": 8192, "N": 8192, "K": 8192}
PID = "    pid_n = A.program_id(1)\n"


def remapped(cond: str) -> Program:
    """The baseline with tile rows routed onto the next tile behind a nonlinear condition:
    at the real size a whole output tile stays unwritten, one is written twice."""
    text = TASK.program("baseline").text
    assert PID in text
    return Program.from_text(text.replace(
        PID, PID + f"    pid_m = A.where({cond}, pid_m + 1, pid_m)\n"))


NONLINEAR = remapped("(pid_m * pid_m * pid_n) % 7919 == 4001")
STORE_LINE = next(i for i, line in enumerate(NONLINEAR.text.splitlines(), 1)
                  if "A.store(" in line)


def test_a_query_the_solver_cannot_decide_leaves_the_report_undecided():
    report = check_program(NONLINEAR, BIG, TASK, timeout_ms=300)
    assert report.status == "undecided" and not report.ok, report.render()
    assert not report.violations
    first = report.undecided[0]
    assert first.line == STORE_LINE and "unknown" in first.reason and first.what, first
    text = report.render()
    assert "undecided" in text and "all invariants hold" not in text, text
    back = InvariantReport.from_dict(report.to_dict())
    assert back.status == "undecided" and back.undecided == report.undecided
    assert report.to_dict()["status"] == "undecided"


def test_check_program_keeps_no_verdict():
    """`check_program` computes every time (the step's evaluator owns the one cache): an
    undecided verdict is never answered from memory, and neither is a proven one."""
    first = check_program(NONLINEAR, BIG, TASK, timeout_ms=300)
    again = check_program(NONLINEAR, BIG, TASK, timeout_ms=300)
    assert first.status == again.status == "undecided", again.render()
    assert again is not first and again.queries > 0
    proven = check_program(TASK.program("baseline"), BIG, TASK)
    assert check_program(TASK.program("baseline"), BIG, TASK) is not proven


def test_the_encoding_shows_an_undecided_report_without_changing_its_size():
    undecided = check_program(NONLINEAR, BIG, TASK, timeout_ms=300)
    proven = check_program(TASK.program("baseline"), BIG, TASK)
    u, p = undecided.encode(), proven.encode()
    assert u.shape == p.shape == (GENERIC_DIM,)
    assert u[SLOT["undecided"]] == 1 and u[SLOT["proven"]] == 0 and u[SLOT["violation"]] == 0
    assert p[SLOT["proven"]] == 1 and p[SLOT["undecided"]] == 0
    assert u[SLOT["first_class"]] == 0 and p[SLOT["first_class"]] == 0
    assert u[SLOT["first_line"]] == STORE_LINE and u[SLOT["obligations"]] >= 1
    assert u[SLOT["violations"]] == 0


def test_the_environment_refuses_and_penalises_an_undecided_program():
    env = gym.make("Argus-GEMM-v0", mode="text", correctness="none")
    try:
        env.reset(seed=0, options={"shape": "square-8192"})
        obs, reward, _, _, info = env.step(NONLINEAR.text)
        assert info["error"] is None, info["error"]
        assert info["report"]["status"] == "undecided", info["report_text"]
        assert not info["measurement"] and info["triton"] is None
        assert reward < 0 and info["reward_terms"].get("violation_penalty", 0) < 0, \
            info["reward_terms"]
        assert obs["report"][SLOT["undecided"]] == 1 and obs["report"][SLOT["proven"]] == 0
        assert "undecided" in info["report_text"]
    finally:
        env.close()


def test_a_step_budget_below_the_query_floor_refuses_the_check():
    ck = Checker(TASK.program("baseline"), BIG, TASK,
                 deadline=time.monotonic() + QUERY_FLOOR_MS / 2000)
    with pytest.raises(CheckTimeout):
        ck.run()
    assert ck.report.queries == 0, "a query was run with less than the floor left"


def test_ctrl_c_during_a_query_interrupts_instead_of_proving():
    timer = threading.Timer(0.5, lambda: os.kill(os.getpid(), signal.SIGINT))
    timer.start()
    t0 = time.monotonic()
    try:
        with pytest.raises(KeyboardInterrupt):
            check_program(NONLINEAR, BIG, TASK, timeout_ms=20_000)
    finally:
        timer.cancel()
    assert time.monotonic() - t0 < 10, "the interruption was not prompt"


def test_a_decidable_nonlinear_remap_is_still_refuted():
    """The same attack where the solver decides: a violation, not undecided."""
    report = check_program(remapped("pid_m * pid_m == 4"), BIG, TASK)
    assert report.status == "violation", report.render()
    assert {"exactly_once", "bijection"} & report.kinds(), report.render()
    vec = np.asarray(report.encode())
    assert vec[SLOT["violation"]] == 1 and vec[SLOT["undecided"]] == 0 and vec[SLOT["first_class"]] > 0
