"""Typing rules of the DSL ops, one function per op: `rule(typer, call, args) -> Type`.

`args` maps each given argument name to its type, and, for the ops that take free
keyword tags (`A.tag`, `A.assert_tags`), each tag name to the type of its value (the
parser keeps tag names apart from argument names). Every rule names its op in its
errors, with both shapes or dtypes where two values disagree.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..ir import nodes as ir
from . import dtypes as D
from .typebase import PolicyT, _check_tile_size, _int64, _pow2, _typed, broadcast
from .types import (CoverT, NoneT, RefT, ScalarT, TileT, TupleT, VoidT, shape_of)

if TYPE_CHECKING:  # the typer passes itself to every rule
    from .semantic import Typer

RULES = {}


def rule(*names):
    def deco(fn):
        for n in names:
            RULES[n] = fn
        return fn
    return deco


def _shape(shape: tuple[int, ...]) -> str:
    return str(tuple(shape))


# ---------------------------------------------------------------- grid and scalars
@rule("program_id", "num_programs")
def _program_id(t: Typer, e: ir.Call, args: dict):
    axis = t.const_int(e, args, "axis")
    if axis not in (0, 1, 2):
        raise t.err(e, f"{e.fn}: axis must be 0, 1 or 2, got {axis}")
    return ScalarT(D.i32)


@rule("num_sms")
def _num_sms(t: Typer, e: ir.Call, args: dict):
    return ScalarT(D.i32)


@rule("grid")
def _grid(t: Typer, e: ir.Call, args: dict):
    dims = args["dims"].elts
    if not 1 <= len(dims) <= 3:
        raise t.err(e, f"grid: 1 to 3 dims, got {len(dims)}")
    for i, d in enumerate(dims):
        if not isinstance(d, ScalarT) or not d.dtype.is_int:
            raise t.err(e, f"grid: dim {i} must be an integer scalar, got {d}")
    return VoidT()


@rule("cdiv")
def _cdiv(t: Typer, e: ir.Call, args: dict):
    a, b = t.int_scalar(e, args, "a"), t.int_scalar(e, args, "b")
    if b.value == 0:
        raise t.err(e, "cdiv: division by zero")
    value = -(-a.value // b.value) if a.value is not None and b.value is not None else None
    return ScalarT(D.promote(a.dtype, b.dtype), _int64(value))


@rule("minimum", "maximum")
def _minmax(t: Typer, e: ir.Call, args: dict):
    a, b = t.number(e, args, "a"), t.number(e, args, "b")
    shape = broadcast(shape_of(a), shape_of(b), e.fn, e.loc)
    value = None
    if isinstance(a, ScalarT) and isinstance(b, ScalarT) and None not in (a.value, b.value):
        value = min(a.value, b.value) if e.fn == "minimum" else max(a.value, b.value)
    return _typed(shape, D.promote(a.dtype, b.dtype), value)


# ---------------------------------------------------------------- tile constructors
@rule("arange")
def _arange(t: Typer, e: ir.Call, args: dict):
    n = t.const_int(e, args, "n")
    if not _pow2(n):
        raise t.err(e, f"arange: length must be a power of two, got {n}")
    _check_tile_size(t, e, (n,), e.fn)
    return TileT((n,), D.i32)


@rule("zeros")
def _zeros(t: Typer, e: ir.Call, args: dict):
    return TileT(t.shape_arg(e, args), t.dtype_arg(e, args))


@rule("full")
def _full(t: Typer, e: ir.Call, args: dict):
    value = args["value"]
    if not isinstance(value, ScalarT):
        raise t.err(e, f"full: value must be a scalar, got {value}")
    return TileT(t.shape_arg(e, args), t.dtype_arg(e, args))


# ---------------------------------------------------------------- memory
def _ref(t: Typer, e: ir.Call, args: dict) -> RefT:
    ref = args["ref"]
    if not isinstance(ref, RefT):
        raise t.err(e, f"{e.fn}: first argument must index a tensor parameter like "
                    f"`a[rows, cols]`, got {ref}")
    return ref


def _mask(t: Typer, e: ir.Call, args: dict, ref: RefT) -> None:
    """A mask is a boolean tile broadcastable to the access, or a tuple with one boolean
    (or None) per tensor dim, each broadcastable to that dim's index."""
    mask = args.get("mask")
    if mask is None or isinstance(mask, NoneT):
        return
    if t.flag(e, args, "tma") if "tma" in args else False:
        raise t.err(e, f"{e.fn} with tma=True takes no mask: the TMA unit bounds-checks "
                    "the access itself (loads read zero, stores drop out-of-bounds elements)")
    if isinstance(mask, TupleT):
        if len(mask.elts) != len(ref.index_types):
            raise t.err(e, f"{e.fn}: a per-dim mask needs {len(ref.index_types)} entries (one "
                        f"per dim of `{ref.tensor.name}`), got {len(mask.elts)}")
        for dim, m, it in zip(ref.tensor.dims, mask.elts, ref.index_types):
            if isinstance(m, NoneT):
                continue
            _bool(t, e, m, f"mask for dim {dim}")
            if shape_of(m) != shape_of(it) and shape_of(m) != ():
                raise t.err(e, f"{e.fn}: mask for dim {dim} has shape {_shape(shape_of(m))}, "
                            f"its index has shape {_shape(shape_of(it))}")
        return
    _bool(t, e, mask, "mask")
    if broadcast(shape_of(mask), ref.shape, f"{e.fn}: mask vs access", e.loc) != ref.shape:
        raise t.err(e, f"{e.fn}: mask of shape {_shape(shape_of(mask))} is larger than the "
                    f"access {_shape(ref.shape)}")


def _bool(t: Typer, e: ir.Call, m, what: str) -> None:
    if not isinstance(m, (ScalarT, TileT)) or m.dtype != D.i1:
        raise t.err(e, f"{e.fn}: {what} must be boolean (a comparison), got {m}")


@rule("load")
def _load(t: Typer, e: ir.Call, args: dict):
    ref = _ref(t, e, args)
    tma = t.flag(e, args, "tma")
    _mask(t, e, args, ref)
    other = args.get("other")
    if other is not None and not isinstance(other, NoneT):
        if not isinstance(other, ScalarT) or other.value is None:
            raise t.err(e, f"load: `other` must be a number literal, got {other}")
        if tma and other.value != 0:
            raise t.err(e, "load with tma=True reads out-of-bounds elements as 0; `other` "
                        f"cannot be {other.value}")
    if tma:
        _tma_shape(t, e, ref)
    return _typed(ref.shape, ref.dtype)


def _tma_shape(t: Typer, e: ir.Call, ref: RefT) -> None:
    tiles = [bool(shape_of(i)) for i in ref.index_types]
    if not ref.orthogonal or not any(tiles) or tiles != sorted(tiles) or \
            (ref.tensor.dims and len(ref.index_types) > 5):
        raise t.err(e, f"{e.fn} with tma=True indexes `{ref.tensor.name}` with scalars on its "
                    "leading dims and one block `start + A.arange(n)` on each trailing dim "
                    "(at most 5 dims)")
    inner = ref.shape[-1] * ref.dtype.itemsize
    if inner < 16:
        raise t.err(e, f"{e.fn} with tma=True: the inner block dim must span at least 16 "
                    f"bytes, got {ref.shape[-1]} x {ref.dtype.itemsize} B")


def _write(t: Typer, e: ir.Call, args: dict) -> RefT:
    ref = _ref(t, e, args)
    value = t.number(e, args, "value")
    if broadcast(shape_of(value), ref.shape, f"{e.fn}: value vs destination", e.loc) != ref.shape:
        raise t.err(e, f"{e.fn}: value of shape {_shape(shape_of(value))} does not fit the "
                    f"destination {_shape(ref.shape)}")
    if value.dtype != ref.dtype:
        raise t.err(e, f"{e.fn}: value dtype {value.dtype.name} does not match `{ref.tensor.name}`"
                    f"'s dtype {ref.dtype.name}; write A.cast(value, A.{ref.dtype.name})")
    _mask(t, e, args, ref)
    return ref


@rule("store")
def _store(t: Typer, e: ir.Call, args: dict):
    ref = _write(t, e, args)
    if t.flag(e, args, "tma"):
        _tma_shape(t, e, ref)
    return VoidT()


@rule("atomic_add")
def _atomic_add(t: Typer, e: ir.Call, args: dict):
    ref = _write(t, e, args)
    if ref.dtype not in (D.f32, D.f16, D.bf16, D.i32):
        raise t.err(e, f"atomic_add: unsupported dtype {ref.dtype.name}")
    return VoidT()


# ---------------------------------------------------------------- compute
MMA_DTYPES = (D.bf16, D.f16, D.f32)


@rule("dot")
def _dot(t: Typer, e: ir.Call, args: dict):
    a, b = args["a"], args["b"]
    for side, x in (("lhs", a), ("rhs", b)):
        if not isinstance(x, TileT) or len(x.shape) != 2:
            raise t.err(e, f"dot: {side} must be a 2-D tile, got {x}")
    if a.shape[1] != b.shape[0]:
        raise t.err(e, f"dot: K mismatch, lhs {_shape(a.shape)} rhs {_shape(b.shape)}: "
                    f"lhs[1] must equal rhs[0]")
    if a.dtype != b.dtype:
        raise t.err(e, f"dot: operand dtypes differ, lhs {a.dtype.name} rhs {b.dtype.name}; "
                    "cast one of them")
    if a.dtype not in MMA_DTYPES:
        raise t.err(e, f"dot: operands must be bf16, f16 or f32, got {a.dtype.name}")
    m, k, n = a.shape[0], a.shape[1], b.shape[1]
    if min(m, n, k) < 16:
        raise t.err(e, f"dot: every dim must be at least 16 for the tensor cores, got "
                    f"M={m} N={n} K={k}")
    acc = args.get("acc")
    out = TileT((m, n), D.f32)
    if acc is not None and not isinstance(acc, NoneT):
        if not isinstance(acc, TileT) or acc.shape != (m, n):
            raise t.err(e, f"dot: accumulator must be a ({m}, {n}) tile, got {acc}")
        if acc.dtype != D.f32:
            raise t.err(e, f"dot: accumulator must be f32, got {acc.dtype.name}")
    for name, allowed in (("mma", ("wgmma", "mma_v2", "fma")), ("precision", ("tf32", "tf32x3", "ieee"))):
        p = args.get(name)
        if p is not None and not (isinstance(p, PolicyT) and p.name in allowed):
            raise t.err(e, f"dot: `{name}` must be one of "
                        f"{', '.join('A.' + x for x in allowed)}, got {p}")
    if "precision" in args and a.dtype != D.f32:
        raise t.err(e, f"dot: `precision` applies to f32 operands, not {a.dtype.name}")
    return out


@rule("trans")
def _trans(t: Typer, e: ir.Call, args: dict):
    x = args["x"]
    if not isinstance(x, TileT) or len(x.shape) != 2:
        raise t.err(e, f"trans: needs a 2-D tile, got {x}")
    return TileT(x.shape[::-1], x.dtype)


@rule("exp", "exp2", "log", "log2", "sqrt", "sigmoid")
def _float_unary(t: Typer, e: ir.Call, args: dict):
    x = t.number(e, args, "x")
    dtype = x.dtype if x.dtype.is_float else D.f32
    return _typed(shape_of(x), dtype)


@rule("abs")
def _abs(t: Typer, e: ir.Call, args: dict):
    x = t.number(e, args, "x")
    value = abs(x.value) if getattr(x, "value", None) is not None else None
    return _typed(shape_of(x), x.dtype, _int64(value))


@rule("max", "min", "sum")
def _reduce(t: Typer, e: ir.Call, args: dict):
    x = args["x"]
    if not isinstance(x, TileT):
        raise t.err(e, f"{e.fn}: needs a tile, got {x}")
    axis = t.const_int(e, args, "axis") if "axis" in args else None
    if axis is None:
        raise t.err(e, f"{e.fn}: give the axis to reduce, e.g. A.{e.fn}(x, 1)")
    if not 0 <= axis < len(x.shape):
        raise t.err(e, f"{e.fn}: axis {axis} out of range for a tile of shape {_shape(x.shape)}")
    shape = x.shape[:axis] + x.shape[axis + 1:]
    dtype = D.f32 if e.fn == "sum" and x.dtype in (D.bf16, D.f16) else x.dtype
    return _typed(shape, dtype)


@rule("where")
def _where(t: Typer, e: ir.Call, args: dict):
    c, x, y = args["cond"], t.number(e, args, "x"), t.number(e, args, "y")
    _bool(t, e, c, "condition")
    shape = broadcast(shape_of(c), broadcast(shape_of(x), shape_of(y), "where", e.loc),
                      "where", e.loc)
    return _typed(shape, D.promote(x.dtype, y.dtype))


@rule("cast")
def _cast(t: Typer, e: ir.Call, args: dict):
    x = t.number(e, args, "x")
    return _typed(shape_of(x), t.dtype_arg(e, args))


# ---------------------------------------------------------------- loops and tags
@rule("range")
def _range(t: Typer, e: ir.Call, args: dict):
    for name in ("start", "stop", "step"):
        t.int_scalar(e, args, name)
    step = args["step"]
    if step.value is not None and step.value <= 0:
        raise t.err(e, f"range: step must be positive, got {step.value}")
    if "stages" in args:
        stages = t.const_int(e, args, "stages")
        if not 1 <= stages <= 8:
            raise t.err(e, f"range: stages must be between 1 and 8, got {stages}")
    t.flag(e, args, "warp_specialize")
    t.flag(e, args, "flatten")
    return ScalarT(D.i32)


@rule("static_range")
def _static_range(t: Typer, e: ir.Call, args: dict):
    t.const_int(e, args, "n")
    return ScalarT(D.i32)


@rule("tag")
def _tag(t: Typer, e: ir.Call, args: dict):
    if not e.tags:
        raise t.err(e, "tag: give at least one tag, e.g. A.tag(x, expert=e)")
    return args["x"]


@rule("assert_tags")
def _assert_tags(t: Typer, e: ir.Call, args: dict):
    """Each relation is `A.covers(lo, hi)` or a value compared elementwise with the tag, so
    it must broadcast to the asserted value's shape without enlarging it."""
    if not e.tags:
        raise t.err(e, "assert_tags: give at least one relation, e.g. row=rows")
    x = t.number(e, args, "x")
    for name, _ in e.tags:
        rel = args[name]
        if isinstance(rel, CoverT):
            continue
        if not isinstance(rel, (ScalarT, TileT)):
            raise t.err(e, f"assert_tags: relation {name} must be a number, a tile or "
                        f"A.covers(lo, hi), got {rel}")
        why = _not_broadcast_to(shape_of(rel), shape_of(x))
        if why:
            raise t.err(e, f"assert_tags: relation {name} has shape {_shape(shape_of(rel))}, "
                        f"which does not broadcast to the asserted value's shape "
                        f"{_shape(shape_of(x))} ({why})")
    return VoidT()


def _not_broadcast_to(src: tuple[int, ...], dst: tuple[int, ...]) -> str:
    """Why numpy broadcasting of `src` does not give exactly `dst` ("" when it does)."""
    if len(src) > len(dst):
        return f"{len(src)} axes vs {len(dst)}"
    for i in range(1, len(src) + 1):
        if src[-i] not in (1, dst[-i]):
            return f"axis {len(dst) - i}: {src[-i]} vs {dst[-i]}"
    return ""


@rule("covers")
def _covers(t: Typer, e: ir.Call, args: dict):
    t.int_scalar(e, args, "lo")
    t.int_scalar(e, args, "hi")
    return CoverT()


CALL_RULES = RULES
