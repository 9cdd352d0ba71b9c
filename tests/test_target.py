"""The Target: hardware facts built once from a profile, the MMA instruction a program's
choice with the target's default, one resource estimate, and the env handing its target
to every part."""

from __future__ import annotations

import dataclasses

import pytest

from argus_env import resources
from argus_env.measure.backends import ModelBackend, make_backend
from argus_env.measure.features import extract
from argus_env.resources import Footprint, dot_footprint
from argus_env.target import HardwareProfile, Target, as_target, load_profile, load_target
from argus_env.task import get_task

GEMM = get_task("gemm")
SQUARE = {"M": 4096, "N": 4096, "K": 4096}


@pytest.mark.parametrize("name,arch,mma,tma", [
    ("h200", 90, ("wgmma", "mma_v2", "fma"), True),
    ("h100", 90, ("wgmma", "mma_v2", "fma"), True),
    ("a100", 80, ("mma_v2", "fma"), False)])
def test_profiles_make_targets(name, arch, mma, tma):
    t = load_target(name)
    p = load_profile(name)
    assert (t.name, t.arch, t.mma, t.tma, t.warp_specialization) == (name, arch, mma, tma, tma), t
    assert (t.sms, t.smem_per_block, t.max_regs_per_thread) == \
        (p.sms, p.smem_per_block, p.max_regs_per_thread)
    assert t.profile is p and load_target(name) is t, "one target per profile"
    assert "arch" in p.source, "the compute capability names its source"


def test_default_mma_is_the_targets():
    h200, a100 = load_target("h200"), load_target("a100")
    assert h200.default_mma(4, 64) == "wgmma" and h200.default_mma(8, 128) == "wgmma"
    assert h200.default_mma(2, 64) == "mma_v2" and h200.default_mma(4, 32) == "mma_v2"
    assert a100.default_mma(4, 64) == "mma_v2" and a100.default_mma(8, 256) == "mma_v2"
    assert h200.mma_of("mma_v2", 8, 128) == "mma_v2", "a program's choice is kept"
    assert a100.mma_reason("wgmma", 8, 128).startswith("wgmma: a100 has no warpgroup MMA")
    assert h200.mma_reason("wgmma", 2, 128).startswith("wgmma: needs whole warpgroups")
    assert h200.mma_reason("mma_v2", 2, 32) is None
    with pytest.raises(ValueError, match="unknown MMA instruction"):
        h200.mma_reason("hmma", 4, 64)


def test_features_take_the_programs_mma_and_the_targets_default():
    h200, a100 = load_target("h200"), load_target("a100")
    base, expert = GEMM.program("baseline"), GEMM.program("expert")   # expert: mma=A.wgmma
    assert extract(base, SQUARE, GEMM, target=h200).mma == "wgmma"
    assert extract(base, SQUARE, GEMM, target=a100).mma == "mma_v2"
    assert extract(expert, SQUARE, GEMM, target=a100).mma == "wgmma"
    a100_expert = ModelBackend(a100).measure(expert, SQUARE, GEMM)
    assert not a100_expert.ok and "wgmma: a100" in a100_expert.error


def test_the_grid_uses_the_targets_sm_count():
    expert = GEMM.program("expert")           # persistent: min(A.num_sms(), tiles) programs
    assert extract(expert, SQUARE, GEMM, target=load_target("a100")).grid_programs == 108
    assert extract(expert, SQUARE, GEMM, target=load_target("h200")).grid_programs == 132


def test_tma_rows_must_be_16_byte_aligned():
    h200 = load_target("h200")
    assert h200.tma_reason({"a": 8192}) is None
    assert "`a` has 200-byte rows" in h200.tma_reason({"a": 200})
    assert load_target("a100").tma_reason().startswith("TMA: a100 has no tensor memory")
    f = extract(GEMM.program("expert"), {"M": 4096, "N": 4096, "K": 4100}, GEMM, target=h200)
    assert ("a", 8200) in f.tma_pitches
    assert any("8200-byte rows" in r for r in ModelBackend(h200).measure(
        GEMM.program("expert"), {"M": 4096, "N": 4096, "K": 4100}, GEMM).error.split("; "))


def test_one_function_per_resource_figure():
    """Triton refused the 4-stage 128x256x64 TMA-store GEMM with OutOfResources(262176)."""
    fp = dot_footprint(128, 256, 64, 8, 4, staging_bytes=128 * 256 * 2)
    assert resources.shared_memory_bytes(fp) == 262176
    assert resources.registers_per_thread(fp) == 128 * 256 // 256 + resources.REGISTER_OVERHEAD
    h200 = load_target("h200")
    assert resources.limits(fp, h200)[0].startswith("shared memory: 4 stages x (128x64 + 64x256) bf16")
    three = dataclasses.replace(fp, stages=3)
    assert resources.limits(three, h200) == [] and resources.occupancy(three, h200) == 1
    small = dot_footprint(64, 64, 32, 4, 3)
    assert resources.occupancy(small, h200) > resources.occupancy(small, load_target("a100")) >= 1
    two = dot_footprint(64, 128, 64, 4, 2, dots=2)       # one A tile feeds two products
    assert two.stage_bytes == (64 * 64 + 2 * 64 * 128) * 2 and two.fp32_values == 2 * 64 * 128
    with pytest.raises(ValueError, match="at least one warp"):
        Footprint(0, 1, 0)


def test_bad_hardware_is_refused_clearly():
    with pytest.raises(ValueError, match="did you mean 'a100'"):
        load_target("a10")
    with pytest.raises(TypeError, match="expected a Target"):
        as_target(132)
    with pytest.raises(TypeError, match="must be an argus_env.target.Target"):
        extract(GEMM.program("baseline"), SQUARE, GEMM, target="h200")
    p = load_profile("a100")
    with pytest.raises(ValueError, match="TMA needs sm_90"):
        Target.from_profile(dataclasses.replace(p, has_tma=True))
    assert isinstance(as_target(p), Target) and as_target("h100").name == "h100"
    assert isinstance(p, HardwareProfile)


def test_backends_are_built_for_a_target():
    a100 = load_target("a100")
    for name in ("model", "table"):
        backend = make_backend(name, a100)
        assert backend.target is a100 and backend.profile is a100.profile
    with pytest.raises(ValueError, match=r"takes only \['estimator', 'fit', 'model_anchor'\], got \['rounds'\]"):
        make_backend("model", a100, rounds=3)
    assert make_backend("table", a100, estimator="analytic").estimator == "analytic"
    with pytest.raises(ValueError, match="estimator must be one of"):
        make_backend("model", a100, estimator="oracle")


@pytest.mark.parametrize("hardware", ["a100", "h100"])
def test_the_env_measures_the_gemm_baseline_on_every_profile(hardware):
    """Before the target, the a100 baseline failed: "wgmma: a100 has no warpgroup MMA"."""
    from argus_env.envs.kernel_env import KernelEnv
    env = KernelEnv(task="gemm", hardware=hardware, correctness="none")
    try:
        _, info = env.reset(options={"shape": "square-4096"})
        assert info["measurement"]["ok"], info["measurement"]
        assert env.target is load_target(hardware) and env.evaluator.target is env.target
        assert env.evaluator.backend.target is env.target
        assert env.profile is env.target.profile
    finally:
        env.close()


@pytest.mark.slow
def test_the_compiler_builds_for_the_target():
    """The real compiler (on the CPU) picks the instruction the target's default names:
    the baseline's dot is wgmma on the H200 (sm_90) and mma.sync on the A100 (sm_80)."""
    from argus_env.lower.aot import compile_for
    base = GEMM.program("baseline")
    hopper, ampere = compile_for(base, "h200"), compile_for(base, load_target("a100"))
    assert hopper.ok and ampere.ok, (hopper.error, ampere.error)
    assert hopper.wgmma > 0 and ampere.wgmma == 0, (hopper, ampere)
    assert load_target("h200").default_mma(4, 64) == "wgmma"
    assert load_target("a100").default_mma(4, 64) == "mma_v2"


@pytest.mark.slow
@pytest.mark.parametrize("hardware", ["a100", "h100"])
def test_every_task_starts_measured_at_every_shape(hardware):
    """Through the env (the checker at the real shape with the target's SM count, then the
    model): every registered task's baseline is measured at every shape of its suite."""
    from argus_env.envs.kernel_env import KernelEnv
    from argus_env.registry import TASKS
    missing = []
    for task in TASKS:
        env = KernelEnv(task=task, hardware=hardware, correctness="none", split="all")
        try:
            for case in env.cases:
                _, info = env.reset(options={"shape": case.name})
                if not (info["measurement"] or {}).get("ok"):
                    missing.append((task, case.name, (info["measurement"] or {}).get("error")))
        finally:
            env.close()
    assert not missing, missing
