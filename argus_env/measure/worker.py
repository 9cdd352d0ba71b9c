"""A persistent worker process that runs candidate kernels, so a hang or a crash costs a
penalty rather than the environment.

The worker receives program *text* (parsed again there by the whitelisting front end),
lowers it, runs it against the task's reference through `oracle.check`, and answers a
dict. The parent waits at most `timeout` seconds; a worker that hangs is killed and a
new one started on the next request; a worker that dies mid-run (a segfault from an
out-of-bounds access under the interpreter, say) is reported as a fault.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import threading
import time


def _serve(conn, interpret: bool) -> None:
    """The worker's loop: one request, one answer, until the pipe closes."""
    os.environ["TRITON_INTERPRET"] = "1" if interpret else "0"  # before triton is imported
    from .. import lower
    from ..dsl.program import Program
    from ..task import get_task
    from . import oracle
    provenance = None
    while True:
        try:
            req = conn.recv()
        except (EOFError, KeyboardInterrupt):
            return
        t0 = time.perf_counter()
        try:
            program = Program.from_text(req["program"])
            task = get_task(req["task"])
            launch = lower.load(program, interpret=interpret)
            if req.get("op") == "measure":
                from .gpu import measure_program
                from .provenance import collect
                answer = measure_program(program, task, req["sizes"], launch,
                                         seed=req.get("seed", 0), **req.get("options", {}))
                provenance = provenance or collect()  # once per worker: GPU, driver, clocks
                answer["provenance"] = provenance
            else:
                verdict = oracle.check(program, task, req["sizes"], launch,
                                       device="cpu" if interpret else "cuda",
                                       seed=req.get("seed", 0))
                answer = {"status": "ok" if verdict.ok else "mismatch", **verdict.to_dict()}
        except Exception as e:  # a compile error is an answer, not a crash
            answer = {"status": "compile", "ok": False, "message": f"{type(e).__name__}: {e}"[:2000]}
        answer["seconds"] = time.perf_counter() - t0
        conn.send(answer)


class Worker:
    """A lazily started worker process; `run` is thread-safe."""

    def __init__(self, interpret: bool = True, timeout: float = 60.0):
        self.interpret = interpret
        self.timeout = timeout
        self._proc = None
        self._conn = None
        self._lock = threading.Lock()
        self.restarts = 0

    def _start(self) -> None:
        ctx = mp.get_context("spawn")
        parent, child = ctx.Pipe()
        self._proc = ctx.Process(target=_serve, args=(child, self.interpret), daemon=True,
                                 name="argus-kernel-worker")
        self._proc.start()
        child.close()
        self._conn = parent

    def stop(self) -> None:
        if self._proc is not None:
            try:
                self._conn.close()
            except OSError:
                pass
            self._proc.kill()
            self._proc.join(timeout=5)
        self._proc = self._conn = None

    def run(self, program_text: str, task: str, sizes: dict, seed: int = 0,
            timeout: float | None = None, op: str = "check", options: dict | None = None) -> dict:
        """Check (op="check") or check and time (op="measure", on a GPU) one program;
        never raises for what the program does."""
        with self._lock:
            if self._proc is None or not self._proc.is_alive():
                if self._proc is not None:
                    self.restarts += 1
                self._start()
            self._conn.send({"program": program_text, "task": task, "sizes": dict(sizes),
                             "seed": seed, "op": op, "options": dict(options or {})})
            limit = self.timeout if timeout is None else timeout
            try:
                ready = self._conn.poll(limit)
            except (EOFError, OSError):
                ready = False
            if not ready:
                alive = self._proc.is_alive()
                self.stop()
                if alive:
                    return {"status": "timeout", "ok": False,
                            "message": f"the kernel did not finish within {limit:.0f} s"}
                return {"status": "fault", "ok": False, "message": "the kernel crashed the worker"}
            try:
                return self._conn.recv()
            except (EOFError, OSError):
                code = self._proc.exitcode if self._proc is not None else None
                self.stop()
                return {"status": "fault", "ok": False,
                        "message": f"the kernel crashed the worker (exit code {code})"}

    def __del__(self):
        try:
            self.stop()
        except Exception:
            pass


_SHARED: dict[tuple, Worker] = {}


def shared_worker(interpret: bool = True) -> Worker:
    """One worker per process and mode, shared by every environment in the process."""
    key = (interpret, os.getpid())
    if key not in _SHARED:
        _SHARED[key] = Worker(interpret)
    return _SHARED[key]
