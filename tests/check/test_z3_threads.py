"""z3 is used by one thread at a time: a z3 object freed by another thread while a check
runs is released by the checking thread (`argus_env.check.z3guard`), and checks started in
two threads run one after the other with the results they give alone."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import threading

import z3

from argus_env.check import z3guard
from argus_env.check.symbolic import check  # noqa: F401  (installs the guard)


def test_every_z3_module_releases_through_the_guard():
    assert z3guard.guarded()
    assert hasattr(z3.z3.Z3_dec_ref, "__argus_z3_guarded__")
    assert hasattr(z3.z3core.Z3_solver_dec_ref, "__argus_z3_guarded__")
    assert not hasattr(z3.z3.Z3_mk_add, "__argus_z3_guarded__")  # only releases are wrapped


def test_a_release_from_another_thread_waits_for_the_session_to_end():
    x = z3.Int("x_guard_test")
    held = [x + 1, x * 3]
    del x
    queued = []
    with z3guard.session():
        t = threading.Thread(target=lambda: (held.clear(), queued.append(len(z3guard._pending))))
        t.start()
        t.join()
        assert queued == [2], queued        # both releases queued, none made in the thread
        assert len(z3guard._pending) == 2
    assert not z3guard._pending             # made by this thread before the session ended
    t = threading.Thread(target=lambda: held.append(z3.Int("y") + 2) or held.clear())
    t.start()
    t.join()
    assert not z3guard._pending             # outside a session a thread releases at once


SCRIPT = textwrap.dedent("""
    import threading
    from argus_env.check import check_program
    from argus_env.task import get_task
    jobs = [(n, s.sizes) for n in ("gemm", "moe", "attention") for s in get_task(n).shapes[:2]]
    def run(name, sizes):
        t = get_task(name)
        r = check_program(t.program("expert"), dict(sizes), t)
        return name, r.status, tuple(r.proven), r.queries
    alone = [run(*j) for j in jobs]
    together = [None] * len(jobs)
    def lane(k):
        for i in range(k, len(jobs), 2):
            together[i] = run(*jobs[i])
    ts = [threading.Thread(target=lane, args=(k,)) for k in range(2)]
    [t.start() for t in ts]
    [t.join() for t in ts]
    assert together == alone, (together, alone)
    assert all(r[1] == "proven" for r in alone), alone
    print("ok", len(alone))
""")


def test_checks_in_two_threads_give_the_results_they_give_alone():
    # a child process: without the guard, z3's context is corrupted and the process dies
    proc = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0 and proc.stdout.startswith("ok 6"), \
        (proc.returncode, proc.stdout[-2000:], proc.stderr[-3000:])



EXIT = textwrap.dedent("""
    import sys
    from argus_env.check.symbolic import check
    import z3
    keep = [z3.Int("x") + 1, z3.Solver()]
    # what the interpreter does at exit before z3's objects go: module globals become None
    guard = sys.modules["argus_env.check.z3guard"]
    for name in [n for n in vars(guard) if not n.startswith("__")]:
        setattr(guard, name, None)
    del keep
""")


def test_z3_objects_freed_after_the_guard_module_is_gone_are_released_quietly():
    proc = subprocess.run([sys.executable, "-c", EXIT], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0 and "Exception ignored" not in proc.stderr, proc.stderr[-2000:]


def test_releases_queued_for_a_context_are_made_before_it_is_deleted():
    """A check's own z3 context (`argus_env.check.isolated`): terms of it freed by another
    thread during a session are released as the context is deleted, before it (a release
    on a deleted context reads freed memory), not at the session's end after it."""
    with z3guard.session():
        ctx = z3.Context()
        held = [z3.Int("x_ctx_test", ctx) + 1, z3.Int("y_ctx_test", ctx) * 2]
        t = threading.Thread(target=held.clear)
        t.start()
        t.join()
        assert len(z3guard._pending) == 2  # queued: the session's thread makes them
        ctx = None  # the last reference: the context is deleted here, in the session
        assert not z3guard._pending
