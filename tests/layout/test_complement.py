"""complement: (L, complement(L, M)) is injective and covers [0, M)."""

import pytest

from argus_env.layout import Layout, complement, filter, make_layout, size

CASES = [
    (Layout(1, 0), 1), (Layout(1, 0), 5), (Layout(1, 1), 8), (Layout(4, 0), 8), (Layout(4, 1), 4),
    (Layout(4, 1), 16), (Layout(4, 2), 8), (Layout(4, 2), 24), (Layout(4, 2), 7),
    (Layout((2, 4), (1, 2)), 16), (Layout((2, 3), (1, 2)), 12), (Layout((2, 2), (1, 6)), 24),
    (Layout((2, 4), (8, 1)), 32), (Layout((2, 4, 8), (8, 1, 64)), 1024),
    (Layout(((2, 2), (2, 2)), ((1, 4), (8, 32))), 256), (Layout((2, (3, 4)), (3, (1, 6))), 48),
    (Layout(3, 2), 12), (Layout((4, 6), (0, 4)), 48),
]


@pytest.mark.parametrize("layout,cotarget", CASES, ids=str)
def test_complement_law(layout, cotarget):
    comp = complement(layout, cotarget)
    joined = make_layout(filter(layout), comp)
    values = [joined(i) for i in range(size(joined))]
    assert len(set(values)) == len(values), \
        f"({layout}, complement {comp}) is not injective: {sorted(values)}"
    missing = set(range(cotarget)) - set(values)
    assert not missing, f"({layout}, complement {comp}) misses {sorted(missing)} of [0, {cotarget})"
    if size(joined) == cotarget:
        assert set(values) == set(range(cotarget)), \
            f"({layout}, complement {comp}) image is not exactly [0, {cotarget})"


@pytest.mark.parametrize("layout,cotarget", CASES, ids=str)
def test_complement_is_ordered_and_disjoint(layout, cotarget):
    comp = complement(layout, cotarget)
    image = {layout(i) for i in range(size(layout))}
    for i in range(1, size(comp)):
        assert comp(i) > comp(i - 1), f"complement {comp} of {layout} is not increasing at {i}"
        assert comp(i) not in image, f"complement {comp} hits {comp(i)}, already in {layout}"


def test_complement_known_results():
    assert complement(Layout(4, 2), 24) == Layout((2, 3), (1, 8)), "4:2 up to 24"
    assert complement(Layout((2, 2), (1, 6)), 24) == Layout((3, 2), (2, 12)), "(2,2):(1,6) up to 24"
    assert size(complement(Layout(4, 1), 4)) == 1, "nothing left to complement"


def test_overlapping_layout_raises():
    with pytest.raises(ValueError, match="overlap"):
        complement(Layout((2, 2), (1, 1)), 4)
