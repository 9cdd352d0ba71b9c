"""Ctrl-C and full disks in `argus run`: stopped promptly, nothing partial left behind.

Ctrl-C (SIGINT to the process group, as a terminal sends it) during an episode stops the
run within seconds with exit status 130 and writes no episode record; a folder that cannot
be written is refused before the episode starts; a record that cannot be written whole is
not written at all.
"""

from __future__ import annotations

import errno
import os
import signal
import subprocess
import sys
import time

import pytest

from argus_env import cli


def _signals_as_at_a_terminal() -> None:
    """Ctrl-C and Ctrl-\\ as a terminal delivers them: a shell starts background jobs with
    SIGINT and SIGQUIT ignored, and an ignored signal stays ignored across exec (the test
    suite itself may run as such a job)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGQUIT, signal.SIG_DFL)


def test_ctrl_c_stops_argus_run_promptly_and_writes_no_record(tmp_path):
    out = tmp_path / "runs"
    env = {**os.environ, "TRITON_INTERPRET": "1", "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen([sys.executable, "-m", "argus_env.cli", "run", "--task", "gemm",
                             "--agent", "random", "--budget", "100000", "--out-dir", str(out)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
                            start_new_session=True, text=True, preexec_fn=_signals_as_at_a_terminal)
    try:
        line = proc.stdout.readline()  # the run has started once it prints its header
        assert "argus run" in line, line + proc.stderr.read()
        time.sleep(4)
        assert proc.poll() is None, "the episode ended before it could be interrupted"
        t0 = time.monotonic()
        os.killpg(proc.pid, signal.SIGINT)
        _, err = proc.communicate(timeout=90)
        elapsed = time.monotonic() - t0
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 130, (proc.returncode, err[-2000:])
    assert elapsed < 30, f"Ctrl-C took {elapsed:.1f} s to stop the run"
    assert "interrupted" in err and "Traceback" not in err, err[-2000:]
    assert not list(out.glob("*")), f"a record was left behind: {list(out.glob('*'))}"


@pytest.fixture
def default_sigint():
    """SIGINT as a fresh `argus run` process has it (Python's default handler), whatever an
    earlier test in this process left installed; restored afterwards."""
    before = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, before)


def test_a_ctrl_c_that_a_finaliser_swallows_is_still_noted(default_sigint):
    """Python prints and drops an exception raised in a `__del__`: a Ctrl-C landing there
    (a z3 object freed by the garbage collector) must still stop `argus run` at its next
    step, through the latch the run checks."""
    class Finalised:
        def __del__(self):
            try:
                os.kill(os.getpid(), signal.SIGINT)
                time.sleep(0.5)  # the handler runs here and raises
            except KeyboardInterrupt:
                pass  # swallowed, as a finaliser's exception is
    with cli._noting_ctrl_c() as latch:
        Finalised()
        assert latch.is_set()
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    with cli._noting_ctrl_c() as latch:  # a fresh latch for the next run
        assert not latch.is_set()


def test_an_unwritable_out_dir_is_refused_before_the_episode(tmp_path, capsys):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    t0 = time.monotonic()
    code = cli.main(["run", "--task", "gemm", "--budget", "3", "--out-dir",
                     str(blocker / "runs")])
    assert code == 2 and time.monotonic() - t0 < 5
    err = capsys.readouterr().err
    assert "--out-dir" in err and "cannot write" in err, err


def test_a_record_that_cannot_be_written_whole_is_not_written(tmp_path, monkeypatch):
    out = tmp_path / "runs"

    def full_disk(fd):
        raise OSError(errno.ENOSPC, "No space left on device")
    monkeypatch.setattr(os, "fsync", full_disk)
    with pytest.raises(OSError):
        cli.main(["run", "--task", "gemm", "--agent", "random", "--budget", "2",
                  "--out-dir", str(out)])
    assert not [p for p in out.iterdir()], list(out.iterdir())


def test_a_ctrl_c_inside_a_z3_call_is_still_an_interrupt(monkeypatch):
    """SIGINT while ctypes converts a z3 call's arguments surfaces as ctypes.ArgumentError;
    the evaluator must not take it for a checker bug and go on."""
    import ctypes

    from argus_env.envs import evaluate
    from argus_env.envs.evaluate import Evaluator, interrupted
    from argus_env.measure.backends import ModelBackend
    from argus_env.task import get_task
    assert interrupted(ctypes.ArgumentError("argument 2: KeyboardInterrupt: "))
    assert not interrupted(ValueError("a checker bug"))

    def hit(*a, **k):
        raise ctypes.ArgumentError("argument 2: KeyboardInterrupt: ")
    monkeypatch.setattr(evaluate, "check_program", hit)
    task = get_task("gemm")
    ev = Evaluator(task, ModelBackend("h200"), correctness="none")
    with pytest.raises(KeyboardInterrupt):
        ev.evaluate(task.program("baseline"), {"M": 64, "N": 64, "K": 64})


def test_after_a_ctrl_c_z3_finalisers_raising_are_not_reported(monkeypatch):
    """A Ctrl-C can land in a z3 object's `__del__` or leave one half-built, whose
    finaliser then raises as it is collected: after the interrupt those reports are
    dropped; any other finaliser's error is still reported."""
    import sys
    import z3
    from argus_env import cli
    seen = []
    monkeypatch.setattr(sys, "unraisablehook", lambda u: seen.append(u.object))
    cli._quiet_interrupted_finalisers()
    cli._quiet_interrupted_finalisers()   # once is enough: not stacked

    class Elsewhere:
        def __del__(self):
            raise AttributeError("not z3")
    half = z3.BoolRef.__new__(z3.BoolRef)   # no ctx: its __del__ raises AttributeError
    del half
    obj = Elsewhere()
    del obj
    assert [getattr(o, "__qualname__", "") for o in seen] == ["test_after_a_ctrl_c_z3_finalisers_raising_are_not_reported.<locals>.Elsewhere.__del__"], seen
