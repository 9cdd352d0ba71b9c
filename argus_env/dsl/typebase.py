"""Leaf helpers of the DSL's typing rules, shared by the typer (`semantic`) and the op
rules (`oprules`): policy values, tile-size limits, broadcasting, integer bounds."""

from __future__ import annotations

from dataclasses import dataclass

from ..ir import nodes as ir
from . import dtypes as D
from .errors import DSLTypeError
from .types import ScalarT, TileT, Type


@dataclass(frozen=True)
class PolicyT:
    """The value of a policy symbol such as `A.wgmma` or `A.tf32`."""

    name: str

    def __str__(self) -> str:
        return f"policy {self.name}"


MAX_TILE_ELEMENTS = 1 << 20  # Triton's limit on the number of elements of one tile
INT64_MIN, INT64_MAX = -2**63, 2**63 - 1  # folded integers beyond these are not constants


def _pow2(n: int) -> bool:
    return n > 0 and n & (n - 1) == 0


def broadcast(a: tuple[int, ...], b: tuple[int, ...], what: str, loc: ir.Loc) -> tuple[int, ...]:
    """Numpy broadcasting of two tile shapes, or a `DSLTypeError` naming both."""
    out = []
    ra, rb = a[::-1], b[::-1]
    for i in range(max(len(a), len(b))):
        x = ra[i] if i < len(ra) else 1
        y = rb[i] if i < len(rb) else 1
        if x != y and 1 not in (x, y):
            raise DSLTypeError(f"{what}: shapes {a} and {b} do not broadcast (axis "
                               f"{max(len(a), len(b)) - 1 - i}: {x} vs {y})", loc.line, loc.col)
        out.append(max(x, y))
    return tuple(out[::-1])


def _typed(shape: tuple[int, ...], dtype: D.DType, value=None) -> Type:
    return TileT(shape, dtype) if shape else ScalarT(dtype, value)


def _check_tile_size(typer, node, shape: tuple[int, ...], what: str) -> None:
    """Reject a tile of more than MAX_TILE_ELEMENTS; `what` names the op (or the access)."""
    n = 1
    for d in shape:
        n *= d
    if n > MAX_TILE_ELEMENTS:
        raise typer.err(node, f"{what}: tile of shape {shape} has {n} elements; the limit is "
                        f"{MAX_TILE_ELEMENTS}")


def _int64(value):
    """`value`, or None (not a compile-time constant) for an integer outside int64.

    Bounding every folded integer keeps folding cheap: without it, `a = a * a` repeated
    forty times builds a number with trillions of digits and hangs the checker."""
    if isinstance(value, int) and not isinstance(value, bool) \
            and not INT64_MIN <= value <= INT64_MAX:
        return None
    return value
