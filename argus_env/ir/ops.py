"""The vocabulary of DSL ops: every `A.<name>(...)` a program may call.

This table is the whitelist of the text front end, the binding rules of the parser
(which arguments may be positional, which are keyword-only) and the printing rules of
the printer. The meaning of each op lives with its interpreters: shapes and dtypes in
`argus_env.dsl.semantic`, Triton emission in `argus_env.lower`.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class OpSpec:
    """How an op is called.

    params: parameter names, which may be passed positionally in this order;
    required: how many leading params must be given;
    kwonly: keyword-only options (compiler and hardware policies);
    varargs: the op takes any number of positional values, stored as one tuple `params[0]`;
    tags: the op takes free keyword tags (`A.tag(x, row=rows)`);
    context: "expr" (a value), "stmt" (called for its effect) or "iter" (a loop iterator).
    """

    name: str
    params: tuple[str, ...] = ()
    required: int = 0
    kwonly: tuple[str, ...] = ()
    varargs: bool = False
    tags: bool = False
    context: str = "expr"
    doc: str = ""
    positional: int | None = None  # how many params the printer writes positionally

    @property
    def n_positional(self) -> int:
        return self.required if self.positional is None else self.positional


def _spec(name, params=(), required=None, **kw) -> OpSpec:
    return OpSpec(name, tuple(params), len(params) if required is None else required, **kw)


_UNARY = ("exp", "exp2", "log", "log2", "sqrt", "abs", "sigmoid")

OPS: dict[str, OpSpec] = {s.name: s for s in [
    _spec("program_id", ["axis"], doc="index of this program instance along a grid axis"),
    _spec("num_programs", ["axis"], doc="number of program instances along a grid axis"),
    _spec("num_sms", doc="number of streaming multiprocessors of the device (for persistent grids)"),
    _spec("grid", ["dims"], varargs=True, context="stmt", doc="the launch grid, first statement"),
    _spec("cdiv", ["a", "b"], doc="ceiling division"),
    _spec("minimum", ["a", "b"], doc="elementwise minimum"),
    _spec("maximum", ["a", "b"], doc="elementwise maximum"),
    _spec("arange", ["n"], doc="the index tile 0, 1, ..., n-1"),
    _spec("zeros", ["shape", "dtype"], doc="a tile of zeros"),
    _spec("full", ["shape", "value", "dtype"], doc="a tile filled with one value"),
    _spec("load", ["ref", "mask", "other"], required=1, kwonly=("tma",),
          doc="load a tile from a global tensor; masked-off elements read `other`"),
    _spec("store", ["ref", "value", "mask"], required=2, kwonly=("tma",), context="stmt",
          doc="store a tile into a global tensor"),
    _spec("atomic_add", ["ref", "value", "mask"], required=2, context="stmt",
          doc="atomically add a tile into a global tensor"),
    _spec("dot", ["a", "b", "acc"], required=2, kwonly=("mma", "precision"), positional=3,
          doc="matrix product of two tiles, accumulated into `acc`"),
    _spec("trans", ["x"], doc="transpose a 2-D tile"),
    *[_spec(n, ["x"], doc=f"elementwise {n}") for n in _UNARY],
    _spec("max", ["x", "axis"], positional=2, doc="maximum along an axis"),
    _spec("min", ["x", "axis"], positional=2, doc="minimum along an axis"),
    _spec("sum", ["x", "axis"], positional=2, doc="sum along an axis"),
    _spec("where", ["cond", "x", "y"], doc="elementwise select"),
    _spec("cast", ["x", "dtype"], doc="convert to another element type"),
    _spec("range", ["start", "stop", "step"], required=1, positional=3,
          kwonly=("stages", "warp_specialize", "flatten"), context="iter",
          doc="a runtime loop; policies: software-pipelining stages, warp specialization, flattening"),
    _spec("static_range", ["n"], context="iter", doc="a loop unrolled at compile time"),
    _spec("tag", ["x"], tags=True, doc="attach symbolic tags to a value"),
    _spec("assert_tags", ["x"], tags=True, context="stmt", doc="assert relations on a value's tags"),
    _spec("covers", ["lo", "hi"], doc="tag relation: a reduction covers [lo, hi) exactly once"),
]}

#: Named values the DSL knows that are not calls: element types, and policy values.
DTYPE_NAMES = ("bf16", "f16", "f32", "f64", "i32", "i64", "i1")
MMA_POLICIES = ("wgmma", "mma_v2", "fma")
PRECISIONS = ("tf32", "tf32x3", "ieee")
#: Storage orders of 2-D tensor parameters: `A.Tensor[A.bf16, "K", "N", A.col_major]`.
ORDERS = ("row_major", "col_major")
SYMBOL_NAMES = DTYPE_NAMES + MMA_POLICIES + PRECISIONS + ORDERS

#: Launch options accepted by `@A.kernel(...)`.
KERNEL_OPTIONS = ("num_warps", "num_stages")

#: Python operator tokens the DSL accepts.
BIN_OPS = ("+", "-", "*", "/", "//", "%", "&", "|", "^", "<<", ">>")
CMP_OPS = ("<", "<=", ">", ">=", "==", "!=")
UNARY_OPS = ("-", "~", "not")
