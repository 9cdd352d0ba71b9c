"""logical/zipped/tiled/blocked/raked products repeat a layout over a tiler."""

import pytest

from argus_env.layout import (
    Layout, blocked_product, complement, cosize, logical_product, raked_product, size,
    tiled_product, zipped_product,
)

CASES = [
    (Layout(1), Layout(4)), (Layout(2, 1), Layout(3)), (Layout(2, 1), Layout(3, 2)),
    (Layout(4, 2), Layout(2)), (Layout((2, 2)), Layout(4)), (Layout((2, 2), (1, 4)), Layout(2, 1)),
    (Layout((2, 2), (2, 1)), Layout((3, 2), (2, 1))), (Layout((4, 3), (3, 1)), Layout(2, 1)),
]


@pytest.mark.parametrize("a,b", CASES, ids=str)
def test_logical_product_law(a, b):
    r = logical_product(a, b)
    comp = complement(a, size(a) * cosize(b))
    assert r[0] == a, f"logical_product {a} x {b} = {r}: first mode is not {a}"
    assert size(r) == size(a) * size(b), f"logical_product {a} x {b} = {r}: wrong size"
    for j in range(size(b)):
        for i in range(size(a)):
            want = a(i) + comp(b(j))
            assert r((i, j)) == want, f"logical_product {a} x {b} = {r} at ({i},{j}): {r((i, j))} != {want}"


@pytest.mark.parametrize("a,b", [(Layout((2, 2)), Layout(4)), (Layout((2, 3), (3, 1)), Layout((2, 2))),
                                 (Layout(4, 1), Layout((3, 2)))], ids=str)
def test_compact_product_is_a_bijection(a, b):
    r = logical_product(a, b)
    image = sorted(r(k) for k in range(size(r)))
    assert image == list(range(size(r))), f"logical_product {a} x {b} = {r} image {image} is not [0, n)"


def test_by_mode_zipped_and_tiled_product():
    """With a tuple tiler, mode m of the result is logical_product(a[m], tiler[m])."""
    a, tiler = Layout((2, 3)), (Layout(2), Layout(4))
    z = zipped_product(a, tiler)
    t = tiled_product(a, tiler)
    per_mode = [logical_product(a[m], tiler[m]) for m in range(2)]
    assert z[0] == a, f"zipped_product {a} x (2,4) = {z}: first mode is not {a}"
    assert size(z) == size(a) * 8, f"zipped_product {a} x (2,4) = {z}: wrong size"
    for i0 in range(2):
        for i1 in range(3):
            for j0 in range(2):
                for j1 in range(4):
                    want = per_mode[0]((i0, j0)) + per_mode[1]((i1, j1))
                    assert z((i0, i1), (j0, j1)) == want, f"zipped_product {z} at {(i0, i1, j0, j1)}"
                    assert t((i0, i1), j0, j1) == want, f"tiled_product {t} at {(i0, i1, j0, j1)}"


BLOCKS = [(Layout((2, 2)), Layout((3, 4))), (Layout((2, 5), (5, 1)), Layout((3, 2))),
          (Layout((4, 1)), Layout((2, 3))), (Layout((2, 3)), Layout((2, 2), (2, 1)))]


@pytest.mark.parametrize("block,tiler", BLOCKS, ids=str)
def test_blocked_product_law(block, tiler):
    r = blocked_product(block, tiler)
    (b0, b1), (t0, t1) = block.shape, tiler.shape
    assert size(r[0]) == b0 * t0 and size(r[1]) == b1 * t1, f"blocked_product {block} x {tiler} = {r}"
    for row in range(b0 * t0):
        for col in range(b1 * t1):
            want = block(row % b0, col % b1) + size(block) * tiler(row // b0, col // b1)
            assert r(row, col) == want, \
                f"blocked_product {block} x {tiler} = {r} at ({row},{col}): {r(row, col)} != {want}"


@pytest.mark.parametrize("block,tiler", BLOCKS, ids=str)
def test_raked_product_law(block, tiler):
    r = raked_product(block, tiler)
    (b0, b1), (t0, t1) = block.shape, tiler.shape
    for row in range(b0 * t0):
        for col in range(b1 * t1):
            want = block(row // t0, col // t1) + size(block) * tiler(row % t0, col % t1)
            assert r(row, col) == want, \
                f"raked_product {block} x {tiler} = {r} at ({row},{col}): {r(row, col)} != {want}"


def test_blocked_product_rank_mismatch_is_padded():
    r = blocked_product(Layout(4), Layout((2, 3)))
    assert len(r) == 2, f"a rank-1 block over a rank-2 tiler gives rank 2, got {r}"
    for row in range(8):
        for col in range(3):
            want = row % 4 + 4 * Layout((2, 3))(row // 4, col)
            assert r(row, col) == want, f"blocked_product 4:1 x (2,3) = {r} at ({row},{col})"
