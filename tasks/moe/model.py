"""An analytic cost model of MoE programs, derived from the calibrated GEMM model.

There are no GPU measurements of MoE programs yet, so nothing here is fitted to MoE data:
each grouped GEMM launch is priced by the GEMM model (`argus_env.measure.model.estimate`,
calibrated on the H200 GEMM table) as a GEMM over the sorted rows the routing produces at the
shape's seeded distribution, with the compulsory traffic of a grouped GEMM (every active
expert's weights once, not one B matrix); the memory-bound passes (gather, SwiGLU, scatter,
combine) cost their bytes at the profile's DRAM bandwidth plus a launch each. Assumptions,
to be refitted once `benchmarks/record_moe_table.py` has run on the H200:

- a launch over blocks of no expert costs `empty_program_us` per program and wave (the
  scalar load and exit), persistent launches skip them for one loop trip each;
- the gather in the gate/up GEMM's A loads (not TMA-able) costs `gather_penalty` on
  the launch's feed;
- the fused SwiGLU epilogue doubles the accumulators: the gate/up GEMM is priced with two
  dots per step; atomic adds in the down GEMM's epilogue cost `atomic_penalty` on its
  output bytes.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, replace

from argus_env.dsl.program import Program
from argus_env.ir import nodes as ir
from argus_env.ir.live import live_program, persistent_loop
from argus_env.ir.rewrite import walk
from argus_env.measure.features import KernelFeatures, typed_dots
from argus_env.measure.model import estimate as gemm_estimate
from argus_env.target import Target, as_target

from .routing import SKEW, padded_rows, router_logits
from .routing import topk as top
from .space import DEFAULT_STAGES, tma_pitches


@dataclass(frozen=True)
class Params:
    empty_program_us: float = 0.8     # per wave of programs whose block has no expert
    gather_penalty: float = 1.15      # gathered A rows (pointer loads, no TMA)
    atomic_penalty: float = 2.0       # bf16 atomic adds vs stores of the output rows
    pass_efficiency: float = 0.8      # of DRAM bandwidth for the elementwise passes


@functools.lru_cache(maxsize=64)
def expert_rows(tokens: int, experts: int, topk: int, skew: int, seed: int = 0) -> tuple:
    """Rows per expert at the shape's seeded routing distribution (what the model prices)."""
    import torch
    gen = torch.Generator().manual_seed(seed)
    _, ids = top(router_logits(tokens, experts, SKEW * skew, gen), topk)
    return tuple(torch.bincount(ids.flatten().long(), minlength=experts).tolist())


@dataclass(frozen=True)
class Config:
    bm: int
    bn: int
    bk: int
    warps: int
    stages: int
    launches: int
    fused_gather: bool
    fused_swiglu: bool
    scatter_pass: bool
    combine_pass: bool
    atomic: bool
    persistent: bool
    tma: bool
    bn_down: int = 0       # the down projection's BN (0: bn)


def _program_sizes(program: Program, sizes: dict) -> dict:
    """The shape's sizes with the routing step's (`MoETask.program_sizes`)."""
    bm = int(program.kernel.consts.get("BM", 64))
    out = dict(sizes)
    out["P"] = padded_rows(sizes["T"], sizes["E"], sizes["TOPK"], bm)
    out["NB"] = out["P"] // bm
    return out


def config(program: Program) -> Config:
    """The choices a program made, read off its IR (`estimate` reads them off the part
    that executes at the sizes, `argus_env.ir.live`); persistence is a loop over tiles
    strided by the grid size."""
    k = program.kernel
    calls = [n for n in walk(k) if isinstance(n, ir.Call)]
    loads = {c.arg("ref").base.id for c in calls if c.fn == "load"}
    loops = [n for n in walk(k) if isinstance(n, ir.For) and n.iter.fn == "range"]
    stages = next((n.iter.arg("stages").value for n in loops if n.iter.has("stages")),
                  DEFAULT_STAGES)
    bm, bk, bn, bn_down = _tiles(program)
    # the grouped tile order is not priced: whether a GROUP_M reorders anything is not
    # read off the program (its addresses go through the routing arrays), and a name
    # alone must not change a price; the GPU tables price it where they hold the program
    return Config(bm, bn, bk, int(k.option("num_warps", 4)), int(stages),
                  len(program.info.grids), "xs" not in loads, "g" not in loads,
                  "y" in loads, "ys" in loads, "out" in program.info.atomic,
                  persistent_loop(k) is not None,
                  any(c.fn == "load" and isinstance(c.arg("tma"), ir.Const) and c.arg("tma").value
                      for c in calls), bn_down)


def _tiles(program: Program) -> tuple[int, int, int, int]:
    """(BM, BK, BN of the gate/up products, BN of the down product), read off the typed
    products the program runs: a product with w_gate or w_up as its B operand is the
    gate/up GEMM's, one with w_down the down GEMM's (the tensors are the task's signature,
    which a program cannot rename). The constants' names count for nothing; a program
    with no such product reads as the smallest MMA tile."""
    finder = typed_dots(program)
    up = down = None
    for d in finder.dots:
        b = finder.tensors(d["call"].arg("b"))
        if b & {"w_gate", "w_up"} and up is None:
            up = d["shape"]
        elif "w_down" in b and down is None:
            down = d["shape"]
    bm, bk, bn = up or down or (16, 16, 16)
    return bm, bk, bn, (down[2] if down else bn)


def _gemm(c: Config, rows: int, n: int, kdim: int, experts: int, dots: int, target: Target,
          atomic: bool, stored_tiles: int, pitches: dict, down: bool = False) -> KernelFeatures:
    """One grouped GEMM launch as the generic model reads it; `stored_tiles` output tiles
    leave by TMA (staged in shared memory)."""
    if down and c.bn_down and c.bn_down != c.bn:
        c = replace(c, bn=c.bn_down)
    tiles = -(-rows // c.bm) * -(-n // c.bn)
    flops = 2.0 * rows * n * kdim * dots
    min_bytes = 2.0 * (rows * kdim + dots * experts * kdim * n + rows * n)
    tma_store = c.tma and not atomic
    return KernelFeatures(
        task="moe", sizes=(), flops=flops, min_bytes=min_bytes, block_m=c.bm, block_n=c.bn,
        block_k=c.bk, dots=dots, num_warps=c.warps, stages=max(1, c.stages),
        mma=target.default_mma(c.warps, c.bm), tma_loads=c.tma,
        tma_store=tma_store, warp_specialize=False, persistent=c.persistent,
        grid_programs=min(target.sms, tiles) if c.persistent else tiles, tiles=tiles, split_k=1,
        atomic_output=False, group_m=1,  # never credited (see `config`)
        kmajor_b=False, operand_bytes=2, output_bytes=2,
        k_iterations=max(1, -(-kdim // c.bk)),
        staging_bytes=stored_tiles * c.bm * c.bn * 2 if tma_store else 0,
        tma_pitches=tuple(pitches.items()) if c.tma else ())


def estimate(program: Program, sizes: dict, target, params: Params | None = None) -> dict:
    """Predicted milliseconds and TFLOP/s of `program` at `sizes` on `target` (a `Target`,
    a hardware profile or its name)."""
    p = params or Params()
    target = as_target(target)
    profile = target.profile
    t, d, f, e, k = (sizes[n] for n in ("T", "D", "F", "E", "TOPK"))
    c = config(live_program(program, _program_sizes(program, sizes), target.sms))
    counts = expert_rows(t, e, k, int(sizes.get("SKEW", 0)))
    active = sum(1 for n in counts if n)
    rows = sum(-(-n // c.bm) * c.bm for n in counts)           # padded rows actually used
    blocks = padded_rows(t, e, k, c.bm) // c.bm                # grid blocks (upper bound)
    sms = target.sms
    pitches = tma_pitches(sizes)
    up = gemm_estimate(_gemm(c, rows, f, d, active, 2, target, False,
                             1 if c.fused_swiglu else 2, pitches), target)
    down = gemm_estimate(_gemm(c, rows, d, f, active, 1, target, c.atomic, 1, pitches, True),
                        target)
    if not (up.legal and down.legal):
        return {"ms": math.inf, "tflops": 0.0, "bound": "illegal", "features": c,
                "reasons": list(dict.fromkeys(up.reasons + down.reasons))}
    ms = up.ms * (p.gather_penalty if c.fused_gather else 1.0) + down.ms
    if c.atomic:
        ms += p.atomic_penalty * 2.0 * t * k * d / (profile.dram_tbps * 1e9)
    empty = blocks - rows // c.bm
    if empty > 0 and not c.persistent:
        for n, bn in ((f, c.bn), (d, c.bn_down or c.bn)):
            ms += p.empty_program_us * 1e-3 * math.ceil(empty * -(-n // bn) / (sms * 8))
    bw = profile.dram_tbps * 1e9 * p.pass_efficiency        # bytes per ms
    passes = {"gather": 4.0 * rows * d * (not c.fused_gather),
              "swiglu": 2.0 * rows * f * 3 * (not c.fused_swiglu),
              "scatter": 4.0 * rows * d * c.scatter_pass,
              "combine": 2.0 * (t * k * d + t * d) * c.combine_pass}
    ms += sum(passes.values()) / bw
    ms += profile.launch_us * 1e-3 * max(0, c.launches - 2)
    flops = 6.0 * t * k * d * f
    return {"ms": ms, "tflops": flops / ms / 1e9, "bound": down.bound,
            "features": replace(c), "breakdown": {"up_ms": up.ms, "down_ms": down.ms,
                                                  "passes_ms": sum(passes.values()) / bw}}
