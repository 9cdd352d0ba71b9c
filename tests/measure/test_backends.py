"""Measurement backends: table lookups and misses, the worker's fault and timeout
handling, and the physical-limit rejection."""

import os
import signal
import threading
import time

import pytest

from argus_env.dsl.program import Program
from argus_env.measure.backends import make_backend
from argus_env.measure.gpu import judge, physical_limit_ms
from argus_env.measure.worker import Worker
from argus_env.task import get_task

TASK = get_task("gemm")
SIZES = {"M": 4096, "N": 4096, "K": 4096}


def test_table_hit_gives_the_recorded_h200_measurement():
    from argus_env.tasks.gemm.space import EXPERT
    m = make_backend("table").measure(TASK.space.program(EXPERT), SIZES, TASK)
    assert m.backend == "table" and m.ok and "table_miss" not in m.details, m
    assert 600 < m.tflops < 800 and 0.9 < m.frac_anchor < 1.1, m.to_dict()


def test_table_miss_falls_back_to_the_model_and_says_so():
    from argus_env.tasks.gemm.space import GemmConfig
    odd = GemmConfig(32, 32, 32, 2, 2)   # not a recorded configuration
    m = make_backend("table").measure(TASK.space.program(odd), SIZES, TASK)
    assert m.backend == "model" and m.details["table_miss"], m.details
    assert m.details["table"].endswith("table_h200.csv")


def test_recorded_failures_stay_failures():
    import csv
    from pathlib import Path
    rows = list(csv.DictReader((Path(TASK.anchors_file).parent / "table_h200.csv").open()))
    bad = next(r for r in rows if r["ok"] != "True")
    sys_sizes = {d: int(bad[d]) for d in ("M", "N", "K")}
    backend = make_backend("table")
    table = backend.table(TASK)
    key = tuple(sys_sizes.values()) + (bad["program_hash"],)
    assert table["rows"][key]["ok"] == "False"


def test_physical_limit_rejects_impossible_timings():
    floor = physical_limit_ms(TASK, SIZES, peak_tflops=989.0, dram_tbps=4.8)
    assert floor == pytest.approx(2 * 4096**3 / 989e9, rel=1e-9)
    assert judge(floor * 0.5, floor)["status"] == "impossible"
    assert judge(0.0, floor)["status"] == "impossible"
    assert judge(floor * 1.2, floor) == {"ok": True, "status": "ok"}
    decode = {"M": 16, "N": 4096, "K": 4096}
    assert physical_limit_ms(TASK, decode, 989.0, 4.8) == pytest.approx(
        TASK.min_bytes(decode) / 4.8e9, rel=1e-9), "decode is bound by memory"


def _forever() -> str:
    text = TASK.program("baseline").text
    return text.replace("for k in A.range(0, K, BK):", "for k in A.range(0, K * 1000000, BK):")


@pytest.mark.slow
def test_worker_times_out_a_kernel_that_does_not_end_then_recovers():
    w = Worker(interpret=True, timeout=60)
    small = {"M": 16, "N": 16, "K": 16}
    ans = w.run(_forever(), "gemm", small, timeout=8)
    assert ans["status"] == "timeout" and not ans["ok"], ans
    ok = w.run(TASK.program("baseline").text, "gemm", TASK.env_check_shape)
    assert ok["status"] == "ok", ok
    w.stop()


@pytest.mark.slow
def test_worker_reports_a_crash_as_a_fault_then_recovers():
    w = Worker(interpret=True, timeout=60)
    w.run(TASK.program("baseline").text, "gemm", {"M": 16, "N": 16, "K": 16})  # started
    result = {}
    t = threading.Thread(target=lambda: result.update(w.run(_forever(), "gemm",
                                                            {"M": 16, "N": 16, "K": 16})))
    t.start()
    time.sleep(2)
    os.kill(w._proc.pid, signal.SIGSEGV)   # what a kernel's out-of-bounds access does
    t.join(30)
    assert result["status"] == "fault" and "crashed" in result["message"], result
    assert not result.get("transient"), "a crash of the kernel's own is a verdict"
    assert w.run(TASK.program("baseline").text, "gemm", TASK.env_check_shape)["ok"]
    w.stop()


def test_worker_answers_a_program_it_cannot_build():
    w = Worker(interpret=True, timeout=60)
    bad = TASK.program("baseline").text.replace("A.cdiv(M, BM)", "A.cdiv(M, BM) +")
    ans = w.run(bad, "gemm", TASK.env_check_shape)
    w.stop()
    assert ans["status"] == "compile" and "DSLSyntaxError" in ans["message"], ans
    assert Program.from_text(TASK.program("baseline").text)  # the good text still parses


@pytest.mark.parametrize("name", ["gemm", "attention", "moe"])
def test_every_tasks_table_hit_carries_the_library_figure_of_its_run(name):
    """Each task's table names its library column its own way (GEMM: cuBLAS, attention:
    the best SDPA backend); a hit must carry that figure, as recorded in the same run.
    The program is the env's starting point (the catalog's baseline configuration)."""
    import csv
    from pathlib import Path
    task = get_task(name)
    backend = make_backend("table")
    rows = list(csv.DictReader((Path(task.anchors_file).parent / "table_h200.csv").open()))
    hits = 0
    for case in task.shape_cases():
        program = task.bind(task.space.program(task.space.baseline()), case.sizes)
        row = next((r for r in rows if r["program_hash"] == program.hash
                    and all(int(r[d]) == case.sizes[d] for d in task.anchor_dims)), None)
        if row is None or row["ok"] != "True":
            continue
        m = backend.measure(program, case.sizes, task)
        library = float(row.get("anchor_tflops") or row["cublas_tflops"])
        assert m.backend == "table" and m.ok, (case.name, m)
        assert m.anchor_tflops == pytest.approx(library) and m.tflops == pytest.approx(float(row["tflops"]))
        assert 0 < m.frac_anchor == pytest.approx(float(row["tflops"]) / library)
        hits += 1
    assert hits >= 3, f"the {name} baseline is recorded at only {hits} shapes"


@pytest.mark.parametrize("name", ["gemm", "attention", "moe"])
def test_every_shape_has_its_library_figure_recorded_on_the_h200(name):
    """Model mode prices the library from the recorded anchors (cuBLAS, cuDNN, the
    grouped-GEMM pipeline), not from a fraction of the roofline."""
    from argus_env.measure.backends import recorded_anchor
    task = get_task(name)
    backend = make_backend("model")
    for case in task.shape_cases():
        library = recorded_anchor(task, case.sizes)
        assert library and library > 1, (name, case.name)
        m = backend.measure(task.bind(task.space.program(task.space.baseline()), case.sizes),
                            case.sizes, task)
        assert m.anchor_tflops == library, (case.name, m.anchor_tflops, library)
