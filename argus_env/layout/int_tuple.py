"""Nested integer tuples ("IntTuples"), the vocabulary of CuTe layouts.

An IntTuple is either an integer or a (possibly nested) tuple of IntTuples,
e.g. ``8`` or ``(4, (2, 8))``.  Shapes, strides and coordinates of a layout
are all IntTuples.  The function names follow CuTe (and NVIDIA's pycute).

Shapes and strides are always concrete Python ints.  Coordinates and linear
indices may also be z3 integer expressions: the arithmetic functions
(``crd2idx``, ``idx2crd``, ...) only use ``+``, ``*``, integer division and
modulo, so a symbolic index flows through them and comes out as a z3 term.
That is what lets the invariant checker *prove* layout facts instead of
sampling them.  z3 is never imported here; a value is treated as symbolic only
if the caller already imported z3 and handed us a z3 term.
"""

from __future__ import annotations

import sys
from functools import reduce
from typing import Any, Union

# ``Any`` stands in for a z3 ``ArithRef``, which we do not want to import.
IntLike = Union[int, Any]
IntTuple = Union[IntLike, tuple]

__all__ = [
    "IntTuple", "is_int", "is_tuple", "is_symbolic", "flatten", "rank", "depth",
    "product", "inner_product", "prefix_product", "suffix_product", "shape_div",
    "ceil_div", "elem_scale", "tuple_max", "crd2idx", "idx2crd", "crd2crd",
    "congruent", "compatible",
]


def is_symbolic(x: object) -> bool:
    """True for a z3 integer expression (only possible if z3 is loaded)."""
    z3 = sys.modules.get("z3")
    return z3 is not None and isinstance(x, z3.ArithRef) and x.is_int()


def is_int(x: object) -> bool:
    """True for an integer leaf: a Python/numpy int or a z3 Int term."""
    if isinstance(x, bool):
        return False
    if isinstance(x, int) or is_symbolic(x):
        return True
    return type(x).__module__ == "numpy" and hasattr(x, "dtype") and x.dtype.kind in "iu"


def is_tuple(x: object) -> bool:
    """True for a tuple node of an IntTuple."""
    return isinstance(x, tuple)


def _div(a: IntLike, b: int) -> IntLike:
    """Floor division that also works on z3 Ints (z3 spells it ``/``)."""
    if b == 1:
        return a
    return a / b if is_symbolic(a) else a // b


def _mod(a: IntLike, b: int) -> IntLike:
    """Modulo for ints and z3 Ints; ``x % 1`` is folded to 0 to keep terms small."""
    if b == 1:
        return 0
    return a % b


def _add(a: IntLike, b: IntLike) -> IntLike:
    """Addition that drops literal zeros so z3 terms stay readable."""
    if isinstance(a, int) and a == 0:
        return b
    if isinstance(b, int) and b == 0:
        return a
    return a + b


def _mul(a: IntLike, b: int) -> IntLike:
    """``a * b`` with the trivial strides 0 and 1 folded."""
    if b == 0:
        return 0
    return a if b == 1 else a * b


def flatten(t: IntTuple) -> tuple:
    """All leaves of ``t`` in order, as a flat tuple."""
    if is_tuple(t):
        return tuple(leaf for sub in t for leaf in flatten(sub))
    return (t,)


def rank(t: IntTuple) -> int:
    """Number of top-level modes (1 for an integer)."""
    return len(t) if is_tuple(t) else 1


def depth(t: IntTuple) -> int:
    """Nesting depth: 0 for an integer, 1 for a flat tuple, ..."""
    if is_tuple(t):
        return 1 + max((depth(sub) for sub in t), default=0)
    return 0


def product(t: IntTuple) -> IntLike:
    """Product of all leaves, i.e. the number of coordinates of a shape."""
    if is_tuple(t):
        return reduce(lambda acc, sub: acc * product(sub), t, 1)
    return t


def inner_product(a: IntTuple, b: IntTuple) -> IntLike:
    """Sum of leafwise products of two congruent tuples (coordinate . stride)."""
    if is_tuple(a):
        if not (is_tuple(b) and len(a) == len(b)):
            raise ValueError(f"inner_product: {a} and {b} are not congruent")
        return sum((inner_product(x, y) for x, y in zip(a, b)), 0)
    if is_tuple(b):
        raise ValueError(f"inner_product: {a} and {b} are not congruent")
    return a * b


def tuple_max(t: IntTuple) -> int:
    """Largest leaf."""
    return max(flatten(t))


def elem_scale(a: IntTuple, b: IntTuple) -> IntTuple:
    """Scale ``a`` leafwise by ``b`` (an int of ``a`` scales by all of ``b``)."""
    if is_tuple(a):
        if not (is_tuple(b) and len(a) == len(b)):
            raise ValueError(f"elem_scale: {a} and {b} are not congruent")
        return tuple(elem_scale(x, y) for x, y in zip(a, b))
    return a * product(b)


def ceil_div(a: int, b: int) -> int:
    """Ceiling of ``a / b`` for positive ints."""
    return (a + b - 1) // b


def shape_div(a: IntTuple, b: IntTuple) -> IntTuple:
    """Divide shape ``a`` by ``b`` from the left, result congruent to ``a``.

    Used by composition: "skip the first ``b`` elements of ``a``".  Each leaf
    step requires one of the two to divide the other (CuTe's divisibility
    condition); otherwise the layouts cannot be composed.
    """
    if is_tuple(a):
        if is_tuple(b):
            if len(a) != len(b):
                raise ValueError(f"shape_div: {a} and {b} are not congruent")
            return tuple(shape_div(x, y) for x, y in zip(a, b))
        result = []
        for sub in a:
            result.append(shape_div(sub, b))
            b = shape_div(b, product(sub))
        return tuple(result)
    if is_tuple(b):
        return shape_div(a, product(b))
    if a % b != 0 and b % a != 0:
        raise ValueError(f"shape_div: neither of {a} and {b} divides the other")
    return ceil_div(a, b)


def prefix_product(a: IntTuple, init: IntTuple = 1) -> IntTuple:
    """Exclusive prefix product, congruent to ``a``: the column-major strides."""
    if is_tuple(a):
        if is_tuple(init):
            return tuple(prefix_product(x, i) for x, i in zip(a, init))
        result = []
        for sub in a:
            result.append(prefix_product(sub, init))
            init = init * product(sub)
        return tuple(result)
    if is_tuple(init):
        raise ValueError(f"prefix_product: int {a} with tuple init {init}")
    return init


def suffix_product(a: IntTuple, init: IntTuple = 1) -> IntTuple:
    """Exclusive suffix product, congruent to ``a``: the row-major strides."""
    if is_tuple(a):
        result = []
        for sub in reversed(a):
            result.append(suffix_product(sub, init))
            init = init * product(sub)
        return tuple(reversed(result))
    return init


def crd2idx(crd: IntTuple, shape: IntTuple, stride: IntTuple | None = None) -> IntLike:
    """Map a coordinate to a linear index: ``sum(crd_i * stride_i)``.

    ``crd`` may be hierarchical (congruent to ``shape``) or a single integer,
    which is first unpacked colexicographically (leftmost mode fastest) over
    ``shape``.  ``stride`` defaults to the column-major prefix product.
    """
    if stride is None:
        stride = prefix_product(shape)
    if is_tuple(crd):
        if not (is_tuple(shape) and len(crd) == len(shape) == len(stride)):
            raise ValueError(f"crd2idx: coordinate {crd} does not match shape {shape}")
        return reduce(_add, (crd2idx(c, s, d) for c, s, d in zip(crd, shape, stride)), 0)
    if crd is None:
        crd = 0
    if is_tuple(shape):
        if len(shape) != len(stride):
            raise ValueError(f"crd2idx: shape {shape} and stride {stride} differ in rank")
        result: IntLike = 0
        for s, d in zip(shape[:-1], stride[:-1]):
            result = _add(result, crd2idx(_mod(crd, product(s)), s, d))
            crd = _div(crd, product(s))
        return _add(result, crd2idx(crd, shape[-1], stride[-1]))
    return _mul(crd, stride)


def idx2crd(idx: IntTuple, shape: IntTuple, stride: IntTuple | None = None) -> IntTuple:
    """Inverse of ``crd2idx`` for compact strides: index -> coordinate.

    With the default column-major stride this is the colexicographic
    decomposition, e.g. ``idx2crd(5, (2, 3)) == (1, 2)``.
    """
    if stride is None:
        stride = prefix_product(shape)
    if is_tuple(idx):
        if not (is_tuple(shape) and len(idx) == len(shape) == len(stride)):
            raise ValueError(f"idx2crd: index {idx} does not match shape {shape}")
        return tuple(idx2crd(i, s, d) for i, s, d in zip(idx, shape, stride))
    if is_tuple(shape):
        return tuple(idx2crd(idx, s, d) for s, d in zip(shape, stride))
    return _mod(_div(idx, stride), shape)


def crd2crd(crd: IntTuple, dst_shape: IntTuple, src_shape: IntTuple | None = None) -> IntTuple:
    """Re-express a coordinate in the coordinate space of ``dst_shape``."""
    if is_tuple(crd):
        if is_tuple(dst_shape):
            return tuple(crd2crd(c, d) for c, d in zip(crd, dst_shape))
        if src_shape is None:
            raise ValueError("crd2crd: tuple to int needs src_shape")
        return crd2idx(crd, src_shape)
    if is_tuple(dst_shape):
        return idx2crd(crd, dst_shape)
    return crd


def congruent(a: IntTuple, b: IntTuple) -> bool:
    """True when ``a`` and ``b`` have the same tuple structure (leaves may differ)."""
    if is_tuple(a) and is_tuple(b):
        return len(a) == len(b) and all(congruent(x, y) for x, y in zip(a, b))
    return not is_tuple(a) and not is_tuple(b)


def compatible(a: IntTuple, b: IntTuple) -> bool:
    """True when every coordinate of shape ``a`` is also a coordinate of ``b``.

    That holds when sizes match and each leaf of ``a`` lines up with a
    sub-tuple of ``b`` of equal size (CuTe's "compatible" partial order).
    """
    if is_tuple(a):
        return is_tuple(b) and len(a) == len(b) and all(compatible(x, y) for x, y in zip(a, b))
    return product(a) == product(b)
