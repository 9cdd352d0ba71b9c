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


#: suffix of a fragment policy whose tile is an MMA accumulator transposed (`A.trans` of a
#: `dot` result: swap-AB stores its accumulator so)
TRANSPOSED = "^T"


def transposed(frag: str | None) -> str | None:
    """The fragment policy of `A.trans` of a tile of policy `frag`."""
    if frag is None:
        return None
    return frag[:-len(TRANSPOSED)] if frag.endswith(TRANSPOSED) else frag + TRANSPOSED


def as_stored(frag: str | None, shape: tuple, element: tuple) -> tuple:
    """(policy, shape, element) of the accumulator that holds `element` of a tile of
    policy `frag` and `shape`: a transposed accumulator's element (i, j) is its (j, i)."""
    if frag is not None and frag.endswith(TRANSPOSED):
        return frag[:-len(TRANSPOSED)], tuple(shape)[::-1], tuple(element)[::-1]
    return frag, tuple(shape), tuple(element)
