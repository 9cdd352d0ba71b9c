"""The expression printer spells each expression directly (`printer._text`), by the rules
`ast.unparse` follows for the Python expression `to_ast` makes of it: the same text, for
every expression of every program the tests and the tasks have (and for the corners:
parentheses by precedence, negative and infinite literals, tuples in subscripts and
calls, `not`, a memo shared by many expressions)."""

from __future__ import annotations

import ast
import itertools
import sys
from pathlib import Path

import pytest

from argus_env.dsl import Program
from argus_env.ir import nodes as ir
from argus_env.ir.printer import print_expr, to_ast
from argus_env.ir.rewrite import walk

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_roundtrip import INLINE, PROGRAM_FILES  # noqa: E402

EXPRS = (ir.Const, ir.Name, ir.Symbol, ir.Slice, ir.TupleExpr, ir.Call, ir.BinOp,
         ir.UnaryOp, ir.Subscript)


def _unparsed(e) -> str:
    return ast.unparse(to_ast(e))


def _programs() -> list[Program]:
    out = [Program.from_file(p) for p in PROGRAM_FILES]
    out += [Program.from_text(t) for t in INLINE.values()]
    check = Path(__file__).resolve().parents[1] / "check"
    sys.path.insert(0, str(check))
    import corpus, corpus_attention, corpus_moe  # noqa: E401
    for m in corpus.CORPUS + corpus_attention.CORPUS + corpus_moe.CORPUS:
        out.append(m.program())
    return out


def test_every_expression_of_every_program_prints_as_unparse():
    n, memo = 0, {}
    for p in _programs():
        for node in walk(p.kernel):
            if isinstance(node, EXPRS):
                want = _unparsed(node)
                assert print_expr(node) == want, want
                assert print_expr(node, memo) == want, want  # with a memo across them
                n += 1
    assert n > 5000


def test_precedence_corners_print_as_unparse():
    a, b, c = ir.Name("a"), ir.Name("b"), ir.Name("c")
    leaves = [a, ir.Const(-3), ir.Const(2.5), ir.Const(-0.0), ir.Const(float("inf")),
              ir.Const(float("-inf")), ir.Const(True), ir.Const(None), ir.Symbol("bf16"),
              ir.TupleExpr((a, b)), ir.TupleExpr((a,)), ir.TupleExpr(()),
              ir.Call("arange", (("n", b),))]
    ops = ["+", "-", "*", "/", "//", "%", "<<", ">>", "&", "|", "^", "<", "<=", "==", "!="]
    nested = [ir.BinOp(o, x, y) for o in ops for x, y in itertools.product(leaves[:4], repeat=2)]
    nested += [ir.UnaryOp(o, x) for o in ("-", "~", "not") for x in leaves + nested[:40]]
    exprs = list(nested)
    for o, p in itertools.product(ops, repeat=2):
        exprs += [ir.BinOp(o, ir.BinOp(p, a, b), c), ir.BinOp(o, a, ir.BinOp(p, b, c))]
    for x in leaves + nested[:60]:
        exprs += [ir.Subscript(a, (x,)), ir.Subscript(x, (a, ir.Slice())),
                  ir.Subscript(a, (x, ir.Const(None))), ir.TupleExpr((x, a)),
                  ir.TupleExpr((x,)), ir.Call("where", (("cond", x), ("x", a), ("y", x))),
                  ir.Call("assert_tags", (("x", a),), (("K", x),))]
    exprs += [ir.Subscript(a, ()), ir.Subscript(a, (ir.TupleExpr((a, b)),)),
              ir.Subscript(a, (ir.TupleExpr(()),)), ir.Subscript(a, (ir.TupleExpr((b,)),))]
    memo = {}
    for e in exprs:
        want = _unparsed(e)
        assert print_expr(e) == want == print_expr(e, memo), (want, print_expr(e))


def test_unprintable_literals_are_refused_alike():
    with pytest.raises(ValueError):
        print_expr(ir.Const(float("nan")))
