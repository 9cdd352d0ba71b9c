"""Types of DSL values, as the semantic layer infers them.

Tile shapes are concrete: compile-time constants (`BM: A.const = 128`) are known when a
program is checked, as in Triton. Problem sizes (`M`, `N`, `K`) stay symbolic: they are
runtime scalars.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Union

from .dtypes import DType


@dataclass(frozen=True)
class ScalarT:
    """One value per program instance. `value` is set when it is a compile-time constant."""

    dtype: DType
    value: Union[int, float, bool, None] = None

    def __str__(self) -> str:
        return f"scalar {self.dtype.name}" + ("" if self.value is None else f" = {self.value}")


@dataclass(frozen=True)
class TileT:
    """A block of values held by one program instance."""

    shape: tuple[int, ...]
    dtype: DType

    def __str__(self) -> str:
        return f"tile {self.shape} {self.dtype.name}"


@dataclass(frozen=True)
class TensorT:
    """A global tensor parameter; only indexed, never used as a value."""

    name: str
    dtype: DType
    dims: tuple[str, ...]

    def __str__(self) -> str:
        return f"tensor {self.name}{list(self.dims)} {self.dtype.name}"


@dataclass(frozen=True)
class RefT:
    """`t[i, j, ...]`: the elements of tensor `t` named by index tiles, ready to load or store.

    `shape` is the tile shape the access produces; `axes[d]` says which tile axis the index
    of tensor dim d runs along (None for a scalar index) in orthogonal indexing.
    """

    tensor: TensorT
    shape: tuple[int, ...]
    index_types: tuple[Union[ScalarT, TileT], ...]
    orthogonal: bool

    @property
    def dtype(self) -> DType:
        return self.tensor.dtype

    def __str__(self) -> str:
        return f"reference into {self.tensor.name} of shape {self.shape}"


@dataclass(frozen=True)
class DTypeT:
    """The value of `A.bf16` and friends."""

    dtype: DType

    def __str__(self) -> str:
        return f"dtype {self.dtype.name}"


@dataclass(frozen=True)
class TupleT:
    elts: tuple["Type", ...]

    def __str__(self) -> str:
        return "(" + ", ".join(str(e) for e in self.elts) + ")"


@dataclass(frozen=True)
class NoneT:
    def __str__(self) -> str:
        return "None"


@dataclass(frozen=True)
class SliceT:
    def __str__(self) -> str:
        return ":"


@dataclass(frozen=True)
class CoverT:
    """`A.covers(lo, hi)`: a tag relation, meaningful only inside `A.assert_tags`."""

    def __str__(self) -> str:
        return "coverage relation"


@dataclass(frozen=True)
class VoidT:
    def __str__(self) -> str:
        return "nothing"


Type = Union[ScalarT, TileT, TensorT, RefT, DTypeT, TupleT, NoneT, SliceT, CoverT, VoidT]


def shape_of(t: Type) -> tuple[int, ...]:
    """Shape for broadcasting: scalars are rank 0."""
    if isinstance(t, TileT):
        return t.shape
    return ()


def dtype_of(t: Type) -> DType:
    return t.dtype  # type: ignore[union-attr]
