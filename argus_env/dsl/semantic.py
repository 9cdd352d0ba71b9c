"""The semantic layer: shapes and dtypes of every DSL value, checked at trace time.

`infer(kernel)` walks a program once, with an environment of names, and raises a
`DSLTypeError` naming the op, the offending shapes or dtypes and the source line
("dot: K mismatch, lhs (128, 64) rhs (32, 128): lhs[1] must equal rhs[0]") for anything
the Triton compiler would reject or silently reinterpret. Other interpreters (the
Triton lowering, the invariant checker) reuse `Typer.expr` to know the type of the
expression in front of them.

Rules are a table keyed by op name, as in Triton's `semantic.py`; an op without a rule
fails with its name.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from ..ir import nodes as ir
from ..ir.ops import DTYPE_NAMES, MMA_POLICIES, ORDERS, PRECISIONS
from . import dtypes as D
from .errors import DSLTypeError
from .oprules import CALL_RULES as _CALL_RULES
from .typebase import (INT64_MAX, INT64_MIN, MAX_TILE_ELEMENTS, PolicyT,  # noqa: F401
                       _check_tile_size, _int64, _pow2, _typed, broadcast)
from .types import (CoverT, DTypeT, NoneT, RefT, ScalarT, SliceT, TensorT, TileT, TupleT, Type,
                    VoidT, shape_of)


@dataclass
class Scope:
    """Names visible at one point of a program, with their types."""

    names: dict[str, Type] = field(default_factory=dict)

    def copy(self) -> "Scope":
        return Scope(dict(self.names))


#: recorded for an expression typed twice with different results (its type depends on
#: the scope it is met in): a later walk works it out again
_SCOPED = object()


class Typer:
    """Types of DSL expressions. Stateless apart from the kernel it belongs to, and the
    types it remembers: a typer made by `infer` records the type of every expression the
    type check met (`recording`), then answers later walks of the same kernel (lowering,
    feature extraction) from that record instead of working the types out again."""

    def __init__(self, kernel: ir.Kernel, types: dict | None = None):
        self.kernel = kernel
        self.types = types        # id(expression) -> its type, while the kernel lives
        self.recording = False
        self.worked_out = 0       # expressions typed by their rule, not from the record

    # ------------------------------------------------------------ entry points
    def initial_scope(self) -> Scope:
        scope = Scope()
        for p in self.kernel.params:
            if p.kind == "tensor":
                scope.names[p.name] = TensorT(p.name, D.DTYPES[p.dtype], p.dims)
            elif p.kind == "const":
                scope.names[p.name] = ScalarT(_const_dtype(p.default), p.default)
            else:
                scope.names[p.name] = ScalarT(D.DTYPES[p.dtype])
        for size in self.kernel.sizes:
            if size in scope.names:
                raise DSLTypeError(f"size name `{size}` is also a parameter", self.kernel.loc.line)
            scope.names[size] = ScalarT(D.i32)
        return scope

    def expr(self, e: ir.Expr, scope: Scope) -> Type:
        types = self.types
        if types is not None and not self.recording:
            t = types.get(id(e))
            if t is not None and t is not _SCOPED:
                return t
        rule = _EXPR_RULES.get(type(e))
        if rule is None:
            raise DSLTypeError(f"no typing rule for {type(e).__name__}", e.loc.line)
        self.worked_out += 1
        t = rule(self, e, scope)
        if self.recording:
            seen = types.get(id(e))
            types[id(e)] = t if seen is None or seen == t else _SCOPED
        return t

    def err(self, node, message: str) -> DSLTypeError:
        return DSLTypeError(message, node.loc.line, node.loc.col)

    # ------------------------------------------------------------ leaves
    def const(self, e: ir.Const, scope: Scope) -> Type:
        if e.value is None:
            return NoneT()
        if _is_nan(e.value):
            raise self.err(e, "a NaN constant has no DSL spelling (no literal parses to NaN)")
        return ScalarT(_const_dtype(e.value), e.value)

    def name(self, e: ir.Name, scope: Scope) -> Type:
        t = scope.names.get(e.id)
        if t is None:
            raise self.err(e, f"undefined name `{e.id}`")
        return t

    def symbol(self, e: ir.Symbol, scope: Scope) -> Type:
        if e.name in DTYPE_NAMES:
            return DTypeT(D.DTYPES[e.name])
        if e.name in MMA_POLICIES + PRECISIONS + ORDERS:
            return PolicyT(e.name)
        raise self.err(e, f"unknown DSL symbol `A.{e.name}`")

    def tuple_(self, e: ir.TupleExpr, scope: Scope) -> Type:
        return TupleT(tuple(self.expr(x, scope) for x in e.elts))

    def slice_(self, e: ir.Slice, scope: Scope) -> Type:
        return SliceT()

    # ------------------------------------------------------------ operators
    def binop(self, e: ir.BinOp, scope: Scope) -> Type:
        lt, rt = self.expr(e.lhs, scope), self.expr(e.rhs, scope)
        for side, t in (("left", lt), ("right", rt)):
            if not isinstance(t, (ScalarT, TileT)):
                raise self.err(e, f"operator `{e.op}`: {side} operand is {t}, not a number or tile")
        shape = broadcast(shape_of(lt), shape_of(rt), f"operator `{e.op}`", e.loc)
        a, b = lt.dtype, rt.dtype
        if e.op in ("<", "<=", ">", ">=", "==", "!="):
            return _typed(shape, D.i1, _fold(e.op, lt, rt))
        if e.op in ("&", "|", "^", "<<", ">>", "//", "%"):
            if a.is_float or b.is_float:
                raise self.err(e, f"operator `{e.op}` needs integer or boolean operands, got "
                               f"{a.name} and {b.name}")
        dtype = D.promote(a, b)
        if e.op == "/" and not dtype.is_float:
            dtype = D.f32
        if e.op in ("&", "|", "^") and a == b == D.i1:
            dtype = D.i1
        return _typed(shape, dtype, _fold(e.op, lt, rt))

    def unaryop(self, e: ir.UnaryOp, scope: Scope) -> Type:
        t = self.expr(e.operand, scope)
        if not isinstance(t, (ScalarT, TileT)):
            raise self.err(e, f"operator `{e.op}`: operand is {t}")
        if e.op == "~" and t.dtype.is_float:
            raise self.err(e, f"operator `~` needs an integer or boolean operand, got {t.dtype.name}")
        if isinstance(t, ScalarT) and t.value is not None:
            value = {"-": lambda v: -v, "~": lambda v: ~v, "not": lambda v: not v}[e.op](t.value)
            return ScalarT(D.i1 if e.op == "not" else t.dtype, _int64(value))
        return t if e.op != "not" else _typed(shape_of(t), D.i1)

    def subscript(self, e: ir.Subscript, scope: Scope) -> Type:
        base = self.expr(e.base, scope)
        if isinstance(base, TensorT):
            return self.reference(e, base, scope)
        if isinstance(base, TileT):
            return self.expand(e, base)
        raise self.err(e, f"cannot index {base}")

    def reference(self, e: ir.Subscript, t: TensorT, scope: Scope) -> RefT:
        """`t[i, j]`: one index per dim. 1-D index tiles combine as an outer product
        (orthogonal indexing, the result has one axis per tile index); index tiles of
        higher rank broadcast against each other as in Triton pointer arithmetic."""
        if len(e.index) != len(t.dims):
            raise self.err(e, f"tensor `{t.name}` has {len(t.dims)} dims {list(t.dims)}, "
                           f"indexed with {len(e.index)}")
        types = []
        for dim, idx in zip(t.dims, e.index):
            it = self.expr(idx, scope)
            if not isinstance(it, (ScalarT, TileT)) or it.dtype.is_float or it.dtype == D.i1:
                raise self.err(idx, f"index of `{t.name}` along {dim} must be an integer scalar "
                               f"or tile, got {it}")
            types.append(it)
        ranks = [len(shape_of(it)) for it in types]
        orthogonal = max(ranks) <= 1
        if orthogonal:
            shape = tuple(d for it in types for d in shape_of(it))
        else:
            shape = ()
            for it in types:
                shape = broadcast(shape, shape_of(it), f"index of `{t.name}`", e.loc)
        _check_tile_size(self, e, shape, f"index of `{t.name}`")
        return RefT(t, shape, tuple(types), orthogonal)

    def expand(self, e: ir.Subscript, t: TileT) -> TileT:
        """`x[:, None]`: keep axes with `:`, insert unit axes with `None`."""
        shape, axis = [], 0
        for idx in e.index:
            if isinstance(idx, ir.Slice):
                if axis >= len(t.shape):
                    raise self.err(e, f"too many `:` for a tile of shape {t.shape}")
                shape.append(t.shape[axis])
                axis += 1
            elif isinstance(idx, ir.Const) and idx.value is None:
                shape.append(1)
            else:
                raise self.err(idx, "tiles are indexed only with `:` and `None` (reshape), "
                               "not with values")
        if axis != len(t.shape):
            raise self.err(e, f"tile of shape {t.shape} indexed with {axis} `:`; "
                           f"give one `:` per axis")
        return TileT(tuple(shape), t.dtype)

    # ------------------------------------------------------------ op calls
    def call(self, e: ir.Call, scope: Scope) -> Type:
        rule = _CALL_RULES.get(e.fn)
        if rule is None:
            raise self.err(e, f"op `A.{e.fn}` has no typing rule")
        args = {k: self.expr(v, scope) for k, v in e.args}
        for k, v in e.tags:  # the parser keeps tag names apart from argument names
            if k in args:
                raise self.err(e, f"{e.fn}: tag `{k}` has the name of an argument")
            args[k] = self.expr(v, scope)
        return rule(self, e, args)

    # helpers used by the rules
    def const_int(self, e: ir.Call, args: dict, name: str, what: str | None = None) -> int:
        t = args.get(name)
        if not (isinstance(t, ScalarT) and isinstance(t.value, int) and not isinstance(t.value, bool)):
            raise self.err(e, f"{e.fn}: `{name}` must be a compile-time integer "
                           f"(a literal or an A.const), got {t}" if what is None else what)
        return t.value

    def number(self, e: ir.Call, args: dict, name: str) -> ScalarT | TileT:
        t = args[name]
        if not isinstance(t, (ScalarT, TileT)):
            raise self.err(e, f"{e.fn}: `{name}` must be a number or a tile, got {t}")
        return t

    def int_scalar(self, e: ir.Call, args: dict, name: str) -> ScalarT:
        t = args[name]
        if not isinstance(t, ScalarT) or not (t.dtype.is_int or t.dtype == D.i1):
            raise self.err(e, f"{e.fn}: `{name}` must be an integer scalar, got {t}")
        return t

    def dtype_arg(self, e: ir.Call, args: dict, name: str = "dtype") -> D.DType:
        t = args.get(name)
        if not isinstance(t, DTypeT):
            raise self.err(e, f"{e.fn}: `{name}` must be an element type such as A.f32, got {t}")
        return t.dtype

    def shape_arg(self, e: ir.Call, args: dict) -> tuple[int, ...]:
        t = args["shape"]
        elts = t.elts if isinstance(t, TupleT) else (t,)
        dims = []
        for x in elts:
            if not (isinstance(x, ScalarT) and isinstance(x.value, int) and not isinstance(x.value, bool)):
                raise self.err(e, f"{e.fn}: tile shape entries must be compile-time integers, got {x}")
            if not _pow2(x.value):
                raise self.err(e, f"{e.fn}: tile dims must be powers of two, got {x.value}")
            dims.append(x.value)
        _check_tile_size(self, e, tuple(dims), e.fn)
        return tuple(dims)

    def flag(self, e: ir.Call, args: dict, name: str) -> bool:
        t = args.get(name)
        if t is None:
            return False
        if not (isinstance(t, ScalarT) and isinstance(t.value, bool)):
            raise self.err(e, f"{e.fn}: `{name}` must be True or False, got {t}")
        return t.value


def _is_nan(value) -> bool:
    return isinstance(value, float) and value != value


def _const_dtype(value) -> D.DType:
    if isinstance(value, bool):
        return D.i1
    if isinstance(value, int):
        return D.i32 if -2**31 <= value < 2**31 else D.i64
    return D.f32


def _fold(op: str, a: Type, b: Type):
    """Constant-fold two compile-time scalars; None when either is not one, or when the
    result is not an int64 (see `_int64`) or a shift count lies outside 0..63."""
    if not (isinstance(a, ScalarT) and isinstance(b, ScalarT)):
        return None
    x, y = a.value, b.value
    if x is None or y is None:
        return None
    if op in ("<<", ">>") and not (isinstance(y, int) and 0 <= y <= 63):
        return None
    try:
        value = {"+": lambda: x + y, "-": lambda: x - y, "*": lambda: x * y,
                 "/": lambda: x / y, "//": lambda: x // y, "%": lambda: x % y,
                 "&": lambda: x & y, "|": lambda: x | y, "^": lambda: x ^ y,
                 "<<": lambda: x << y, ">>": lambda: x >> y, "<": lambda: x < y,
                 "<=": lambda: x <= y, ">": lambda: x > y, ">=": lambda: x >= y,
                 "==": lambda: x == y, "!=": lambda: x != y}[op]()
    except (ZeroDivisionError, TypeError, ValueError, OverflowError):
        return None
    return _int64(value)


@dataclass
class KernelInfo:
    """What the semantic pass learned about a whole program."""

    kernel: ir.Kernel
    grid: ir.Call
    loaded: set[str] = field(default_factory=set)     # tensors read
    stored: set[str] = field(default_factory=set)     # tensors written by `store`
    atomic: set[str] = field(default_factory=set)     # tensors written by `atomic_add`
    uses_num_sms: bool = False
    #: one grid per launch: a kernel body may hold several launches, each starting with a
    #: top-level `A.grid(...)` and running after the previous one has finished
    grids: list[ir.Call] = field(default_factory=list)
    #: per launch, the tensors it reads and the tensors it writes
    launch_loads: list[set[str]] = field(default_factory=list)
    launch_writes: list[set[str]] = field(default_factory=list)

    @property
    def workspaces(self) -> list[str]:
        """Tensors a later launch reads after an earlier launch wrote them, read by no
        launch before (or during) the first write: intermediate results between launches,
        which the launcher allocates when they are not given."""
        out = []
        for p in self.kernel.tensors:
            first = next((i for i, w in enumerate(self.launch_writes) if p.name in w), None)
            reads = [i for i, r in enumerate(self.launch_loads) if p.name in r]
            if first is not None and reads and min(reads) > first:
                out.append(p.name)
        return out

    @property
    def outputs(self) -> list[str]:
        """Tensors written and never read: the launcher may allocate them."""
        return [p.name for p in self.kernel.tensors
                if (p.name in self.stored or p.name in self.atomic) and p.name not in self.loaded]


def infer(kernel: ir.Kernel, typer: Typer | None = None) -> KernelInfo:
    """Type-check a whole program; raise `DSLTypeError` at the first problem. A `typer`
    with a `types` record is filled with the type of every expression met."""
    return _Checker(kernel, typer).run()


class _Checker:
    def __init__(self, kernel: ir.Kernel, typer: Typer | None = None):
        self.kernel = kernel
        self.typer = typer if typer is not None else Typer(kernel)
        self.typer.recording = self.typer.types is not None

    def run(self) -> KernelInfo:
        k = self.kernel
        body = k.body
        if not body or not (isinstance(body[0], ir.ExprStmt) and body[0].value.fn == "grid"):
            line = body[0].loc.line if body else k.loc.line
            raise DSLTypeError("the first statement of a kernel must be `A.grid(...)`, the "
                               "launch grid", line)
        self.info = KernelInfo(k, body[0].value)
        _check_options(k)
        for p in k.params:
            if _is_nan(p.default):
                raise DSLTypeError(f"parameter `{p.name}`: a NaN default has no DSL spelling "
                                   "(no literal parses to NaN)", p.loc.line, p.loc.col)
        for grid, stmts in launches(k):
            # a launch sees only parameters and sizes: values do not cross launches
            scope = self.typer.initial_scope()
            self.info.grids.append(grid)
            self.info.launch_loads.append(set())
            self.info.launch_writes.append(set())
            self._grid_names(grid, scope)
            self._effects(ir.ExprStmt(grid))
            self.typer.expr(grid, scope)
            self.block(stmts, scope, in_loop=False)
        self.typer.recording = False
        return self.info

    def _grid_names(self, grid: ir.Call, scope: Scope) -> None:
        """The grid is evaluated on the host: only sizes, constants and scalars may appear."""
        from ..ir.rewrite import walk
        host = {p.name for p in self.kernel.params if p.kind != "tensor"} | set(self.kernel.sizes)
        for node in walk(grid):
            if isinstance(node, ir.Name) and node.id not in host:
                raise DSLTypeError(f"grid: `{node.id}` is not known at launch; the grid may use "
                                   "problem sizes, constants, scalars and A.num_sms()",
                                   node.loc.line, node.loc.col)
            if isinstance(node, ir.Call) and node.fn not in ("grid", "cdiv", "minimum",
                                                             "maximum", "num_sms"):
                raise DSLTypeError(f"grid: A.{node.fn} cannot be evaluated at launch",
                                   node.loc.line, node.loc.col)

    def block(self, stmts, scope: Scope, in_loop: bool) -> None:
        for s in stmts:
            if isinstance(s, ir.ExprStmt) and s.value.fn == "grid":
                raise DSLTypeError("`A.grid` may appear only at the top level of the kernel: "
                                   "as its first statement, and again to start a new launch",
                                   s.loc.line)
            self.stmt(s, scope, in_loop)

    def stmt(self, s: ir.Stmt, scope: Scope, in_loop: bool) -> None:
        self._effects(s)
        if isinstance(s, ir.Assign):
            t = self.typer.expr(s.value, scope)
            self._bind(s, t, scope)
        elif isinstance(s, ir.ExprStmt):
            self.typer.expr(s.value, scope)
        elif isinstance(s, ir.For):
            self.loop(s, scope)
        elif isinstance(s, ir.If):
            self.branch(s, scope, in_loop)
        else:
            raise DSLTypeError(f"no typing rule for statement {type(s).__name__}", s.loc.line)

    def _bind(self, s: ir.Assign, t: Type, scope: Scope) -> None:
        if len(s.targets) == 1:
            values = [t]
        elif isinstance(t, TupleT) and len(t.elts) == len(s.targets):
            values = list(t.elts)
        else:
            raise DSLTypeError(f"cannot unpack {t} into {len(s.targets)} names", s.loc.line)
        for name, v in zip(s.targets, values):
            if not isinstance(v, (ScalarT, TileT)):
                raise DSLTypeError(f"`{name}` cannot hold {v}; only numbers and tiles are values",
                                   s.loc.line)
            self._assignable(name, s)
            scope.names[name] = v

    def _assignable(self, name: str, s: ir.Stmt) -> None:
        """Parameters and problem sizes are fixed for the whole kernel: no assignment and no
        loop variable may rebind them."""
        if name in self.kernel.sizes or self.kernel.param(name) is not None:
            raise DSLTypeError(f"cannot assign to `{name}`: it is a kernel parameter or "
                               "problem size", s.loc.line)

    def loop(self, s: ir.For, scope: Scope) -> None:
        self.typer.expr(s.iter, scope)
        self._assignable(s.var, s)
        from ..ir.rewrite import assigned
        inner = scope.copy()
        for node in assigned(s.body):
            if node in inner.names:  # loop-carried: its value varies between iterations
                inner.names[node] = _runtime(inner.names[node])
        inner.names[s.var] = ScalarT(D.i32)
        self.block(s.body, inner, in_loop=True)
        for name, before in scope.names.items():
            after = inner.names.get(name)
            if after is not None and _runtime(after) != _runtime(before):
                raise DSLTypeError(f"loop-carried `{name}` changes type in the loop body from "
                                   f"{before} to {after}; keep its shape and dtype (use A.cast)",
                                   s.loc.line)
            if after is not None and after != before:
                scope.names[name] = _runtime(before)

    def branch(self, s: ir.If, scope: Scope, in_loop: bool) -> None:
        c = self.typer.expr(s.cond, scope)
        if not isinstance(c, ScalarT):
            raise DSLTypeError(f"`if` needs a scalar condition, got {c}; use A.where for tiles",
                               s.loc.line)
        then, other = scope.copy(), scope.copy()
        self.block(s.body, then, in_loop)
        self.block(s.orelse, other, in_loop)
        for name in set(then.names) | set(other.names):
            a, b = then.names.get(name), other.names.get(name)
            if a is None or b is None:
                continue  # defined on one side only: not visible after the `if`
            if _runtime(a) != _runtime(b):
                raise DSLTypeError(f"`{name}` has type {a} in one branch and {b} in the other",
                                   s.loc.line)
            scope.names[name] = a if a == b else _runtime(a)

    def _effects(self, s: ir.Stmt) -> None:
        from ..ir.rewrite import walk
        roots = [s.value] if isinstance(s, (ir.Assign, ir.ExprStmt)) else \
            [s.iter] if isinstance(s, ir.For) else [s.cond]
        for root in roots:
            for node in walk(root):
                if not isinstance(node, ir.Call):
                    continue
                if node.fn == "num_sms":
                    self.info.uses_num_sms = True
                ref = node.arg("ref")
                if isinstance(ref, ir.Subscript) and isinstance(ref.base, ir.Name):
                    {"load": self.info.loaded, "store": self.info.stored,
                     "atomic_add": self.info.atomic}[node.fn].add(ref.base.id)
                    if self.info.launch_loads:
                        (self.info.launch_loads if node.fn == "load" else
                         self.info.launch_writes)[-1].add(ref.base.id)


def _check_options(kernel: ir.Kernel) -> None:
    """Launch options Triton accepts: `num_warps` a power of two from 1 to 32 (at most 1024
    threads a program), `num_stages` a positive integer."""
    for name, value in kernel.options:
        is_int = isinstance(value, int) and not isinstance(value, bool)
        if name == "num_warps" and not (is_int and 1 <= value <= 32 and value & (value - 1) == 0):
            raise DSLTypeError(f"kernel option num_warps must be a power of two from 1 to 32, "
                               f"got {value!r}", kernel.loc.line)
        if name == "num_stages" and not (is_int and value >= 1):
            raise DSLTypeError(f"kernel option num_stages must be a positive integer, got "
                               f"{value!r}", kernel.loc.line)


def launches(kernel: ir.Kernel) -> list[tuple[ir.Call, list[ir.Stmt]]]:
    """The kernel's launches in order: each top-level `A.grid(...)` with the statements up to
    the next one. A single-launch kernel has one."""
    out: list[tuple[ir.Call, list[ir.Stmt]]] = []
    for s in kernel.body:
        if isinstance(s, ir.ExprStmt) and s.value.fn == "grid":
            out.append((s.value, []))
        elif out:
            out[-1][1].append(s)
    return out



def _runtime(t: Type) -> Type:
    """The type with its compile-time value forgotten (a loop-carried scalar varies)."""
    return ScalarT(t.dtype) if isinstance(t, ScalarT) else t


_EXPR_RULES: dict[type, Callable] = {
    ir.Const: Typer.const, ir.Name: Typer.name, ir.Symbol: Typer.symbol,
    ir.TupleExpr: Typer.tuple_, ir.Slice: Typer.slice_, ir.BinOp: Typer.binop,
    ir.UnaryOp: Typer.unaryop, ir.Subscript: Typer.subscript, ir.Call: Typer.call,
}

