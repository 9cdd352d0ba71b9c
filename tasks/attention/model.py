"""An analytic cost model of flash-attention forward programs, calibrated on the H200 table.

One program handles BM query rows of one head and walks key blocks of BN. Each step costs
two tensor-core products (QK^T and PV, 4*BM*BN*D flops) and a softmax over BM*BN scores on
the CUDA cores; the two overlap only partly (that is what FA3's ping-pong improves on).
Causal programs that skip the blocks after their diagonal do about half the steps; those
that do not still pay for every step. Programs run in waves over the SMs, several at once
where shared memory and registers allow. The free constants are fitted by
`benchmarks/calibrate_attention_model.py` against `tasks/attention/table_h200.csv`.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, replace
from pathlib import Path

from argus_env.dsl.program import Program
from argus_env.ir import nodes as ir
from argus_env.ir.rewrite import walk

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


def features(program: Program) -> AttnFeatures:
    """The choices a program made, read off its IR."""
    k = program.kernel
    consts = k.consts
    calls = [n for n in walk(k) if isinstance(n, ir.Call)]
    loops = [n for n in walk(k) if isinstance(n, ir.For) and n.iter.fn == "range"]
    stages = next((n.iter.arg("stages").value for n in loops if n.iter.has("stages")), 2)
    return AttnFeatures(
        int(consts.get("BM", 64)), int(consts.get("BN", 64)), int(k.option("num_warps", 4)),
        int(stages), any(c.fn == "exp2" for c in calls), len(loops) > 1,
        any(c.fn == "load" and isinstance(c.arg("tma"), ir.Const) and c.arg("tma").value for c in calls))


def estimate(program: Program, sizes: dict, profile, params: Params | None = None) -> dict:
    """Predicted milliseconds and TFLOP/s (with the task's FLOP convention)."""
    return estimate_features(features(program), sizes, profile, params or _default())


_PARAMS: list = []


def _default() -> Params:
    if not _PARAMS:
        _PARAMS.append(Params.load())
    return _PARAMS[0]


def estimate_features(f: AttnFeatures, sizes: dict, profile, p: Params) -> dict:
    b, h, sq, sk, d = (sizes[x] for x in ("B", "H", "SQ", "SK", "D"))
    causal = bool(sizes.get("CAUSAL", 0))
    q_blocks = math.ceil(sq / f.block_m)
    steps_full = math.ceil(sk / f.block_n)
    # average key blocks a program visits
    steps = (steps_full + 1) / 2 + f.block_m / f.block_n / 2 if causal and f.skip_blocks else steps_full
    wgmma = f.num_warps % 4 == 0 and f.block_m >= 64
    rate = profile.bf16_tflops_achievable * 1e12 / profile.sms  # flop/s per SM
    mma_s = 4.0 * f.block_m * f.block_n * d / (rate * (p.mma_efficiency if wgmma else p.mma_v2_efficiency))
    soft_s = f.block_m * f.block_n / 1000 * p.softmax_ns_per_kelem * 1e-9 * \
        (1.0 if f.exp2 else p.exp_penalty) * (4 / f.num_warps) ** 0.5
    step_s = max(mma_s, soft_s) + (1 - p.overlap) * min(mma_s, soft_s)
    overhead = p.step_overhead_ns * 1e-9 * (p.tma_gain if f.tma else 1.0) * \
        p.stage_gain ** max(f.stages - 1, 0) * (p.small_block_penalty if f.block_n <= 32 else 1.0)
    per_program = steps * (step_s + overhead)
    smem = f.block_m * d * 2 + f.stages * 2 * f.block_n * d * 2
    resident = max(1, min(profile.smem_per_sm // max(smem, 1), 2048 // (32 * f.num_warps)))
    programs = q_blocks * b * h
    waves = programs / (profile.sms * resident)
    # resident programs share an SM: a wave takes `resident` programs' work
    seconds = math.ceil(waves) * per_program * resident if waves >= 1 else per_program * \
        math.ceil(programs / profile.sms)
    seconds += profile.launch_us * 1e-6
    flops = 4.0 * b * h * sq * sk * d / (2 if causal else 1)
    floor = flops / (profile.bf16_tflops_achievable * 1e12)
    seconds = max(seconds, floor)
    return {"ms": seconds * 1e3, "tflops": flops / seconds / 1e12, "features": asdict(f),
            "steps": steps, "resident": resident, "bound": "softmax" if soft_s > mma_s else "compute"}
