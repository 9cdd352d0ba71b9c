"""Thread-value fragment layouts: bijections over the tile and PTX spot values."""

import pytest
import z3

from argus_env.layout import (
    TVLayout, blocked_layout, fragment_layout, mma_v2_warps_per_tile,
)

CONFIGS = [
    ("wgmma", (64, 8), 4), ("wgmma", (64, 64), 4), ("wgmma", (128, 128), 4), ("wgmma", (128, 64), 8),
    ("wgmma", (256, 64), 8), ("wgmma", (192, 16), 12),
    ("mma_v2", (16, 8), 1), ("mma_v2", (64, 64), 4), ("mma_v2", (128, 128), 8), ("mma_v2", (32, 64), 2),
    ("blocked", (16, 16), 4), ("blocked", (32, 64), 4), ("blocked", (128, 32), 8), ("blocked", (64, 8), 2),
]


def check_bijection(tv: TVLayout) -> None:
    bm, bn = tv.tile_shape
    name = f"{tv.policy} {tv.tile_shape}"
    seen = {}
    for t in range(tv.num_threads):
        for r in range(tv.num_values):
            row, col = tv.element_of(t, r)
            assert 0 <= row < bm and 0 <= col < bn, f"{name}: ({t},{r}) -> ({row},{col}) off tile"
            assert (row, col) not in seen, \
                f"{name}: ({row},{col}) owned by {seen.get((row, col))} and ({t},{r})"
            seen[(row, col)] = (t, r)
            owner = tv.owner_of(row, col)
            assert owner == (t, r), f"{name}: owner_of({row},{col}) = {owner} != ({t},{r})"
    assert len(seen) == bm * bn, f"{name}: covers {len(seen)} of {bm * bn} elements"
    for row in range(bm):
        for col in range(bn):
            back = tv.element_of(*tv.owner_of(row, col))
            assert back == (row, col), f"{name}: element_of(owner_of({row},{col})) = {back}"


@pytest.mark.parametrize("policy,tile,warps", CONFIGS, ids=str)
def test_fragment_is_bijection(policy, tile, warps):
    tv = fragment_layout(policy, tile, warps)
    assert tv.num_threads == 32 * warps, f"{policy} {tile}: {tv.num_threads} threads for {warps} warps"
    assert tv.num_threads * tv.num_values == tile[0] * tile[1], f"{policy} {tile}: thread x value != tile"
    check_bijection(tv)


def ptx_wgmma(t, r):
    """PTX ISA 'WGMMA .m64nNk16 register fragment layout for accumulator matrix D'."""
    w, lane = t // 32, t % 32
    return 16 * w + lane // 4 + 8 * ((r // 2) % 2), 2 * (lane % 4) + r % 2 + 8 * (r // 4)


def ptx_mma_m16n8(lane, r):
    """PTX ISA 'mma.m16n8k16 fragment layout for accumulator matrix C/D'."""
    return lane // 4 + 8 * (r // 2), 2 * (lane % 4) + r % 2


def test_wgmma_spot_values():
    tv = fragment_layout("wgmma", (64, 64), 4)
    assert tv.element_of(0, 0) == (0, 0), "wgmma thread 0 reg 0 is d0 at (0,0)"
    assert tv.element_of(0, 1) == (0, 1), "wgmma thread 0 reg 1 is d1 at (0,1)"
    assert tv.element_of(0, 2) == (8, 0), "wgmma thread 0 reg 2 is d2 at (8,0)"
    assert tv.element_of(0, 4) == (0, 8), "wgmma thread 0 reg 4 starts the next 8 columns"
    assert tv.element_of(1, 0) == (0, 2), "wgmma thread 1 reg 0 at (0,2)"
    assert tv.element_of(4, 0) == (1, 0), "wgmma thread 4 reg 0 at (1,0)"
    assert tv.element_of(32, 0) == (16, 0), "warp 1 starts at row 16"
    assert tv.element_of(127, 31) == (63, 63), "last thread, last register is the last element"
    assert tv.num_values == 32, "m64n64 gives 32 f32 accumulators per thread"


@pytest.mark.parametrize("bn", [8, 16, 64, 256])
def test_wgmma_matches_ptx_figure(bn):
    tv = fragment_layout("wgmma", (64, bn), 4)
    for t in range(128):
        for r in range(bn // 2):
            got, want = tv.element_of(t, r), ptx_wgmma(t, r)
            assert got == want, f"wgmma 64x{bn} ({t},{r}): {got} != PTX {want}"


def test_wgmma_tiling_convention():
    tv = fragment_layout("wgmma", (256, 32), 8)  # 2 warpgroups, 2 repeats each along M
    assert tv.element_of(128, 0) == (64, 0), "warpgroup 1 starts at row 64"
    assert tv.element_of(0, 16) == (128, 0), "register BN/2 is warpgroup 0's next band at row 64*G"
    assert tv.element_of(128, 16) == (192, 0), "warpgroup 1's second band starts at row 192"
    for t in range(256):
        for r in range(32):
            base_row, col = ptx_wgmma(t % 128, r % 16)
            want = (base_row + 64 * (t // 128) + 128 * (r // 16), col)
            got = tv.element_of(t, r)
            assert got == want, f"wgmma 256x32 with 8 warps ({t},{r}): {got} != {want}"


def test_mma_v2_spot_values_and_warps():
    tv = fragment_layout("mma_v2", (16, 8), 1)
    for lane in range(32):
        for r in range(4):
            got, want = tv.element_of(lane, r), ptx_mma_m16n8(lane, r)
            assert got == want, f"mma m16n8 lane {lane} reg {r}: {got} != PTX {want}"
    assert mma_v2_warps_per_tile((128, 128), 8) == (4, 2), "Triton warpsPerTileV2 for 128x128, 8 warps"
    assert mma_v2_warps_per_tile((64, 64), 4) == (2, 2), "Triton warpsPerTileV2 for 64x64, 4 warps"
    tv = fragment_layout("mma_v2", (64, 64), 4)  # warps 2x2, blocks repeat 2x4
    assert tv.element_of(32, 0) == (16, 0), "warp 1 is the next 16 rows (M fastest)"
    assert tv.element_of(64, 0) == (0, 8), "warp 2 is the next 8 columns"
    assert tv.element_of(0, 4) == (0, 16), "register 4 is the first N repeat (every 8*WN cols)"
    assert tv.element_of(0, 16) == (32, 0), "register 16 is the first M repeat (every 16*WM rows)"


def test_blocked_spot_values():
    tv = fragment_layout("blocked", (16, 16), 4)  # threads (2, 16), warps (4, 1)
    assert tv.element_of(1, 0) == (0, 1), "lanes run along the fastest dim (cols for order (1,0))"
    assert tv.element_of(16, 0) == (1, 0), "lane 16 wraps to the next row"
    assert tv.element_of(32, 0) == (2, 0), "warp 1 starts 2 rows down"
    assert tv.element_of(0, 1) == (8, 0), "register 1 is the repeat 8 rows down"
    tv = fragment_layout("blocked", (32, 64), 4, size_per_thread=(1, 4))
    regs = [tv.element_of(0, r) for r in range(4)]
    assert regs == [(0, c) for c in range(4)], f"4 contiguous cols per thread, got {regs}"
    assert tv.element_of(1, 0) == (0, 4), "next lane starts 4 cols over"
    col_major = blocked_layout((16, 16), (2, 1), (8, 4), (1, 2), order=(0, 1))
    assert col_major.element_of(0, 1) == (1, 0), "order (0,1): registers run down the column"
    assert col_major.element_of(1, 0) == (2, 0), "order (0,1): lanes run down the column"
    check_bijection(col_major)


@pytest.mark.parametrize("policy,tile,warps,needle", [
    ("wgmma", (32, 128), 8, "wgmma: tile (32, 128) with 8 warps: BM must be a multiple of 64 per warpgroup"),
    ("wgmma", (64, 64), 6, "num_warps must be a multiple of 4"),
    ("wgmma", (64, 12), 4, "BN must be a multiple of 8"),
    ("mma_v2", (16, 8), 4, "mma_v2: tile (16, 8) with 4 warps: warps split 1x4"),
    ("mma_v2", (64, 64), 3, "power of 2"),
    ("blocked", (8, 8), 4, "blocked: tile (8, 8) with 4 warps: the CTA footprint (16, 8)"),
    ("tma", (64, 64), 4, "unknown fragment policy 'tma'"),
])
def test_invalid_configs_raise(policy, tile, warps, needle):
    with pytest.raises(ValueError) as info:
        fragment_layout(policy, tile, warps)
    assert needle in str(info.value), f"error {str(info.value)!r} lacks {needle!r}"


def test_z3_owner_inverts_element():
    tv = fragment_layout("wgmma", (64, 32), 4)
    t, r = z3.Ints("t r")
    row, col = tv.element_of(t, r)
    t2, r2 = tv.owner_of(row, col)
    solver = z3.Solver()
    solver.add(t >= 0, t < tv.num_threads, r >= 0, r < tv.num_values)
    solver.add(z3.Or(t2 != t, r2 != r, row < 0, row >= 64, col < 0, col >= 32))
    result = solver.check()
    detail = solver.model() if result == z3.sat else result
    assert result == z3.unsat, f"wgmma owner_of(element_of(t, r)) != (t, r) symbolically: {detail}"
