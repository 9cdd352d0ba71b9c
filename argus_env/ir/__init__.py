"""The DSL's intermediate representation: immutable nodes, printer, hashing and rewriting."""

from .nodes import (NOLOC, Assign, BinOp, Call, Const, Symbol, Expr, ExprStmt, For, If,
                    Kernel, Loc, Name, Param, Slice, Stmt, Subscript, TupleExpr, UnaryOp)
from .printer import print_kernel, print_expr
from .rewrite import structural_hash, transform, walk, with_const, with_option

__all__ = [
    "NOLOC", "Assign", "BinOp", "Call", "Const", "Symbol", "Expr", "ExprStmt", "For", "If",
    "Kernel", "Loc", "Name", "Param", "Slice", "Stmt", "Subscript", "TupleExpr", "UnaryOp",
    "print_kernel", "print_expr", "structural_hash", "transform", "walk", "with_const",
    "with_option",
]
