"""Legal means it compiles for the target: the verdict of Triton's ahead-of-time compiler.

Before a program is priced (in every measurement mode) the evaluator asks `Legality` for
its verdict on the environment's `Target`: the program compiled for the target's compute
capability (sm_90 for the H200 and H100 profiles, sm_80 for the A100) on the CPU, and its
shared memory and registers set against the target's per-block limits, which Triton
itself checks only when it loads the kernel on a GPU. A program the compiler rejects, or
one that would not launch, is a `compile` failure: scored, never raised.

Verdicts come from, in order:

* memory: a bounded least-recently-used map of the verdicts this process has seen;
* the task's committed compile table, `tasks/<task>/compile_sm<arch>.csv`, written by
  `benchmarks/compile_sweep.py` (one row per program: compile key, configuration, bound
  constants, the compiler's figures, provenance);
* a disk cache, `$ARGUS_CACHE_DIR/legality` (default `~/.cache/argus/legality`), one small
  JSON file per program;
* the compiler, in a persistent non-interpreting worker process (`measure.worker`, op
  "compile"), one per process, shared by every `Legality` in it.

How far a verdict runs the compiler is its stage (`lower.aot.STAGES`, `Verdict.stage`).
The environment's verdicts (`make_legality`) run Triton's stages through its shared-memory
allocation ("alloc", `verdict_stage`, ARGUS_VERDICT_STAGE): the refusals and the figures
the verdict rests on (acceptance, shared memory, warps) are all there, and the rest of
the pipeline (lowering to LLVM, LLVM -O3, PTX, ptxas) is two thirds of a compile's time
on the CPU and refused no program on record (`benchmarks/compile_stages.py`, its
results under `benchmarks/results/compile_stages_*`). Such a verdict has no register,
stack, wgmma or TMA figures (0). The compile tables, `Legality` by default and
`verdict(..., stage="cubin")` run the whole pipeline, ptxas included; a verdict of a
deeper compile (a table row, a cached one) serves a shallower stage, never the reverse.

The compile key of a program digests what the compiler sees: the bound program's
structure without its docstring, the target's compute capability and SM count (the
`A.num_sms()` constant), Triton's version and the lowering's version. The figures are
the compiler's; whether they fit is decided per target at lookup (`fit_reason`), so one
table serves every profile of an architecture.
"""

from __future__ import annotations

import csv
import dataclasses
import hashlib
import importlib.util
import inspect
import json
import os
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from ..dsl.program import Program
from ..ir.rewrite import structural_hash
from ..target import Target, as_target

#: the table's columns, in order (`benchmarks/compile_sweep.py` writes them)
COLUMNS = ("key", "config", "binding", "ok", "shared_bytes", "registers", "stack_bytes",
           "num_warps", "wgmma", "tma_loads", "kernels", "seconds", "error", "triton",
           "argus_commit", "date", "machine")
REGISTER_GRANULE = 8      # registers are allocated per thread in multiples of 8
MEMORY_ENTRIES = 4096     # verdicts kept in memory per `Legality`
COMPILE_TIMEOUT = 180.0   # seconds one program may take to compile


class LegalityUnavailable(RuntimeError):
    """The compiler the verdicts need (Triton with its NVIDIA backend) is missing."""


@dataclass
class Verdict:
    """Whether a program compiles for and fits a target, with the compiler's figures."""

    ok: bool                 # compiles, and fits the target's per-block limits
    compiled: bool           # the compiler accepted it
    reason: str = ""         # why not (the compiler's error, or the limit it exceeds)
    shared_bytes: int = 0
    registers: int = 0       # per thread
    stack_bytes: int = 0     # per-thread stack frame (spills)
    num_warps: int = 0
    wgmma: int = 0
    tma_loads: int = 0
    source: str = ""         # "memory", "table", "cache", "compiler"
    seconds: float = 0.0     # this lookup's time (the compile's, from the compiler)
    key: str = ""
    target: str = ""
    stage: str = "cubin"     # how far the compiler ran (`lower.aot.STAGES`): figures of
                             # later stages are 0 (registers and stack come from ptxas)

    def to_dict(self) -> dict:
        return asdict(self)

    @property
    def message(self) -> str:
        if self.ok:
            return ""
        what = "does not compile" if not self.compiled else "compiles but cannot launch"
        return f"the program {what} for {self.target}: {self.reason}"


def triton_version() -> str:
    """Triton's version, read from its package metadata without importing it."""
    try:
        from importlib.metadata import version
        return version("triton")
    except Exception:  # noqa: BLE001 - no Triton at all
        return ""


def compiler_reason() -> str | None:
    """Why Triton's NVIDIA compiler cannot run here (no Triton, no ptxas), or None."""
    spec = importlib.util.find_spec("triton")
    if spec is None or not spec.origin:
        return "Triton is not installed (pip install triton)"
    bin_dir = Path(spec.origin).parent / "backends" / "nvidia" / "bin"
    if not (bin_dir / "ptxas").exists() and not os.environ.get("TRITON_PTXAS_PATH"):
        return f"Triton's NVIDIA backend has no ptxas (looked in {bin_dir})"
    return None


def arch_tag(target: Target) -> str:
    return f"sm{target.arch}"


def table_path(task, target: Target) -> Path:
    """`tasks/<task>/compile_sm<arch>.csv`, beside the task's module."""
    return Path(inspect.getfile(type(task))).parent / f"compile_{arch_tag(as_target(target))}.csv"


def compile_key(program: Program, target: Target, sizes: dict | None = None) -> str:
    """The digest of what the compiler sees for `program` (bound) on `target`, launched
    at `sizes`: of the sizes only the launch's specialisation (which integer arguments
    are 1 or divisible by 16, `lower.aot.specialization`), so shapes that specialise
    alike share one verdict; no sizes: the unspecialised kernel."""
    from ..lower.aot import spec_text, specialization
    from ..lower.module import LOWERING_VERSION
    target = as_target(target)
    # worked out once per program object, target and launch sizes, and kept on it (a step
    # asks for it three times: `begin`, `verdict` and its lookup)
    memo = program.__dict__.setdefault("_compile_keys", {})
    version = triton_version()
    # the workers compile with Triton's FP contraction on unless the user turned it off
    # (`measure.worker.FP_FUSION`): another setting is another compile (the default's
    # keys are those the committed verdict tables were written with)
    from .worker import FP_FUSION, FP_FUSION_DEFAULT
    fusion = os.environ.get(FP_FUSION, FP_FUSION_DEFAULT)
    at = (target.arch, target.sms, version, LOWERING_VERSION, fusion,
          None if sizes is None else tuple(sorted((k, int(v)) for k, v in sizes.items())))
    if at in memo:
        return memo[at]
    body = structural_hash(dataclasses.replace(program.kernel, doc=None))
    text = f"{body}|sm{target.arch}|sms{target.sms}|triton{version}|lower{LOWERING_VERSION}"
    if fusion != FP_FUSION_DEFAULT:
        text += f"|fpfusion{fusion}"
    if sizes is not None:
        text += f"|spec{spec_text(specialization(program, sizes))}"
    memo[at] = key = hashlib.sha256(text.encode()).hexdigest()[:24]
    return key


def size_classes(sizes: dict) -> str:
    """How a shape's sizes specialise a launch: per size, `1` (equal to one), `D`
    (divisible by 16) or `-`, as `NAME=class,...` in name order."""
    return ",".join(f"{k}={'1' if int(v) == 1 else 'D' if int(v) % 16 == 0 else '-'}"
                    for k, v in sorted(sizes.items()))


def binding(program: Program, base: Program, sizes: dict | None = None) -> str:
    """The constants binding changed (`Task.bind`: `base` unbound, `program` bound), as
    `NAME=value;...` in name order; with `sizes`, followed by `|` and their
    `size_classes` (shapes that bind and specialise alike compile the same programs)."""
    text = ";".join(f"{k}={v!r}" for k, v in sorted(program.kernel.consts.items())
                    if base.kernel.consts.get(k) != v)
    return text if sizes is None else f"{text}|{size_classes(sizes)}"


def fit_reason(figures: dict, target: Target) -> str | None:
    """Why a compiled kernel with these figures (`shared_bytes`, `registers`,
    `num_warps`) cannot launch on `target`, or None: shared memory over the per-block
    limit, or more registers per block than the SM holds."""
    target = as_target(target)
    smem = int(figures.get("shared_bytes") or 0)
    if smem > target.smem_per_block:
        return (f"shared memory: the compiled kernel allocates {smem} B > "
                f"{target.smem_per_block} B per block on {target.name}")
    regs = int(figures.get("registers") or 0)
    threads = 32 * int(figures.get("num_warps") or 0)
    per_block = -(-regs // REGISTER_GRANULE) * REGISTER_GRANULE * threads
    if per_block > target.regs_per_sm:
        return (f"registers: {regs} per thread x {threads} threads = {per_block} > "
                f"{target.regs_per_sm} per block on {target.name}")
    return None


def verdict_of(figures: dict, target: Target, source: str, key: str = "",
               seconds: float = 0.0) -> Verdict:
    """The verdict for compiler figures (a table row, a cached or fresh answer)."""
    target = as_target(target)
    compiled = _bool(figures.get("ok"))
    reason = str(figures.get("error") or "compiler gave no reason") if not compiled else \
        (fit_reason(figures, target) or "")
    return Verdict(compiled and not reason, compiled, reason,
                   *(int(float(figures.get(f) or 0)) for f in
                     ("shared_bytes", "registers", "stack_bytes", "num_warps", "wgmma",
                      "tma_loads")), source=source, seconds=seconds, key=key,
                   target=target.name, stage=str(figures.get("stage") or "cubin"))


def _bool(v) -> bool:
    return v is True or str(v).strip().lower() in ("true", "1")


def read_table(path: Path) -> dict[str, dict]:
    """A compile table's rows by compile key ({} when the file does not exist)."""
    if not Path(path).exists():
        return {}
    with open(path, newline="") as f:
        return {row["key"]: row for row in csv.DictReader(
            line for line in f if not line.startswith("#"))}


COMPLETE_MARK = "# complete:"


def table_complete(path: Path) -> bool:
    """Whether the sweep that wrote the table compiled every masked-legal configuration
    at every suite shape (its first line says so)."""
    try:
        with open(path) as f:
            return f.readline().startswith(COMPLETE_MARK)
    except OSError:
        return False


#: how far the environment's compile verdicts run the compiler (`lower.aot.STAGES`),
#: unless ARGUS_VERDICT_STAGE names another stage; see `verdict_stage`
DEFAULT_STAGE = "alloc"


def verdict_stage() -> str:
    """The stage the environment's compile verdicts run the compiler to
    (ARGUS_VERDICT_STAGE, default `DEFAULT_STAGE`):

    - "alloc": Triton's stages through its shared-memory allocation (the start of its LLVM
      stage): refusals of the front end, TTIR and TTGIR passes and of the allocation, and
      the allocated shared memory and warps, which decide the launch (`fit_reason`). Every
      refusal on record came from these stages (`benchmarks/compile_stages.py`: the
      stage each sample program's compile failed at; the GPU runs' compile failures:
      pass-manager failures in TTGIR and shared memory over the limit); the lowering to
      LLVM, PTX and ptxas, which refused none of them, are not run for a step;
    - "ptx": all but ptxas (no registers or stack figures);
    - "cubin": the whole pipeline, ptxas included, as the compile tables are made."""
    from ..lower.aot import STAGES
    stage = (os.environ.get("ARGUS_VERDICT_STAGE") or DEFAULT_STAGE).strip().lower()
    if stage not in STAGES:
        raise ValueError(f"ARGUS_VERDICT_STAGE must be one of {STAGES}, got {stage!r}")
    return stage


def _depth(stage: str) -> int:
    from ..lower.aot import STAGES
    return STAGES.index(stage or "cubin")


def cache_dir() -> Path:
    root = os.environ.get("ARGUS_CACHE_DIR") or os.path.join(os.path.expanduser("~"), ".cache",
                                                          "argus")
    return Path(root) / "legality"


# ---------------------------------------------------------------- the compile worker
_WORKER = None
_USERS = 0
_WORKER_LOCK = threading.Lock()


def _acquire_worker(arch: int = 90):
    """The process's compile worker (started, it first warms its compiler for `arch`),
    counting the caller as a user."""
    global _WORKER, _USERS
    with _WORKER_LOCK:
        if _WORKER is None or _WORKER_PID != os.getpid():
            from .worker import Worker
            _set_worker(Worker(interpret=False, timeout=COMPILE_TIMEOUT, warm=arch))
        _USERS += 1
        return _WORKER


_WORKER_PID = None


def _set_worker(worker) -> None:
    global _WORKER, _USERS, _WORKER_PID
    _WORKER, _USERS, _WORKER_PID = worker, 0, os.getpid()


def _release_worker() -> None:
    global _USERS
    with _WORKER_LOCK:
        _USERS = max(0, _USERS - 1)
        if _USERS == 0 and _WORKER is not None:
            _WORKER.stop()


class Legality:
    """Compile verdicts for one task on one target (see the module doc).

    `table`: the committed compile table's path, True for the task's own, False for
    none; `cache`: the disk cache folder, True for `cache_dir()`, False for none;
    `memory`: verdicts kept in memory; `stage`: how far its compiles run the compiler
    (`lower.aot.STAGES`; the environment's is `verdict_stage()`): a verdict of a compile
    that ran at least as far (a table row, a cached or remembered one) serves too.
    Raises `LegalityUnavailable` when Triton's NVIDIA compiler is missing: a program is
    never declared legal without it."""

    def __init__(self, task, target: Target | str, table: bool | str | Path = True,
                 cache: bool | str | Path = True, memory: int = MEMORY_ENTRIES,
                 timeout: float = COMPILE_TIMEOUT, stage: str = "cubin"):
        reason = compiler_reason()
        if reason:
            raise LegalityUnavailable(f"legality needs Triton's NVIDIA compiler on the CPU: "
                                      f"{reason}")
        from ..lower.build import LRU
        from ..lower.aot import STAGES
        if stage not in STAGES:
            raise ValueError(f"stage must be one of {STAGES}, got {stage!r}")
        self.task, self.target, self.stage = task, as_target(target), stage
        self.timeout = float(timeout)
        path = table_path(task, self.target) if table is True else (Path(table) if table else None)
        self.table_file = path
        self._table = read_table(path) if path is not None else {}
        self.cache = cache_dir() if cache is True else (Path(cache) if cache else None)
        self._memory = LRU(memory)
        self._worker = None
        self._lock = threading.RLock()
        self._running = 0  # compiles started by `begin` not yet answered
        self.counts = {"memory": 0, "table": 0, "cache": 0, "compiler": 0}

    def __getstate__(self) -> dict:
        state = dict(self.__dict__)
        state["_worker"], state["_lock"], state["_running"] = None, None, 0
        return state

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self._lock = threading.RLock()

    def prestart(self) -> None:
        """Start the compile worker now (its imports overlap the caller's work)."""
        with self._lock:
            if self._worker is None:
                self._worker = _acquire_worker(self.target.arch)
        self._worker.prestart()

    def busy(self) -> bool:
        """Whether a compile started by `begin` is still running."""
        return self._running > 0

    def begin(self, program: Program, idle_only: bool = False, sizes: dict | None = None):
        """The verdict on `program`, as a function to call for it: looked up now, or
        compiled in a thread started now (so that the compile overlaps the numerical
        checks); the function returns the verdict, waiting for the compile if need be.
        `idle_only`: None instead of starting a compile while another one runs (a
        compile started ahead of need is never queued behind one)."""
        found = self.lookup(program, sizes)
        if found is not None:
            return lambda: found
        with self._lock:
            if idle_only and self._running:
                return None
            self._running += 1
        box: list = []
        # pickled here, in the caller's thread: the thread below then shares no object
        # with the caller's own work (`Worker.prepare` says why that matters)
        request = self._request(program, sizes)

        def run() -> None:
            try:
                box.append(self.verdict(program, request, sizes))
            except BaseException as e:  # noqa: BLE001 - raised again by the caller
                box.append(e)
            finally:
                with self._lock:
                    self._running -= 1
        thread = threading.Thread(target=run, daemon=True, name="argus-legality")
        thread.start()

        def wait() -> Verdict:
            thread.join()
            if isinstance(box[0], BaseException):
                raise box[0]
            return box[0]
        return wait

    def rows(self) -> int:
        return len(self._table)

    def lookup(self, program: Program, sizes: dict | None = None,
               stage: str | None = None) -> Verdict | None:
        """The verdict on `program` (bound to its shape, launched at `sizes`) of a compile
        that ran at least to `stage` (default: this instance's), without compiling, or
        None."""
        from ..lower.aot import STAGES
        t0 = time.perf_counter()
        depth = _depth(stage or self.stage)
        key = compile_key(program, self.target, sizes)
        with self._lock:
            found = self._memory.get(key)
        if found is not None and _depth(found.stage) >= depth:
            self.counts["memory"] += 1
            return dataclasses.replace(found, source="memory",
                                       seconds=time.perf_counter() - t0)
        row = self._table.get(key)   # a table row is a whole compile
        source = "table"
        if row is None and self.cache is not None:
            for s in reversed(STAGES[depth:]):   # the deepest compile first
                try:
                    row = json.loads((self.cache / self._cache_name(key, s)).read_text())
                    source = "cache"
                    break
                except (OSError, ValueError):
                    row = None
        if row is None:
            return None
        v = verdict_of(row, self.target, source, key, time.perf_counter() - t0)
        with self._lock:
            self.counts[source] += 1
            self._memory.put(key, v)
        return v

    @staticmethod
    def _cache_name(key: str, stage: str) -> str:
        """The disk cache's file for a compile to `stage` (a whole compile's keeps the
        name it had before stages)."""
        return f"{key}.json" if stage == "cubin" else f"{key}.{stage}.json"

    def _request(self, program: Program, sizes: dict | None = None,
                 stage: str | None = None) -> bytes:
        """The compile worker's request for `program`, pickled (`Worker.prepare`)."""
        from .worker import Worker
        options = {"target": self.target.name}
        if sizes is not None:
            options["sizes"] = {k: int(v) for k, v in sizes.items()}
        if (stage or self.stage) != "cubin":
            options["until"] = stage or self.stage
        return Worker.prepare(program, self.task.name, {}, op="compile", options=options)

    def verdict(self, program: Program, request: bytes | None = None,
                sizes: dict | None = None, stage: str | None = None) -> Verdict:
        """The verdict on `program` (bound to its shape, launched at `sizes`: the
        specialisation the real launch gets; None: unspecialised) of a compile run at
        least to `stage` (default: this instance's; "cubin": the whole compiler, for a
        program about to be submitted, say): looked up, else compiled now (`request`:
        its compile request made by `_request` with the same sizes and stage, else made
        here). Never raises for what the program is; raises `LegalityUnavailable` when
        the compiler process cannot run at all."""
        stage = stage or self.stage
        found = self.lookup(program, sizes, stage)
        if found is not None:
            return found
        t0 = time.perf_counter()
        key = compile_key(program, self.target, sizes)
        with self._lock:
            if self._worker is None:
                self._worker = _acquire_worker(self.target.arch)
        if request is None:
            request = self._request(program, sizes, stage)
        answer = {}
        for _ in range(2):  # a worker killed from outside is not a verdict: once more
            answer = self._worker.run_prepared(request, timeout=self.timeout)
            if not answer.get("transient") or answer.get("stopped"):
                break  # a worker stopped on purpose (`Worker.stop`) is not started again
        status = answer.get("status")
        if status == "timeout":
            answer = {"ok": False, "error": f"the compiler did not finish within "
                      f"{self.timeout:g} s"}
        elif status == "fault" or answer.get("transient"):
            if answer.get("transient"):
                raise LegalityUnavailable(f"the compile worker could not run: "
                                          f"{answer.get('message', '')}")
            answer = {"ok": False, "error": answer.get("message", "the compiler crashed")}
        elif status == "compile" and not answer.get("error"):
            answer["error"] = answer.get("message", "")
        if "No module named" in str(answer.get("error", "")):
            raise LegalityUnavailable(f"the compile worker lacks a module: {answer['error']}")
        record = {k: answer.get(k) for k in ("ok", "shared_bytes", "registers", "stack_bytes",
                                             "num_warps", "wgmma", "tma_loads", "kernels",
                                             "seconds", "error")}
        record["stage"] = answer.get("stage") or stage
        record["triton"] = triton_version()
        self._store(key, record)
        v = verdict_of(record, self.target, "compiler", key, time.perf_counter() - t0)
        with self._lock:
            self.counts["compiler"] += 1
            self._memory.put(key, v)
        return v

    def _store(self, key: str, record: dict) -> None:
        if self.cache is None:
            return
        try:
            self.cache.mkdir(parents=True, exist_ok=True)
            tmp = self.cache / f".{key}.{os.getpid()}.{threading.get_ident()}.tmp"
            tmp.write_text(json.dumps(record))
            os.replace(tmp, self.cache / self._cache_name(key, record.get("stage") or "cubin"))
        except OSError:
            pass  # an unwritable cache costs a compile next time, nothing else

    def close(self) -> None:
        with self._lock:
            if self._worker is not None:
                self._worker = None
                _release_worker()


# ---------------------------------------------------------------- the masks
_CONFIG_ROWS: dict = {}    # (task, arch) -> {(configuration text, binding): row}
_BINDINGS: dict = {}       # (task, sizes) -> the binding string at those sizes
_MASK_LOCK = threading.Lock()


def config_rows(task_name: str, target: Target) -> dict:
    """The task's committed compile table for the target's architecture, by
    (configuration text, binding), keeping only rows of the installed Triton. The text is
    the configuration's `repr` today: a row written before a field was added names it at
    its default (`recorded.config_from_text`)."""
    target = as_target(target)
    key = (task_name, target.arch)
    with _MASK_LOCK:
        if key not in _CONFIG_ROWS:
            from ..task import get_task
            from .recorded import config_from_text
            task = get_task(task_name)
            version = triton_version()
            rows = read_table(table_path(task, target))
            out = {}
            for r in rows.values():
                if not r.get("config") or r.get("triton") != version:
                    continue
                config = config_from_text(task.space, r["config"]) \
                    if getattr(task, "space", None) is not None else None
                out[(repr(config) if config is not None else r["config"], r["binding"])] = r
            _CONFIG_ROWS[key] = out
        return _CONFIG_ROWS[key]


def shape_binding(task_name: str, sizes: dict) -> str | None:
    """The constants `Task.bind` sets at `sizes`, as the compile tables name them (the
    baseline program's binding: shapes with one binding compile the same programs), or
    None when the sizes are not a shape of the task."""
    key = (task_name, tuple(sorted(sizes.items())))
    if key not in _BINDINGS:
        from ..task import get_task
        task = get_task(task_name)
        base = task.space.program(task.space.baseline())
        try:
            _BINDINGS[key] = binding(task.bind(base, sizes), base, sizes)
        except (KeyError, TypeError, ValueError, ZeroDivisionError):
            _BINDINGS[key] = None
    return _BINDINGS[key]


def table_reason(task_name: str, config, ctx: dict) -> str | None:
    """Why the committed compile table says `config` cannot run at the context's shape
    on its target (the compiler rejected it, or its kernel exceeds the target's
    limits), or None: legal there, or not in the table (the estimates decide)."""
    from ..space import target_of
    target = target_of(ctx)
    rows = config_rows(task_name, target)
    if not rows:
        return None
    bind = shape_binding(task_name, ctx.get("sizes") or {})
    row = rows.get((repr(config), bind)) if bind is not None else None
    if row is None:
        return None
    v = verdict_of(row, target, "table")
    return None if v.ok else v.message


def make_legality(task, target: Target, spec) -> Legality | None:
    """The evaluator's legality stage from its `legality` argument: True (the task's
    table, the disk cache; none when the environment variable ARGUS_LEGALITY is 0, as
    the CPU test suite sets it), False/None (no compile verdicts), or a `Legality`."""
    if spec is True:
        if os.environ.get("ARGUS_LEGALITY", "1").strip().lower() in ("0", "off", "false"):
            return None
        return Legality(task, target, stage=verdict_stage())
    if spec is False or spec is None:
        return None
    if isinstance(spec, Legality):
        if spec.target.arch != as_target(target).arch or spec.target.sms != as_target(target).sms:
            raise ValueError(f"the legality stage compiles for {spec.target.name}, the "
                             f"evaluator's target is {as_target(target).name}")
        return spec
    raise TypeError(f"legality must be True, False or a Legality, got {spec!r}")


def failed_measurement(backend, verdict: Verdict):
    """The measurement of a program that does not compile for the target: not priced."""
    from .measurement import Measurement
    return Measurement(getattr(backend, "name", "backend"), False, error=verdict.message,
                       details={"status": "compile", "legality": verdict.to_dict()})


def with_verdict(measurement, verdict: Verdict):
    """`measurement` with the compile verdict in its details (`info["measurement"]`)."""
    if measurement is None:
        return None
    return dataclasses.replace(measurement, details={**measurement.details,
                                                     "legality": verdict.to_dict()})


__all__ = ["Legality", "Verdict", "make_legality", "table_reason", "config_rows",
           "shape_binding", "failed_measurement", "with_verdict", "LegalityUnavailable", "compile_key", "binding",
           "size_classes",
           "fit_reason", "verdict_of", "read_table", "table_path", "cache_dir", "COLUMNS",
           "compiler_reason", "triton_version", "table_complete", "verdict_stage",
           "DEFAULT_STAGE"]
