"""The path of one step after the action: check, run, measure (each cached by program).

    program ──► invariant report (z3, at the episode's shape) ── violations? ──► unmeasured
                   │ clean
                   ▼
              correctness (worker process, Triton interpreter at a reduced shape)
                   │ correct
                   ▼
              measurement (model | table | gpu backend)
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field

from ..check import InvariantReport, check_program
from ..dsl.program import Program
from ..measure.backends import Backend, Measurement
from ..measure.features import KernelFeatures, extract


@dataclass
class Evaluation:
    """Everything known about one program at one shape."""

    program: Program
    report: InvariantReport
    features: KernelFeatures | None = None
    correctness: dict | None = None      # the worker's answer, None if not run
    measurement: Measurement | None = None
    error: str | None = None             # "compile", "mismatch", "fault", "timeout", "illegal"
    message: str = ""
    timings: dict = field(default_factory=dict)

    @property
    def measured(self) -> bool:
        return self.measurement is not None and self.measurement.ok

    @property
    def throughput(self) -> float | None:
        return self.measurement.tflops if self.measured else None


class Evaluator:
    """Evaluates programs for one task, remembering every answer by program and shape."""

    def __init__(self, task, backend: Backend, correctness: str = "interpreter",
                 worker=None, cache_size: int = 4096):
        self.task = task
        self.backend = backend
        self.correctness = correctness
        self._worker = worker
        self._cache: OrderedDict = OrderedDict()
        self.cache_size = cache_size
        self.hits = self.misses = 0

    @property
    def worker(self):
        if self._worker is None:
            from ..measure.worker import shared_worker
            self._worker = shared_worker(interpret=True)
        return self._worker

    def evaluate(self, program: Program, sizes: dict) -> Evaluation:
        key = (program.hash, tuple(sorted(sizes.items())))
        if key in self._cache:
            self.hits += 1
            self._cache.move_to_end(key)
            return self._cache[key]
        self.misses += 1
        ev = self._evaluate(program, sizes)
        self._cache[key] = ev
        if len(self._cache) > self.cache_size:
            self._cache.popitem(last=False)
        return ev

    def _evaluate(self, program: Program, sizes: dict) -> Evaluation:
        import time
        t0 = time.perf_counter()
        report = check_program(program, sizes, self.task)
        ev = Evaluation(program, report, timings={"check": time.perf_counter() - t0})
        try:
            ev.features = extract(program, sizes, self.task)
        except (ValueError, KeyError, ZeroDivisionError) as e:  # a program without a dot, say
            ev.message = f"no performance features: {e}"
        if not report.ok:
            return ev
        t1 = time.perf_counter()
        if self.correctness == "interpreter":
            answer = self._correct(program)
            ev.correctness = answer
            ev.timings["correctness"] = time.perf_counter() - t1
            if not answer.get("ok"):
                ev.error = answer.get("status", "mismatch")
                ev.message = answer.get("message", "")
                return ev
        t2 = time.perf_counter()
        ev.measurement = self.backend.measure(program, sizes, self.task, ev.features)
        ev.timings["measure"] = time.perf_counter() - t2
        if not ev.measurement.ok:
            ev.error = ev.measurement.details.get("status") or "illegal"
            ev.message = ev.measurement.error
        return ev

    def _correct(self, program: Program) -> dict:
        """Numerical check at the task's reduced shape, in the worker (cached by program)."""
        cache = self.__dict__.setdefault("_correct_cache", {})
        if program.hash not in cache:
            sizes = self.task.env_check_shape
            cache[program.hash] = self.worker.run(program.text, self.task.name, sizes)
        return cache[program.hash]
