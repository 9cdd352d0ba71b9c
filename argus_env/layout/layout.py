"""CuTe layouts: functions from coordinates to linear indices, and their algebra.

A ``Layout`` is a pair ``shape:stride`` of congruent IntTuples.  Calling it on
a coordinate returns ``sum(crd_i * stride_i)``; calling it on a single integer
first unpacks the integer column-major over the shape.  So ``(4,8):(1,4)`` is
a column-major 4x8 matrix and ``(4,8):(8,1)`` a row-major one.

The free functions below (composition, complement, divide, product, inverse)
are the operations CuTe uses to describe tilings and thread/value partitions;
they follow NVIDIA's CuTe and its Python reference (pycute), including the
"by-mode" convention: when the second argument is a *tuple* of layouts, the
operation is applied mode by mode.  Only ``shape``/``stride`` must be concrete;
the coordinates passed to ``Layout.__call__`` may be z3 Ints.
"""

from __future__ import annotations

from typing import Iterable, Union

from argus_env.layout import int_tuple as it
from argus_env.layout.int_tuple import IntTuple, ceil_div, flatten, is_int, is_tuple, product

__all__ = [
    "Layout", "Tiler", "is_layout", "make_layout", "size", "cosize", "rank", "depth",
    "coalesce", "filter", "composition", "complement", "right_inverse", "left_inverse",
    "logical_divide", "zipped_divide", "tiled_divide", "logical_product",
    "zipped_product", "tiled_product", "blocked_product", "raked_product",
]


def _fmt(t: IntTuple) -> str:
    """CuTe's compact tuple spelling: ``(4,(2,8))``."""
    if is_tuple(t):
        return "(" + ",".join(_fmt(x) for x in t) + ")"
    return str(t)


class Layout:
    """A map from coordinates of ``shape`` to indices, with ``stride`` weights."""

    __slots__ = ("shape", "stride")

    def __init__(self, shape: IntTuple, stride: IntTuple | None = None) -> None:
        self.shape = shape
        # CuTe's default is LayoutLeft: column-major, leftmost mode fastest.
        self.stride = it.prefix_product(shape) if stride is None else stride
        if not it.congruent(self.shape, self.stride):
            raise ValueError(f"Layout: shape {shape} and stride {stride} are not congruent")

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Layout):
            return NotImplemented
        return self.shape == other.shape and self.stride == other.stride

    def __hash__(self) -> int:
        return hash((self.shape, self.stride))

    def __len__(self) -> int:
        return it.rank(self.shape)

    def __call__(self, *crd: IntTuple) -> IntTuple:
        """Index of a coordinate: ``L(i)``, ``L(i, j)`` or ``L((i, (j, k)))``."""
        arg = crd[0] if len(crd) == 1 else tuple(crd)
        return it.crd2idx(arg, self.shape, self.stride)

    def __getitem__(self, i: int) -> "Layout":
        """Mode ``i`` as its own layout (an int-shaped layout has one mode)."""
        if is_tuple(self.shape):
            return Layout(self.shape[i], self.stride[i])
        if i not in (0, -1):
            raise IndexError(f"Layout {self} has a single mode; asked for mode {i}")
        return self

    def __iter__(self):
        return (self[i] for i in range(len(self)))

    def size(self) -> int:
        """Number of coordinates in the domain."""
        return product(self.shape)

    def cosize(self) -> int:
        """One past the largest index produced (for non-negative strides)."""
        return self(self.size() - 1) + 1

    def rank(self) -> int:
        """Number of top-level modes."""
        return len(self)

    def depth(self) -> int:
        """Nesting depth of the shape."""
        return it.depth(self.shape)

    def __repr__(self) -> str:
        return f"{_fmt(self.shape)}:{_fmt(self.stride)}"

    __str__ = __repr__


# A tiler is what divide/product/composition accept as second argument.
Tiler = Union[Layout, int, tuple, None]


def is_layout(x: object) -> bool:
    return isinstance(x, Layout)


def make_layout(*layouts: Union[Layout, Iterable[Layout]]) -> Layout:
    """Concatenate layouts, each becoming one mode of the result."""
    if len(layouts) == 1 and not is_layout(layouts[0]):
        layouts = tuple(layouts[0])
    return Layout(tuple(l.shape for l in layouts), tuple(l.stride for l in layouts))


def _as_layout(x: Union[Layout, int]) -> Layout:
    return x if is_layout(x) else Layout(x)


def size(x: Union[Layout, IntTuple]) -> int:
    return x.size() if is_layout(x) else product(x)


def cosize(x: Layout) -> int:
    return x.cosize()


def rank(x: Union[Layout, IntTuple]) -> int:
    return x.rank() if is_layout(x) else it.rank(x)


def depth(x: Union[Layout, IntTuple]) -> int:
    return x.depth() if is_layout(x) else it.depth(x)


def _by_mode(op, a: Layout, b: tuple) -> Layout:
    """Apply ``op`` to mode i of ``a`` and ``b[i]``; keep a's extra modes as is."""
    if len(a) < len(b):
        raise ValueError(f"{op.__name__}: tiler {b} has more modes than layout {a}")
    modes = [op(a[i], b[i]) for i in range(len(b))]
    return make_layout(modes + [a[i] for i in range(len(b), len(a))])


def _from_lists(shapes: list, strides: list) -> Layout:
    if not shapes:
        return Layout(1, 0)
    if len(shapes) == 1:
        return Layout(shapes[0], strides[0])
    return Layout(tuple(shapes), tuple(strides))


def coalesce(layout: Layout, profile: IntTuple | None = None) -> Layout:
    """Merge modes into as few as possible while keeping the same int -> int map.

    Adjacent modes ``s0:d0, s1:d1`` merge when ``d1 == s0 * d0``; size-1 modes
    vanish.  With a tuple ``profile``, coalesce each mode separately.
    """
    if is_tuple(profile):
        return _by_mode(coalesce, layout, profile)
    shapes: list = []
    strides: list = []
    for s, d in zip(flatten(layout.shape), flatten(layout.stride)):
        if s == 1:
            continue
        if shapes and shapes[-1] * strides[-1] == d:
            shapes[-1] *= s
        else:
            shapes.append(s)
            strides.append(d)
    return _from_lists(shapes, strides)


def filter(layout: Layout, profile: IntTuple | None = None) -> Layout:  # noqa: A001 (CuTe name)
    """Drop stride-0 (broadcast) and size-1 modes, then coalesce."""
    if is_tuple(profile):
        return _by_mode(filter, layout, profile)
    kept = [(s, d) for s, d in zip(flatten(layout.shape), flatten(layout.stride))
            if s != 1 and d != 0]
    return coalesce(_from_lists([s for s, _ in kept], [d for _, d in kept]))


def _compose_1d(a: Layout, b_shape: int, b_stride: int) -> Layout:
    """Compose ``a`` with the single mode ``b_shape:b_stride``.

    Walk a's flat modes: b's stride first skips whole modes of a, then b's
    shape takes what is left, mode by mode.  Each step needs one of the two
    numbers to divide the other (CuTe's divisibility conditions), unless the
    remaining part of b fits inside the current mode.
    """
    if b_stride == 0:
        return Layout(b_shape, 0)
    shapes, strides = [], []
    rest_shape, rest_stride = b_shape, b_stride
    flat_s, flat_d = flatten(a.shape), flatten(a.stride)
    for s, d in zip(flat_s[:-1], flat_d[:-1]):
        if rest_shape == 1:
            break
        if rest_stride >= s:
            if rest_stride % s != 0:
                why = f"stride {rest_stride} is not a multiple of mode size {s}"
                raise _compose_error(a, b_shape, b_stride, why)
            rest_stride //= s
            continue
        step = s // rest_stride
        fits = (rest_shape - 1) * rest_stride < s
        if not fits and (s % rest_stride != 0 or rest_shape % step != 0):
            why = f"{rest_shape}:{rest_stride} does not divide mode size {s}"
            raise _compose_error(a, b_shape, b_stride, why)
        take = rest_shape if fits else step
        shapes.append(take)
        strides.append(rest_stride * d)
        rest_shape, rest_stride = rest_shape // take, 1
    shapes.append(rest_shape)
    strides.append(rest_stride * flat_d[-1])
    return coalesce(Layout(tuple(shapes), tuple(strides)))


def _compose_error(a: Layout, b_shape: int, b_stride: int, why: str) -> ValueError:
    return ValueError(f"composition {a} o {b_shape}:{b_stride}: {why}")


def composition(a: Layout, b: Tiler) -> Layout:
    """``R = a o b`` with ``R(i) == a(b(i))`` for every ``i < size(b)``.

    ``b`` may be a layout, an int ``n`` (meaning ``n:1``), ``None`` (identity)
    or a tuple of those, applied to a's modes one by one.  The result keeps
    b's mode structure: mode m of the result is ``a o b[m]``, so the law for
    the whole index holds when ``a`` is additive over b's modes (as for the
    usual injective tilers).  It is stated for ``b(i) < size(a)``.
    """
    if b is None:
        return a
    if is_int(b):
        return composition(a, Layout(b))
    if is_tuple(b):
        return _by_mode(composition, a, b)
    if is_tuple(b.shape):
        return make_layout(composition(a, b_i) for b_i in b)
    return _compose_1d(coalesce(a), b.shape, b.stride)


def complement(layout: Union[Layout, int], cotarget: int = 1) -> Layout:
    """The layout of the "holes" of ``layout`` up to ``cotarget``.

    ``make_layout(layout, complement(layout, M))`` is injective and its image
    covers ``[0, M)``; the image is exactly ``[0, M)`` when ``M`` is a multiple
    of ``shape * stride`` of the largest-stride mode (e.g. 8 for ``4:2``).
    Each stride (sorted) must be a multiple of the extent of the modes below
    it, otherwise the modes overlap and there is no complement.
    """
    layout = _as_layout(layout)
    flat = filter(layout)
    modes = sorted(zip(flatten(flat.stride), flatten(flat.shape)))
    shapes, strides = [], []
    current = 1
    for d, s in modes:
        if s == 1 or d == 0:
            continue
        if d % current != 0:
            raise ValueError(f"complement of {layout}: stride {d} is not a multiple of "
                             f"{current}, the extent of the smaller modes (overlap)")
        shapes.append(d // current)
        strides.append(current)
        current = s * d
    shapes.append(ceil_div(cotarget, current))
    strides.append(current)
    return coalesce(Layout(tuple(shapes), tuple(strides)))


def right_inverse(layout: Union[Layout, int, None]) -> Layout | None:
    """``R`` with ``layout(R(i)) == i`` for every ``i < size(R)`` (largest such).

    Built by chaining modes whose stride equals the extent reached so far
    (1, then s0*d0, ...); each contributes its position in layout's domain.
    """
    if layout is None:
        return None
    layout = _as_layout(layout)
    flat_s, flat_d = flatten(layout.shape), flatten(layout.stride)
    positions = flatten(it.prefix_product(layout.shape))
    modes = [(d, s, p) for s, d, p in zip(flat_s, flat_d, positions) if s != 1]
    shapes, strides = [], []
    current = 1
    while True:
        match = next(((s, p) for d, s, p in modes if d == current), None)
        if match is None:
            break
        shapes.append(match[0])
        strides.append(match[1])
        current *= match[0]
    return coalesce(_from_lists(shapes, strides))


def left_inverse(layout: Union[Layout, int, None]) -> Layout | None:
    """``L`` with ``L(layout(i)) == i`` for every ``i < size(layout)`` (injective input)."""
    if layout is None:
        return None
    layout = _as_layout(layout)
    return right_inverse(make_layout(layout, complement(layout)))


def logical_divide(a: Layout, b: Tiler) -> Layout:
    """Split ``a`` into (tile, rest): ``a o (b, complement(b, size(a)))``.

    Mode 0 of the result enumerates one tile (the elements b selects), mode 1
    enumerates the tiles.
    """
    if b is None:
        return a
    if is_int(b):
        return logical_divide(a, Layout(b))
    if is_tuple(b):
        return _by_mode(logical_divide, a, b)
    return composition(a, make_layout(b, complement(b, size(a))))


def logical_product(a: Layout, b: Tiler) -> Layout:
    """Repeat ``a`` according to ``b``: ``(a, complement(a, size(a)*cosize(b)) o b)``."""
    if b is None:
        return a
    if is_int(b):
        return logical_product(a, Layout(b))
    if is_tuple(b):
        return _by_mode(logical_product, a, b)
    return make_layout(a, composition(complement(a, size(a) * cosize(b)), b))


def _hier_unzip(splitter, a: Layout, b: Tiler) -> Layout:
    """Apply a rank-2 ``splitter`` by mode, then gather (inner modes, outer modes)."""
    if b is None:
        return make_layout(Layout(1, 0), a)
    if not is_tuple(b):
        return splitter(a, b)
    if len(a) < len(b):
        raise ValueError(f"{splitter.__name__}: tiler {b} has more modes than layout {a}")
    split = [_hier_unzip(splitter, a[i], b[i]) for i in range(len(b))]
    inner = make_layout(m[0] for m in split)
    outer = make_layout([m[1] for m in split] + [a[i] for i in range(len(b), len(a))])
    return make_layout(inner, outer)


def zipped_divide(a: Layout, b: Tiler) -> Layout:
    """Like logical_divide, but as ((tile modes...), (rest modes...))."""
    return _hier_unzip(logical_divide, a, b)


def tiled_divide(a: Layout, b: Tiler) -> Layout:
    """Like zipped_divide, with the rest modes unpacked: ((tile...), rest0, rest1, ...)."""
    result = zipped_divide(a, b)
    return make_layout([result[0]] + list(result[1]))


def zipped_product(a: Layout, b: Tiler) -> Layout:
    """Like logical_product, but as ((block modes...), (repeat modes...))."""
    return _hier_unzip(logical_product, a, b)


def tiled_product(a: Layout, b: Tiler) -> Layout:
    """Like zipped_product, with the repeat modes unpacked."""
    result = zipped_product(a, b)
    return make_layout([result[0]] + list(result[1]))


def _append_modes(layout: Layout, n: int) -> Layout:
    """Pad with trivial ``1:0`` modes up to rank ``n``."""
    return make_layout(list(layout) + [Layout(1, 0)] * (n - len(layout)))


def _zip_product(block: Layout, tiler: Layout, block_first: bool) -> Layout:
    n = max(len(block), len(tiler))
    result = logical_product(_append_modes(block, n), _append_modes(tiler, n))
    pairs = [(result[0][i], result[1][i]) for i in range(n)]
    modes = [make_layout(p if block_first else p[::-1]) for p in pairs]
    return coalesce(make_layout(modes), (1,) * n)


def blocked_product(block: Layout, tiler: Layout) -> Layout:
    """Tile ``block`` across ``tiler``: mode i is (block_i, tiler_i), blocks contiguous."""
    return _zip_product(block, tiler, block_first=True)


def raked_product(block: Layout, tiler: Layout) -> Layout:
    """Interleave copies of ``block``: mode i is (tiler_i, block_i), copies raked."""
    return _zip_product(block, tiler, block_first=False)
