"""`Worker.stop` from another thread (an environment closed on Ctrl-C, `atexit`) while a
request runs: the request ends at once with the `stopped` answer (a transient fault, not a
verdict on the program), prints nothing, starts no new process, and a later request starts
a fresh one.

The worker processes here are stand-ins started through `_ENTRY` (no torch, no Triton):
one that never answers, one that never says it is ready, one that answers every request,
so each case is quick and no timing decides it. Before the stop/lock protocol, the stop
set the worker's connection to None between the requesting thread's poll and recv (an
AttributeError traceback from the thread, and no answer), or closed a descriptor that a
poll in another thread went on waiting on."""

from __future__ import annotations

import select
import threading
import time

import pytest

from argus_env.measure import worker as worker_mod
from argus_env.measure.worker import Worker

_CONN = ("import os, select, sys, time\n"
         "from multiprocessing.connection import Connection\n"
         "fd = int(sys.argv[sys.argv.index('--fd') + 1])\n"
         "c = Connection(fd)\n")
#: says it is ready, takes a request, never answers
SILENT = _CONN + "c.send({'status': 'ready'})\nc.recv_bytes()\ntime.sleep(600)\n"
#: never says it is ready
MUTE = _CONN + "time.sleep(600)\n"
#: answers every request
ECHO = _CONN + ("c.send({'status': 'ready'})\n"
                "while True:\n"
                "    try:\n"
                "        c.recv_bytes()\n"
                "    except EOFError:\n"
                "        break\n"
                "    c.send({'status': 'ok', 'ok': True, 'message': ''})\n")
#: SILENT, with a grandchild holding the socket open too: killing the worker alone then
#: ends nothing on the parent's side (only shutting the socket down does; the grandchild
#: leaves when it sees that, or after 60 s)
SILENT_WITH_HEIR = _CONN + (
    "if os.fork() == 0:\n"
    "    p = select.poll()\n"
    "    p.register(fd, select.POLLRDHUP)\n"
    "    p.poll(60000)\n"
    "    os._exit(0)\n"
    "c.send({'status': 'ready'})\nc.recv_bytes()\ntime.sleep(600)\n")

REQUEST = b"any bytes: the stand-ins do not read them"


def _worker(monkeypatch, entry: str, **kw) -> Worker:
    monkeypatch.setattr(worker_mod, "_ENTRY", entry)
    return Worker(interpret=True, **kw)


def _in_thread(fn) -> tuple[threading.Thread, dict]:
    box: dict = {}

    def run():
        try:
            box["answer"] = fn()
        except BaseException as e:  # noqa: BLE001 - the test reports it
            box["error"] = e
    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t, box


def _watch_poll(w: Worker) -> threading.Event:
    """An event set when the running process's connection starts a poll."""
    polling = threading.Event()
    conn = w._conn
    real = conn.poll

    def poll(timeout=0.0):
        polling.set()
        return real(timeout)
    conn.poll = poll
    return polling


def _assert_stopped(box: dict) -> None:
    assert "error" not in box, box
    answer = box["answer"]
    assert answer["status"] == "fault" and not answer["ok"], answer
    assert answer.get("transient") and answer.get("stopped"), answer


@pytest.mark.parametrize("entry", [SILENT, SILENT_WITH_HEIR], ids=["silent", "with-heir"])
@pytest.mark.parametrize("round", range(4))
def test_stop_from_another_thread_ends_a_request_blocked_on_its_answer(monkeypatch, capfd,
                                                                        entry, round):
    w = _worker(monkeypatch, entry, timeout=120)
    assert w.ensure_started()
    child = w._proc
    polling = _watch_poll(w)
    lane, box = _in_thread(lambda: w.run_prepared(REQUEST))
    assert polling.wait(10)
    time.sleep(0.05 * round)  # into the poll, a little further each round
    t0 = time.monotonic()
    w.stop()
    lane.join(10)
    assert not lane.is_alive(), "the request was left waiting for an answer after stop()"
    assert time.monotonic() - t0 < 8
    _assert_stopped(box)
    assert child.poll() is not None and w._proc is None and w._conn is None
    assert w.restarts == 0  # a stop is not a restart
    out, err = capfd.readouterr()
    assert err == "" and out == "", (out, err)


def test_stop_between_poll_and_recv(monkeypatch, capfd):
    """The answer has arrived (poll said so) when another thread's stop lands: the
    request still ends with the stopped answer, not an AttributeError."""
    w = _worker(monkeypatch, ECHO, timeout=60)
    assert w.ensure_started()
    conn = w._conn
    real = conn.poll

    def poll_then_stop(timeout=0.0):
        ready = real(timeout)
        assert ready  # the answer is there to be read
        other = threading.Thread(target=w.stop)
        other.start()
        other.join(10)
        return ready
    conn.poll = poll_then_stop
    lane, box = _in_thread(lambda: w.run_prepared(REQUEST))
    lane.join(10)
    assert not lane.is_alive()
    _assert_stopped(box)
    assert w._proc is None and w._conn is None
    out, err = capfd.readouterr()
    assert err == "" and out == "", (out, err)


def test_stop_between_poll_and_recv_inside_recv(monkeypatch, capfd):
    """The stop lands as the request starts reading the answer: the stopped answer."""
    w = _worker(monkeypatch, ECHO, timeout=60)
    assert w.ensure_started()
    conn = w._conn
    real = conn.recv

    def stop_then_recv():
        other = threading.Thread(target=w.stop)
        other.start()
        other.join(10)
        return real()
    conn.recv = stop_then_recv
    lane, box = _in_thread(lambda: w.run_prepared(REQUEST))
    lane.join(10)
    assert not lane.is_alive()
    _assert_stopped(box)
    out, err = capfd.readouterr()
    assert err == "" and out == "", (out, err)


def test_stop_ends_a_request_waiting_for_its_turn_and_starts_no_process(monkeypatch, capfd):
    w = _worker(monkeypatch, SILENT, timeout=120)
    assert w.ensure_started()
    polling = _watch_poll(w)
    spawned = []
    real_spawn = w._spawn
    monkeypatch.setattr(w, "_spawn", lambda: spawned.append(1) or real_spawn())
    first, box1 = _in_thread(lambda: w.run_prepared(REQUEST))
    assert polling.wait(10)
    second, box2 = _in_thread(lambda: w.run_prepared(REQUEST))  # waits for the lock
    time.sleep(0.2)
    w.stop()
    first.join(10)
    second.join(10)
    assert not first.is_alive() and not second.is_alive()
    _assert_stopped(box1)
    _assert_stopped(box2)
    assert not spawned and w._proc is None, "a stopped worker was started again"
    assert capfd.readouterr().err == ""


def test_stop_while_the_process_starts(monkeypatch, capfd):
    """A request waiting for a new process to say it is ready ends at the stop, and starts
    no second process (the startup limit is far away)."""
    w = _worker(monkeypatch, MUTE, timeout=60, startup_timeout=120)
    spawned = []
    real_spawn = w._spawn
    monkeypatch.setattr(w, "_spawn", lambda: spawned.append(1) or real_spawn())
    lane, box = _in_thread(lambda: w.run_prepared(REQUEST))
    deadline = time.monotonic() + 10
    while w._busy is None and time.monotonic() < deadline:  # waiting for "ready"
        time.sleep(0.01)
    assert w._busy is not None
    child = w._proc
    t0 = time.monotonic()
    w.stop()
    lane.join(10)
    assert not lane.is_alive() and time.monotonic() - t0 < 8
    _assert_stopped(box)
    assert spawned == [1] and child.poll() is not None and w._proc is None
    assert capfd.readouterr().err == ""


def test_a_request_after_a_stop_starts_a_fresh_process(monkeypatch):
    w = _worker(monkeypatch, ECHO, timeout=60)
    try:
        assert w.run_prepared(REQUEST)["ok"]
        first = w._proc
        w.stop()
        assert w.run_prepared(REQUEST)["ok"]
        assert w._proc is not None and w._proc is not first and first.poll() is not None
        assert w.restarts == 0
    finally:
        w.stop()


def test_an_interrupt_in_the_requesting_thread_replaces_the_process(monkeypatch):
    """A KeyboardInterrupt while the request waits leaves no process whose late answer
    would be read as the next request's."""
    w = _worker(monkeypatch, SILENT, timeout=60)
    assert w.ensure_started()
    child = w._proc
    conn = w._conn

    def interrupted(timeout=0.0):
        raise KeyboardInterrupt
    conn.poll = interrupted
    with pytest.raises(KeyboardInterrupt):
        w.run_prepared(REQUEST)
    assert w._proc is None and child.poll() is not None


def test_lanes_start_no_shape_after_an_interrupt_in_the_first():
    """`_run_lanes`: a Ctrl-C in the first lane (the caller's thread) keeps the other
    lanes from starting further shapes (each would start a worker the closing
    environment has just stopped)."""
    from argus_env.envs.evaluate import _run_lanes
    calls: list = []
    go = threading.Event()

    def run(worker, i):
        calls.append(i)
        if i == 0:
            raise KeyboardInterrupt
        go.wait(10)
        return {"ok": True}
    before = set(threading.enumerate())
    with pytest.raises(KeyboardInterrupt):
        _run_lanes(["a", "b"], 6, run)
    go.set()
    for t in set(threading.enumerate()) - before:
        t.join(10)
    assert sorted(calls) == [0, 1], calls


def test_shutting_down_wakes_a_poll_in_another_thread():
    """What `stop` relies on: shutting a socket down wakes a poll blocked on it (closing
    the descriptor would not), and the descriptor stays open for its user to close."""
    import socket
    from multiprocessing.connection import Connection
    a, b = socket.socketpair()
    conn = Connection(a.detach())
    try:
        t, box = _in_thread(lambda: conn.poll(60))
        time.sleep(0.2)
        worker_mod._shut_down(conn)
        t.join(5)
        assert not t.is_alive() and box.get("answer") is True
        with pytest.raises(EOFError):
            conn.recv()
        assert not conn.closed
        p = select.poll()
        p.register(b.fileno(), select.POLLRDHUP)
        assert p.poll(1000), "the other end sees the shutdown"
    finally:
        conn.close()
        b.close()


class _LeftConn:
    """The worker's end of a connection whose parent has left: a recv is reset (the
    parent closed its end with an answer unread), or a send finds no reader."""

    def __init__(self, requests: list):
        self.requests, self.sent = list(requests), []

    def send(self, obj):
        if self.sent:
            raise BrokenPipeError(32, "Broken pipe")
        self.sent.append(obj)

    def recv(self):
        if not self.requests:
            raise ConnectionResetError(104, "Connection reset by peer")
        return self.requests.pop(0)


@pytest.mark.parametrize("requests", [[], [{"program": "not a program", "task": "gemm",
                                            "sizes": {}}]], ids=["recv-reset", "send-broken"])
def test_the_worker_process_leaves_quietly_when_its_parent_has_gone(capfd, requests):
    """A worker whose parent stopped it mid-request ends without a traceback on the
    stderr it shares with the parent (`argus run` on Ctrl-C printed one)."""
    conn = _LeftConn(requests)
    worker_mod._serve(conn, interpret=True, recycle_after=0)
    assert conn.sent == [{"status": "ready"}] and not conn.requests
    assert capfd.readouterr().err == ""
