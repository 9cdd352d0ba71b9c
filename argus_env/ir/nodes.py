"""Immutable IR nodes of the tile DSL.

The IR is a small structured language: a `Kernel` holds typed parameters and a body of
statements (assignments, `for` loops with compiler policies, `if`, and op calls such as
`store`); expressions are trees of constants, names, op calls, arithmetic and subscripts.
Every node records its source location in `loc`, which takes part in neither equality
nor hashing: two programs that differ only in where their text sits are the same
program. Nodes are frozen dataclasses, so structural equality and hashing come free;
the nodes that hold Python literals (`Const`, `Param`, `Kernel`) compare them by type
and spelling as well as by value, since `2`, `2.0` and `True` print differently.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Union


@dataclass(frozen=True)
class Loc:
    """A source position: 1-based line, 0-based column (0 when unknown)."""

    line: int = 0
    col: int = 0

    def __str__(self) -> str:
        return f"line {self.line}" if self.line else "unknown line"


NOLOC = Loc()


def _loc() -> Loc:
    return field(default=NOLOC, compare=False, hash=False, repr=False, kw_only=True)


def _literal_key(value):
    """What equality sees of a literal: its type and its repr, so that `2`, `2.0` and `True`
    differ (Python says they are equal), as do `0.0` and `-0.0`, exactly as in
    `structural_hash`, which hashes the repr. Tuples (kernel options) are keyed item by item;
    anything else (names, child nodes) is compared as itself."""
    if isinstance(value, (bool, int, float)):
        return type(value).__name__, repr(value)
    if isinstance(value, tuple):
        return tuple(_literal_key(v) for v in value)
    return value


def _typed_literals(cls):
    """Class decorator for a frozen dataclass declared with `eq=False`: equality and hashing
    over the compared fields, with literals keyed by `_literal_key`."""
    names = tuple(f.name for f in fields(cls) if f.compare)

    def key(self) -> tuple:
        return tuple(_literal_key(getattr(self, n)) for n in names)

    def __eq__(self, other):
        if other.__class__ is not self.__class__:
            return NotImplemented
        return key(self) == key(other)

    def __hash__(self) -> int:
        return hash(key(self))

    cls.__eq__, cls.__hash__ = __eq__, __hash__
    return cls


# ---------------------------------------------------------------- expressions
@_typed_literals
@dataclass(frozen=True, eq=False)
class Const:
    """A literal: int, float, bool, or None (as in `x[:, None]` or `mask=None`)."""

    value: Union[int, float, bool, None]
    loc: Loc = _loc()


@dataclass(frozen=True)
class Name:
    """A reference to a parameter, a size symbol (`M`) or a local variable."""

    id: str
    loc: Loc = _loc()


@dataclass(frozen=True)
class Symbol:
    """A named DSL constant: an element type (`A.bf16`) or a policy value (`A.wgmma`)."""

    name: str
    loc: Loc = _loc()


@dataclass(frozen=True)
class Slice:
    """The full slice `:` inside a tile subscript such as `x[:, None]`."""

    loc: Loc = _loc()


@dataclass(frozen=True)
class TupleExpr:
    """A tuple of expressions, e.g. a tile shape `(BM, BN)` or per-axis masks."""

    elts: tuple["Expr", ...]
    loc: Loc = _loc()


@dataclass(frozen=True)
class Call:
    """A call of a DSL op `A.<fn>`. Arguments are bound to the op's parameter names, in the
    op's declared order (`args`), so `A.dot(x, y, acc)` and `A.dot(x, y, acc=acc)` are one node.
    Ops that take free keyword tags (`A.tag`, `A.assert_tags`) keep them in `tags`."""

    fn: str
    args: tuple[tuple[str, "Expr"], ...] = ()
    tags: tuple[tuple[str, "Expr"], ...] = ()
    loc: Loc = _loc()

    def arg(self, name: str, default: "Expr | None" = None) -> "Expr | None":
        for key, value in self.args:
            if key == name:
                return value
        return default

    def has(self, name: str) -> bool:
        return any(key == name for key, _ in self.args)


@dataclass(frozen=True)
class BinOp:
    """Binary arithmetic, bitwise or comparison: op is the Python token ('+', '//', '<', '&')."""

    op: str
    lhs: "Expr"
    rhs: "Expr"
    loc: Loc = _loc()


@dataclass(frozen=True)
class UnaryOp:
    """Unary minus, bitwise not ('~') or logical not ('not')."""

    op: str
    operand: "Expr"
    loc: Loc = _loc()


@dataclass(frozen=True)
class Subscript:
    """`t[i, j]` on a global tensor (a reference for load/store), or `x[:, None]` on a tile."""

    base: "Expr"
    index: tuple["Expr", ...]
    loc: Loc = _loc()


Expr = Union[Const, Name, Symbol, Slice, TupleExpr, Call, BinOp, UnaryOp, Subscript]


# ---------------------------------------------------------------- statements
@dataclass(frozen=True)
class Assign:
    """`x = expr`, or `a, b = expr` for an op returning several values."""

    targets: tuple[str, ...]
    value: Expr
    loc: Loc = _loc()


@dataclass(frozen=True)
class For:
    """`for var in A.range(...)` (a runtime loop with policies) or `A.static_range(n)`."""

    var: str
    iter: Call
    body: tuple["Stmt", ...]
    loc: Loc = _loc()


@dataclass(frozen=True)
class If:
    """`if cond: ... else: ...` on a scalar condition."""

    cond: Expr
    body: tuple["Stmt", ...]
    orelse: tuple["Stmt", ...] = ()
    loc: Loc = _loc()


@dataclass(frozen=True)
class ExprStmt:
    """An op called for its effect: `A.store`, `A.atomic_add`, `A.grid`, `A.assert_tags`."""

    value: Call
    loc: Loc = _loc()


Stmt = Union[Assign, For, If, ExprStmt]


# ---------------------------------------------------------------- kernel
@_typed_literals
@dataclass(frozen=True, eq=False)
class Param:
    """A kernel parameter.

    kind "tensor": a global tensor `A.Tensor[dtype, "M", "K"]` whose dims name size symbols;
    kind "const": a compile-time constant `BM: A.const = 128` (its default is its value);
    kind "scalar": a runtime scalar such as `scale: A.f32`.
    A tensor's `order` is its storage order: "row_major" (last dim contiguous, the default)
    or "col_major" (first dim contiguous; 2-D only, e.g. a k-major B operand).
    """

    name: str
    kind: str
    dtype: str | None = None
    dims: tuple[str, ...] = ()
    order: str = "row_major"
    default: Union[int, float, bool, None] = None
    loc: Loc = _loc()


@_typed_literals
@dataclass(frozen=True, eq=False)
class Kernel:
    """A whole DSL program: one kernel with its launch options (`num_warps`, `num_stages`)."""

    name: str
    params: tuple[Param, ...]
    body: tuple[Stmt, ...]
    options: tuple[tuple[str, Union[int, bool]], ...] = ()
    doc: str | None = None
    loc: Loc = _loc()

    def param(self, name: str) -> Param | None:
        for p in self.params:
            if p.name == name:
                return p
        return None

    @property
    def consts(self) -> dict[str, Union[int, float, bool, None]]:
        return {p.name: p.default for p in self.params if p.kind == "const"}

    @property
    def tensors(self) -> tuple[Param, ...]:
        return tuple(p for p in self.params if p.kind == "tensor")

    @property
    def sizes(self) -> tuple[str, ...]:
        """Size symbols in order of first appearance among the tensor dims (a dim that
        names a compile-time constant, such as a workspace's `SPLIT_K`, is no size)."""
        consts = self.consts
        seen: list[str] = []
        for p in self.tensors:
            for d in p.dims:
                if d not in seen and d not in consts:
                    seen.append(d)
        return tuple(seen)

    @property
    def const_dims(self) -> dict[str, int]:
        """Tensor dims that name a compile-time constant, with its value: a workspace
        between launches may be `A.Tensor[A.f32, "SPLIT_K", "M", "N"]`."""
        consts = self.consts
        return {d: consts[d] for p in self.tensors for d in p.dims if d in consts}

    def extents(self, sizes: dict) -> dict:
        """The extent of every dim name: the problem's sizes and the constant dims."""
        return {**sizes, **self.const_dims}

    def option(self, name: str, default=None):
        return dict(self.options).get(name, default)


Node = Union[Expr, Stmt, Param, Kernel]
