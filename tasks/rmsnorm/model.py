"""A memory-bound cost model of RMSNorm programs: bytes over bandwidth, plus a launch.

The constants are the target's (SMs, registers), its profile's (DRAM and L2 bandwidth,
latency, launch) and these hand-set assumptions, none fitted by a solver:

- a program holds `PARAMS.values_per_element` f32 values per element of its BM x tile
  tile in registers and no shared memory: `argus_env.resources` turns that footprint
  into registers per thread, programs per SM and the reasons it does not fit (then the
  configuration is illegal), the same estimate the space's preconditions use;
- DRAM streams at `PARAMS.stream_efficiency` of the profile's copy bandwidth, or at
  `PARAMS.sm_share` times an SM's even share of it per SM with work, whichever is less;
- the second pass of a two-pass program re-reads x and residual from L2 when the rows in
  flight fit in half the L2 (time added to the stream), else from DRAM; each program
  reads the weight row from L2 (overlapped with the stream).

A program's time is the larger of the chip's streaming time and the waves of programs
each bound by its own latency chain (a DRAM round trip per feature tile, an L2 one per
tile of a second pass, its bytes at one SM's bandwidth), plus the profile's launch time.
The form was revised once against the H200 table of `benchmarks/rmsnorm_suite.py`
(`table_h200.csv`: the weight's L2 reads overlapped, no Little's-law term); the tests hold
the model to that table (mean error under 25%, baseline against expert in the measured
order on every shape). Known misses: two-pass programs whose tile is wider than the row
(137 us measured, 70 predicted) and single programs (decode), priced above the measured
1.8-3 us by the profile's 2 us launch.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from argus_env.dsl.program import Program
from argus_env.ir import nodes as ir
from argus_env.ir.live import live_program, persistent_loop
from argus_env.ir.rewrite import walk
from argus_env.resources import Footprint, limits, occupancy
from argus_env.target import DEFAULT_HARDWARE, as_target

from .problem import flops as task_flops
from .problem import hp, min_bytes


@dataclass(frozen=True)
class Params:
    values_per_element: int = 2     # f32 row value and weight per tile element held
    stream_efficiency: float = 0.92  # of the profile's copy bandwidth (dram_tbps)
    sm_share: float = 2.5           # one SM's bandwidth / its even share of the chip's


PARAMS = Params()
#: Triton's largest tile (elements)
MAX_TILE = 1 << 20


@dataclass(frozen=True)
class Config:
    """The choices a program made, read off its IR (or given by a space configuration)."""

    block_m: int
    tile: int          # features per tile
    passes: int        # 1: the row read once; 2: x and residual read twice
    num_warps: int
    persistent: bool
    stages: int


def footprint(block_m: int, tile: int, num_warps: int, p: Params = PARAMS) -> Footprint:
    """One program's demand: no shared memory, the f32 row tile and its weights in
    registers (the shared estimate of `argus_env.resources`)."""
    return Footprint(num_warps, 1, 0, fp32_values=p.values_per_element * block_m * tile,
                     values_text=f"the {block_m}x{tile} f32 row tile and its weights")


def check(c: Config, target=None, p: Params = PARAMS) -> str | None:
    """Why `c` cannot run on `target` (None: it can): the tile over Triton's limit, or the
    shared resource limits (registers per thread, a program per SM)."""
    if c.block_m * c.tile > MAX_TILE:
        return f"a tile of {c.block_m}x{c.tile} elements exceeds Triton's {MAX_TILE}"
    reasons = limits(footprint(c.block_m, c.tile, c.num_warps, p), as_target(target or DEFAULT_HARDWARE))
    return reasons[0] if reasons else None


def space_config(space_config, sizes: dict | None) -> Config:
    """The model's view of a space configuration at `sizes` (a whole row is HP features
    wide, so it depends on H; 4096 when no sizes are given)."""
    tile = hp((sizes or {}).get("H", 4096)) if space_config.single_pass else space_config.block_h
    return Config(space_config.block_m, tile, 1 if space_config.single_pass else 2,
                  space_config.num_warps, space_config.persistent, space_config.stages or 1)


def config(program: Program, sizes: dict) -> Config:
    """Read the configuration off a program: rows per program (BM), the tile width (the
    widest `A.arange`; HP is the shape's power of two), passes (loads of x), warps, a
    persistent grid (a loop over row blocks strided by the grid size), pipelining stages;
    all read off the part that executes at `sizes` (`argus_env.ir.live`)."""
    program = live_program(program, sizes)
    k = program.kernel
    consts = dict(k.consts)
    consts["HP"] = hp(sizes["H"])
    calls = [n for n in walk(k) if isinstance(n, ir.Call)]
    widths = []
    for c in calls:
        if c.fn == "arange":
            n = c.arg("n")
            if isinstance(n, ir.Const):
                widths.append(int(n.value))
            elif isinstance(n, ir.Name) and n.id in consts:
                widths.append(int(consts[n.id]))
    bm = int(consts.get("BM", 1))
    tile = max((w for w in widths if w != bm), default=max(widths, default=1))
    passes = max(1, sum(1 for c in calls if c.fn == "load" and c.arg("ref").base.id == "x"))
    stages = max([int(c.arg("stages").value) for c in calls if c.fn == "range" and c.has("stages")]
                 or [1])
    return Config(bm, tile, passes, int(k.option("num_warps", 4)),
                  persistent_loop(k) is not None, stages)


def estimate_config(c: Config, sizes: dict, target, p: Params = PARAMS) -> dict:
    target = as_target(target)
    prof = target.profile
    t, h = sizes["T"], sizes["H"]
    flops = task_flops(sizes)
    reason = check(c, target, p)
    if reason:
        return {"ms": math.inf, "tflops": 0.0, "bound": "illegal", "reasons": [reason],
                "features": c}
    row_blocks = math.ceil(t / c.block_m)
    grid = min(row_blocks, target.sms * 4) if c.persistent else row_blocks
    per_sm = occupancy(footprint(c.block_m, c.tile, c.num_warps, p), target)
    resident = min(grid, target.sms * per_sm)
    # compulsory traffic, plus the second pass's re-read (L2 if the rows in flight fit)
    dram = min_bytes(sizes)
    reread = (c.passes - 1) * 4.0 * t * h
    in_l2 = resident * c.block_m * h * 4.0 <= 0.5 * prof.l2_bytes
    l2 = 2.0 * h * row_blocks + (reread if in_l2 else 0.0)
    dram += 0.0 if in_l2 else reread
    # the chip streams at its copy bandwidth, or at what the SMs with work can pull; the
    # weight's L2 reads overlap the stream, a second pass's L2 re-reads add to it
    sm_bw = prof.dram_tbps * 1e12 / target.sms * p.sm_share
    rate = min(prof.dram_tbps * 1e12 * p.stream_efficiency, min(target.sms, grid) * sm_bw)
    l2_reread = reread if in_l2 else 0.0
    stream_s = max(dram / rate, (l2 - l2_reread) / (prof.l2_tbps * 1e12)) + \
        l2_reread / (prof.l2_tbps * 1e12)
    # one program's chain: per tile a DRAM round trip in the first pass and an L2 one in
    # the second (fewer when pipelined), and its bytes at one SM's bandwidth
    tiles = math.ceil(h / c.tile)
    program_s = tiles * prof.dram_latency_us * 1e-6 / c.stages + \
        (c.passes - 1) * tiles * prof.l2_latency_us * 1e-6 / c.stages + \
        c.block_m * h * (4.0 * c.passes + 4.0) / sm_bw
    waves = math.ceil(row_blocks / resident)
    compute_s = flops / (prof.fp32_tflops * 1e12)
    seconds = max(stream_s, waves * program_s, compute_s) + prof.launch_us * 1e-6
    bound = "memory" if stream_s >= waves * program_s else "latency"
    return {"ms": seconds * 1e3, "tflops": flops / seconds / 1e12, "bound": bound,
            "features": c, "reasons": [], "gbps": min_bytes(sizes) / seconds / 1e9,
            "dram_bytes": dram, "l2_bytes": l2, "resident": resident, "waves": waves}


def estimate(program: Program, sizes: dict, target, p: Params = PARAMS) -> dict:
    """Predicted milliseconds and TFLOP/s (with the task's FLOP convention) of `program`
    on `target` (a `Target`, a hardware profile or its name)."""
    return estimate_config(config(program, sizes), sizes, target, p)
