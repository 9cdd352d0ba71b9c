"""The fragment policy of an MMA accumulator, shared by both interpreters: which
instruction (and so which thread-value layout) a `dot` compiles to, for naming the thread
and register that own an element in a counterexample."""

from __future__ import annotations


def mma_policy(target, warps: int, block_m: int) -> str:
    """The instruction a `dot` without `mma=` compiles to: the target's rule
    (`argus_env.target.Target.default_mma`) when a target is given, else Triton's choice on
    a Hopper GPU without the row condition (wgmma for whole warpgroups, else mma.sync)."""
    if target is not None:
        return target.mma_of(None, warps, block_m)
    return "wgmma" if warps % 4 == 0 else "mma_v2"
