"""Resource limits and cleanup: bounded step time, worker processes released by
`close`, no temporary files left behind, episode records written atomically."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import gymnasium as gym
import pytest

import argus_env  # noqa: F401
from argus_env.envs.record import EpisodeRecord

ROOT = Path(__file__).resolve().parents[2]
LONG_LOOP = "for i in A.range(0, 1000000000000):\n    pass"


def _insert_in_body(text: str, code: str) -> str:
    import fuzz_actions
    return fuzz_actions.insert_in_body(text, code)


def test_a_program_that_runs_too_long_is_a_timeout_and_the_env_continues():
    env = gym.make("Argus-GEMM-v0", mode="text", correctness_timeout=3.0)
    try:
        env.reset(seed=0, options={"shape": "ragged-1000"})
        base = env.unwrapped.task.program("baseline").text
        env.step(base)  # start the worker outside the timed step
        worker = env.unwrapped.evaluator.worker
        restarts = worker.restarts
        t0 = time.perf_counter()
        obs, reward, term, _, info = env.step(_insert_in_body(base, LONG_LOOP))
        dt = time.perf_counter() - t0
        assert info["report"]["ok"], "the loop is harmless to the invariants"
        assert info["failure"] == "timeout", (info["failure"], info["failure_message"])
        assert "3 s correctness budget" in info["failure_message"], info["failure_message"]
        assert reward == -1.0 and not term, reward
        assert dt < 3.0 + 10.0, f"the timed-out step took {dt:.1f} s"
        assert worker.restarts == restarts + 1, "the hung worker was not replaced"
        # the environment carries on: a correct program is checked (in a new worker) and measured
        obs, reward, term, _, info = env.step(base.replace("BM: A.const = 64", "BM: A.const = 128"))
        assert info["failure"] is None and info["measurement"]["ok"], info["failure_message"]
    finally:
        env.close()


def test_the_step_budget_bounds_checking_and_numerics_together():
    """A step whose check and numerics together would outlast `step_timeout` ends within
    it: numerics cut short are a timeout naming the step's budget (not remembered, so
    the same program is judged in full when the step has time), and a check cut short
    is refused with a message and a penalty, the state kept."""
    env = gym.make("Argus-GEMM-v0", mode="text", correctness_timeout=60.0, step_timeout=4.0)
    try:
        env.reset(seed=0, options={"shape": "ragged-1000"})
        core = env.unwrapped
        base = core.task.program("baseline").text
        env.step(base)  # start the worker outside the timed steps
        slow = _insert_in_body(base, LONG_LOOP)
        t0 = time.perf_counter()
        _, reward, _, _, info = env.step(slow)
        dt = time.perf_counter() - t0
        assert info["failure"] == "timeout", (info["failure"], info["failure_message"])
        assert "step's time budget" in info["failure_message"], info["failure_message"]
        assert reward < 0 and dt < 4.0 + 10.0, (reward, dt)
        assert core.evaluator._cache.get((core.state.program.hash,
                                          tuple(sorted(core.sizes.items())))) is None
        # the checker itself: a budget that is spent before it starts refuses the program
        core.step_timeout = 1e-9
        before = core.state.program.hash
        other = base.replace("BM: A.const = 64", "BM: A.const = 32")
        _, reward, _, _, info = env.step(other)
        assert info["error"] and "did not reach a verdict within the step's time budget" \
            in info["error"], info["error"]
        assert reward < 0 and core.state.program.hash == before
        # with time, the same program is checked (the refusal was not remembered)
        core.step_timeout = 60.0
        _, reward, _, _, info = env.step(other)
        assert info["error"] is None and info["report"]["ok"], info["error"]
    finally:
        env.close()


@pytest.mark.parametrize("bad", [0, -1.0, float("inf"), float("nan"), "10", True])
def test_step_timeout_must_be_a_positive_number(bad):
    with pytest.raises(ValueError, match="step_timeout"):
        gym.make("Argus-GEMM-v0", step_timeout=bad)


def test_a_check_past_its_deadline_raises_and_caches_nothing():
    from argus_env.check import CheckTimeout, check_program
    from argus_env.task import get_task
    task = get_task("moe")
    sizes = dict(task.shape_cases("train")[0].sizes)
    program = task.bind(task.program("expert"), sizes)
    with pytest.raises(CheckTimeout, match="time budget") as e:
        check_program(program, sizes, task, deadline=time.monotonic() - 1)
    assert e.value.line > 0, "the refusal names where the checker stopped"
    report = check_program(program, sizes, task, deadline=time.monotonic() + 600)
    assert report.ok and report.queries > 0, report.violations


def test_correctness_timeout_is_configurable_through_env_config():
    from argus_env.envs import env_creator
    env = env_creator({"mode": "text", "correctness_timeout": 7.5, "check_shapes": 2})
    assert env.evaluator.correctness_timeout == 7.5
    assert len(env.evaluator.check_shapes) == 2
    env.close()


# ---------------------------------------------------------------- close and temp files
CLOSE_SCRIPT = textwrap.dedent("""
    import json, os, sys, time
    import psutil
    import gymnasium as gym
    import argus_env
    me = psutil.Process()
    def children():  # multiprocessing's own resource tracker lives as long as we do
        return sorted(p.pid for p in me.children(recursive=True) if p.is_running()
                      and p.status() != psutil.STATUS_ZOMBIE
                      and "resource_tracker" not in " ".join(p.cmdline()))
    before = children()
    envs = [gym.make(env_id, mode="text") for env_id in ("Argus-GEMM-v0", "Argus-GEMM-v0")]
    for env in envs:
        env.reset(seed=0, options={"shape": "ragged-1000"})
        base = env.unwrapped.task.program("baseline").text
        env.step(base.replace("BM: A.const = 64", "BM: A.const = 128"))
    during = children()
    envs[0].close()
    after_one = children()
    envs[1].close()
    deadline = time.time() + 10
    while children() and time.time() < deadline:
        time.sleep(0.1)
    print(json.dumps({"before": before, "during": during, "after_one": after_one,
                      "after": children()}))
""")


def _files(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())


def test_close_releases_worker_processes_and_leaves_no_temp_files(tmp_path):
    tmp, cache, triton = tmp_path / "tmp", tmp_path / "cache", tmp_path / "triton"
    for d in (tmp, cache, triton):
        d.mkdir()
    env = {**os.environ, "TMPDIR": str(tmp), "ARGUS_CACHE_DIR": str(cache),
           "TRITON_CACHE_DIR": str(triton), "TRITON_INTERPRET": "1"}
    out = subprocess.run([sys.executable, "-c", CLOSE_SCRIPT], env=env, cwd=ROOT, text=True,
                         capture_output=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    counts = json.loads(out.stdout.strip().splitlines()[-1])
    assert len(counts["during"]) > len(counts["before"]), f"no worker was started: {counts}"
    assert counts["after_one"] == counts["during"], \
        f"closing one env stopped the worker the other still uses: {counts}"
    assert counts["after"] == counts["before"], f"worker processes left after close: {counts}"
    assert _files(tmp) == [], f"temporary files left in TMPDIR: {_files(tmp)[:10]}"
    assert _files(triton) == [], f"files left in the Triton cache: {_files(triton)[:10]}"
    leftovers = [f for f in _files(cache) if not f.endswith(".py")]
    assert leftovers == [], f"non-module files in the kernel cache: {leftovers[:10]}"
    assert _files(cache), "the kernel cache is where generated modules live: none written?"


# ---------------------------------------------------------------- atomic records
def _record(i: int, size: int = 0) -> EpisodeRecord:
    return EpisodeRecord("gemm", "Argus-GEMM-v0", "square-4096", {"M": 1}, "fuzz", i, "text",
                         "model", "h200", actions=[f"tile_m({i})"] * 3,
                         best_program="x" * size, versions={})


def test_save_round_trips_and_replaces(tmp_path):
    path = tmp_path / "runs" / "episode.json"
    _record(1).save(path)
    _record(2).save(path)
    assert EpisodeRecord.load(path).seed == 2
    assert sorted(p.name for p in path.parent.iterdir()) == ["episode.json"], "temp file left"


def test_a_failed_save_keeps_the_old_record(tmp_path, monkeypatch):
    path = tmp_path / "episode.json"
    _record(1).save(path)

    def crash(*a, **k):
        raise OSError("disk full")
    monkeypatch.setattr(os, "replace", crash)
    with pytest.raises(OSError, match="disk full"):
        _record(2).save(path)
    assert EpisodeRecord.load(path).seed == 1, "the old record was damaged"
    assert [p.name for p in tmp_path.iterdir()] == ["episode.json"], "temp file left"


WRITER = textwrap.dedent("""
    import sys
    from argus_env.envs.record import EpisodeRecord
    out = sys.argv[1]
    i = 0
    while True:
        rec = EpisodeRecord("gemm", "Argus-GEMM-v0", "s", {}, "w", i, "text", "model", "h200",
                            best_program="y" * (200_000 + 997 * (i % 50)), versions={})
        rec.save(f"{out}/record_{i % 7}.json")
        if i == 5:
            print("ready", flush=True)
        i += 1
""")


@pytest.mark.parametrize("delay", [0.05, 0.13, 0.31])
def test_records_survive_a_writer_killed_mid_write(tmp_path, delay):
    proc = subprocess.Popen([sys.executable, "-c", WRITER, str(tmp_path)], cwd=ROOT,
                            stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "ready"
        time.sleep(delay)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
    records = sorted(tmp_path.glob("record_*.json"))
    assert records, "the writer wrote nothing"
    for path in records:
        rec = EpisodeRecord.load(path)   # raises on a half-written file
        assert len(rec.best_program) >= 200_000, path
    # a write cut short leaves at most its hidden temporary file, never a damaged record
    assert all(p.name.startswith(".") and p.suffix == ".tmp" for p in tmp_path.iterdir()
               if p not in records), sorted(p.name for p in tmp_path.iterdir())


def test_cuda_sticky_errors_retire_the_worker():
    """On a GPU, an illegal address poisons the process's CUDA context: the worker answers
    `fault` and exits (its replacement starts clean); other errors are compile answers."""
    from argus_env.measure.worker import _context_lost
    for text in ("CUDA error: an illegal memory access was encountered",
                 "Triton Error [CUDA]: misaligned address", "device-side assert triggered"):
        assert _context_lost(RuntimeError(text)), text
    assert not _context_lost(ValueError("dot: K mismatch")), "a compile error is not a fault"
    assert not _context_lost(RuntimeError("CUDA out of memory. Tried to allocate 2 GiB"))


GPU_SCRIPT_IMPORTS = textwrap.dedent("""
    import importlib.util, sys
    for name in ("z3", "gymnasium", "hypothesis", "ray"):
        sys.modules[name] = None   # the GPU script must not need them
    spec = importlib.util.spec_from_file_location("gfc", "benchmarks/gpu_fault_containment.py")
    gfc = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gfc)
    from argus_env.dsl.program import Program
    from argus_env.lower import source
    from argus_env.measure.gpu_backend import GPUBackend
    from argus_env.measure.worker import Worker
    from argus_env.task import get_task
    GPUBackend(worker=Worker(interpret=False))
    for name, text in gfc.programs(get_task("gemm").program("baseline").text).items():
        source(Program.from_text(text))
    print("ok")
""")


def test_gpu_fault_containment_script_needs_only_the_gpu_stack():
    """benchmarks/gpu_fault_containment.py runs on a bare GPU machine (torch, triton,
    numpy, pyyaml, rich): its programs still type-check and lower, without z3 or gymnasium."""
    out = subprocess.run([sys.executable, "-c", GPU_SCRIPT_IMPORTS], cwd=ROOT, text=True,
                         capture_output=True, timeout=120)
    assert out.returncode == 0 and out.stdout.strip().endswith("ok"), out.stderr[-3000:]
