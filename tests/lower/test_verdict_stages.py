"""How far a compile verdict runs the compiler (`lower.aot.STAGES`): "alloc" (Triton's
stages through its shared-memory allocation), "ptx" (all but ptxas), "cubin" (all).

The default tests need no compile; those marked `slow` compile live on the CPU for sm_90
and hold a partial compile to the whole one's verdict, shared memory and warps.
"""

import dataclasses
import json

import pytest

from argus_env.lower import aot
from argus_env.measure import legality as L
from argus_env.measure.legality import Legality, compile_key, verdict_of
from argus_env.target import load_target
from argus_env.task import get_task

H200 = load_target("h200")
GEMM = get_task("gemm")
SIZES = {"M": 512, "N": 512, "K": 512}


def _program(config=None, task=GEMM, sizes=SIZES):
    return task.bind(task.space.program(config or task.space.baseline()), sizes)


def test_the_installed_triton_allocates_shared_memory_where_the_alloc_stage_stops():
    """`_allocated` replays the start of the installed Triton's `make_llir` (else an
    "alloc" compile runs to "ptx"): if this fails, Triton's LLVM stage changed and
    `_ALLOC_PREFIX` and `_allocated` must follow it."""
    assert aot._prefix_matches()


def test_remembered_figures_are_given_as_of_the_stage_asked():
    whole = {"shared": 1024, "num_warps": 8, "registers": 96, "stack_bytes": 16,
             "wgmma": 4, "tma_loads": 2, "stage": "cubin"}
    assert aot._as_of(whole, "cubin") == whole
    assert aot._as_of(whole, "ptx") == {**whole, "registers": 0, "stack_bytes": 0,
                                        "stage": "ptx"}
    assert aot._as_of(whole, "alloc") == {**whole, "registers": 0, "stack_bytes": 0,
                                          "wgmma": 0, "tma_loads": 0, "stage": "alloc"}


def test_the_environment_stage_is_alloc_unless_set(monkeypatch):
    monkeypatch.delenv("ARGUS_VERDICT_STAGE", raising=False)
    assert L.verdict_stage() == L.DEFAULT_STAGE == "alloc"
    monkeypatch.setenv("ARGUS_VERDICT_STAGE", "cubin")
    assert L.verdict_stage() == "cubin"
    monkeypatch.setenv("ARGUS_VERDICT_STAGE", "llvm")
    with pytest.raises(ValueError):
        L.verdict_stage()
    with pytest.raises(ValueError):
        Legality(GEMM, H200, table=False, cache=False, stage="sass")


def test_make_legality_takes_the_environment_stage(monkeypatch):
    monkeypatch.setenv("ARGUS_LEGALITY", "1")
    monkeypatch.setenv("ARGUS_VERDICT_STAGE", "ptx")
    leg = L.make_legality(GEMM, H200, True)
    try:
        assert leg.stage == "ptx"
    finally:
        leg.close()
    assert Legality(GEMM, H200, table=False, cache=False).stage == "cubin"


def test_a_deeper_verdict_serves_a_shallower_stage_not_the_reverse(tmp_path):
    """A cached whole compile answers every stage; a cached "alloc" compile answers an
    "alloc" verdict only (a whole-compile verdict then compiles)."""
    program = _program()
    key = compile_key(program, H200, SIZES)
    cache = tmp_path / "cache"
    cache.mkdir()
    row = {"ok": True, "shared_bytes": 8192, "num_warps": 4, "registers": 0,
           "stage": "alloc", "triton": L.triton_version()}
    (cache / f"{key}.alloc.json").write_text(json.dumps(row))
    quick = Legality(GEMM, H200, table=False, cache=cache, stage="alloc")
    v = quick.lookup(program, SIZES)
    assert v is not None and v.ok and v.stage == "alloc" and v.source == "cache"
    ptx = Legality(GEMM, H200, table=False, cache=cache, stage="ptx")
    assert ptx.lookup(program, SIZES) is None
    assert Legality(GEMM, H200, table=False, cache=cache).lookup(program, SIZES) is None
    assert quick.lookup(program, SIZES, stage="cubin") is None   # a memory hit too shallow
    whole = dict(row, stage="cubin", registers=96)
    (cache / f"{key}.json").write_text(json.dumps(whole))
    for stage in aot.STAGES:
        v = Legality(GEMM, H200, table=False, cache=cache, stage=stage).lookup(program, SIZES)
        assert v is not None and v.stage == "cubin" and v.registers == 96


def test_a_row_without_a_stage_is_a_whole_compile():
    assert verdict_of({"ok": True, "shared_bytes": 1}, H200, "table").stage == "cubin"
    assert verdict_of({"ok": True, "stage": "alloc"}, H200, "cache").stage == "alloc"


def test_the_request_names_the_stage():
    import pickle
    leg = Legality(GEMM, H200, table=False, cache=False, stage="alloc")
    program = _program()
    assert pickle.loads(leg._request(program, SIZES))["options"]["until"] == "alloc"
    assert "until" not in pickle.loads(leg._request(program, SIZES, "cubin"))["options"]


# ---------------------------------------------------------------- live compiles
def _compiles(program, sizes):
    return {until: aot.compile_for(program, H200, sizes=sizes, until=until)
            for until in aot.STAGES}


def _same_verdict(results):
    whole = results["cubin"]
    for until, r in results.items():
        assert r.stage == until, (until, r.error)
        assert (r.ok, r.shared_bytes, r.num_warps) == \
            (whole.ok, whole.shared_bytes, whole.num_warps), until
        assert r.ok or r.error.split(":")[0] == whole.error.split(":")[0]
    if whole.ok:
        assert whole.registers > 0 and results["ptx"].registers == 0
        assert results["ptx"].wgmma == whole.wgmma and results["alloc"].wgmma == 0


@pytest.mark.slow
@pytest.mark.parametrize("task_name", ["gemm", "attention", "moe", "rmsnorm"])
def test_partial_compiles_give_the_whole_compiles_verdict(task_name):
    """The baseline and the expert of each task: the same acceptance, shared memory and
    warps at every stage (the MoE programs have 6 and 2 kernels)."""
    import sys
    task = get_task(task_name)
    sizes = dict(task.shape_cases("train")[0].sizes)
    expert = sys.modules[type(task.space).__module__].EXPERT
    for config in (task.space.baseline(), expert):
        program = _program(config, task, sizes)
        _same_verdict(_compiles(program, dict(task.program_sizes(program, sizes))))


@pytest.mark.slow
def test_over_the_shared_memory_limit_at_the_alloc_stage():
    """The expert GEMM with 128-deep K tiles allocates more shared memory than an H200
    block has: the "alloc" compile has the whole compile's figure, and the verdict at
    that stage refuses it."""
    from argus_env.tasks.gemm.space import EXPERT
    program = _program(dataclasses.replace(EXPERT, block_k=128))
    results = _compiles(program, SIZES)
    _same_verdict(results)
    assert results["alloc"].shared_bytes > H200.smem_per_block
    v = verdict_of({**results["alloc"].to_dict()}, H200, "compiler")
    assert v.compiled and not v.ok and "shared memory" in v.reason and v.stage == "alloc"


@pytest.mark.slow
def test_a_pass_manager_refusal_is_refused_at_the_alloc_stage():
    """A warp-specialized TMA attention program that a GPU's compile refused ("PassManager::
    run failed", in TTGIR): every stage refuses it."""
    from argus_env.tasks.attention.space import AttentionConfig
    task = get_task("attention")
    case = next(c for c in task.shapes if c.name == "b8-h16-s2048-d128")
    config = AttentionConfig(128, 64, 4, 2, tma=True, warp_specialize=True)
    program = _program(config, task, dict(case.sizes))
    results = _compiles(program, dict(task.program_sizes(program, case.sizes)))
    assert not results["cubin"].ok and "PassManager::run failed" in results["cubin"].error
    _same_verdict(results)


@pytest.mark.slow
def test_an_alloc_legality_compiles_once_per_stage(tmp_path, monkeypatch):
    """A live "alloc" verdict is cached as such; asked for the whole compile, the same
    instance compiles the whole pipeline, whose verdict then serves both stages."""
    monkeypatch.setenv("ARGUS_CACHE_DIR", str(tmp_path))
    program = _program()
    leg = Legality(GEMM, H200, table=False, stage="alloc")
    try:
        quick = leg.verdict(program, sizes=SIZES)
        assert quick.source == "compiler" and quick.ok and quick.stage == "alloc"
        assert quick.registers == 0 and quick.shared_bytes > 0
        assert leg.verdict(program, sizes=SIZES).source == "memory"
        whole = leg.verdict(program, sizes=SIZES, stage="cubin")
        assert whole.source == "compiler" and whole.stage == "cubin" and whole.registers > 0
        assert (whole.ok, whole.shared_bytes, whole.num_warps) == \
            (quick.ok, quick.shared_bytes, quick.num_warps)
        again = Legality(GEMM, H200, table=False, stage="alloc").lookup(program, SIZES)
        assert again.source == "cache" and again.stage == "cubin"
    finally:
        leg.close()
