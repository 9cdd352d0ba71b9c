"""coalesce and filter must keep the layout's int -> int function."""

import pytest

from argus_env.layout import Layout, coalesce, depth, filter, size

LAYOUTS = [
    Layout(1, 0), Layout(1, 1), Layout(4, 2), Layout((2, 4)), Layout((2, 4), (4, 1)),
    Layout((2, 1, 6), (1, 6, 2)), Layout((2, 1, 6), (1, 7, 2)), Layout((2, 1, 6), (4, 1, 8)),
    Layout((2, 4, 6)), Layout((2, 4, 6), (4, 1, 16)), Layout((2, (4, 3)), (1, (2, 8))),
    Layout(((2, 2), (2, 3)), ((1, 2), (4, 8))), Layout((4, 3), (0, 4)), Layout((2, 1, 3), (2, 4, 4)),
]


@pytest.mark.parametrize("layout", LAYOUTS, ids=str)
def test_coalesce_preserves_function(layout):
    result = coalesce(layout)
    assert size(result) == size(layout), f"coalesce {layout} -> {result} changed size"
    assert depth(result) <= 1, f"coalesce {layout} -> {result} is not flat"
    for i in range(size(layout)):
        assert result(i) == layout(i), f"coalesce {layout} -> {result} at {i}: {result(i)} != {layout(i)}"


def test_coalesce_merges_contiguous_modes():
    assert coalesce(Layout((2, 4), (1, 2))) == Layout(8, 1), "column-major collapses to 8:1"
    assert coalesce(Layout((2, 1, 4), (1, 9, 2))) == Layout(8, 1), "size-1 modes vanish"
    assert coalesce(Layout((2, 4), (4, 1))) == Layout((2, 4), (4, 1)), "row-major does not merge"


def test_coalesce_by_mode_keeps_rank():
    layout = Layout(((2, 2), (2, 3)), ((1, 2), (4, 8)))
    result = coalesce(layout, (1, 1))
    assert len(result) == 2, f"profile (1,1) keeps two modes, got {result}"
    assert result[0] == Layout(4, 1), f"mode 0 of {result} should be 4:1"
    for i in range(size(layout)):
        assert result(i) == layout(i), f"by-mode coalesce {layout} -> {result} at {i}"


@pytest.mark.parametrize("layout", LAYOUTS, ids=str)
def test_filter_keeps_image(layout):
    result = filter(layout)
    image = {layout(i) for i in range(size(layout))}
    filtered = {result(i) for i in range(size(result))}
    assert filtered == image, f"filter {layout} -> {result}: image {filtered} != {image}"
    assert all(d != 0 for d in (result.stride if isinstance(result.stride, tuple)
                                else (result.stride,))) or size(result) == 1, \
        f"filter {layout} -> {result} still has a broadcast mode"
