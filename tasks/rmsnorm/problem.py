"""The problem itself, shared by the task, its space and its cost model: the tensors, the
epsilon, the whole-row tile width, and the FLOP and byte counts."""

from __future__ import annotations

EPS = 1e-6
#: tensors every program takes: name -> (dims, dtype)
SIGNATURE = {"x": (("T", "H"), "bf16"), "residual": (("T", "H"), "bf16"),
             "weight": (("H",), "bf16"), "out": (("T", "H"), "bf16"),
             "residual_out": (("T", "H"), "bf16")}


def hp(h: int) -> int:
    """H rounded up to a power of two: the width of a whole-row tile."""
    return 1 << max(0, (int(h) - 1).bit_length())


def flops(sizes) -> float:
    """Per element: the add, the square, its sum, the scale and the weight; per row: the
    mean, the square root and its inverse."""
    return 5.0 * sizes["T"] * sizes["H"] + 3.0 * sizes["T"]


def min_bytes(sizes) -> float:
    """x and residual read, out and residual_out written (bf16), the weight once."""
    return 2.0 * (4 * sizes["T"] * sizes["H"] + sizes["H"])
