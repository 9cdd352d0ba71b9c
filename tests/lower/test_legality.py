"""Legal means it compiles for the target (`argus_env.measure.legality`).

The default tests answer from compile tables written here (no compile); those marked
`slow` compile live on the CPU (Triton's ahead-of-time compile for sm_90).
"""

import csv
import dataclasses
import importlib.util
import math
import random

import pytest

from argus_env.envs.evaluate import Evaluator
from argus_env.measure.backends import make_backend
from argus_env.measure.legality import (COLUMNS, Legality, LegalityUnavailable, binding,
                                        compile_key, fit_reason, read_table, table_complete,
                                        size_classes, table_path, verdict_of)
from argus_env.measure.measurement import Backend, Measurement
from argus_env.measure.recorded import config_from_text
from argus_env.target import load_target
from argus_env.task import get_task

H200 = load_target("h200")
GEMM = get_task("gemm")
SIZES = {"M": 512, "N": 512, "K": 512}


def _write_table(path, rows):
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=COLUMNS)
        w.writeheader()
        for r in rows:
            w.writerow({k: r.get(k, "") for k in COLUMNS})
    return path


def _row(program, ok=True, shared=8192, regs=96, warps=4, error="", sizes=None):
    """A table row for `program` (launched at `sizes`: the evaluator's lookups carry the
    launch's specialisation; None: unspecialised)."""
    return {"key": compile_key(program, H200, sizes), "ok": ok, "shared_bytes": shared,
            "registers": regs, "num_warps": warps, "error": error}


def _legality(tmp_path, rows, task=GEMM):
    return Legality(task, H200, table=_write_table(tmp_path / "compile.csv", rows),
                    cache=tmp_path / "cache")


def test_fit_reason_names_the_limit():
    assert fit_reason({"shared_bytes": 232448, "registers": 255, "num_warps": 1}, H200) is None
    smem = fit_reason({"shared_bytes": 245760, "registers": 96, "num_warps": 8}, H200)
    assert "245760 B > 232448 B" in smem
    # 8 warps x 256 threads x 255 registers (allocated as 256) = 65536: fits exactly
    assert fit_reason({"shared_bytes": 0, "registers": 255, "num_warps": 8}, H200) is None
    regs = fit_reason({"shared_bytes": 0, "registers": 130, "num_warps": 16}, H200)
    assert "registers" in regs and "> 65536" in regs


def test_compile_key_follows_what_the_compiler_sees():
    base = GEMM.space.program(GEMM.space.baseline())
    other = GEMM.space.program(dataclasses.replace(GEMM.space.baseline(), stages=3))
    assert compile_key(base, H200) != compile_key(other, H200)
    assert compile_key(base, H200) != compile_key(base, load_target("a100"))
    undocumented = type(base)(dataclasses.replace(base.kernel, doc="another docstring"))
    assert compile_key(undocumented, H200) == compile_key(base, H200)


def test_compile_key_follows_the_fp_contraction_setting(monkeypatch):
    """The workers compile with Triton's FP contraction as the user sets it (on by
    default): a verdict compiled with it off is not shared with the default's, whose keys
    stay those of the committed verdict tables."""
    from argus_env.measure.worker import FP_FUSION
    monkeypatch.delenv(FP_FUSION, raising=False)
    default = compile_key(GEMM.space.program(GEMM.space.baseline()), H200)
    monkeypatch.setenv(FP_FUSION, "1")
    assert compile_key(GEMM.space.program(GEMM.space.baseline()), H200) == default
    monkeypatch.setenv(FP_FUSION, "0")
    assert compile_key(GEMM.space.program(GEMM.space.baseline()), H200) != default


def test_table_verdicts_and_memory(tmp_path):
    base = GEMM.space.program(GEMM.space.baseline())
    leg = _legality(tmp_path, [_row(base, shared=245760, warps=8)])
    v = leg.verdict(base)  # from the table: no compile
    assert (v.source, v.compiled, v.ok) == ("table", True, False)
    assert "245760 B > 232448 B" in v.message and "h200" in v.message
    assert leg.verdict(base).source == "memory"
    assert leg.counts["compiler"] == 0


class Counting(Backend):
    """A backend that prices everything and counts its calls (a GPU stands in here)."""

    name = "gpu"

    def __init__(self):
        self.target, self.profile, self.calls = H200, H200.profile, 0

    def measure(self, program, sizes, task, features=None):
        self.calls += 1
        return Measurement("gpu", True, 1.0, 100.0, 200.0, 300.0)


@pytest.mark.parametrize("mode", ["model", "table", "gpu"])
def test_a_program_that_does_not_compile_is_a_scored_failure(tmp_path, mode):
    program = GEMM.bind(GEMM.space.program(GEMM.space.baseline()), SIZES)
    leg = _legality(tmp_path, [_row(program, ok=False, shared=0,
                                    error="PassManager::run failed", sizes=SIZES)])
    backend = Counting() if mode == "gpu" else make_backend(mode, H200)
    ev = Evaluator(GEMM, backend, correctness="none", legality=leg).evaluate(program, SIZES)
    assert ev.error == "compile" and not ev.measured
    assert "does not compile for h200: PassManager::run failed" in ev.message
    assert ev.measurement.details["legality"]["compiled"] is False
    if mode == "gpu":
        assert backend.calls == 0


def test_a_legal_program_carries_the_compiler_figures(tmp_path):
    program = GEMM.bind(GEMM.space.program(GEMM.space.baseline()), SIZES)
    leg = _legality(tmp_path, [_row(program, sizes=SIZES)])
    ev = Evaluator(GEMM, make_backend("model", H200), correctness="none",
                   legality=leg).evaluate(program, SIZES)
    assert ev.measured and ev.error is None
    assert ev.measurement.details["legality"]["shared_bytes"] == 8192
    assert ev.measurement.details["legality"]["source"] == "table"


def test_the_failure_costs_the_failure_penalty(tmp_path, monkeypatch):
    from argus_env.envs.kernel_env import KernelEnv
    program = GEMM.space.program(GEMM.space.baseline())
    rows = [_row(GEMM.bind(program, c.sizes), ok=False, error="ptxas failed", sizes=c.sizes)
            for c in GEMM.shapes]
    leg = _legality(tmp_path, rows)
    evaluator = Evaluator(GEMM, make_backend("model", H200), correctness="none", legality=leg)
    env = KernelEnv("gemm", measure="model", evaluator=evaluator)
    try:
        _, info = env.reset(seed=0)
        assert info["failure"] == "compile" and "ptxas failed" in info["failure_message"]
        _, reward, *_ , info = env.step(env.catalog.index(("submit", None)))
        assert reward < 0 and not math.isnan(reward)
        assert info["measurement"]["details"]["legality"]["ok"] is False
    finally:
        env.close()


def test_no_compiler_is_an_error_not_a_pass(monkeypatch):
    monkeypatch.setenv("ARGUS_LEGALITY", "1")
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "triton" else real(name, *a))
    with pytest.raises(LegalityUnavailable, match="Triton is not installed"):
        Legality(GEMM, H200)
    with pytest.raises(LegalityUnavailable):
        Evaluator(GEMM, make_backend("model", H200), correctness="none")


def test_the_evaluator_compiles_by_default(monkeypatch):
    monkeypatch.setenv("ARGUS_LEGALITY", "1")
    ev = Evaluator(GEMM, make_backend("model", H200), correctness="none")
    try:
        assert isinstance(ev.legality, Legality) and ev.legality.target == H200
        assert ev.legality.table_file == table_path(GEMM, H200)
    finally:
        ev.close()
    monkeypatch.setenv("ARGUS_LEGALITY", "0")  # the switch the CPU test suite sets
    assert Evaluator(GEMM, make_backend("model", H200), correctness="none").legality is None


def test_verdict_of_a_row_without_a_reason():
    v = verdict_of({"ok": "False", "error": ""}, H200, "table")
    assert not v.ok and v.reason


# ---------------------------------------------------------------- the masks and the tables
def _tables():
    from argus_env.task import KNOWN_TASKS
    for name in KNOWN_TASKS:
        task = get_task(name)
        path = table_path(task, H200)
        if path.exists():
            yield task, read_table(path)


def _groups(task):
    base = task.space.program(task.space.baseline())
    out: dict = {}
    for case in task.shapes:
        out.setdefault(binding(task.bind(base, case.sizes), base, case.sizes),
                       []).append(case.sizes)
    return out


def _in_grid(space, config) -> bool:
    """Whether every field a transformation sets holds one of its catalog values."""
    return all(getattr(config, t.field) in t.values for t in space.transforms)


def test_every_masked_legal_configuration_compiles_for_sm90():
    """From the committed tables: a configuration the mask allows at a suite shape is one
    whose row says it compiles and fits the H200 (a failing row is masked at every shape
    of its binding), and a table marked complete has a row for every configuration the
    mask allows at every suite shape."""
    tables = list(_tables())
    if not tables:
        pytest.skip("no committed compile table (benchmarks/compile_sweep.py writes them)")
    for task, rows in tables:
        groups = _groups(task)
        allowed_bad, checked = [], 0
        baseline = task.space.baseline()
        for r in rows.values():
            c = config_from_text(task.space, r["config"])  # a row predating a field: its default
            if c == baseline and not _in_grid(task.space, c):
                # the program every episode starts from (`compile_sweep.py --baselines`),
                # outside the catalog's grid where its fields are unset: it must compile
                assert verdict_of(r, H200, "table").ok, (task.name, r["binding"], r["error"])
                continue
            for sizes in groups[r["binding"]]:
                ctx = {"sizes": sizes, "target": H200}
                legal = task.space.config_reason(c, ctx) is None
                checked += legal
                if legal and not verdict_of(r, H200, "table").ok:
                    allowed_bad.append((r["config"], sizes, r["error"][:80] or fit_reason(r, H200)))
        assert not allowed_bad, f"{task.name}: the mask allows {len(allowed_bad)} " \
            f"configurations that do not compile for sm_90, e.g. {allowed_bad[:3]}"
        if not table_complete(table_path(task, H200)):
            continue
        by_config = {(repr(config_from_text(task.space, r["config"])), r["binding"])
                     for r in rows.values()}
        configs = list(task.space.configurations())
        missing = [(repr(c), bind) for bind, shapes in groups.items() for sizes in shapes
                   for c in task.space.legal_configurations(configs,
                                                            {"sizes": sizes, "target": H200})
                   if (repr(c), bind) not in by_config]
        assert not missing, f"{task.name}: the complete table lacks {len(missing)} " \
            f"masked-legal configurations, e.g. {missing[:2]}"


def test_the_mask_refuses_what_the_table_says_does_not_compile(tmp_path, monkeypatch):
    """A configuration the estimates allow is masked once the compile table says it
    fails, at the shapes of the row's binding only."""
    import argus_env.measure.legality as L
    from argus_env.tasks.gemm.space import BASELINE
    ctx = {"sizes": dict(GEMM.shapes[0].sizes), "target": H200}
    c = dataclasses.replace(BASELINE, stages=3)
    assert GEMM.space.config_reason(c, ctx) is None
    monkeypatch.setitem(L._CONFIG_ROWS, ("gemm", 90), {(repr(c), L.shape_binding("gemm", ctx["sizes"])): {
        "ok": "False", "error": "PassManager::run failed", "triton": L.triton_version()}})
    reason = GEMM.space.config_reason(c, ctx)
    assert reason and "does not compile for h200: PassManager::run failed" in reason
    assert GEMM.space.why_illegal(BASELINE, "stages", 3, ctx) == reason
    assert GEMM.space.config_reason(dataclasses.replace(c, stages=4), ctx) is None


@pytest.mark.slow
def test_the_committed_tables_agree_with_the_compiler(tmp_path):
    """A random sample of committed rows, compiled live, gives the same verdict and
    figures (the compile cost per new program is the time this takes)."""
    tables = list(_tables())
    if not tables:
        pytest.skip("no committed compile table")
    rng = random.Random(20)
    for task, rows in tables:
        groups = _groups(task)
        leg = Legality(task, H200, table=False, cache=False)
        try:
            for r in rng.sample(sorted(rows.values(), key=lambda r: r["key"]), 2):
                config = config_from_text(task.space, r["config"])
                base = task.space.program(config)
                sizes = groups[r["binding"]][0]
                program = task.bind(base, sizes)
                launch = dict(task.program_sizes(program, sizes))
                assert compile_key(program, H200, launch) == r["key"]
                v = leg.verdict(program, sizes=launch)
                assert v.source == "compiler"
                assert v.compiled == (r["ok"] == "True"), (r["config"], v.reason)
                if v.compiled:
                    assert (v.shared_bytes, v.registers) == \
                        (int(r["shared_bytes"]), int(r["registers"])), r["config"]
        finally:
            leg.close()


@pytest.mark.slow
def test_over_the_shared_memory_limit_is_a_compile_failure_live(tmp_path, monkeypatch):
    """Triton compiles a kernel that needs more shared memory than the H200 has (it
    refuses only at launch): the legality stage answers it as a failure, in a text step."""
    from argus_env.tasks.gemm.space import EXPERT
    monkeypatch.setenv("ARGUS_CACHE_DIR", str(tmp_path))
    wide = dataclasses.replace(EXPERT, block_k=128)
    program = GEMM.bind(GEMM.space.program(wide), SIZES)
    leg = Legality(GEMM, H200, table=False)
    try:
        v = leg.verdict(program)
        assert v.compiled and not v.ok and v.shared_bytes > H200.smem_per_block
        assert v.registers > 0
        again = Legality(GEMM, H200, table=False).lookup(program)  # the disk cache
        assert again is not None and again.source == "cache"
        assert (again.ok, again.shared_bytes) == (False, v.shared_bytes)
    finally:
        leg.close()


@pytest.mark.slow
def test_cubin_registers_match_cuobjdump():
    import os
    import subprocess
    import sys
    code = r"""
import os, subprocess, sys, tempfile
os.environ["TRITON_INTERPRET"] = "0"
import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource
from argus_env.lower.aot import cubin_resources
from argus_env.lower.build import load_module
from argus_env.lower.module import kernel_signature
from argus_env.task import get_task
p = get_task("gemm").space.program(get_task("gemm").space.baseline())
m = load_module(p, interpret=False)
k = triton.compile(ASTSource(m.gemm_kernel, kernel_signature(p), dict(p.kernel.consts)),
                   target=GPUTarget("cuda", 90, 32), options={"num_warps": 4})
f = tempfile.NamedTemporaryFile(suffix=".cubin", delete=False)
f.write(k.asm["cubin"]); f.close()
tool = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin", "cuobjdump")
out = subprocess.run([tool, "--dump-resource-usage", f.name], capture_output=True, text=True).stdout
regs = int(out.split("REG:")[1].split()[0]); stack = int(out.split("STACK:")[1].split()[0])
print(cubin_resources(k.asm["cubin"]), (regs, stack))
"""
    env = dict(os.environ, TRITON_INTERPRET="0")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env=env, timeout=300)
    mine, tool = out.stdout.strip().splitlines()[-1].split(") (")
    assert mine + ")" == "(" + tool, out.stdout + out.stderr
    assert not mine.startswith("(0,")


# ---------------------------------------------------------------- what the key holds
def test_the_compile_key_is_kept_on_the_program_and_follows_triton(monkeypatch):
    """The compile key is worked out once per program object, target and launch sizes;
    another Triton version gives another key for the same object."""
    import argus_env.measure.legality as legality
    sizes = GEMM.shapes[0].sizes
    program = GEMM.bind(GEMM.space.program(GEMM.space.baseline()), sizes)
    fresh = GEMM.bind(GEMM.space.program(GEMM.space.baseline()), sizes)
    first = compile_key(program, H200, sizes)
    assert compile_key(program, H200, sizes) == first == compile_key(fresh, H200, sizes)
    assert compile_key(program, H200) == compile_key(fresh, H200) != first
    monkeypatch.setattr(legality, "triton_version", lambda: "0.0.0")
    assert compile_key(program, H200, sizes) != first


def test_the_compile_key_holds_bound_constants_and_the_specialisation_not_sizes():
    """Sizes are runtime arguments that the launch specialises (Triton: an integer
    argument equal to 1 becomes a constant, one divisible by 16 carries that), so shapes
    whose bound constants and specialisation agree share one compile; a shape that
    changes a bound constant (attention's head dim, causal flag) or the specialisation
    (a ragged GEMM size) compiles again."""
    attention = get_task("attention")
    base = attention.space.program(attention.space.baseline())
    by_case = {c.name: c.sizes for c in attention.shapes}
    a, b = by_case["b8-h16-s2048-d128"], by_case["b4-h32-s4096-d128"]
    assert a != b and binding(attention.bind(base, a), base, a) == \
        binding(attention.bind(base, b), base, b)
    assert compile_key(attention.bind(base, a), H200, a) == \
        compile_key(attention.bind(base, b), H200, b)
    d64 = by_case["b4-h32-s4096-d64"]
    assert compile_key(attention.bind(base, d64), H200, d64) != \
        compile_key(attention.bind(base, a), H200, a)
    causal = by_case["b4-h32-s4096-d128-causal"]
    assert compile_key(attention.bind(base, causal), H200, causal) != \
        compile_key(attention.bind(base, a), H200, a)
    gemm = GEMM.space.program(GEMM.space.baseline())
    keys = {}
    for c in GEMM.shapes:
        keys.setdefault(size_classes(c.sizes), set()).add(
            compile_key(GEMM.bind(gemm, c.sizes), H200, c.sizes))
    # GEMM binds no constant: one compile per specialisation serves every shape
    assert all(len(k) == 1 for k in keys.values()) and len(keys) > 1
    assert len(set().union(*keys.values())) == len(keys)
    assert compile_key(gemm, H200) not in set().union(*keys.values())  # unspecialised


def test_the_specialisation_is_the_launchs():
    """Pointers 16-byte aligned, a contiguous tensor's last stride the constant 1, a
    size divisible by 16 marked so, a ragged one left plain."""
    from argus_env.lower.aot import specialization
    gemm = GEMM.space.program(GEMM.space.baseline())
    spec = specialization(gemm, {"M": 3000, "N": 4096, "K": 1})
    sig = __import__("argus_env.lower.module", fromlist=["x"]).kernel_signature(gemm)
    assert all(spec[n] == "D" for n, t in sig.items() if t.startswith("*"))
    assert "M" not in spec and spec["N"] == "D" and spec["K"] == "1"
    assert specialization(gemm, None) == {}
    ints = [n for n, t in sig.items() if t == "i32"]
    assert sum(spec.get(n) == "1" for n in ints) >= 3   # the unit strides of a, b and c


@pytest.mark.slow
def test_the_specialised_compile_needs_what_the_gpu_launch_needed():
    """An MoE program that the unspecialised compile fit in 48 KiB of shared memory
    needed 245,760 B when launched on a Hopper GPU (Triton refused it there): the
    specialised compile sees the same 245,760 B, so the verdict refuses it."""
    from argus_env.lower.aot import compile_hopper
    moe = get_task("moe")
    from argus_env.tasks.moe.space import MoEConfig
    c = MoEConfig(block_m=64, block_n=128, block_k=128, num_warps=4, stages=None,
                  fuse_gather=False, fuse_swiglu=False, fuse_scatter=False,
                  inverse_scatter=False, fuse_weight=False, persistent=False, tma=False)
    sizes = next(s.sizes for s in moe.shapes if s.name == "qwen3-decode-256-skewed")
    program = moe.bind(moe.space.program(c), sizes)
    launch = dict(moe.program_sizes(program, sizes))
    real = compile_hopper(program, sizes=launch)
    assert real.ok and real.shared_bytes == 245760 > H200.smem_per_block
    plain = compile_hopper(program)
    assert plain.shared_bytes < real.shared_bytes


def test_another_triton_version_misses_the_tables_and_the_cache(tmp_path, monkeypatch):
    """Rows written under another Triton are never read as verdicts: the version is part
    of the compile key (tables, disk cache, memory) and of the masks' rows."""
    import argus_env.measure.legality as L
    base = GEMM.space.program(GEMM.space.baseline())
    leg = _legality(tmp_path, [_row(base)])
    leg._store(compile_key(base, H200), {"ok": True, "shared_bytes": 8192})
    monkeypatch.setattr(L, "triton_version", lambda: "0.0.0-other")
    assert leg.lookup(base) is None
    assert Legality(GEMM, H200, table=leg.table_file, cache=leg.cache).lookup(base) is None


@pytest.mark.slow
def test_repeated_kernels_are_remembered_with_the_compilers_figures():
    """A compile worker (warmed for sm_90) remembers the figures of each kernel it
    compiled by what the compiler's pipeline receives: an MoE program that changes one
    GEMM's tile keeps kernels the worker compiled before, and its figures are those of a
    fresh compile in a new worker."""
    from argus_env.measure.worker import Worker
    moe = get_task("moe")
    sizes = moe.shapes[0].sizes
    base = moe.space.baseline()
    first = moe.bind(moe.space.program(base), sizes)
    second = moe.bind(moe.space.program(dataclasses.replace(base, block_n=128)), sizes)
    figures = ("ok", "shared_bytes", "num_warps", "registers", "stack_bytes", "wgmma",
               "tma_loads", "kernels", "error")
    warm, fresh = Worker(interpret=False, timeout=300, warm=90), \
        Worker(interpret=False, timeout=300)
    try:
        opts = {"target": "h200"}
        once = warm.run(first, "moe", {}, op="compile", options=opts)
        again = warm.run(second, "moe", {}, op="compile", options=opts)
        # met again: every kernel found by its source's key, without the front end
        twice = warm.run(first, "moe", {}, op="compile", options=opts)
        alone = fresh.run(second, "moe", {}, op="compile", options=opts)
    finally:
        warm.stop()
        fresh.stop()
    assert alone["ok"] and alone["kernels"] == 6 and alone["remembered"] == 0
    assert 0 < again["remembered"] < 6  # the tile's GEMMs compiled, the rest remembered
    assert {k: again[k] for k in figures} == {k: alone[k] for k in figures}
    assert twice["remembered"] == 6 and once["remembered"] == 0
    assert {k: twice[k] for k in figures} == {k: once[k] for k in figures}
