"""What the symbolic interpreter records while it runs: the enclosing loops and branches
(`Frame`), the writes the whole-program checks read afterwards (`Write`), and how a
counterexample names its statement and the thread owning a tile element."""

from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import Callable

import z3

from ...ir import nodes as ir
from ...ir.printer import _stmt_ast, print_expr
from ...layout.tv import fragment_layout
from ..fragments import as_stored, mma_policy
from .values import SV


@dataclass
class Frame:
    """One enclosing runtime loop (or `if`) of the current point."""

    kind: str                         # "loop" or "if"
    cons: list[z3.BoolRef]            # constraints its body runs under
    var: z3.ArithRef | None = None    # iteration counter t
    name: str = ""                    # the loop variable's name
    start: z3.ArithRef | None = None
    stop: z3.ArithRef | None = None
    step: z3.ArithRef | None = None
    carried: set = None               # names carried around this loop
    value: z3.ArithRef | None = None  # the loop variable's value at iteration `var`
    at: Callable | None = None        # t' -> substitution pairs moving the body to t'


@dataclass
class Write:
    """A recorded `store` or `atomic_add`, for the whole-program checks."""

    tensor: str
    coords: list[z3.ArithRef]
    live: z3.BoolRef
    value: SV
    atomic: bool
    tma: bool
    shape: tuple[int, ...]
    path: list[z3.BoolRef]
    frames: list[Frame]
    stmt: ir.Stmt
    names: dict[str, z3.ArithRef]


def owner(frag, shape, kernel: ir.Kernel, element,
          target=None) -> tuple[int | None, int | None]:
    """Thread and register owning `element` of a tile of fragment policy `frag` (an MMA
    accumulator without a stated instruction takes the `target`'s default; a transposed
    accumulator's element is the accumulator's transposed one)."""
    frag, shape, element = as_stored(frag, shape, element)
    warps = kernel.option("num_warps", 4)
    policy = frag if frag in ("wgmma", "mma_v2") else (
        mma_policy(target, warps, shape[0]) if frag == "mma" else "blocked")
    if policy not in ("wgmma", "mma_v2"):
        policy = "blocked"  # FMA: a blocked layout
    try:
        thread, reg = fragment_layout(policy, tuple(shape), warps).owner_of(*element)
        return int(thread), int(reg)
    except (ValueError, TypeError, AssertionError, IndexError):
        return None, None


def stmt_text(s) -> str:
    """The DSL text of a statement (its header for `for` and `if`), at most 100 chars."""
    if s is None:
        return ""
    if isinstance(s, ir.For):
        return f"for {s.var} in {print_expr(s.iter)}"
    if isinstance(s, ir.If):
        return f"if {print_expr(s.cond)}"
    text = ast.unparse(_stmt_ast(s))
    return text if len(text) <= 100 else text[:97] + "..."
