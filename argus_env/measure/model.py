"""The analytic cost model: a program's time on a GPU from its `KernelFeatures` alone.

Rollouts need thousands of throughput figures a second, deterministic and without a GPU,
so the model is plain arithmetic over the mechanisms that the H200 measurements show:

* **Compute.** Per SM, datasheet peak / SMs x an instruction efficiency (wgmma high,
  mma_v2 a fraction); for the chip, the measured cuBLAS ceiling x the share its power cap
  sustains. The chip cap binds on big problems, the per-SM rate when few SMs are busy.
* **Tile feed.** Each k step pulls (BM + BN) x BK operands from L2 into the SM; this per-SM
  bandwidth, not the tensor cores, holds small tiles back (64x64 tiles: ~330 TFLOP/s).
  Feed and MMA overlap more with TMA, warp specialization and more resident warpgroups.
  TMA moves whole boxes: rows past M arrive zero-filled but cost the feed like real ones.
* **Latency.** S pipeline stages keep S-1 loads in flight: a step lasts at least
  latency / (S-1), and S=1 exposes it fully. Latency mixes L2 and DRAM by the miss ratio;
  a TMA load waits a little longer (descriptor, mbarrier round trip).
* **DRAM.** A is re-read per tile column and B per tile row unless L2 keeps them; the tile
  order (grouped, persistent, plain 2D grid) decides what must stay. Split-K adds the
  zero-fill and read-modify-write of C.
* **Atomics.** Each thread's acq_rel atomic adds (split-K) complete one after another, and
  many times slower when N is not 16-aligned, so no vector width is provable (the H200
  table's 1000x1000x1000 split-K rows run at 4-24 TFLOP/s).
* **Waves.** The busiest SM runs ceil(tiles / SMs) tiles, `occupancy` at once (shared
  memory, registers, warps); persistent grids skip per-program start-up and, with their
  flattened loop, pipeline refills. Per-tile start-up and epilogue weigh on short K loops.
* **Swap-AB.** A dot computing the output tile transposed (`swap_ab`) runs its MMA over
  (BN x BM): the MMA's rows are the tile's N side, so a small M fills wgmma's N; the
  tile grid and the operand traffic follow the output's orientation.
* **Stream-K.** Programs share the tiles' k steps (`stream_k`): the busiest SM runs the
  main-loop trips of the busiest program as the program's own index arithmetic gives them
  (`busiest_steps`, counted on integers), over `busiest_segments` tile segments, each with
  its pipeline fill, start-up and epilogue; a tile split between programs is added into
  the zero-filled output by atomic adds (at most two such segments per program).
* **Launch.** A fixed cost per kernel (two with a zero-filled output: split-K, stream-K).

Limits that bind together join by p-norms (soft maxima). The result is asserted to stay
under the achievable compute ceiling and over the DRAM floor min_bytes / bandwidth. The
free constants are the fields of `CalibrationParams`; benchmarks/calibrate_model.py fits
them to a recorded table into configs/calibration/<profile>.json, which `estimate` uses
by default (profiles without a file keep the hand-set values).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

from .. import resources
from ..resources import Footprint, dot_footprint
from ..target import HardwareProfile, Target, as_target, available_profiles, load_profile
from .calibration import CALIBRATION_DIR, CalibrationParams, _load_params  # noqa: F401
from .features import KernelFeatures

WARP_COUNTS = (1, 2, 4, 8, 16)
MMA_RATE_SCALE = {1: 2.0, 2: 1.0, 4: 0.5}   # fp8 doubles the bf16 tensor rate, tf32 halves it


# ---------------------------------------------------------------- result
@dataclass
class Estimate:
    """The model's answer for one configuration at one shape."""

    ms: float
    tflops: float
    bound: str                     # "compute", "memory", "latency", "launch" ("illegal")
    legal: bool
    reasons: list[str]
    breakdown: dict[str, float]    # named components, ms
    occupancy: int                 # programs resident per SM

    def to_dict(self) -> dict:
        return asdict(self)


# ---------------------------------------------------------------- resources and legality
def footprint(f: KernelFeatures) -> Footprint:
    """The main loop's program as `argus_env.resources` sees it: operand ring, TMA-store
    staging, one fp32 accumulator per dot."""
    staging = f.staging_bytes if f.tma_store else 0
    text = f"{f.block_m}x{f.block_n} output staging" if staging else ""
    return dot_footprint(f.block_m, f.block_n, f.block_k, f.num_warps, f.stages,
                          max(1, f.dots), f.operand_bytes, staging, text)


def occupancy(f: KernelFeatures, target) -> int:
    """Programs resident per SM (`argus_env.resources.occupancy`)."""
    return resources.occupancy(footprint(f), as_target(target))


def legality(f: KernelFeatures, target) -> list[str]:
    """Why this configuration cannot run on `target`, one sentence per reason (empty: it can)."""
    t = as_target(target)
    reasons = []
    for dim, v in (("block_m", f.block_m), ("block_n", f.block_n), ("block_k", f.block_k)):
        if v < 16 or v & (v - 1):
            reasons.append(f"tile: {dim}={v} must be a power of two >= 16")
    if f.num_warps not in WARP_COUNTS:
        reasons.append(f"warps: num_warps={f.num_warps} is not one of {WARP_COUNTS}")
        return reasons
    reasons += resources.limits(footprint(f), t)
    mma = t.mma_reason(f.mma, f.num_warps, f.block_m)
    if mma:
        reasons.append(mma)
    if f.tma_loads or f.tma_store:
        tma = t.tma_reason(dict(f.tma_pitches))
        if tma:
            reasons.append(tma)
    if f.warp_specialize and t.warp_specialization_reason():
        reasons.append(t.warp_specialization_reason())
    return reasons


# ---------------------------------------------------------------- geometry and traffic
@dataclass(frozen=True)
class _Shape:
    """The contraction's extents, tile grid and per-step loads (elements, bytes)."""

    m: int
    n: int
    k: int
    gm: int
    gn: int
    a_step: float      # bytes of A one k step loads (masked rows cost nothing, TMA's do)
    b_step: float
    c_tile: float      # bytes of one output tile
    a_slow: bool       # operand's contiguous extent not a multiple of 16 (no vector loads)
    b_slow: bool
    c_slow: bool


def tile_mn(f: KernelFeatures) -> tuple[int, int]:
    """The output tile's rows and columns (the main dot's, transposed under swap-AB)."""
    return (f.block_n, f.block_m) if f.swap_ab else (f.block_m, f.block_n)


def _shape(f: KernelFeatures) -> _Shape:
    """M, N, K from a GEMM's sizes; for other tasks, a guess from the tile counts."""
    s = dict(f.sizes)
    tm, tn = tile_mn(f)
    if {"M", "N", "K"} <= s.keys():
        m, n, k = s["M"], s["N"], s["K"]
    else:   # another task: a square tile grid, K from the loop trips
        tiles_mn = max(1, f.tiles // max(1, f.split_k))
        side = max(1, round(math.sqrt(tiles_mn)))
        m, n = side * tm, max(1, tiles_mn // side) * tn
        k = f.k_iterations * f.block_k * f.split_k
    bk = min(f.block_k, k)
    rows, cols = min(tm, m), min(tn, n)
    mnk = {"M", "N", "K"} <= s.keys()
    plain = mnk and not f.tma_loads
    # TMA fills whole boxes: out-of-bounds rows arrive as zeros and cost the feed
    box_m, box_n = (tm, tn) if f.tma_loads else (rows, cols)
    return _Shape(m, n, k, -(-m // tm), -(-n // tn),
                  box_m * bk * f.operand_bytes * f.dots, box_n * bk * f.operand_bytes * f.dots,
                  rows * cols * f.output_bytes,
                  plain and k % 16 != 0, plain and (k if f.kmajor_b else n) % 16 != 0,
                  mnk and not f.tma_store and n % 16 != 0)


def _hit(working_set: float, l2: float, c: CalibrationParams) -> float:
    """Share of re-reads L2 serves: all below the onset, none past its capacity."""
    lo = c.l2_reuse_onset * l2
    return 1.0 if working_set <= lo else max(0.0, (l2 - working_set) / (l2 - lo))


def dram_traffic(f: KernelFeatures, sh: _Shape, p: HardwareProfile, c: CalibrationParams,
                 occ: int) -> tuple[float, float, float, float]:
    """DRAM bytes of A, B and C, and the chance that a k step waits on DRAM.

    Grouped orders (persistent grids, GROUP_M > 1) walk GROUP_M tile rows per column, so the
    tiles in flight at once form a window of rows x columns sharing their operand loads; the
    next window re-reads A only if the window's footprint outgrew L2, and the next band of
    rows re-reads B unless all of B stays. The ungrouped 2D grid (program_id(0) over M, the
    fast axis) is taken to share A between no two columns, as the H200 baselines show (they
    move A once per tile column as soon as A outgrows L2). A window's first touch of an
    operand chunk comes from DRAM, and every tile sharing it waits that long.
    """
    ob, k = f.operand_bytes, sh.k / max(1, f.split_k)
    tm, tn = tile_mn(f)
    a_all, b_all = sh.m * k * ob, k * sh.n * ob                 # one split's slice
    if not (f.persistent or f.stream_k) and f.group_m <= 1:
        a_windows, b_windows = max(1, sh.gn), 1
        a_reads, b_reads = 1 + (a_windows - 1) * (1 - _hit(a_all, p.l2_bytes, c)), 1.0
    else:
        g = max(1, min(f.group_m, sh.gm))
        walking = f.persistent or f.stream_k      # one program per SM walks the tiles
        inflight = max(1, min(f.grid_programs if walking else f.tiles, p.sms * occ))
        cols = max(1, min(sh.gn, inflight // g))
        rows = max(1, min(sh.gm, g * max(1, inflight // (g * max(1, sh.gn)))))
        window = (rows * min(tm, sh.m) + cols * min(tn, sh.n)) * k * ob
        a_windows, b_windows = max(1, -(-sh.gn // cols)), max(1, -(-sh.gm // rows))
        a_reads = 1 + (a_windows - 1) * (1 - _hit(window, p.l2_bytes, c))
        b_reads = 1 + (b_windows - 1) * (1 - _hit(b_all, p.l2_bytes, c))
    miss = 1.0 - (1.0 - min(1.0, a_reads / a_windows)) * (1.0 - min(1.0, b_reads / b_windows))
    c_bytes = sh.m * sh.n * f.output_bytes * (3 if f.atomic_output else 1)
    if f.reduce_pass:   # every split's partial sums written to the workspace
        c_bytes *= max(1, f.split_k)
    if f.stream_k:   # zero-filled, stored, and the split tiles read and written again
        c_bytes += sh.m * sh.n * f.output_bytes + \
            2 * _split_tiles(f) * sh.c_tile
    elif f.zero_filled and not f.atomic_output:
        c_bytes += sh.m * sh.n * f.output_bytes
    return sh.m * sh.k * ob * a_reads, sh.k * sh.n * ob * b_reads, c_bytes, miss


# ---------------------------------------------------------------- the estimate
def _mma_rate(f: KernelFeatures, p: HardwareProfile, c: CalibrationParams) -> tuple[float, float]:
    """(per-SM, whole-chip) MMA rates in FLOP per microsecond."""
    scale = MMA_RATE_SCALE.get(f.operand_bytes, 1.0)
    chip = p.bf16_tflops_achievable * 1e6 * c.sustained_fraction * scale
    if f.mma == "wgmma":
        per_sm = p.bf16_tflops_peak * 1e6 / p.sms * c.wgmma_efficiency * scale
    elif f.mma == "mma_v2":
        per_sm = p.bf16_tflops_peak * 1e6 / p.sms * c.mma_v2_efficiency * scale
    else:   # plain FMA on the CUDA cores
        per_sm, chip = p.fp32_tflops * 1e6 / p.sms, min(chip, p.fp32_tflops * 1e6)
    return per_sm, chip


def _waves(f: KernelFeatures, p: HardwareProfile, occ: int) -> tuple[int, int]:
    """(tiles on the busiest SM, programs it runs at once)."""
    if f.persistent:
        programs = max(1, f.grid_programs)
        slots = min(programs, p.sms * occ)                 # programs resident at once
        per_sm, rounds = -(-slots // p.sms), -(-programs // slots)
        return -(-f.tiles // programs) * per_sm * rounds, per_sm
    n = -(-f.tiles // p.sms)
    return n, max(1, min(occ, n))


def _split_tiles(f: KernelFeatures) -> int:
    """Stream-K's tiles split between programs: at most one per program boundary."""
    return min(f.tiles, max(0, f.grid_programs - 1)) if f.stream_k else 0


def _combine(a: float, b: float, hidden: float) -> float:
    """Two concurrent activities of which `hidden` of the shorter overlaps the longer."""
    return max(a, b) + (1.0 - hidden) * min(a, b)


def _sm_time(f: KernelFeatures, p: HardwareProfile, c: CalibrationParams, sh: _Shape,
             occ: int, miss: float) -> dict[str, float]:
    """Busiest SM's time (us): throughput-bound (n x work) or latency-bound (rounds x chain)."""
    n, conc = _waves(f, p, occ)
    per_sm, _ = _mma_rate(f, p, c)
    bw = p.l2_tbps * 1e6 / p.sms                                   # bytes per us per SM
    step_flops = 2.0 * f.block_m * f.block_n * f.block_k * f.dots
    t_mma = step_flops / (per_sm * min(1.0, f.num_warps / 4))
    t_mma_sm = step_flops / (per_sm * min(1.0, conc * f.num_warps / 4))
    t_feed = (sh.a_step / (c.unaligned_feed if sh.a_slow else 1.0)
              + sh.b_step / (c.unaligned_feed if sh.b_slow else 1.0)) / bw
    hidden = c.overlap_plain + (1 - c.overlap_plain) * 0.5 * (f.tma_loads + f.warp_specialize)
    latency = (p.l2_latency_us + (p.dram_latency_us - p.l2_latency_us) * miss) * c.latency_scale \
        + (c.tma_latency_us if f.tma_loads else 0.0)
    groups = f.num_warps / 4                              # warpgroups overlap each other
    step = _combine(t_mma, t_feed, 1 - (1 - hidden) / max(1.0, groups)) + c.step_overhead_us
    if f.stages >= 2:
        chain_step, waits = max(step, latency / (f.stages - 1)), latency / (f.stages - 1) > step
    else:
        chain_step, waits = latency + t_mma + t_feed, True
    epilogue = sh.c_tile / bw / (c.atomic_feed if f.atomic_output else 1.0) \
        / (c.unaligned_feed if sh.c_slow else 1.0)
    atomics = 0.0                  # each thread's atomic adds, one after another
    if f.atomic_output:
        atomics = sh.c_tile / f.output_bytes / (32 * f.num_warps) * c.atomic_us \
            * (c.unaligned_atomic if sh.c_slow else 1.0)
    if f.stream_k:
        return _stream_k_time(f, p, c, sh, occ, t_mma, t_feed, hidden, groups, chain_step,
                              latency, epilogue, waits)
    per_tile = 0.0 if f.persistent else c.program_overhead_us
    fill = 0.0 if f.persistent else latency              # flattened loops keep the pipe full
    k = f.k_iterations
    work = k * (_combine(t_mma_sm, t_feed, 1 - (1 - hidden) / max(1.0, conc * groups))
                + c.step_overhead_us / conc) + epilogue + per_tile + atomics / conc
    chain = fill + k * chain_step + epilogue + per_tile + atomics
    start = c.program_overhead_us if f.persistent else 0.0
    return {"busy": n * work, "latency": -(-n // conc) * chain + start,
            "compute": n * k * t_mma_sm, "feed": n * k * t_feed,
            "overhead": n * (epilogue + per_tile + atomics / conc) + start, "waits": waits}


def _stream_k_time(f: KernelFeatures, p: HardwareProfile, c: CalibrationParams, sh: _Shape,
                   occ: int, t_mma: float, t_feed: float, hidden: float, groups: float,
                   chain_step: float, latency: float, epilogue: float, waits: bool) -> dict:
    """The busiest SM of a stream-K launch (us): the main-loop trips of the busiest
    program (times the programs an SM runs, where there are more than SMs), each tile
    segment paying start-up, pipeline fill and epilogue, and at most two segments per
    program finished by atomic adds into the zero-filled output."""
    stack = -(-max(1, f.grid_programs) // p.sms)          # programs one SM runs
    conc = max(1, min(occ, stack))                          # of them at once
    steps = max(1, f.busiest_steps) * stack
    segments = max(1, f.busiest_segments) * stack
    split = min(2 * stack, segments)                        # segments added atomically
    bw = p.l2_tbps * 1e6 / p.sms
    fixup = split * sh.c_tile / bw / c.atomic_feed
    if c.atomic_us:
        fixup += split * sh.c_tile / f.output_bytes / (32 * f.num_warps) * c.atomic_us
    step = _combine(t_mma, t_feed, 1 - (1 - hidden) / max(1.0, conc * groups)) \
        + c.step_overhead_us / conc
    per_segment = epilogue + c.program_overhead_us
    chain = segments * latency + steps * chain_step + segments * per_segment + fixup
    return {"busy": steps * step + segments * per_segment + fixup / conc,
            "latency": chain / conc + c.program_overhead_us,
            "compute": steps * t_mma, "feed": steps * t_feed,
            "overhead": segments * per_segment + fixup, "waits": waits}


def _pnorm(a: float, b: float, p: float) -> float:
    """A soft maximum: two limits that bind together cost more than the larger alone."""
    hi = max(a, b)
    return hi * (1.0 + (min(a, b) / hi) ** p) ** (1.0 / p) if hi > 0 else 0.0


def estimate(f: KernelFeatures, target: Target | HardwareProfile,
             params: CalibrationParams | None = None) -> Estimate:
    """Predicted time and throughput of `f` on `target` (see the module docstring), with
    `params` or else the target's calibrated constants."""
    t = as_target(target)
    c, p = params or CalibrationParams.load(t.name), t.profile
    reasons = legality(f, t)
    occ = resources.occupancy(footprint(f), t)
    if reasons or occ < 1:
        reasons = reasons or [f"occupancy: no program fits on one SM of {p.name}"]
        return Estimate(math.inf, 0.0, "illegal", False, reasons, {}, occ)
    sh = _shape(f)
    *dram, miss = dram_traffic(f, sh, p, c, occ)
    sm = _sm_time(f, p, c, sh, occ, miss)
    _, chip_rate = _mma_rate(f, p, c)
    executed = max(f.flops, 2.0 * f.block_m * f.block_n * f.block_k * f.dots
                   * f.tiles * f.k_iterations)    # stream-K: the same k steps, shared out
    t_chip = executed / chip_rate
    floor_us = f.min_bytes / (p.dram_tbps * 1e6)
    t_dram = max(sum(dram) / (p.dram_tbps * 1e6 * c.dram_efficiency), floor_us)
    t_body = _pnorm(max(sm["busy"], sm["latency"]), t_chip, c.chip_overlap_p)
    t_kernel = _pnorm(t_body, t_dram, c.memory_overlap_p)
    # split-K and stream-K zero-fill C first; a reduction pass is a launch of its own that
    # reads the workspace back and writes C (DRAM-bound, and a DRAM round trip to start)
    launch = p.launch_us * (2 if f.atomic_output or f.zero_filled else 1) \
        + p.launch_us * (max(1, f.launches) - 1)
    t_reduce = 0.0
    if f.reduce_pass:
        t_reduce = f.reduce_bytes / (p.dram_tbps * 1e6 * c.dram_efficiency) + p.dram_latency_us
        t_dram += t_reduce
    ms = (t_kernel + t_reduce + launch) / 1e3
    tflops = f.flops / ms / 1e9
    ceiling = p.bf16_tflops_achievable * MMA_RATE_SCALE.get(f.operand_bytes, 1.0)
    assert tflops <= ceiling * (1 + 1e-9), f"model above the compute ceiling: {tflops} > {ceiling}"
    assert ms * 1e3 >= floor_us * (1 - 1e-9), f"model below the DRAM floor: {ms} ms"
    breakdown = {"compute": max(t_chip, sm["compute"]) / 1e3, "l2_feed": sm["feed"] / 1e3,
                 "dram": t_dram / 1e3, "latency": sm["latency"] / 1e3,
                 "tile_overhead": sm["overhead"] / 1e3, "launch": launch / 1e3, "total": ms}
    return Estimate(ms, tflops, _bound(breakdown, t_kernel, t_chip, sm), True, [], breakdown, occ)


def _bound(b: dict[str, float], t_kernel_us: float, t_chip_us: float, sm: dict) -> str:
    """The limiter: launch if it outweighs the kernel, else the largest on-chip/DRAM term."""
    if b["launch"] * 1e3 >= t_kernel_us:
        return "launch"
    if b["dram"] >= max(sm["busy"], sm["latency"], t_chip_us) / 1e3:
        return "memory"
    if t_chip_us >= max(sm["busy"], sm["latency"]):
        return "compute"
    if sm["latency"] > sm["busy"] and sm["waits"]:
        return "latency"
    return "compute" if sm["compute"] >= sm["feed"] else "memory"


DEFAULT_PARAMS = CalibrationParams()   # hand-set; `estimate` uses CalibrationParams.load

__all__ = ["HardwareProfile", "CalibrationParams", "Estimate", "load_profile",
           "available_profiles", "legality", "occupancy", "footprint", "dram_traffic",
           "estimate", "DEFAULT_PARAMS", "CALIBRATION_DIR"]
