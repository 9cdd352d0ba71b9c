"""An analytic cost model of flash-attention forward programs, calibrated on the H200 table.

One program handles BM query rows of one head and walks key blocks of BN. Each step costs
two tensor-core products (QK^T and PV, 4*BM*BN*D flops) and a softmax over BM*BN scores on
the CUDA cores; the two overlap only partly (that is what FA3's ping-pong improves on).
Causal programs that skip the blocks after their diagonal do about half the steps; those
that do not still pay for every step. Programs run in waves over the SMs, several at once
where shared memory and registers allow. The free constants are fitted by
`benchmarks/calibrate_attention_model.py` against `tasks/attention/table_h200.csv`.

The program-structure knobs' constants were set against the H200 timings of the expert
with each knob turned (`benchmarks/attention_suite.py --structure`,
`tasks/attention/table_structure_h200.csv`, 64 programs at 10 shapes: mean |log error|
0.109 with the published-kernel guesses, 0.078 after a grid search over the five below,
the persistent factor then raised from 1.03 to 1.10 so that its sign matches the GPU).
On that GPU with Triton 3.6 lazy rescaling costs rather than saves (its branch and extra
row reductions outweigh the skipped multiply), warp specialization changes nothing, and
a persistent tile is slightly slower; the terms:

- lazy rescaling (FA4) skips the accumulator's BM x D multiply in most key blocks: the
  softmax side shrinks by `lazy_gain` (the rescale's share of the elementwise work, about
  D / (5 BN + D) of it, times the share of blocks that skip it);
- Q reloaded per key block moves BM x D bf16 through L2 every step (`l2_bytes_per_ns`
  per SM, partly hidden by the pipeline), but frees the registers Q held on the mma_v2
  path (wgmma reads Q from shared memory, as the H200 table's 128x64 4-warp programs
  suggest: no spill cliff): when Q in registers pushes the estimate past 255 registers
  there, the program pays `spill_penalty`;
- warp specialization lets producer warps feed the consumers, so the MMA and softmax
  overlap more (`ws_overlap`) and the per-step overhead drops (`ws_overhead`);
- a persistent grid starts one program per SM: its tiles fill the SMs without whole-wave
  quantization, and a tile's start-up overlaps the previous one's epilogue
  (`persistent_gain`);
- GQA packing gives a program BM // GROUP query positions of GROUP heads: the same MMA
  work and the same K/V blocks per tile (so no change in L2 traffic per output row is
  modelled; the better L2 locality of a KV head read by one program is not), but causal
  programs waste less above their diagonal (the masked band is max(BM // GROUP, BN) keys
  wide, not BM), and short sequences fill their tiles.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, replace
from pathlib import Path

from argus_env import resources
from argus_env.dsl.program import Program
from argus_env.ir import nodes as ir
from argus_env.ir.live import _range_args, depends_on_position, live_program, persistent_loop
from argus_env.ir.rewrite import walk
from argus_env.resources import Footprint
from argus_env.target import as_target

#: registers per thread besides the loop's fp32 values: the generic overhead plus the row
#: statistics (running maximum, row sum, rescale factor) and the key-loop indices
REGISTER_OVERHEAD = 48
DEFAULT_STAGES = 2            # the K/V pipeline depth priced where the loop names none

CALIBRATION = Path(__file__).resolve().parents[2] / "configs" / "calibration" / "attention_h200.json"


@dataclass(frozen=True)
class Params:
    mma_efficiency: float = 0.75        # of the profile's achievable tensor-core rate, wgmma
    mma_v2_efficiency: float = 0.45
    softmax_ns_per_kelem: float = 0.60  # per 1000 scores per SM, exp2 (exp costs `exp_penalty` more)
    exp_penalty: float = 1.25
    overlap: float = 0.45               # share of the shorter of MMA/softmax hidden under the longer
    step_overhead_ns: float = 60.0      # per key block: barriers, address arithmetic
    tma_gain: float = 0.90              # factor on the step overhead with TMA loads
    stage_gain: float = 0.93            # factor per pipeline stage beyond the first (on overhead)
    small_block_penalty: float = 1.25   # BN = 32 steps: more steps, less work each
    # program-structure knobs: grid-searched on table_structure_h200.csv (module doc)
    lazy_gain: float = -0.2             # share of softmax time saved by lazy rescaling (< 0: added)
    l2_bytes_per_ns: float = 40.0       # L2 bandwidth per SM (~5.5 TB/s over 132 SMs)
    reload_hidden: float = 0.85         # share of a per-step Q reload hidden by the pipeline
    spill_penalty: float = 1.3          # factor on a step whose registers spill
    ws_overlap: float = 0.45            # MMA/softmax overlap with warp specialization
    ws_overhead: float = 1.0            # factor on the step overhead with warp specialization
    persistent_gain: float = 1.10       # factor on a persistent tile (no wave quantization, but slower tiles)

    @classmethod
    def load(cls) -> "Params":
        if CALIBRATION.exists():
            data = json.loads(CALIBRATION.read_text())["params"]
            return replace(cls(), **data)
        return cls()


@dataclass(frozen=True)
class AttnFeatures:
    block_m: int
    block_n: int
    num_warps: int
    stages: int
    exp2: bool
    skip_blocks: bool
    tma: bool
    lazy_rescale: bool = False
    q_in_registers: bool = True
    warp_specialize: bool = False
    persistent: bool = False
    gqa_pack: bool = False
    mma: tuple[str | None, ...] = (None,)   # the products' `mma=` choices (None: the target's)


def footprint(block_m: int, block_n: int, head_dim: int, num_warps: int, stages: int,
              tma: bool) -> Footprint:
    """One program: a ring of K and V blocks, the Q tile (and with TMA the O tile's store
    staging) held throughout, the fp32 accumulator and scores live across the key loop."""
    staging = block_m * head_dim * 2 if tma else 0
    return Footprint(num_warps, stages, 2 * block_n * head_dim * 2,
                     resident_bytes=block_m * head_dim * 2 + staging,
                     fp32_values=block_m * head_dim + block_m * block_n,
                     register_overhead=REGISTER_OVERHEAD, stage_text=f"K,V {block_n}x{head_dim}",
                     dtype_text="bf16", resident_text=f"Q {block_m}x{head_dim}"
                     + (f" + O {block_m}x{head_dim} staging" if tma else ""),
                     values_text=f"accumulator {block_m}x{head_dim} and scores "
                                 f"{block_m}x{block_n}")


def hardware_reasons(f: "AttnFeatures", head_dim: int, target) -> list[str]:
    """What the target refuses of these choices (the space's hardware preconditions)."""
    t = as_target(target)
    reasons = resources.limits(footprint(f.block_m, f.block_n, head_dim, f.num_warps, f.stages,
                                         f.tma), t)
    if f.tma and t.tma_reason({"q": head_dim * 2}):
        reasons.append(t.tma_reason({"q": head_dim * 2}))
    if f.warp_specialize and t.warp_specialization_reason():
        reasons.append(t.warp_specialization_reason())
    for mma in f.mma:
        reason = t.mma_reason(t.mma_of(mma, f.num_warps, f.block_m), f.num_warps, f.block_m)
        if reason:
            reasons.append(reason)
    return reasons


def features(program: Program, sizes: dict | None = None, sms: int | None = None
             ) -> AttnFeatures:
    """The choices a program made, read off the IR of what it executes at `sizes`
    (`argus_env.ir.live`; the whole program when None): causal block skipping is a key
    loop whose bound follows the program's position (the diagonal), persistence a loop
    over tiles strided by the grid size, a program without a dot works on the CUDA cores."""
    if sizes is not None:
        program = live_program(program, sizes, sms)
    k = program.kernel
    consts = k.consts
    calls = [n for n in walk(k) if isinstance(n, ir.Call)]
    loops = [n for n in walk(k) if isinstance(n, ir.For) and n.iter.fn == "range"]
    # key loops hold the products and no loop of their own (a persistent tile loop holds both)
    key_loops = [n for n in loops if any(isinstance(x, ir.Call) and x.fn == "dot" for x in walk(n))
                 and not any(isinstance(x, ir.For) for x in walk(n) if x is not n)]
    stages = next((n.iter.arg("stages").value for n in loops if n.iter.has("stages")),
                  DEFAULT_STAGES)
    mmas = tuple(sorted({c.arg("mma").name if isinstance(c.arg("mma"), ir.Symbol) else None
                         for c in calls if c.fn == "dot"}, key=str)) or ("fma",)
    q_loads = [x for n in key_loops for x in walk(n) if isinstance(x, ir.Call) and x.fn == "load"
               and _tensor(x) == "q"]
    grid = next((c for c in calls if c.fn == "grid"), None)
    block_m, block_n = _tile(program, key_loops, consts)
    return AttnFeatures(
        block_m, block_n, int(k.option("num_warps", 4)),
        int(stages), any(c.fn == "exp2" for c in calls),
        any(depends_on_position(k, bound) for n in key_loops for bound in _range_args(n.iter)[:2]),
        any(c.fn == "load" and isinstance(c.arg("tma"), ir.Const) and c.arg("tma").value for c in calls),
        lazy_rescale=any(isinstance(n, ir.If) and any(isinstance(x, ir.Call) and x.fn == "max"
                                                       for x in walk(n.cond))
                         for n in walk(k)),
        q_in_registers=not q_loads,
        warp_specialize=any(n.iter.has("warp_specialize") and isinstance(n.iter.arg("warp_specialize"), ir.Const)
                            and n.iter.arg("warp_specialize").value for n in loops),
        persistent=persistent_loop(k) is not None,
        gqa_pack=grid is not None and any(getattr(x, "name", getattr(x, "id", None)) == "KVH"
                                          for x in walk(grid)),
        mma=mmas)


def _tile(program: Program, key_loops: list, consts: dict) -> tuple[int, int]:
    """(query rows, keys) of one step of the key loop, read off the shapes of its dots (the
    type check's): the rows of the scores' product and the dimension that product's output
    and the next product's contraction share (S = Q K^T is rows x keys, P V contracts the
    keys). Not the names `BM` and `BN`, which a program may declare for anything: those
    only for a program without a dot (its products on the CUDA cores)."""
    from argus_env.measure.features import _MainDot
    finder = _MainDot(program)
    finder.block(program.kernel.body[1:], finder.typer.initial_scope(), depth=0, loop=None)
    dots = [d for d in finder.dots if any(d["for"] is n for n in key_loops)] or finder.dots
    if not dots:
        return int(consts.get("BM", 64)), int(consts.get("BN", 64))
    shapes = [d["shape"] for d in dots]   # (m, k, n) of each product
    keys = next((a[2] for a in shapes for b in shapes if a is not b and a[2] == b[1]),
                shapes[0][2])
    return int(shapes[0][0]), int(keys)


def _tensor(load: ir.Call) -> str | None:
    ref = load.arg("ref")
    return ref.base.id if isinstance(ref, ir.Subscript) and isinstance(ref.base, ir.Name) else None


def estimate(program: Program, sizes: dict, target, params: Params | None = None) -> dict:
    """Predicted milliseconds and TFLOP/s (with the task's FLOP convention) on `target`
    (a `Target`, a hardware profile or its name)."""
    return estimate_features(features(program, sizes, as_target(target).sms), sizes, target,
                             params or _default())


_PARAMS: list = []


def _default() -> Params:
    if not _PARAMS:
        _PARAMS.append(Params.load())
    return _PARAMS[0]


def estimate_features(f: AttnFeatures, sizes: dict, target, p: Params) -> dict:
    b, h, sq, sk, d = (sizes[x] for x in ("B", "H", "SQ", "SK", "D"))
    target = as_target(target)
    profile = target.profile
    reasons = hardware_reasons(f, d, target)
    if reasons:
        return {"ms": math.inf, "tflops": 0.0, "bound": "illegal", "features": asdict(f),
                "reasons": reasons}
    kvh = sizes.get("KVH", h)
    group = max(1, h // max(kvh, 1))
    causal = bool(sizes.get("CAUSAL", 0))
    packed = f.gqa_pack and group > 1 and f.block_m % group == 0
    span = f.block_m // group if packed else f.block_m     # query positions per program
    q_blocks = math.ceil(sq / span)
    steps_full = math.ceil(sk / f.block_n)
    # average key blocks a program visits
    steps = (steps_full + 1) / 2 + max(span, f.block_n) / f.block_n / 2 \
        if causal and f.skip_blocks else steps_full
    used = {target.mma_of(m, f.num_warps, f.block_m) for m in f.mma}
    mma = "fma" if "fma" in used else ("mma_v2" if "mma_v2" in used else "wgmma")  # the slowest
    wgmma = mma == "wgmma"
    rate = profile.bf16_tflops_achievable * 1e12 / profile.sms  # flop/s per SM
    if mma == "fma":   # no tensor cores: the CUDA cores' fp32 rate
        rate, efficiency = profile.fp32_tflops * 1e12 / profile.sms, 1.0
    else:
        efficiency = p.mma_efficiency if wgmma else p.mma_v2_efficiency
    mma_s = 4.0 * f.block_m * f.block_n * d / (rate * efficiency)
    soft_s = f.block_m * f.block_n / 1000 * p.softmax_ns_per_kelem * 1e-9 * \
        (1.0 if f.exp2 else p.exp_penalty) * (4 / f.num_warps) ** 0.5
    if f.lazy_rescale:
        soft_s *= 1 - p.lazy_gain
    overlap = max(p.overlap, p.ws_overlap) if f.warp_specialize else p.overlap
    step_s = max(mma_s, soft_s) + (1 - overlap) * min(mma_s, soft_s)
    overhead = p.step_overhead_ns * 1e-9 * (p.tma_gain if f.tma else 1.0) * \
        p.stage_gain ** max(f.stages - 1, 0) * (p.small_block_penalty if f.block_n <= 32 else 1.0) * \
        (p.ws_overhead if f.warp_specialize else 1.0)
    fp = footprint(f.block_m, f.block_n, d, f.num_warps, f.stages, f.tma)
    regs = resources.registers_per_thread(fp)
    if f.q_in_registers:
        # wgmma reads Q from shared memory; the mma_v2 path holds it in registers
        regs += 0 if wgmma else f.block_m * d // (64 * f.num_warps)   # bf16, two per register
        if regs > target.max_regs_per_thread:
            step_s *= p.spill_penalty
    else:
        overhead += f.block_m * d * 2 / p.l2_bytes_per_ns * 1e-9 * (1 - p.reload_hidden)
    per_program = steps * (step_s + overhead)
    resident = resources.occupancy(fp, target)
    programs = q_blocks * b * (kvh if packed else h)
    slots = profile.sms * resident
    waves = programs / slots
    if f.persistent and waves >= 1:
        # one program per SM walks the tiles: the last wave is as long as its share of
        # tiles, and a tile's start-up overlaps the previous tile's epilogue
        seconds = waves * per_program * resident * p.persistent_gain
    elif waves >= 1:
        # resident programs share an SM: a wave takes `resident` programs' work
        seconds = math.ceil(waves) * per_program * resident
    else:
        seconds = per_program * math.ceil(programs / profile.sms)
    seconds += profile.launch_us * 1e-6
    flops = 4.0 * b * h * sq * sk * d / (2 if causal else 1)
    floor = flops / (profile.bf16_tflops_achievable * 1e12)
    seconds = max(seconds, floor)
    return {"ms": seconds * 1e3, "tflops": flops / seconds / 1e12, "features": asdict(f),
            "steps": steps, "resident": resident, "bound": "softmax" if soft_s > mma_s else "compute"}
