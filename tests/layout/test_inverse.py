"""right_inverse: L(R(i)) == i;  left_inverse: Linv(L(i)) == i for injective L."""

import pytest
import z3

from argus_env.layout import Layout, left_inverse, right_inverse, size

LAYOUTS = [
    Layout(1, 0), Layout(4, 1), Layout(4, 0), Layout(4, 2), Layout((8, 4)), Layout((8, 4), (4, 1)),
    Layout((2, 4, 6), (1, 12, 2)), Layout((2, 4, 6), (4, 1, 8)), Layout(((2, 2), (4, 2)), ((4, 16), (1, 64))),
    Layout((4, 2), (1, 8)), Layout((2, 3, 4), (0, 1, 3)), Layout((4, 8), (8, 1)),
]
BIJECTIONS = [Layout((8, 4)), Layout((8, 4), (4, 1)), Layout((2, 4, 6), (1, 12, 2)),
              Layout((2, 4, 6), (4, 1, 8)), Layout(((2, 2), (4, 2)), ((4, 8), (1, 16)))]


@pytest.mark.parametrize("layout", LAYOUTS, ids=str)
def test_right_inverse_law(layout):
    inv = right_inverse(layout)
    for i in range(size(inv)):
        assert layout(inv(i)) == i, f"right_inverse {layout} -> {inv} at {i}: L(R(i)) = {layout(inv(i))}"


@pytest.mark.parametrize("layout", BIJECTIONS, ids=str)
def test_inverse_of_bijection_is_total(layout):
    inv = right_inverse(layout)
    assert size(inv) == size(layout), f"right_inverse {layout} -> {inv} is not total"
    for i in range(size(layout)):
        assert inv(layout(i)) == i, f"right_inverse {layout} -> {inv} is not also a left inverse at {i}"


@pytest.mark.parametrize("layout", [l for l in LAYOUTS if l.stride != 0 and 0 not in
                                    (l.stride if isinstance(l.stride, tuple) else (l.stride,))], ids=str)
def test_left_inverse_law(layout):
    inv = left_inverse(layout)
    for i in range(size(layout)):
        assert inv(layout(i)) == i, f"left_inverse {layout} -> {inv} at {i}: Linv(L(i)) = {inv(layout(i))}"


def test_known_inverses():
    assert right_inverse(Layout((4, 8), (8, 1))) == Layout((8, 4), (4, 1)), "transpose inverts to transpose"
    assert right_inverse(Layout(4, 2)) == Layout(1, 0), "4:2 never hits 1, so only index 0 is inverted"
    assert right_inverse(None) is None, "None passes through"


def test_right_inverse_z3_proof():
    layout = Layout(((2, 2), (4, 2)), ((4, 16), (1, 64)))
    inv = right_inverse(layout)
    i = z3.Int("i")
    solver = z3.Solver()
    solver.add(i >= 0, i < size(inv), layout(inv(i)) != i)
    result = solver.check()
    detail = solver.model() if result == z3.sat else result
    assert result == z3.unsat, f"right_inverse {layout} -> {inv} fails symbolically: {detail}"
