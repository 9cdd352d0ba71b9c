"""What one program holds on an SM, and whether it fits a `Target`: the one estimate of
shared memory, registers and occupancy that the action preconditions and the cost
models share.

A `Footprint` describes one program of a kernel: its warps, the operand tiles one
pipeline stage holds, what it keeps for its whole life (a Q tile, TMA-store staging)
and the fp32 values it carries across the loop (accumulators, scores). Each figure has
its own function (`shared_memory_bytes`, `registers_per_thread`, `occupancy`), so that a
compiler's figures for the same program can be set against each one; `limits` says why
a footprint does not fit a target.
"""

from __future__ import annotations

from dataclasses import dataclass

from .target import Target

BARRIER_BYTES_PER_STAGE = 8   # one mbarrier per pipeline stage (Triton's 262176 B = 4 stages)
REGISTER_OVERHEAD = 40        # registers per thread besides the loop's fp32 values
REGISTER_GRANULE = 8          # registers are allocated per thread in multiples of this
DTYPE_NAMES = {1: "fp8", 2: "bf16", 4: "fp32"}


@dataclass(frozen=True)
class Footprint:
    """One program's demand on an SM. The `*_text` fields name the parts for messages."""

    num_warps: int
    stages: int                   # software-pipelining depth (operand buffers in the ring)
    stage_bytes: int              # shared memory of one stage: every tile it loads
    resident_bytes: int = 0       # shared memory held outside the ring
    scratch_bytes: int = 0        # shared memory used once the ring is free (an
                                  # epilogue's layout conversion): the larger of the two
    fp32_values: int = 0          # fp32 elements live across the loop, the whole program's
    register_overhead: int = REGISTER_OVERHEAD
    stage_text: str = ""          # "64x32 + 32x64"
    dtype_text: str = ""          # the operands' element type, "bf16"
    resident_text: str = ""       # "64x64 output staging"
    values_text: str = ""         # "the 64x64 fp32 accumulator"
    scratch_text: str = ""        # "64x64 bf16 atomic-add conversion"

    def __post_init__(self):
        if self.num_warps < 1 or self.stages < 1:
            raise ValueError(f"a footprint needs at least one warp and one stage, got "
                             f"{self.num_warps} warps and {self.stages} stages")


def dot_footprint(block_m: int, block_n: int, block_k: int, num_warps: int, stages: int,
                   dots: int = 1, operand_bytes: int = 2, staging_bytes: int = 0,
                   staging_text: str = "") -> Footprint:
    """A contraction's program: per stage one (BM x BK) A tile shared by `dots` products
    and a (BK x BN) B tile for each, `dots` fp32 (BM x BN) accumulators, and
    `staging_bytes` of TMA-store staging."""
    dt = DTYPE_NAMES.get(operand_bytes, f"{operand_bytes}-byte")
    b = f"{dots} x {block_k}x{block_n}" if dots > 1 else f"{block_k}x{block_n}"
    accs = (f"{dots} fp32 accumulators of {block_m}x{block_n}" if dots > 1
            else f"the {block_m}x{block_n} fp32 accumulator")
    return Footprint(num_warps, stages,
                     (block_m * block_k + dots * block_k * block_n) * operand_bytes,
                     resident_bytes=staging_bytes, fp32_values=dots * block_m * block_n,
                     stage_text=f"{block_m}x{block_k} + {b}", dtype_text=dt,
                     resident_text=staging_text, values_text=accs)


def shared_memory_bytes(fp: Footprint) -> int:
    """Shared memory one program allocates: the operand ring with an mbarrier per stage,
    or the scratch used after the loop where that is larger (the compiler reuses the
    ring's memory), plus what it holds outside the ring."""
    ring = fp.stages * fp.stage_bytes + BARRIER_BYTES_PER_STAGE * fp.stages
    return max(ring, fp.scratch_bytes) + fp.resident_bytes


def registers_per_thread(fp: Footprint) -> int:
    """The program's fp32 values spread over its threads, plus the fixed overhead."""
    return fp.fp32_values // (32 * fp.num_warps) + fp.register_overhead


def occupancy(fp: Footprint, target: Target) -> int:
    """Programs resident per SM, limited by blocks, warps, registers and shared memory."""
    threads = 32 * fp.num_warps
    regs = -(-registers_per_thread(fp) // REGISTER_GRANULE) * REGISTER_GRANULE
    return max(0, min(target.max_blocks_per_sm, target.max_warps_per_sm // fp.num_warps,
                      target.regs_per_sm // (regs * threads),
                      target.smem_per_sm // (shared_memory_bytes(fp)
                                             + target.smem_reserved_per_block)))


def limits(fp: Footprint, target: Target) -> list[str]:
    """Why `fp` cannot run on `target`, one sentence per limit it exceeds (empty: it fits)."""
    reasons = []
    smem = shared_memory_bytes(fp)
    ring = fp.stages * fp.stage_bytes + BARRIER_BYTES_PER_STAGE * fp.stages
    if smem > target.smem_per_block and fp.scratch_bytes > ring:
        reasons.append(f"shared memory: {fp.scratch_text or f'{fp.scratch_bytes} B scratch'}"
                       + (f" + {fp.resident_text or f'{fp.resident_bytes} B'}"
                          if fp.resident_bytes else "")
                       + f" = {smem} B > {target.smem_per_block} B per block on {target.name}")
    elif smem > target.smem_per_block:
        parts = [f"{fp.stages} stages x ({fp.stage_text}) {fp.dtype_text}".rstrip()
                 if fp.stage_text else f"{fp.stages} stages x {fp.stage_bytes} B"]
        if fp.resident_bytes:
            parts.append(fp.resident_text or f"{fp.resident_bytes} B")
        parts.append(f"{BARRIER_BYTES_PER_STAGE * fp.stages} B barriers")
        reasons.append(f"shared memory: {' + '.join(parts)} = {smem} B > "
                       f"{target.smem_per_block} B per block on {target.name}")
    regs = registers_per_thread(fp)
    if regs > target.max_regs_per_thread:
        what = fp.values_text or f"{fp.fp32_values} fp32 values"
        reasons.append(f"registers: {what} over {32 * fp.num_warps} threads needs "
                       f"{regs - fp.register_overhead} registers per thread "
                       f"(+{fp.register_overhead} overhead = {regs}) > "
                       f"{target.max_regs_per_thread} on {target.name}")
    if not reasons and occupancy(fp, target) < 1:
        reasons.append(f"occupancy: no program of {fp.num_warps} warps fits on one SM of "
                       f"{target.name}")
    return reasons


__all__ = ["Footprint", "dot_footprint", "shared_memory_bytes", "registers_per_thread",
           "occupancy", "limits", "BARRIER_BYTES_PER_STAGE", "REGISTER_OVERHEAD"]
