"""Tests for the IntTuple helpers, concrete and with z3 coordinates."""

import pytest
import z3

from argus_env.layout import (
    compatible, congruent, crd2idx, flatten, idx2crd, inner_product, prefix_product, product,
    shape_div, suffix_product,
)
from argus_env.layout.int_tuple import depth, is_int, is_tuple, rank

SHAPES = [1, 7, (2, 3), (4, 1, 2), ((2, 2), 3), (3, (2, (2, 2))), ((2, 3), (4, 2))]


def test_predicates():
    assert is_int(3) and not is_int((3,)), "is_int accepts ints, rejects tuples"
    assert not is_int(True), "is_int rejects bools"
    assert is_int(z3.Int("x")), "is_int accepts z3 Ints"
    assert is_tuple((1, 2)) and not is_tuple(1), "is_tuple distinguishes tuples"


def test_structure():
    t = (2, (3, (4, 5)))
    assert flatten(t) == (2, 3, 4, 5), f"flatten {t}"
    assert product(t) == 120, f"product {t}"
    assert rank(t) == 2 and rank(7) == 1, f"rank {t}"
    assert depth(t) == 3 and depth(7) == 0, f"depth {t}"
    assert inner_product((1, (2, 3)), (4, (5, 6))) == 4 + 10 + 18, "inner_product"
    assert congruent((1, (2, 3)), (4, (5, 6))), "same structure is congruent"
    assert not congruent((1, 2), (1, (2, 3))), "different structure is not congruent"
    assert compatible(6, (2, 3)) and not compatible((2, 3), 6), "compatible is a partial order"


def test_prefix_suffix_and_shape_div():
    assert prefix_product((2, (3, 4))) == (1, (2, 6)), "column-major strides"
    assert suffix_product((2, (3, 4))) == (12, (4, 1)), "row-major strides"
    assert shape_div((4, 6), 2) == (2, 6), "shape_div consumes the first mode"
    assert shape_div((4, 6), 8) == (1, 3), "shape_div crosses into the second mode"
    assert shape_div(3, 6) == 1, "a divisor larger than the shape leaves 1"
    with pytest.raises(ValueError, match="divides"):
        shape_div(6, 4)


@pytest.mark.parametrize("shape", SHAPES)
def test_idx_crd_round_trip(shape):
    for i in range(product(shape)):
        crd = idx2crd(i, shape)
        assert congruent(crd, shape), f"idx2crd({i}, {shape}) = {crd} not congruent"
        assert crd2idx(crd, shape) == i, f"crd2idx(idx2crd({i})) on {shape} gave {crd2idx(crd, shape)}"
        assert crd2idx(i, shape) == i, f"int coordinate {i} on compact {shape}"


def test_crd2idx_with_stride():
    shape, stride = (4, (2, 3)), (6, (1, 24))
    for i in range(product(shape)):
        crd = idx2crd(i, shape)
        assert crd2idx(i, shape, stride) == inner_product(crd, stride), f"index {i} vs {crd}"


@pytest.mark.parametrize("shape", [(4, 8), ((2, 2), 3), (3, (2, 5))])
def test_z3_terms_match_concrete(shape):
    i = z3.Int("i")
    sym_idx = crd2idx(i, shape, suffix_product(shape))
    sym_crd = idx2crd(i, shape)
    assert isinstance(sym_idx, z3.ArithRef), f"crd2idx on z3 Int gave {type(sym_idx)}"
    for k in range(product(shape)):
        got = z3.simplify(z3.substitute(sym_idx, (i, z3.IntVal(k)))).as_long()
        assert got == crd2idx(k, shape, suffix_product(shape)), f"symbolic crd2idx at {k}"
        crd = tuple(flatten(sym_crd))
        vals = tuple(z3.simplify(z3.substitute(c, (i, z3.IntVal(k)))).as_long() for c in crd)
        assert vals == flatten(idx2crd(k, shape)), f"symbolic idx2crd at {k}: {vals}"


def test_z3_round_trip_proof():
    shape = ((2, 3), (4, 2))
    i = z3.Int("i")
    solver = z3.Solver()
    solver.add(i >= 0, i < product(shape))
    solver.add(crd2idx(idx2crd(i, shape), shape) != i)
    result = solver.check()
    detail = solver.model() if result == z3.sat else result
    assert result == z3.unsat, f"idx2crd/crd2idx round trip on {shape} fails: {detail}"
