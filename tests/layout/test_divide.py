"""logical_divide / zipped_divide / tiled_divide split a layout into tiles."""

import pytest

from argus_env.layout import (
    Layout, complement, logical_divide, make_layout, size, tiled_divide, zipped_divide,
)

CASES = [
    (Layout(16), Layout(4)), (Layout(16), Layout(4, 2)), (Layout(16), Layout((2, 2), (4, 1))),
    (Layout(24), Layout(4, 3)), (Layout((4, 6)), Layout(4)), (Layout((6, 4), (4, 1)), Layout(3, 2)),
    (Layout((8, 8)), Layout((2, 2), (1, 8))), (Layout((2, 4, 8), (1, 16, 2)), Layout((4, 2), (2, 16))),
]


@pytest.mark.parametrize("a,b", CASES, ids=str)
def test_logical_divide_law(a, b):
    r = logical_divide(a, b)
    full = make_layout(b, complement(b, size(a)))
    tile, rest = size(r[0]), size(r[1])
    assert size(r) == size(a), f"logical_divide {a} / {b} = {r}: size {size(r)} != {size(a)}"
    assert tile == size(b), f"logical_divide {a} / {b} = {r}: tile size {tile} != {size(b)}"
    for j in range(rest):
        for i in range(tile):
            want = a(full((i, j)))
            assert r((i, j)) == want, \
                f"logical_divide {a} / {b} = {r} at tile {j} elem {i}: {r((i, j))} != {want}"
    for i in range(tile):
        assert r[0](i) == a(b(i)), f"tile 0 of {a} / {b} = {r} at {i}: {r[0](i)} != {a(b(i))}"
    image = sorted(r(k) for k in range(size(r)))
    assert image == sorted(a(k) for k in range(size(a))), \
        f"logical_divide {a} / {b} = {r} is not a permutation of {a}"


def test_logical_divide_known_result():
    r = logical_divide(Layout(16), Layout(4, 2))
    assert r == Layout((4, (2, 2)), (2, (1, 8))), f"16:1 / 4:2 gave {r}"


def _matrix_tile_law(name, a, tile_m, tile_n, value_at):
    rows, cols = a.shape
    for tm in range(rows // tile_m):
        for tn in range(cols // tile_n):
            for r in range(tile_m):
                for c in range(tile_n):
                    got = value_at(r, c, tm, tn)
                    want = a(tm * tile_m + r, tn * tile_n + c)
                    assert got == want, f"{name}: tile ({tm},{tn}) elem ({r},{c}): {got} != {want}"


@pytest.mark.parametrize("a", [Layout((8, 12)), Layout((8, 12), (12, 1)), Layout((8, 12), (1, 16))], ids=str)
def test_zipped_and_tiled_divide_2d(a):
    tiler = (Layout(4), Layout(3))
    z = zipped_divide(a, tiler)
    assert z.shape == ((4, 3), (2, 4)), f"zipped_divide {a} by (4,3) has shape {z.shape}"
    _matrix_tile_law(f"zipped_divide {a} = {z}", a, 4, 3, lambda r, c, tm, tn: z((r, c), (tm, tn)))
    t = tiled_divide(a, tiler)
    assert t.shape == ((4, 3), 2, 4), f"tiled_divide {a} by (4,3) has shape {t.shape}"
    _matrix_tile_law(f"tiled_divide {a} = {t}", a, 4, 3, lambda r, c, tm, tn: t((r, c), tm, tn))


def test_by_mode_divide_with_int_tiler():
    a = Layout((8, 12))
    r = logical_divide(a, (4, 3))
    assert r.shape == ((4, 2), (3, 4)), f"by-mode divide of {a} by (4, 3) has shape {r.shape}"
    _matrix_tile_law(f"logical_divide {a} = {r}", a, 4, 3, lambda row, c, tm, tn: r((row, tm), (c, tn)))
