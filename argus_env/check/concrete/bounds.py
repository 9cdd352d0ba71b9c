"""Coverage bounds of the task over integers: "K", "K // 2", "min(pos(SQ) + 1, SK)".

`size_expr` evaluates a bound over the problem's size names (without `eval`); `bound` also
reads `pos(DIM)`, the destination element's index along DIM, from coordinate arrays, so a
causal row requires its own keys `[0, query + 1)`.
"""

from __future__ import annotations

import ast

import numpy as np

_SIZE_OPS = {ast.Add: lambda a, b: a + b, ast.Sub: lambda a, b: a - b,
             ast.Mult: lambda a, b: a * b, ast.FloorDiv: lambda a, b: a // b,
             ast.Mod: lambda a, b: a % b}


def bound(text: str, sizes: dict[str, int], where: dict | None = None):
    """`text` over `sizes`, `min(a, b)` and `pos(DIM)` (from `where`: dim -> coordinates):
    an int, or an int64 array shaped like the coordinates."""
    def ev(node: ast.AST):
        if isinstance(node, ast.Constant) and type(node.value) is int:
            return node.value
        if isinstance(node, ast.Name) and node.id in sizes:
            return sizes[node.id]
        if isinstance(node, ast.BinOp) and type(node.op) in _SIZE_OPS:
            return _SIZE_OPS[type(node.op)](ev(node.left), ev(node.right))
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            return -ev(node.operand)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and not node.keywords:
            if node.func.id == "min" and len(node.args) == 2:
                return np.minimum(ev(node.args[0]), ev(node.args[1]))
            if node.func.id == "pos" and len(node.args) == 1 and isinstance(node.args[0], ast.Name) \
                    and where is not None and node.args[0].id in where:
                return np.asarray(where[node.args[0].id], dtype=np.int64)
        raise ValueError(f"coverage bound {text!r}: only integers, the size names "
                         f"{sorted(sizes)}, + - * // %, min() and pos(DIM) are allowed")
    out = ev(ast.parse(str(text), mode="eval").body)
    return int(out) if np.ndim(out) == 0 else out


def size_expr(text: str, sizes: dict[str, int]) -> int:
    """Evaluate a bound such as "K" or "K // 2" over size names, without eval()."""
    out = bound(text, sizes)
    if not isinstance(out, int):
        raise ValueError(f"coverage bound {text!r} depends on the element (pos)")
    return out


__all__ = ["bound", "size_expr"]
