"""Element types of the DSL, with their Triton and PyTorch spellings."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class DType:
    """A scalar element type: `A.bf16`, `A.f32`, ... in DSL text."""

    name: str
    bits: int
    kind: str  # "float", "int" or "bool"
    triton: str
    torch: str

    @property
    def is_float(self) -> bool:
        return self.kind == "float"

    @property
    def is_int(self) -> bool:
        return self.kind == "int"

    @property
    def itemsize(self) -> int:
        return max(1, self.bits // 8)

    def __repr__(self) -> str:
        return f"A.{self.name}"


bf16 = DType("bf16", 16, "float", "tl.bfloat16", "bfloat16")
f16 = DType("f16", 16, "float", "tl.float16", "float16")
f32 = DType("f32", 32, "float", "tl.float32", "float32")
f64 = DType("f64", 64, "float", "tl.float64", "float64")
i32 = DType("i32", 32, "int", "tl.int32", "int32")
i64 = DType("i64", 64, "int", "tl.int64", "int64")
i1 = DType("i1", 1, "bool", "tl.int1", "bool")

DTYPES: dict[str, DType] = {d.name: d for d in (bf16, f16, f32, f64, i32, i64, i1)}


def promote(a: DType, b: DType) -> DType:
    """Result type of a binary arithmetic op, following Triton's rules closely enough.

    Floats beat ints; among floats the wider wins (bf16 with f16 gives f32, as in Triton);
    among ints the wider wins; bools behave as the narrowest int.
    """
    if a == b:
        return a
    if a.is_float and b.is_float:
        if a.bits == b.bits:
            return f32
        return a if a.bits > b.bits else b
    if a.is_float:
        return a
    if b.is_float:
        return b
    return a if a.bits >= b.bits else b


def from_torch(name: str) -> DType:
    """The DSL dtype whose torch spelling is `name` (e.g. "bfloat16")."""
    for d in DTYPES.values():
        if d.torch == name:
            return d
    raise KeyError(f"no DSL dtype for torch dtype {name!r}")
