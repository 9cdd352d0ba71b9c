"""A persistent worker process that runs candidate kernels, so a hang or a crash costs a
penalty rather than the environment.

The worker receives a program: from the environment, the parent's own `Program` (parsed
and type-checked there, once) with its generated Triton text, which it loads as is; from
other callers, DSL *text*, which it parses with the whitelisting front end and lowers. It
runs the kernel against the task's reference through `oracle.check` and answers a dict. The parent waits at most `timeout` seconds; a worker that hangs is killed and a
new one started on the next request; a worker that dies mid-run (a segfault from an
out-of-bounds access under the interpreter, say) is reported as a fault. A worker first
imports torch and triton and says it is ready; only then does a request's time start, so
a restart never eats into a kernel's budget.

The worker is a plain subprocess, `python -m argus_env.measure.worker --fd N`, talking over
one end of a socket pair with `multiprocessing.connection`'s framing: it never re-imports
the user's main module (an unguarded script stays correct), and a daemonic process (an
`AsyncVectorEnv` worker, an RLlib env runner) may start it. A worker killed from outside
(SIGKILL, SIGTERM, SIGINT that it did not raise itself) gives a `fault` answer marked
`transient`: not a verdict on the program, so it is not remembered.

A program may run before the checker has proven its accesses in bounds (`run_prepared`'s
`trust`: the environment's numerics beside the check). Under the interpreter an
out-of-bounds store writes through a raw pointer and may corrupt the process's heap
without crashing it there, so a process that ran such a program serves no further
request until the program is proven (`trust` set); otherwise it is replaced first, and the
next program's answer is never the earlier one's damage.
"""

from __future__ import annotations

import atexit
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import weakref
from multiprocessing.connection import Connection
from multiprocessing.reduction import ForkingPickler

#: signals a process raises by running code: a kernel's out-of-bounds access (SIGSEGV,
#: SIGBUS), an abort in the compiler or runtime (SIGABRT), a trap, a resource limit its run
#: exceeded. A worker ended by any other signal (SIGKILL, SIGTERM, SIGINT, SIGHUP, SIGQUIT,
#: SIGUSR1, ...) was stopped from outside (an operator, an OOM killer, a terminal).
PROGRAM_SIGNALS = frozenset({signal.SIGSEGV, signal.SIGBUS, signal.SIGFPE, signal.SIGILL,
                             signal.SIGABRT, signal.SIGTRAP, signal.SIGSYS, signal.SIGXCPU,
                             signal.SIGXFSZ})
_LIVE: "weakref.WeakSet[Worker]" = weakref.WeakSet()


#: distinct programs a worker loads before it makes way for a fresh one (its module and
#: text caches are bounded too; recycling also returns whatever torch, Triton or the
#: allocator keep per program)
RECYCLE_AFTER = 1000


def _serve(conn, interpret: bool, recycle_after: int = RECYCLE_AFTER, warm: int = 0) -> None:
    """The worker's loop: one request, one answer, until the pipe closes or it has loaded
    `recycle_after` programs (0: never), when its last answer says `recycle`. `warm`: a
    compute capability to compile a small kernel for before saying ready (a compile
    worker: its first program then does not pay the compiler's start), 0 for none."""
    os.environ["TRITON_INTERPRET"] = "1" if interpret else "0"  # before triton is imported
    from .. import lower
    from ..dsl.program import Program
    from ..task import get_task
    from . import oracle
    try:  # the slow imports, before the first request's clock starts
        import torch  # noqa: F401
        import triton  # noqa: F401
    except ImportError:
        pass  # requests will say what is missing
    if warm and not interpret:
        from ..lower.aot import warm_up
        warm_up(warm)
    try:
        conn.send({"status": "ready"})
    except OSError:  # the parent left while this worker started: nothing to serve
        return
    provenance = None
    while True:
        try:
            req = conn.recv()
        except (EOFError, OSError, KeyboardInterrupt):
            # the parent closed its end (or reset it: it left an answer unread), or is
            # gone: nothing more to serve, and nothing to say on the shared stderr
            return
        t0 = time.perf_counter()
        try:
            program = req["program"]
            if not isinstance(program, Program):  # text from outside the environment
                program = Program.from_text(program)
            task = get_task(req["task"])
            if req.get("op") == "compile":  # ahead of time for a named target (`lower.aot`)
                from ..lower.aot import compile_answer
                if interpret:
                    raise RuntimeError("the compile op needs a worker with interpret=False")
                answer = compile_answer(program, **req.get("options", {}))
            elif req.get("op") == "measure":
                launch = lower.load(program, interpret=interpret, source=req.get("source"))
                from .gpu import measure_program
                from .provenance import collect
                answer = measure_program(program, task, req["sizes"], launch,
                                         seed=req.get("seed", 0), **req.get("options", {}))
                provenance = provenance or collect()  # once per worker: GPU, driver, clocks
                answer["provenance"] = provenance
            else:
                launch = lower.load(program, interpret=interpret, source=req.get("source"))
                verdict = oracle.check(program, task, req["sizes"], launch,
                                       device="cpu" if interpret else "cuda",
                                       seed=req.get("seed", 0))
                answer = {"status": "ok" if verdict.ok else "mismatch", **verdict.to_dict()}
        except Exception as e:  # a compile error is an answer, not a crash
            answer = {"status": "compile", "ok": False, "message": f"{type(e).__name__}: {e}"[:2000]}
            if not interpret and _context_lost(e):
                # an illegal address or device assert poisons this process's CUDA context
                # for good: answer, then make way for a fresh worker
                answer.update(status="fault", restart=True)
        answer["seconds"] = time.perf_counter() - t0
        if recycle_after and lower.loads() >= recycle_after:
            answer["recycle"] = True
        try:
            conn.send(answer)
        except OSError:  # the parent left while this request ran
            return
        if answer.get("restart") or answer.get("recycle"):
            return


#: what CUDA's sticky errors say (torch and Triton wrap them in their own exceptions)
STICKY = ("illegal memory access", "misaligned address", "device-side assert",
          "unspecified launch failure", "illegal instruction", "an illegal address",
          "CUDA error: unknown error", "launch timed out")


def _context_lost(e: BaseException) -> bool:
    text = f"{type(e).__name__}: {e}"
    return type(e).__name__ == "AcceleratorError" or any(s in text for s in STICKY)


class Worker:
    """A lazily started worker process; `run` is thread-safe, and so is `stop`.

    One request runs at a time (`_lock`, held for the whole request). `stop` takes no part
    in that: called from another thread (an environment closed on Ctrl-C while a numerics
    lane waits for its answer, `atexit`), it ends the request in flight at once. The
    process, its connection and the stop count are read and changed under `_state`, held
    only briefly and never while waiting. A request marks the connection it waits on as
    in use (`_busy`): `stop` then shuts that socket down rather than closing it (a poll or
    recv blocked on it returns at once with EOF; closing the descriptor would not wake it,
    and its number could be reused for another file meanwhile), and the request closes it
    when it lets go of it. A request that a `stop` overtook answers `_stopped()`: a
    transient fault, not a verdict on the program; it never starts another process."""

    def __init__(self, interpret: bool = True, timeout: float = 60.0,
                 startup_timeout: float = 120.0, recycle_after: int = RECYCLE_AFTER,
                 warm: int = 0):
        self.interpret = interpret
        self.warm = int(warm)  # compute capability a compile worker warms its compiler for
        self.timeout = timeout
        self.startup_timeout = startup_timeout
        self.recycle_after = recycle_after  # programs per worker process (0: unbounded)
        self.slot = 0  # which of the process's shared workers it is (`shared_worker`)
        self._proc = None
        self._conn = None
        self._ready = False  # the running process said it is ready
        self._lock = threading.Lock()  # one request (or start) at a time
        self._state = threading.Lock()  # _proc, _conn, _ready, _busy, _stops: held briefly
        self._busy = None  # the connection a request is using now (`stop` wakes it)
        self._stops = 0  # calls of `stop`: a request notes the count when it is made
        self.restarts = 0
        self.recycles = 0  # planned replacements after `recycle_after` programs
        # (process, trust) of the last request that ran a program not yet proven safe:
        # that process serves no other request unless `trust` is set by then
        self._unproven = None
        self.distrusted = 0  # processes replaced because an unproven program ran there

    def _start(self, stops: int | None = None) -> bool:
        """Start the process and wait until it is ready; False if it never is."""
        return self._spawn() and self._await_ready(stops)

    def _spawn(self) -> bool:
        """Start the process without waiting for it; False if it cannot be started."""
        parent, child = socket.socketpair()
        # `-c` rather than `-m`: runpy would run a second copy of this module as __main__
        # beside the one the package's imports load (and warn about it on stderr)
        cmd = [sys.executable, "-c", _ENTRY, "--fd", str(child.fileno()),
               "--interpret", "1" if self.interpret else "0",
               "--recycle", str(int(self.recycle_after)), "--warm", str(self.warm)]
        try:
            proc = subprocess.Popen(cmd, pass_fds=(child.fileno(),), stdin=subprocess.DEVNULL,
                                    env=_environment(self.interpret))
        except OSError:
            parent.close()
            return False
        finally:
            child.close()
        conn = Connection(parent.detach())
        with self._state:
            self._proc, self._conn, self._ready = proc, conn, False
        _LIVE.add(self)
        return True

    def _await_ready(self, stops: int | None = None) -> bool:
        """Wait until the started process says it is ready; False (and stopped) if it never
        does within `startup_timeout`, or if `stop` is called meanwhile (or was since the
        request that `stops` counted was made)."""
        conn, _ = self._take(stops)
        ok = False
        if conn is not None:
            try:
                ok = conn.poll(self.startup_timeout) and conn.recv().get("status") == "ready"
            except (EOFError, OSError):
                ok = False
            finally:
                self._let_go(conn)
        with self._state:
            if ok and self._conn is conn and (stops is None or stops == self._stops):
                self._ready = True
                return True
        self._halt()
        return False

    def _take(self, stops: int | None = None) -> tuple:
        """The live connection and its process, the connection marked in use until
        `_let_go`; (None, None) when there is none, or when `stop` was called since the
        count `stops` was read."""
        with self._state:
            if self._conn is None or (stops is not None and stops != self._stops):
                return None, None
            self._busy = self._conn
            return self._conn, self._proc

    def _let_go(self, conn) -> None:
        """Done with `conn` (from `_take`): closed here if a stop came meanwhile (it shut
        the socket down and left the descriptor to the one using it)."""
        with self._state:
            if self._busy is conn:
                self._busy = None
            if conn is not self._conn:
                conn.close()

    def prestart(self, stops: int | None = None) -> None:
        """Start the process now without waiting for it, so that its imports (torch,
        Triton: about a second) overlap the caller's own work; a later request waits for
        it to be ready. `stops`: a count of stops read earlier (`stops_so_far`); nothing
        is started if `stop` was called since."""
        with self._lock:
            if stops is not None and stops != self._stops:
                return
            self._drop_if_distrusted()
            if not self._alive():
                if self._proc is not None:
                    self._halt()
                self._spawn()

    def stops_so_far(self) -> int:
        """How many times `stop` was called (for `prestart`)."""
        with self._state:
            return self._stops

    def _drop_if_distrusted(self) -> None:
        """Replace the process (halt it: the next request or `prestart` starts another) if
        the last program it ran is not proven safe (`run_prepared`'s `trust`). Under
        `_lock`."""
        unproven = self._unproven
        if unproven is None:
            return
        proc, trust = unproven
        if trust.is_set() or proc is not self._proc:
            self._unproven = None
            return
        self._unproven = None
        self.distrusted += 1
        self._halt()

    def _alive(self) -> bool:
        proc = self._proc
        return proc is not None and proc.poll() is None

    def _exit_code(self) -> int | None:
        proc = self._proc
        return proc.poll() if proc is not None else None

    def ensure_started(self) -> bool:
        """Start the worker now (outside any request's time limit) unless it is running."""
        with self._lock:
            self._drop_if_distrusted()
            return self._ensure_started()

    def _ensure_started(self, stops: int | None = None) -> bool:
        if self._alive():
            return self._ready or self._await_ready(stops)
        if self._proc is not None:
            self.restarts += 1
            self._halt()
        return self._start(stops)

    def _retire(self) -> None:
        """Let a worker that said it is leaving exit by itself, then forget it."""
        proc = self._proc
        if proc is not None:
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass
        self._halt()

    def stop(self) -> None:
        """Stop the process (a later request starts a new one). Safe from any thread: a
        request running in another thread, or waiting there for its turn, ends at once
        with `_stopped()`'s answer."""
        self._halt(stopping=True)

    def _halt(self, stopping: bool = False) -> None:
        """Kill the process and forget it. `stopping` (`stop`): also count the stop, so
        that requests made before it give up. A connection a request is using is shut
        down (which wakes it) and left for the request to close; another is closed here."""
        with self._state:
            if stopping:
                self._stops += 1
            proc, conn = self._proc, self._conn
            self._proc = self._conn = None
            self._ready = False
            if proc is not None and proc.poll() is None:
                proc.kill()
            if conn is not None:
                if conn is self._busy:
                    _shut_down(conn)
                else:
                    try:
                        conn.close()
                    except OSError:
                        pass
        if proc is not None:
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass

    @staticmethod
    def prepare(program, task: str, sizes: dict, seed: int = 0, op: str = "check",
                options: dict | None = None, source: str | None = None) -> bytes:
        """A request for `run_prepared`, pickled now. Callers that run requests from
        several threads prepare them in one thread first: pickling an object reads (and in
        CPython 3.11 materialises) its `__dict__`, which two threads doing at once for the
        same object can corrupt (a garbage collection inside one lets the other in)."""
        request = {"program": program, "task": task, "sizes": dict(sizes), "seed": seed,
                   "op": op, "options": dict(options or {}), "source": source}
        return bytes(ForkingPickler.dumps(request))

    def run(self, program, task: str, sizes: dict, seed: int = 0,
            timeout: float | None = None, op: str = "check", options: dict | None = None,
            source: str | None = None) -> dict:
        """Check (op="check") or check and time (op="measure", on a GPU) one program: a
        `Program` (sent as it is, so the worker neither parses nor types it again) or DSL
        text; `source`, its generated Triton text, spares the worker generating it again.
        Never raises for what the program does."""
        return self.run_prepared(self.prepare(program, task, sizes, seed, op, options, source),
                                 timeout)

    def run_prepared(self, request: bytes, timeout: float | None = None,
                     trust: threading.Event | None = None) -> dict:
        """`run` for a request made by `prepare`: sends only bytes, so threads running
        requests share no object with one another. A `stop` called while the request runs
        or waits for its turn ends it with `_stopped()`'s answer. `trust`: the program is
        not yet proven to stay in bounds; the process that runs it serves no later request
        unless `trust` is set by the time that request comes (it is replaced first)."""
        with self._state:
            stops = self._stops
        with self._lock:
            try:
                self._drop_if_distrusted()
                return self._run_request(request, timeout, stops, trust)
            except BaseException:
                # given up midway (a KeyboardInterrupt in this thread): the process may
                # still answer this request, and that answer would be read as the next
                # one's; it makes way for a fresh one
                self._halt()
                raise

    def _run_request(self, request: bytes, timeout: float | None, stops: int,
                     trust: threading.Event | None = None) -> dict:
        conn = proc = None
        for attempt in range(2):  # a worker that died between requests is replaced once
            if stops != self._stops:
                return _stopped()
            if self._ensure_started(stops):
                conn, proc = self._take(stops)
                if conn is None:
                    return _stopped()
                try:
                    conn.send_bytes(request)
                    if trust is not None:  # this process now runs an unproven program
                        self._unproven = (proc, trust)
                    break
                except OSError:  # BrokenPipeError: it died after the liveness check
                    self._let_go(conn)
                    conn = None
                    if stops != self._stops:
                        return _stopped()
                    self._halt()
            if attempt:
                return _stopped() if stops != self._stops else \
                    {"status": "fault", "ok": False, "transient": True,
                     "message": "the worker process could not be started"}
        try:
            return self._answer(conn, proc, timeout, stops)
        finally:
            self._let_go(conn)

    def _answer(self, conn, proc, timeout: float | None, stops: int) -> dict:
        """The answer to the request just sent on `conn` to `proc`."""
        limit = self.timeout if timeout is None else timeout
        try:
            ready = conn.poll(limit)
        except (EOFError, OSError):
            ready = False
        if stops != self._stops:
            return _stopped()
        if not ready:
            alive = proc.poll() is None
            code = proc.poll()
            self._halt()
            if stops != self._stops:  # stopped while the process was looked at
                return _stopped()
            self.restarts += 1
            if alive:
                return {"status": "timeout", "ok": False,
                        "message": f"the kernel did not finish within {limit:.0f} s"}
            return _crashed(code)
        try:
            answer = conn.recv()
        except (EOFError, OSError):
            if stops != self._stops:
                return _stopped()
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass
            code = proc.poll()
            self._halt()
            if stops != self._stops:
                return _stopped()
            self.restarts += 1
            return _crashed(code)
        if stops != self._stops:  # overtaken all the same: one outcome for every stop
            return _stopped()
        if answer.get("restart"):  # the worker is exiting: replace it next time
            self._halt()
            self.restarts += 1
        if answer.pop("recycle", False):  # done its share of programs: likewise
            self._retire()
            self.recycles += 1
        return answer

    def __del__(self):
        try:
            self.stop()
        except Exception:
            pass


def _shut_down(conn) -> None:
    """Shut `conn`'s socket down for both directions without closing its descriptor: a
    thread blocked in `poll` or `recv` on it wakes at once and reads EOF."""
    try:
        sock = socket.socket(fileno=conn.fileno())
    except OSError:  # closed already
        return
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    finally:
        sock.detach()  # the descriptor stays the connection's


def _stopped() -> dict:
    """The answer to a request that `Worker.stop` overtook (called from another thread
    while the request ran or waited for its turn): transient, as a worker killed from
    outside is, so it is not remembered."""
    return {"status": "fault", "ok": False, "transient": True, "stopped": True,
            "message": "the worker was stopped (Worker.stop) before it answered; not a "
                       "verdict on the program"}


def _crashed(code: int | None) -> dict:
    """The answer for a worker that died mid-request with exit code `code` (`-n`: signal
    n): a fault of the program when its run raised the signal (`PROGRAM_SIGNALS`), else
    `transient` (a signal from outside, or an end without a signal, which no program text
    causes: the worker catches every exception a request raises), so the same program may
    well pass next time."""
    if code is not None and code < 0 and -code in PROGRAM_SIGNALS:
        return {"status": "fault", "ok": False,
                "message": f"the kernel crashed the worker ({_signal_name(-code)}, exit code "
                           f"{code})"}
    why = (f"stopped from outside ({_signal_name(-code)})" if code is not None and code < 0
           else "gone" if code is None else f"ended without a signal (exit code {code})")
    return {"status": "fault", "ok": False, "transient": True,
            "message": f"the worker was {why} while running the kernel; not a verdict on the "
                       "program"}


def _signal_name(n: int) -> str:
    try:
        return signal.Signals(n).name
    except ValueError:
        return f"signal {n}"


#: thread pools of the libraries a worker runs (torch's OpenMP, NumPy's BLAS): one thread
#: each under the interpreter, whose tiles are small and whose workers run side by side
#: (several pools spinning on a few cores slow every one of them down many times)
#: Triton's switch for floating-point contraction when a kernel does not choose
FP_FUSION = "TRITON_DEFAULT_FP_FUSION"
FP_FUSION_DEFAULT = "1"   # on, as Triton 3.6-3.9 default to
SERIAL = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")


def _environment(interpret: bool) -> dict:
    env = {**os.environ, "PYTHONPATH": _pythonpath()}
    # floating-point contraction (FMA) as every Triton the project supports does by default
    # (3.6-3.9), said explicitly: Triton 3.9 warns on every compile where it is unset, and
    # 3.10 turns the default off, which would change the kernels' numerics and code
    env.setdefault(FP_FUSION, FP_FUSION_DEFAULT)
    if interpret:
        env.update({name: "1" for name in SERIAL})
    return env


def _pythonpath() -> str:
    """This process's import path for the worker, so it imports the same Argus."""
    here = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    parts = [here] + [p for p in sys.path if p and os.path.isdir(p)]
    return os.pathsep.join(dict.fromkeys(parts))


@atexit.register
def _stop_all() -> None:
    for w in list(_LIVE):
        try:
            w.stop()
        except Exception:  # noqa: BLE001 - exiting anyway
            pass


_SHARED: dict[tuple, Worker] = {}
_USERS: dict[tuple, int] = {}


def shared_worker(interpret: bool = True, slot: int = 0) -> Worker:
    """One worker per process, mode and slot, shared by every environment in the process
    (slots past 0 run further reduced shapes side by side)."""
    key = (interpret, os.getpid(), slot)
    if key not in _SHARED:
        _SHARED[key] = Worker(interpret)
        _SHARED[key].slot = slot
    return _SHARED[key]


def acquire_shared_worker(interpret: bool = True, slot: int = 0) -> Worker:
    """`shared_worker`, counting the caller as a user until `release_shared_worker`."""
    key = (interpret, os.getpid(), slot)
    _USERS[key] = _USERS.get(key, 0) + 1
    return shared_worker(interpret, slot)


def release_shared_worker(worker: Worker) -> None:
    """One user fewer; the last one stops the process (a later `run` starts a new one)."""
    key = (worker.interpret, os.getpid(), worker.slot)
    if _SHARED.get(key) is not worker or not _USERS.get(key):
        return
    _USERS[key] -= 1
    if _USERS[key] == 0:
        worker.stop()


_ENTRY = "import sys; from argus_env.measure.worker import main; main(sys.argv[1:])"


def main(argv: list[str] | None = None) -> None:
    """`python -m argus_env.measure.worker --fd N --interpret 0|1`: serve requests on the
    inherited socket N until it closes."""
    import argparse
    ap = argparse.ArgumentParser(prog="python -m argus_env.measure.worker")
    ap.add_argument("--fd", type=int, required=True)
    ap.add_argument("--interpret", type=int, default=1)
    ap.add_argument("--recycle", type=int, default=RECYCLE_AFTER)
    ap.add_argument("--warm", type=int, default=0)
    args = ap.parse_args(argv)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle
    _serve(Connection(args.fd), bool(args.interpret), args.recycle, args.warm)


if __name__ == "__main__":
    main()
