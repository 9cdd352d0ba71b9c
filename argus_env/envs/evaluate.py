"""The path of one step after the action: check, run, measure, on one analysis.

    program ──► Analysis (sizes, features, Triton text: each worked out once, `analysis.py`)
                   │
                   ▼
              invariant report (z3, at the episode's shape) ── violation or undecided? ──► unmeasured
                   │ proven
                   ▼
              correctness (worker process, Triton interpreter at 2 reduced shapes, run from
                   │       the analysis' Triton text), beside the compile verdict for the
                   │       target (`measure.legality`: a program that does not compile or
                   │       launch there is a `compile` failure in every mode)
                   ▼ correct, compiles
              measurement (model | table | gpu backend, from the analysis' features)

The evaluator holds the one cache of a step's path: a least-recently-used map of
`cache_size` entries holding evaluations (by program and shape), numerical verdicts (by
the kernel the interpreter runs and its shapes), the programs of configurations and
texts already seen (so a step that meets a known program parses and types nothing) and
the action masks of configurations (`remember`).
"""

from __future__ import annotations

import hashlib
import math
import os
import threading
import time
from dataclasses import dataclass, field, replace

from ..check import (CheckTimeout, CheckUnsupported, InvariantReport, check_for_all_sizes,
                     check_program, for_all_covers)
from ..dsl.program import Program
from ..lower.build import LRU
from ..measure.backends import Backend, Measurement
from ..measure.features import KernelFeatures
from ..target import Target, as_target
from .analysis import Analysis


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
    analysis: Analysis | None = field(default=None, repr=False)

    @property
    def triton(self) -> str | None:
        """The generated Triton module of a proven program (None otherwise), from the
        analysis the step already made; a lowering failure is reported as a comment."""
        if not self.report.ok:
            return None
        an = self.analysis or Analysis(self.program, {}, None)
        try:
            return an.triton
        except Exception as e:  # noqa: BLE001 - a program the lowering rejects is reported
            return f"# lowering failed: {type(e).__name__}: {e}"

    @property
    def measured(self) -> bool:
        return self.measurement is not None and self.measurement.ok

    @property
    def throughput(self) -> float | None:
        return self.measurement.tflops if self.measured else None


class EvaluationError(RuntimeError):
    """Argus itself failed on a program (a checker or cost-model bug, not something the
    program did): the environment refuses the step with this message instead of letting
    the exception escape into the agent's loop."""

    def __init__(self, stage: str, exc: BaseException):
        self.stage, self.exc = stage, exc
        super().__init__(f"internal error in the {stage} (an Argus bug, not a verdict on the "
                         f"program): {type(exc).__name__}: {str(exc)[:300]}")


#: new programs the "adaptive" compile policy looks back on (`Evaluator.compile_early`)
ADAPTIVE_WINDOW = 8


class Evaluator:
    """Evaluates programs for one task on one target, remembering the answers in one
    least-recently-used cache of `cache_size` entries.

    Correctness runs in a worker process at `check_shapes` reduced shapes (the task's
    `env_check_shape` first, then its cheapest other `cpu_shapes`), each with inputs
    drawn from a seed derived from the program, within `correctness_timeout` seconds for
    all shapes together; a program that special-cases one size fails at another."""

    def __init__(self, task, backend: Backend, correctness: str = "interpreter",
                 worker=None, cache_size: int = 4096, correctness_timeout: float = 20.0,
                 check_shapes: int | list[dict] = 2, target: Target | None = None,
                 numerics_workers: int | None = None, legality=True):
        self.task = task
        self.backend = backend
        # the hardware the checker, the features and the backend all assume
        self.target = target if target is not None else as_target(backend.profile)
        self.correctness = correctness
        self.correctness_timeout = float(correctness_timeout)
        self.check_shapes = _check_shapes(task, check_shapes)
        if not (isinstance(cache_size, int) and not isinstance(cache_size, bool)
                and cache_size >= 1):
            raise ValueError(f"cache_size must be a positive number of entries, got "
                             f"{cache_size!r}")
        if numerics_workers is None:  # the parent waits meanwhile: one per core, up to 2
            numerics_workers = min(2, os.cpu_count() or 1)
        if not (isinstance(numerics_workers, int) and not isinstance(numerics_workers, bool)
                and numerics_workers >= 1):
            raise ValueError(f"numerics_workers must be a positive number of processes, got "
                             f"{numerics_workers!r}")
        self.numerics_workers = numerics_workers if worker is None else 1
        # whether the first reduced shape's numerics run beside the check: True, False, or
        # "auto" (when a core is idle: on 2 cores loaded by other work the worker slows
        # the check more than it saves). The shared workers only: a worker given by the
        # caller is asked exactly as before, after the check
        self.speculate = "auto" if worker is None else False
        self._worker = worker
        self._shared = False  # whether `_worker` is the process's shared worker, counted
        self._more: list = []  # further shared workers, for reduced shapes side by side
        self._cache = LRU(cache_size)  # the only cache on a step's path (see the module doc)
        self.hits = self.misses = 0
        # compile verdicts for the target before any pricing (`measure.legality`)
        from ..measure.legality import make_legality
        self.legality = make_legality(task, self.target, legality)
        # whether a new program's compile starts beside its invariant check (True), once
        # the check has proven it (False: no compile for a program that violates), beside
        # the check when a core is idle ("auto"), or while most of the last new programs
        # were proven ("adaptive", the default); never queued behind a compile still
        # running (one started beside the check of a program that violated). The compile
        # is the longest stage of a new program: on 2 cores (benchmarks/env_speed.py, 40
        # uncached steps per task) starting it early took the median step from 480 to 388
        # ms on GEMM, 1128 to 964 on MoE and 322 to 283 on RMSNorm, where every program
        # was proven; on attention, where 27 of 40 violated, the compiles of refuted
        # programs took a core from the next checks (p90 1,000 -> 1,400 ms)
        self.compile_early = "adaptive"
        self._proven: list[bool] = []   # the last ADAPTIVE_WINDOW new programs: proven?
        if self.legality is not None:
            self.legality.prestart()
        if correctness == "interpreter":
            for w in self._numerics_workers(len(self.check_shapes)):
                w.prestart()  # their imports overlap the first check

    def __getstate__(self) -> dict:
        """A copy (pickle, deepcopy, another process) holds no worker process: it starts or
        shares one on its first numerics check; the remembered answers travel along."""
        state = dict(self.__dict__)
        state["_worker"], state["_shared"], state["_more"] = None, False, []
        return state

    @property
    def cache_size(self) -> int:
        return self._cache.size

    def cached(self) -> int:
        """Entries held now (at most `cache_size`)."""
        return len(self._cache)

    def remember(self, key: tuple, make):
        """The value remembered under `key` (a tuple whose first item names its kind), else
        `make()`, remembered; an exception from `make` is raised, nothing remembered."""
        value = self._cache.get(key)
        if value is None:
            value = make()
            self._cache.put(key, value)
        return value

    def program(self, config, sizes: dict) -> Program:
        """The program of the task space's configuration `config`, bound to the problem's
        constants at `sizes` (rendered, parsed and typed once while it is remembered)."""
        return self.remember(("config", config, tuple(sorted(sizes.items()))), lambda: self.task.bind(
            Program.from_text(self.task.space.render(config), filename="<transformed>"), sizes))

    def parse(self, text: str, filename: str = "<action>") -> Program:
        """`Program.from_text(text)`, remembered by the exact text (a parse error is raised
        again each time, never remembered)."""
        return self.remember(("text", text), lambda: Program.from_text(text, filename=filename))

    @property
    def worker(self):
        if self._worker is None:
            from ..measure.worker import acquire_shared_worker
            self._worker = acquire_shared_worker(interpret=True)
            self._shared = True
        return self._worker

    def _numerics_workers(self, shapes: int) -> list:
        """The workers that check `shapes` reduced shapes: the first, and as many more of
        the process's shared ones as `numerics_workers` allows."""
        want = min(max(shapes, 1), self.numerics_workers)
        first = self.worker
        if len(self._more) < want - 1:
            from ..measure.worker import acquire_shared_worker
            while len(self._more) < want - 1:
                self._more.append(acquire_shared_worker(interpret=True,
                                                        slot=len(self._more) + 1))
        return [first, *self._more[:want - 1]]

    def confirm(self, ev: Evaluation) -> Evaluation:
        """`ev` as submitted: where its step's compile verdict stopped before the end of
        the compiler (`measure.legality.verdict_stage`, Triton's stages through its
        shared-memory allocation), the whole pipeline is run now, ptxas included, and a
        program it refuses is answered as one that does not compile (not priced). `ev`
        itself where the verdict was whole already, or where it is not priced."""
        details = (ev.measurement.details or {}) if ev.measurement is not None else {}
        step = details.get("legality") or {}
        if self.legality is None or not ev.measured or not step or \
                step.get("stage", "cubin") == "cubin":
            return ev
        from ..measure.legality import failed_measurement, with_verdict
        sizes = ev.analysis.program_sizes if ev.analysis is not None else None
        try:
            verdict = self.legality.verdict(ev.program, sizes=sizes, stage="cubin")
        except Exception as e:  # noqa: BLE001 - no compiler process: no verdict, no price
            if interrupted(e):
                raise KeyboardInterrupt("interrupted during the compile verdict") from None
            raise EvaluationError("compile stage", e) from e
        if verdict.ok:
            return replace(ev, measurement=with_verdict(ev.measurement, verdict))
        return replace(ev, error="compile", message=verdict.message,
                       measurement=failed_measurement(self.backend, verdict))

    def close(self) -> None:
        """Release worker processes: the shared interpreter workers (each stopped when its
        last user closes) and the backend's own (the live `gpu` backend's)."""
        from ..measure.worker import release_shared_worker
        for w in self._more:
            release_shared_worker(w)
        self._more = []
        if self._shared:
            release_shared_worker(self._worker)
            self._worker, self._shared = None, False
        own = getattr(self.backend, "worker", None)
        if own is not None and hasattr(own, "stop"):
            own.stop()
        if self.legality is not None:
            self.legality.close()

    def evaluate(self, program: Program, sizes: dict, budget: float | None = None) -> Evaluation:
        """The evaluation of `program` at `sizes`; raises `EvaluationError` when Argus
        cannot evaluate it and `CheckUnsupported` when the checker has no rule for one of
        its constructs (both remembered too, so a retry is as cheap as a hit).

        `budget` (seconds) bounds checking and numerics together, worker (re)start
        included: a check still running at the end raises `CheckTimeout` (not remembered:
        a resent program is checked again), numerics still running are a `timeout`
        failure (within `correctness_timeout` as well)."""
        key = (program.hash, tuple(sorted(sizes.items())))
        ev = self._cache.get(key)
        if ev is not None:
            self.hits += 1
        else:
            self.misses += 1
            deadline = None if budget is None else time.monotonic() + budget
            try:
                ev = self._evaluate(Analysis(program, sizes, self.task, self.target), deadline)
            except CheckTimeout:
                raise
            except (EvaluationError, CheckUnsupported) as e:
                ev = e
            if _lasting(ev):
                self._cache.put(key, ev)
        if isinstance(ev, (EvaluationError, CheckUnsupported)):
            raise ev
        return ev

    def _evaluate(self, an: Analysis, deadline: float | None = None) -> Evaluation:
        program, sizes = an.program, an.sizes
        ts = time.perf_counter()
        # the compile verdict, started before the check so that the compile (the longest
        # stage of a new program) overlaps the check and the numerical checks; read only
        # for a program the checker proves (`measure.legality` remembers it either way)
        # (specialised as the launch at these sizes is: `lower.aot.specialization`)
        pending = self.legality.begin(program, idle_only=True, sizes=an.program_sizes) \
            if self.legality is not None and self._compile_early() else None
        spec = self._speculate(an, deadline) \
            if self.correctness == "interpreter" and self._overlap() else None
        t0 = time.perf_counter()
        try:
            report = self._proof_for_all(an, deadline) or \
                check_program(program, sizes, an.task_view, deadline=deadline,
                              num_sms=self.target.sms, target=self.target)
        except CheckUnsupported:  # no verdict possible: refused like a program that is
            raise                 # not well-typed, naming the construct and its line
        except Exception as e:  # noqa: BLE001 - any checker crash on agent text is contained
            if interrupted(e):
                raise KeyboardInterrupt("interrupted during the invariant check") from None
            raise EvaluationError("invariant checker", e) from e
        ev = Evaluation(program, report, timings={"check": time.perf_counter() - t0},
                        analysis=an)
        self._proven = (self._proven + [bool(report.ok)])[-ADAPTIVE_WINDOW:]
        if spec is not None:
            ev.timings["numerics_start"] = t0 - ts
            if report.ok:
                spec.trust.set()  # proven: its worker process may serve the next program
            else:
                spec.reject()
        if report.ok and pending is None and self.legality is not None:
            # the compile verdict, started before the features are worked out, so that it
            # overlaps them and the numerics
            pending = self.legality.begin(program, sizes=an.program_sizes)
        try:
            ev.features = an.features
        except Exception as e:  # noqa: BLE001 - a program without a dot, say
            if interrupted(e):
                raise KeyboardInterrupt("interrupted during feature extraction") from None
            ev.message = f"no performance features: {type(e).__name__}: {e}"
        if not report.ok:
            return ev
        t1 = time.perf_counter()
        if self.correctness == "interpreter":
            answer = self._correct(an, deadline, spec)
            ev.correctness = answer
            ev.timings["correctness"] = time.perf_counter() - t1
            if not answer.get("ok"):
                ev.error = answer.get("status", "mismatch")
                ev.message = answer.get("message", "")
                return ev
        verdict = None
        if pending is not None:
            from ..measure.legality import failed_measurement
            from ..measure.legality import LegalityUnavailable
            try:
                verdict = pending()
            except LegalityUnavailable as e:  # no compiler: no verdict, and no price
                raise EvaluationError("compile stage", e) from e
            ev.timings["legality"] = verdict.seconds
            if not verdict.ok:  # would not compile or launch on the target: not priced
                ev.error, ev.message = "compile", verdict.message
                ev.measurement = failed_measurement(self.backend, verdict)
                return ev
        t2 = time.perf_counter()
        try:
            ev.measurement = self.backend.measure(program, sizes, self.task, ev.features)
        except Exception as e:  # noqa: BLE001 - the cost model on a program it cannot price
            if interrupted(e):
                raise KeyboardInterrupt("interrupted during the measurement") from None
            raise EvaluationError(f"{getattr(self.backend, 'name', 'measurement')} backend",
                                  e) from e
        ev.timings["measure"] = time.perf_counter() - t2
        if verdict is not None:
            from ..measure.legality import with_verdict
            ev.measurement = with_verdict(ev.measurement, verdict)
        if not ev.measurement.ok:
            ev.error = ev.measurement.details.get("status") or "illegal"
            ev.message = ev.measurement.error
        elif not all(math.isfinite(x) and x >= 0 for x in (ev.measurement.tflops,
                                                            ev.measurement.ms)):
            raise EvaluationError("measurement", ValueError(
                f"non-finite measurement {ev.measurement.ms} ms, {ev.measurement.tflops} TFLOP/s"))
        return ev

    def _proof_for_all(self, an: Analysis, deadline: float | None) -> InvariantReport | None:
        """A proof of `an`'s program for all values of the task's varying sizes that
        covers `an`'s shape, or None. The proof is tried once per program and fixed sizes,
        when the program is met at a second shape (a program met at one shape costs no
        more than before); a program outside the fragment or not proven is remembered as
        such and checked at each shape."""
        names = getattr(self.task, "for_all_sizes", ())
        sizes = an.sizes
        if not names or not for_all_covers(an.program, self.task,
                                           getattr(an, "program_sizes", None) or sizes):
            return None
        fixed = tuple(sorted((k, v) for k, v in sizes.items() if k not in names))
        key = ("for all sizes", an.program.hash, fixed)
        known = self._cache.get(key)
        if isinstance(known, InvariantReport):
            return known
        if known is not None:
            return None  # tried: not in the fragment, or not proven
        seen = ("seen at", an.program.hash, fixed)
        first = self._cache.get(seen)
        shape = tuple(sorted(sizes.items()))
        if first is None or first == shape:
            self._cache.put(seen, shape)
            return None
        try:
            report, _ = check_for_all_sizes(an.program, sizes, an.task_view, deadline=deadline,
                                            num_sms=self.target.sms, target=self.target)
        except CheckTimeout:
            return None  # the step's budget is short: this shape's own check, retried later
        except Exception as e:  # noqa: BLE001 - a construct the all-sizes mode has no rule
            if interrupted(e):  # for is checked at the shape, which says what it lacks
                raise KeyboardInterrupt("interrupted during the invariant check") from None
            report = None
        self._cache.put(key, report if report is not None and report.ok else False)
        return report if report is not None and report.ok else None

    def _numerics_plan(self, an: Analysis) -> tuple[list[dict], tuple]:
        """The reduced shapes of `an`'s numerical checks and the key of their verdict;
        raises `CheckUnsupported` when no shape is in the episode's size regime."""
        program, sizes = an.program, an.sizes
        shapes = self.check_shapes
        if getattr(self.task, "reduced_shapes", None) is not None:
            shapes = self.task.reduced_shapes(sizes) or shapes
        shapes = regime_shapes(self.task, program, sizes, shapes, real=an.program_sizes,
                               sms=self.target.sms)
        return shapes, ("numerics", an.numerics_key,
                        tuple(tuple(sorted(s.items())) for s in shapes))

    def _compile_early(self) -> bool:
        """Whether this step's compile starts beside its check (`compile_early`)."""
        early = getattr(self, "compile_early", False)
        if early == "adaptive":
            seen = getattr(self, "_proven", [])
            return 2 * sum(seen) >= len(seen)
        if early != "auto":
            return bool(early)
        cores = os.cpu_count() or 1
        return cores > 1 and os.getloadavg()[0] <= cores - 1

    def _overlap(self) -> bool:
        """Whether this step's numerics start beside its check (`speculate`)."""
        if self.speculate != "auto":
            return bool(self.speculate)
        cores = os.cpu_count() or 1
        return cores > 1 and os.getloadavg()[0] <= cores - 1

    def _speculate(self, an: Analysis, step_deadline: float | None) -> "_Speculation | None":
        """The first reduced shape's numerical check, started in the first worker before
        the invariant check, or None when there is nothing to start (a verdict already
        known, a program without a regime shape or that does not lower: `_correct` says so
        after the check, as without speculation). Its answer is read only for a program
        the checker proves (`_correct`); for any other it is dropped, the worker finishing
        it while the next step checks."""
        try:
            shapes, key = self._numerics_plan(an)
            if not shapes or self._cache.get(key) is not None:
                return None
            source = an.triton
        except KeyboardInterrupt:
            raise
        except Exception:  # noqa: BLE001 - reported by `_correct`, after the check
            return None
        worker = self._numerics_workers(len(shapes))[0]
        limit = time.monotonic() + self.correctness_timeout
        if step_deadline is not None:
            limit = min(limit, step_deadline)
        return _Speculation(worker, key, self._request(an, source, 0, shapes[0]), limit)

    def _correct(self, an: Analysis, step_deadline: float | None = None,
                 spec: "_Speculation | None" = None) -> dict:
        """Numerical checks at the reduced shapes, in the worker: the first failure, or the
        last success with every shape checked. A task whose programs carry problem
        constants (attention's causal flag, GQA group, head dim) gives reduced shapes with
        the episode's constants (`Task.reduced_shapes`). Remembered by the kernel the
        interpreter runs (`Analysis.numerics_key`: programs that differ only in compiler
        hints run the same) and the shapes. `spec`: the first shape's check, started
        before the invariant check (`_speculate`)."""
        shapes, key = self._numerics_plan(an)
        answer = self._cache.get(key)
        if answer is not None:
            return dict(answer)
        if spec is not None and spec.key != key:
            spec = None  # not this plan's (cannot happen: the same analysis, the same plan)
        try:
            source = an.triton
        except Exception as e:  # noqa: BLE001 - the lowering's refusal is a compile failure
            if interrupted(e):
                raise KeyboardInterrupt("interrupted during the lowering") from None
            answer = {"status": "compile", "ok": False, "shapes_checked": 0,
                      "message": f"{type(e).__name__}: {e}"[:2000]}
            self._cache.put(key, answer)
            return answer
        workers = self._numerics_workers(len(shapes))
        for w in workers:
            if spec is None or w is not spec.worker:  # that one runs the first shape now
                w.ensure_started()  # a (re)start is not the program's time, but the step's
        deadline = time.monotonic() + self.correctness_timeout
        by_step = step_deadline is not None and step_deadline < deadline
        if by_step:
            deadline = step_deadline
        budget = "step's time budget" if by_step else \
            f"{self.correctness_timeout:g} s correctness budget"
        # side by side, each request is pickled here first: the lanes' threads then share
        # no object (`Worker.prepare` says why that matters)
        requests = [None if spec is not None and i == 0 else self._request(an, source, i, s)
                    for i, s in enumerate(shapes)] \
            if len(workers) > 1 or spec is not None else [None] * len(shapes)

        def run(w, i):
            if spec is not None and i == 0:
                return _labelled(spec.wait(deadline - time.monotonic()), shapes[0], budget)
            return self._run_shape(w, an, source, i, shapes[i], deadline - time.monotonic(),
                                   budget, requests[i])
        answers = _run_lanes(workers, len(shapes), run)
        answer: dict = {"status": "mismatch", "ok": False, "message": "no shape to check"}
        checked = 0
        for answer in answers:  # the first failure in shape order, else the last success
            checked += 1
            if not answer.get("ok"):
                break
        answer["shapes_checked"] = checked
        if answer.get("status") == "timeout" and by_step:
            answer["budget"] = "step"  # cut short by the step: not remembered, tried again
        elif not answer.get("transient"):  # a worker killed from outside: tried again
            self._cache.put(key, dict(answer))
        return answer


    def _request(self, an: Analysis, source: str, i: int, sizes: dict) -> bytes:
        """The pickled worker request for the `i`th reduced shape (`Worker.prepare`)."""
        from ..measure.worker import Worker
        bound = self.task.bind(an.program, sizes)
        return Worker.prepare(bound, self.task.name, sizes, seed=_seed(an, i),
                              source=source if bound is an.program else None)

    def _run_shape(self, worker, an: Analysis, source: str, i: int, sizes: dict, left: float,
                   budget: str, request: bytes | None = None) -> dict:
        """The worker's answer for the `i`th reduced shape, its failure message naming it;
        `request`, the shape's request made by `_request`."""
        if left <= 0:
            return {"status": "timeout", "ok": False, "sizes": dict(sizes),
                    "message": f"correctness checks did not finish within the {budget}"}
        if request is not None:
            answer = worker.run_prepared(request, timeout=left)
        else:
            program = an.program
            bound = self.task.bind(program, sizes)
            answer = worker.run(bound, self.task.name, sizes, seed=_seed(an, i), timeout=left,
                                source=source if bound is program else None)
        return _labelled(answer, sizes, budget)


def _labelled(answer: dict, sizes: dict, budget: str) -> dict:
    """A worker's answer at reduced shape `sizes`, its failure message naming the shape."""
    answer["sizes"] = dict(sizes)
    if not answer.get("ok"):
        shape = ", ".join(f"{k}={v}" for k, v in sizes.items())
        answer["message"] = f"at {shape}: {answer.get('message', '')}"
        if answer.get("status") == "timeout":
            answer["message"] = (f"the kernel did not finish within the {budget} "
                                 f"(at sizes {dict(sizes)})")
    return answer


class _Speculation:
    """One prepared request run by `worker` in a thread of its own, started now: the
    thread shares no object with the step (the request is bytes); `wait` gives its answer.
    The worker's own lock makes a later request to it wait until this one is answered.
    The program is not proven when it starts: until `trust` is set (the checker proved
    it), the process that ran it serves no other request (`Worker.run_prepared`)."""

    def __init__(self, worker, key: tuple, request: bytes, limit: float):
        self.worker, self.key = worker, key
        self.trust = threading.Event()
        self._answer: dict | None = None
        self._thread = threading.Thread(target=self._run, args=(request, limit), daemon=True)
        self._thread.start()

    def _run(self, request: bytes, limit: float) -> None:
        try:
            self._answer = self.worker.run_prepared(request, trust=self.trust,
                                                    timeout=max(limit - time.monotonic(), 0.001))
        except BaseException as e:  # noqa: BLE001 - no verdict on the program: tried again
            self._answer = {"status": "fault", "ok": False, "transient": True,
                            "message": f"the numerics request failed: {type(e).__name__}: {e}"}

    def reject(self) -> None:
        """The checker refuted the program (or could not prove it): its run may have
        damaged the worker process, which is replaced in the background once the run ends
        (`Worker.prestart`), so the next program neither waits for nor inherits it."""
        stops = self.worker.stops_so_far()
        threading.Thread(target=self._replace, args=(stops,), daemon=True).start()

    def _replace(self, stops: int) -> None:
        self._thread.join()
        try:
            self.worker.prestart(stops)  # not after the evaluator is closed
        except Exception:  # noqa: BLE001 - the next request starts one all the same
            pass

    def wait(self, left: float) -> dict:
        """The answer, waiting at most `left` seconds (a timeout answer after that)."""
        self._thread.join(max(left, 0.0))
        if self._thread.is_alive() or self._answer is None:
            return {"status": "timeout", "ok": False, "message": "did not finish"}
        return dict(self._answer)


def _run_lanes(workers: list, n: int, run) -> list[dict]:
    """`run(worker, i)` for i < n, shape i on worker i % len(workers), each worker taking
    its shapes in order in a thread of its own (the parent only waits meanwhile). The
    answers in shape order up to and including the first failure: a lane stops at its
    first failure, and no lane starts a shape after a failure at an earlier one."""
    answers: list = [None] * n
    failed = [n]  # the earliest failing shape so far

    def lane(k: int) -> None:
        for i in range(k, n, len(workers)):
            if i > failed[0]:
                return
            answers[i] = run(workers[k], i)
            if not answers[i].get("ok"):
                failed[0] = min(failed[0], i)
                return
    threads = [threading.Thread(target=lane, args=(k,), daemon=True)
               for k in range(1, min(len(workers), n))]
    for t in threads:
        t.start()
    try:
        lane(0)
        for t in threads:
            t.join()
    except BaseException:  # Ctrl-C in this thread: the other lanes start no further shape
        failed[0] = -1
        raise
    out = []
    for a in answers:
        if a is None:
            break
        out.append(a)
        if not a.get("ok"):
            break
    return out


def regime_shapes(task, program: Program, sizes: dict, shapes: list[dict],
                  real: dict | None = None, sms: int | None = None) -> list[dict]:
    """`shapes`, plus a small shape in the episode's size regime when none of them is in it:
    a program that tests its sizes (`if M <= 130:`) must also be run where it behaves as at
    the real size (`argus_env.check.regimes`). `real`: the program's sizes at `sizes`, when
    the caller has them (`Analysis.program_sizes`); `sms`: the target's SM count, which
    `A.num_sms()` reads at the real size (the interpreter's is
    `lower.runtime.INTERPRETER_NUM_SMS`; by default the checker's, an H200's). Raises
    `CheckUnsupported` when no such shape is found, when the program computes a value
    from its sizes in a way the regimes cannot follow, or when a float depends on its
    element's position other than through a mask (`check.uniform`): the program is
    refused, not run at the wrong regime or at small indices only."""
    from ..check.regimes import NUM_SMS, conditions, realise, regime
    from ..check.uniform import positional
    from ..lower.runtime import INTERPRETER_NUM_SMS
    found = positional(program.kernel)
    if found is not None:  # a float that depends on where its element is
        raise CheckUnsupported(f"`{found.text}`: {found.why}, so the float computed differs "
                               f"with the element's position (not through a mask), and the "
                               f"numerics at reduced shapes, which reach only small indices, "
                               f"need not hold at the episode's sizes: the program is refused",
                               found.line)
    conds = conditions(program.kernel)
    if not conds or not shapes:
        return shapes
    opaque = next((c for c in conds if c.opaque), None)
    if opaque is not None:
        raise CheckUnsupported(f"the program computes `{opaque.text}` from the problem sizes "
                               f"in a way whose size regimes cannot be followed (a bit "
                               f"operation, a math function, a rounding cast of a size or a "
                               f"comparison made in floating point, which the GPU decides in "
                               f"float32), so "
                               f"its numerics at reduced shapes need not hold at the episode's "
                               f"sizes: the program is refused", opaque.line)
    if sms is None:
        from ..check.symbolic.checker import DEFAULT_NUM_SMS as sms
    real = task.program_sizes(program, sizes) if real is None else real
    real = {**real, NUM_SMS: int(sms)}

    def at(s: dict) -> dict:  # a reduced shape's sizes, run under the interpreter
        return {**task.program_sizes(program, s), NUM_SMS: INTERPRETER_NUM_SMS}
    want = regime(conds, real)
    if any(regime(conds, at(s)) == want for s in shapes):
        return shapes
    extra = realise(conds, real, {**shapes[0], NUM_SMS: INTERPRETER_NUM_SMS})
    if extra is not None:
        try:
            task.check_sizes(extra)
        except ValueError:
            extra = None
    if extra is None or regime(conds, at(extra)) != want:
        first = next(c for c, w, g in zip(conds, want, regime(conds, at(shapes[0])))
                     if w != g)
        raise CheckUnsupported(f"the program's behaviour depends on the problem sizes "
                               f"(`{first.text}` is {want[conds.index(first)]} at the "
                               f"episode's sizes) and no small shape behaves the same, so its "
                               f"numerics cannot be checked: the program is refused",
                               first.line)
    return [*shapes, extra]


def interrupted(e: BaseException) -> bool:
    """Whether `e` is a Ctrl-C in disguise: a KeyboardInterrupt that arrived while ctypes
    converted a z3 call's arguments comes back as `ctypes.ArgumentError` naming it."""
    seen = 0
    while e is not None and seen < 8:
        if isinstance(e, KeyboardInterrupt) or "KeyboardInterrupt" in f"{type(e).__name__}: {e}":
            return True
        e, seen = e.__cause__ or e.__context__, seen + 1
    return False


def _lasting(ev) -> bool:
    """Whether an evaluation is a verdict on the program that holds next time: not one
    the step's time budget cut short, not an undecided check (more time may decide it),
    not a failure caused from outside (a worker killed by a signal the program did not
    raise)."""
    if not isinstance(ev, Evaluation):
        return True  # an Argus error or an unsupported construct: the same next time
    if ev.report.status == "undecided":
        return False
    answer = ev.correctness or {}
    return answer.get("budget") != "step" and not answer.get("transient")


def _check_shapes(task, spec) -> list[dict]:
    """`spec` shapes to check numerics at: an explicit list, or a count taken from the
    task's `env_check_shape` and then its `cpu_shapes`: cheapest (fewest elements) first
    among those that differ from every shape taken in every size, then cheapest first."""
    if not isinstance(spec, int):
        return [dict(s) for s in spec]
    first = dict(task.env_check_shape)
    shapes = [first] if first else []
    others = sorted((dict(s) for s in task.cpu_shapes if set(s) == set(first) or not first),
                    key=lambda s: math.prod(max(int(v), 1) for v in s.values()))

    varying = [d for d in first if len({s[d] for s in others + shapes}) > 1]

    def new_everywhere(s):  # a special case on any one size fails on this shape
        return all(s[d] != t[d] for t in shapes for d in varying)
    for pick in (new_everywhere, lambda s: True):
        for s in others:
            if len(shapes) < spec and s not in shapes and pick(s):
                shapes.append(s)
    return shapes[:max(spec, 0)]


def _seed(program: Program | Analysis, i: int) -> int:
    """Inputs differ per program and shape (a program cannot carry the expected output of
    inputs it knows in advance), yet the same program always meets the same inputs; a
    program that differs from another only in compiler hints, which the interpreter
    ignores, runs the same kernel and meets the same inputs."""
    key = program.numerics_key if isinstance(program, Analysis) else \
        Analysis(program, {}, None).numerics_key
    return int(hashlib.sha256(f"{key}:{i}".encode()).hexdigest()[:8], 16)
