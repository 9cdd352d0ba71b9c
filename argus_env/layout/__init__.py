"""CuTe-style layout algebra and thread-value fragment layouts.

``int_tuple`` holds the nested-integer helpers, ``layout`` the ``Layout``
class and its algebra (composition, complement, divide, product, inverse),
``tv`` the (thread, register) <-> (row, col) maps of the MMA and load
fragments the DSL emits.
"""

from argus_env.layout.int_tuple import (
    IntTuple, ceil_div, compatible, congruent, crd2crd, crd2idx, elem_scale, flatten,
    idx2crd, inner_product, is_int, is_symbolic, is_tuple, prefix_product, product,
    shape_div, suffix_product, tuple_max,
)
from argus_env.layout.layout import (
    Layout, Tiler, blocked_product, coalesce, complement, composition, cosize, depth,
    filter, is_layout, left_inverse, logical_divide, logical_product, make_layout, rank,
    raked_product, right_inverse, size, tiled_divide, tiled_product, zipped_divide,
    zipped_product,
)
from argus_env.layout.tv import (
    POLICIES, TVLayout, blocked_layout, default_blocked_params, fragment_layout,
    mma_v2_layout, mma_v2_warps_per_tile, wgmma_layout,
)

__all__ = [
    # int_tuple
    "IntTuple", "ceil_div", "compatible", "congruent", "crd2crd", "crd2idx", "elem_scale",
    "flatten", "idx2crd", "inner_product", "is_int", "is_symbolic", "is_tuple",
    "prefix_product", "product", "shape_div", "suffix_product", "tuple_max",
    # layout
    "Layout", "Tiler", "blocked_product", "coalesce", "complement", "composition",
    "cosize", "depth", "filter", "is_layout", "left_inverse", "logical_divide",
    "logical_product", "make_layout", "rank", "raked_product", "right_inverse", "size",
    "tiled_divide", "tiled_product", "zipped_divide", "zipped_product",
    # tv
    "POLICIES", "TVLayout", "blocked_layout", "default_blocked_params", "fragment_layout",
    "mma_v2_layout", "mma_v2_warps_per_tile", "wgmma_layout",
]
