"""The worker's life: a crash the program causes is a fault of the program, an end it did
not cause is transient (not remembered); the worker's memory stays bounded however many
distinct programs it runs."""

from __future__ import annotations

import os
import signal
import threading
import time

import pytest

from argus_env.measure.worker import Worker, _crashed
from argus_env.task import get_task

TASK = get_task("gemm")
SMALL = {"M": 16, "N": 16, "K": 16}


def _forever() -> str:
    text = TASK.program("baseline").text
    return text.replace("for k in A.range(0, K, BK):", "for k in A.range(0, K * 1000000, BK):")


def _out_of_bounds() -> str:
    """A store far past the end of `c` with no mask: a segfault under the interpreter."""
    text = TASK.program("baseline").text
    old = "A.store(c[rows, cols], A.cast(acc, A.bf16), mask=(rows < M, cols < N))"
    assert old in text
    return text.replace(old, "A.store(c[rows + 100000000, cols], A.cast(acc, A.bf16))")


@pytest.mark.parametrize("code, transient", [
    (-signal.SIGSEGV, False), (-signal.SIGBUS, False), (-signal.SIGABRT, False),
    (-signal.SIGFPE, False), (-signal.SIGILL, False),
    (-signal.SIGKILL, True), (-signal.SIGTERM, True), (-signal.SIGINT, True),
    (-signal.SIGHUP, True), (-signal.SIGQUIT, True), (-signal.SIGUSR1, True),
    (-signal.SIGPIPE, True), (-signal.SIGALRM, True), (-64, True), (0, True), (1, True),
    (None, True),
])
def test_only_a_signal_the_run_raises_is_the_programs_fault(code, transient):
    answer = _crashed(code)
    assert answer["status"] == "fault" and not answer["ok"]
    assert bool(answer.get("transient")) is transient, answer
    assert ("crashed" in answer["message"]) is not transient, answer["message"]


def test_every_program_signal_is_a_synchronous_one():
    """Signals a running kernel raises itself; none of them is how processes are stopped."""
    from argus_env.measure.worker import PROGRAM_SIGNALS
    assert not PROGRAM_SIGNALS & {signal.SIGKILL, signal.SIGTERM, signal.SIGINT, signal.SIGHUP,
                                  signal.SIGQUIT, signal.SIGUSR1, signal.SIGUSR2}


@pytest.mark.slow
def test_an_out_of_bounds_kernel_is_a_lasting_fault_and_the_worker_recovers():
    w = Worker(interpret=True, timeout=60)
    try:
        answer = w.run(_out_of_bounds(), "gemm", SMALL)
        assert answer["status"] == "fault" and not answer.get("transient"), answer
        assert "SIGSEGV" in answer["message"] or "SIGBUS" in answer["message"], answer
        assert w.run(TASK.program("baseline").text, "gemm", TASK.env_check_shape)["ok"]
    finally:
        w.stop()


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM, signal.SIGQUIT, signal.SIGUSR1])
def test_a_worker_ended_by_any_outside_signal_is_transient(sig):
    previous = None
    if sig != signal.SIGKILL:
        # a shell starts background jobs with SIGQUIT (and SIGINT) ignored, and the worker
        # would inherit that; the signal as an operator's `kill` delivers it to a process
        # that has not chosen to ignore it
        previous = signal.signal(sig, signal.SIG_DFL)
    w = Worker(interpret=True, timeout=60)
    try:
        assert w.ensure_started()
        result: dict = {}
        t = threading.Thread(target=lambda: result.update(w.run(_forever(), "gemm", SMALL)))
        t.start()
        time.sleep(2)
        os.kill(w._proc.pid, sig)
        t.join(30)
        assert result["status"] == "fault" and result.get("transient"), result
        assert signal.Signals(sig).name in result["message"], result
        assert "from outside" in result["message"], result
        assert w.run(TASK.program("baseline").text, "gemm", TASK.env_check_shape)["ok"]
    finally:
        w.stop()
        if previous is not None:
            signal.signal(sig, previous)


def _variant(i: int) -> str:
    return TASK.program("baseline").text.replace(
        "    A.grid(", f'    """variant {i}"""\n    A.grid(', 1)


@pytest.mark.slow
def test_the_worker_is_recycled_after_its_share_of_programs():
    w = Worker(interpret=True, timeout=60, recycle_after=3)
    try:
        answers, pids = [], []
        for i in range(7):
            w.ensure_started()
            pids.append(w._proc.pid)
            answers.append(w.run(_variant(i), "gemm", SMALL))
        assert all(a["status"] == "ok" and "recycle" not in a for a in answers), answers
        assert w.recycles == 2 and w.restarts == 0, (w.recycles, w.restarts)
        assert len(set(pids[:3])) == 1 and len(set(pids[3:6])) == 1 and pids[3] != pids[0]
        assert pids[6] not in pids[:6], "the seventh program runs in a third process"
    finally:
        w.stop()


@pytest.mark.slow
def test_the_same_program_again_is_not_a_new_one():
    w = Worker(interpret=True, timeout=60, recycle_after=2)
    try:
        for _ in range(4):
            assert w.run(_variant(0), "gemm", SMALL)["ok"]
        assert w.recycles == 0
    finally:
        w.stop()


@pytest.mark.slow
@pytest.mark.parametrize("proven", [False, True])
def test_a_process_that_ran_an_unproven_program_serves_nothing_else_until_it_is_proven(proven):
    """An out-of-bounds store under the interpreter may corrupt the heap without crashing
    there (a later, innocent request then dies with "double free"): a process that ran a
    program the checker has not proven serves the next request only once it is proven."""
    w = Worker(interpret=True, timeout=60)
    try:
        assert w.ensure_started()
        first = w._proc.pid
        trust = threading.Event()
        request = Worker.prepare(TASK.program("baseline").text, "gemm", SMALL)
        assert w.run_prepared(request, trust=trust)["ok"]
        if proven:
            trust.set()
        assert w.run(TASK.program("baseline").text, "gemm", SMALL)["ok"]
        assert (w._proc.pid == first) is proven, (first, w._proc.pid)
        assert w.distrusted == (0 if proven else 1) and w.restarts == 0
        # a trust set only after the process was replaced changes nothing
        trust.set()
        again = w._proc.pid
        assert w.run(TASK.program("baseline").text, "gemm", SMALL)["ok"]
        assert w._proc.pid == again
    finally:
        w.stop()
