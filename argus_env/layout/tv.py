"""Thread-value (TV) layouts: which thread holds which element of a 2-D tile.

A TV layout is a CuTe ``Layout`` whose domain is ``(thread, value)`` and whose
codomain is the tile, indexed column-major: element ``(row, col)`` of a
``(BM, BN)`` tile has offset ``row + BM * col``.  ``value`` is the register
slot inside the thread.  When the layout is a bijection, its right inverse maps
a tile offset back to ``(thread, value)``, so every element has exactly one
owner.  The DSL's invariant checker relies on both directions.

Supported fragments (``fragment_layout(policy, tile_shape, num_warps)``):

* ``"wgmma"``: Hopper warpgroup MMA accumulator (PTX ``wgmma .m64nNk16``, D).
  Within a warpgroup, thread ``t`` (warp ``w = t // 32``, lane ``l = t % 32``)
  owns rows ``16*w + l//4 + 8*a`` and cols ``2*(l%4) + b + 8*j``; its register
  ``2*a + b + 4*j`` holds that element (``a, b`` in {0, 1}, ``j < BN/8``),
  exactly the PTX D-fragment register order.
  Tiling convention (as Triton's MMAv3 encoding with warpsPerCTA
  ``[num_warps, 1]`` and CUTLASS's TiledMMA with warpgroups stacked along M):
  the ``G = num_warps // 4`` warpgroups split M; warpgroup ``g`` (threads
  ``128*g ...``) owns the 64-row bands starting at rows ``64*g + 64*G*r`` for
  ``r < BM / (64*G)``.  Registers list the instruction's values first
  (``2*a + b + 4*j`` as above, covering all of BN), then the M repeats ``r``:
  ``reg = 2*a + b + 4*j + (BN/2)*r``.
* ``"mma_v2"``: Ampere ``mma.sync.m16n8k16`` accumulator (C/D).  In a warp,
  lane ``l`` owns rows ``l//4 + 8*a`` and cols ``2*(l%4) + b``, in register
  ``2*a + b``.  Warps are split ``WM x WN`` by Triton's ``warpsPerTileV2``
  heuristic; warp ``w`` sits at block ``(w % WM, w // WM)`` (M fastest) and the
  16x8 blocks repeat every ``16*WM`` rows / ``8*WN`` cols.  Registers: the
  four instruction values, then the N repeats, then the M repeats.
* ``"blocked"``: Triton ``BlockedLayout`` (size_per_thread, threads_per_warp,
  warps_per_cta, order).  ``order[0]`` is the fastest dimension for lanes and
  warps; a thread's registers enumerate its elements along ``order[0]`` first
  (size_per_thread, then repeats), then along ``order[1]``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from argus_env.layout.int_tuple import IntTuple, crd2idx, idx2crd
from argus_env.layout.layout import Layout, right_inverse, size

__all__ = [
    "TVLayout", "POLICIES", "fragment_layout", "wgmma_layout", "mma_v2_layout",
    "blocked_layout", "mma_v2_warps_per_tile", "default_blocked_params",
]

POLICIES = ("wgmma", "mma_v2", "blocked")
WARP_SIZE = 32


@dataclass(frozen=True)
class TVLayout:
    """A bijection between ``(thread, reg)`` pairs and the elements of a tile."""

    policy: str
    tile_shape: tuple[int, int]
    layout: Layout  # (thread, value) -> column-major tile offset
    inverse: Layout = field(init=False, repr=False)  # tile offset -> linear tv index

    def __post_init__(self) -> None:
        elements = self.tile_shape[0] * self.tile_shape[1]
        inverse = right_inverse(self.layout)
        if size(self.layout) != elements or size(inverse) != elements:
            raise ValueError(f"{self.policy}: layout {self.layout} is not a bijection onto "
                             f"the {self.tile_shape} tile")
        object.__setattr__(self, "inverse", inverse)

    @property
    def num_threads(self) -> int:
        return size(self.layout[0])

    @property
    def num_values(self) -> int:
        """Registers per thread."""
        return size(self.layout[1])

    def element_of(self, thread: IntTuple, reg: IntTuple) -> tuple:
        """Tile coordinate ``(row, col)`` held by ``thread`` in register ``reg``."""
        offset = self.layout(thread, reg)
        return idx2crd(offset, self.tile_shape)

    def owner_of(self, row: IntTuple, col: IntTuple) -> tuple:
        """``(thread, reg)`` holding tile element ``(row, col)``."""
        offset = crd2idx((row, col), self.tile_shape)
        tv_index = self.inverse(offset)
        return idx2crd(tv_index, (self.num_threads, self.num_values))

    def thread_elements(self, thread: int) -> list[tuple]:
        """All ``(row, col)`` held by one thread, in register order."""
        return [self.element_of(thread, v) for v in range(self.num_values)]


def _fail(policy: str, tile: tuple[int, int], num_warps: int, why: str) -> ValueError:
    return ValueError(f"{policy}: tile {tuple(tile)} with {num_warps} warps: {why}")


def wgmma_layout(tile_shape: tuple[int, int], num_warps: int) -> TVLayout:
    """Hopper wgmma m64nNk16 accumulator, warpgroups stacked along M."""
    bm, bn = tile_shape
    if num_warps % 4 != 0:
        raise _fail("wgmma", tile_shape, num_warps,
                    "num_warps must be a multiple of 4 (one warpgroup is 4 warps)")
    groups = num_warps // 4
    if bm % (64 * groups) != 0:
        raise _fail("wgmma", tile_shape, num_warps,
                    f"BM must be a multiple of 64 per warpgroup (64 x {groups} = {64 * groups})")
    if bn % 8 != 0:
        raise _fail("wgmma", tile_shape, num_warps, "BN must be a multiple of 8 (wgmma N step)")
    # thread = (lane%4, lane//4, warp in group, group); offsets are row + bm*col.
    thr = Layout((4, 8, 4, groups), (2 * bm, 1, 16, 64))
    # value = (col+1, row+8, col block of 8, M repeat)
    val = Layout((2, 2, bn // 8, bm // (64 * groups)), (bm, 8, 8 * bm, 64 * groups))
    return TVLayout("wgmma", (bm, bn), _tv(thr, val))


def mma_v2_warps_per_tile(tile_shape: tuple[int, int], num_warps: int) -> tuple[int, int]:
    """Triton's ``warpsPerTileV2`` greedy split of warps into (WM, WN)."""
    bm, bn = tile_shape
    wm, wn = 1, 1
    while wm * wn < num_warps:
        if bm // 16 // wm >= bn // 16 // wn and wm < bm // 16:
            wm *= 2
        else:
            wn *= 2
    return wm, wn


def mma_v2_layout(tile_shape: tuple[int, int], num_warps: int) -> TVLayout:
    """Ampere mma.sync m16n8k16 accumulator tiled by ``mma_v2_warps_per_tile``."""
    bm, bn = tile_shape
    if num_warps < 1 or num_warps & (num_warps - 1):
        raise _fail("mma_v2", tile_shape, num_warps, "num_warps must be a power of 2")
    wm, wn = mma_v2_warps_per_tile(tile_shape, num_warps)
    if bm % (16 * wm) != 0 or bn % (8 * wn) != 0:
        raise _fail("mma_v2", tile_shape, num_warps,
                    f"warps split {wm}x{wn} (M x N) need BM % {16 * wm} == 0 and "
                    f"BN % {8 * wn} == 0 (each warp owns whole 16x8 blocks)")
    thr = Layout((4, 8, wm, wn), (2 * bm, 1, 16, 8 * bm))
    val = Layout((2, 2, bn // (8 * wn), bm // (16 * wm)), (bm, 8, 8 * wn * bm, 16 * wm))
    return TVLayout("mma_v2", (bm, bn), _tv(thr, val))


def default_blocked_params(tile_shape: tuple[int, int], num_warps: int,
                           size_per_thread: tuple[int, int] = (1, 1),
                           order: tuple[int, int] = (1, 0)) -> tuple[tuple, tuple]:
    """(threads_per_warp, warps_per_cta) as Triton's default BlockedEncoding builder.

    Threads go to the fastest dimension ``order[0]`` until it is covered; the
    remaining lanes and warps go to ``order[1]``.
    """
    fast, slow = order
    tpw, wpc = [1, 1], [1, 1]
    fit = max(1, tile_shape[fast] // size_per_thread[fast])
    threads = min(max(num_warps * WARP_SIZE, 1), fit)
    tpw[fast] = min(threads, WARP_SIZE)
    wpc[fast] = max(1, min(threads // tpw[fast], num_warps))
    tpw[slow] = WARP_SIZE // tpw[fast]
    wpc[slow] = num_warps // wpc[fast]
    return tuple(tpw), tuple(wpc)


def blocked_layout(tile_shape: tuple[int, int], size_per_thread: tuple[int, int],
                   threads_per_warp: tuple[int, int], warps_per_cta: tuple[int, int],
                   order: tuple[int, int] = (1, 0)) -> TVLayout:
    """Triton BlockedLayout over a 2-D tile, as a TV layout."""
    spt, tpw, wpc = size_per_thread, threads_per_warp, warps_per_cta
    num_warps = wpc[0] * wpc[1]
    if tuple(sorted(order)) != (0, 1):
        raise _fail("blocked", tile_shape, num_warps, f"order {order} must be (1, 0) or (0, 1)")
    if tpw[0] * tpw[1] != WARP_SIZE:
        raise _fail("blocked", tile_shape, num_warps,
                    f"threads_per_warp {tuple(tpw)} must multiply to {WARP_SIZE}")
    foot = tuple(spt[d] * tpw[d] * wpc[d] for d in (0, 1))
    if tile_shape[0] % foot[0] or tile_shape[1] % foot[1]:
        raise _fail("blocked", tile_shape, num_warps,
                    f"the CTA footprint {foot} must divide the tile (a larger footprint "
                    f"would replicate elements across threads)")
    rep = tuple(tile_shape[d] // foot[d] for d in (0, 1))
    step = (1, tile_shape[0])  # column-major offset of one row / one column
    o = order
    thr = Layout((tpw[o[0]], tpw[o[1]], wpc[o[0]], wpc[o[1]]),
                 tuple(spt[d] * step[d] for d in o) + tuple(spt[d] * tpw[d] * step[d] for d in o))
    val = Layout((spt[o[0]], rep[o[0]], spt[o[1]], rep[o[1]]),
                 (step[o[0]], foot[o[0]] * step[o[0]], step[o[1]], foot[o[1]] * step[o[1]]))
    return TVLayout("blocked", tuple(tile_shape), _tv(thr, val))


def _tv(thr: Layout, val: Layout) -> Layout:
    return Layout((thr.shape, val.shape), (thr.stride, val.stride))


def _check_args(policy: str, tile_shape: tuple[int, int], num_warps: int) -> None:
    if policy not in POLICIES:
        raise ValueError(f"unknown fragment policy {policy!r} for tile {tuple(tile_shape)} "
                         f"with {num_warps} warps; expected one of {POLICIES}")
    if len(tile_shape) != 2 or any(not isinstance(d, int) or d <= 0 for d in tile_shape):
        raise _fail(policy, tile_shape, num_warps, "tile_shape must be two positive ints")
    if not isinstance(num_warps, int) or num_warps <= 0:
        raise _fail(policy, tile_shape, num_warps, "num_warps must be a positive int")


def fragment_layout(policy: str, tile_shape: tuple[int, int], num_warps: int, *,
                    size_per_thread: tuple[int, int] = (1, 1),
                    order: tuple[int, int] = (1, 0)) -> TVLayout:
    """TV layout of a ``(BM, BN)`` tile for ``policy`` in {"wgmma", "mma_v2", "blocked"}.

    ``size_per_thread`` and ``order`` only matter for "blocked"; its
    threads/warps split comes from ``default_blocked_params``.  Raises
    ``ValueError`` naming the policy, tile and violated constraint.
    """
    _check_args(policy, tile_shape, num_warps)
    tile = (tile_shape[0], tile_shape[1])
    if policy == "wgmma":
        return wgmma_layout(tile, num_warps)
    if policy == "mma_v2":
        return mma_v2_layout(tile, num_warps)
    if any(s <= 0 or t % s for s, t in zip(size_per_thread, tile)):
        raise _fail(policy, tile, num_warps,
                    f"size_per_thread {tuple(size_per_thread)} must divide the tile")
    tpw, wpc = default_blocked_params(tile, num_warps, size_per_thread, order)
    return blocked_layout(tile, size_per_thread, tpw, wpc, order)
