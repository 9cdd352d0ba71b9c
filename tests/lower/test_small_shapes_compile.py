"""The swap-AB and stream-K configurations (`tasks/gemm/space.py`'s `SMALL_SHAPES`) compile
ahead of time for sm_90 at every GEMM suite shape where the mask allows them, within the
H200's shared memory and registers: from the committed compile table (its rows written by
`benchmarks/compile_sweep.py --task gemm --configs small-shapes`), and live on the CPU
(slow: about 30 distinct compiles, the shapes of one specialisation sharing one)."""

from __future__ import annotations

import pytest

from argus_env.measure.legality import Legality, compile_key, compiler_reason, triton_version
from argus_env.target import load_target
from argus_env.task import get_task
from argus_env.tasks.gemm.space import SMALL_SHAPES

H200 = load_target("h200")
GEMM = get_task("gemm")
#: the Triton the committed rows were compiled with
TABLE_TRITON = "3.9.0"


def _programs() -> dict:
    """compile key -> (configuration name, shape name, bound program, launch sizes) for
    every configuration at every suite shape where the mask allows it."""
    out: dict = {}
    for name, config in SMALL_SHAPES.items():
        for case in GEMM.shapes:
            if GEMM.space.config_reason(config, {"sizes": case.sizes, "target": H200}):
                continue
            program = GEMM.bind(GEMM.space.program(config), case.sizes)
            launch = dict(GEMM.program_sizes(program, case.sizes))
            out.setdefault(compile_key(program, H200, launch), (name, case.name, program, launch))
    return out


def _check(verdict, name: str, shape: str) -> None:
    assert verdict.ok, f"{name} at {shape}: {verdict.message}"
    config = SMALL_SHAPES[name]
    assert verdict.shared_bytes <= H200.smem_per_block, (name, shape, verdict.shared_bytes)
    assert verdict.wgmma > 0, f"{name} at {shape} compiled without wgmma"
    if config.tma:
        assert verdict.tma_loads > 0, f"{name} at {shape} compiled without TMA loads"


def test_every_small_shape_configuration_has_a_passing_compile_row():
    if triton_version() != TABLE_TRITON:
        pytest.skip(f"the committed rows are Triton {TABLE_TRITON}'s")
    if compiler_reason():
        pytest.skip(compiler_reason())
    leg = Legality(GEMM, H200, cache=False)
    try:
        for key, (name, shape, program, launch) in _programs().items():
            v = leg.lookup(program, launch)
            assert v is not None and v.source == "table", f"{name} at {shape}: no table row"
            _check(v, name, shape)
    finally:
        leg.close()


@pytest.mark.slow
def test_every_small_shape_configuration_compiles_for_sm90_live():
    if compiler_reason():
        pytest.skip(compiler_reason())
    leg = Legality(GEMM, H200, table=False, cache=False)
    shared: dict = {}
    try:
        for key, (name, shape, program, launch) in _programs().items():
            v = leg.verdict(program, sizes=launch)
            assert v.source == "compiler", v.source
            _check(v, name, shape)
            shared.setdefault(name, set()).add(v.shared_bytes)
    finally:
        leg.close()
    assert set(shared) == set(SMALL_SHAPES), set(SMALL_SHAPES) - set(shared)
