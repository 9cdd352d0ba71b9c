"""Print IR back to DSL text.

The printer builds a Python `ast` for the program and lets `ast.unparse` handle operator
precedence, so the text always parses back (through `argus_env.dsl.parse_program`) to an
equal IR. Only the function signature is laid out by hand, one parameter per line, to
keep long signatures readable; the body is unparsed inside a function definition, so a
multi-line docstring keeps its text exactly. One expression (`print_expr`, which the
checker's messages ask for thousands of times a check) is spelled directly by the rules
`ast.unparse` follows, without the `ast` objects (`tests/ir/test_printer.py` holds the two
equal on every expression of every program).
"""

from __future__ import annotations

import ast
import math

from . import nodes as ir
from .ops import OPS

ALIAS = "A"
HEADER = "from argus_env import dsl as A\n"

_BIN = {"+": ast.Add, "-": ast.Sub, "*": ast.Mult, "/": ast.Div, "//": ast.FloorDiv,
        "%": ast.Mod, "&": ast.BitAnd, "|": ast.BitOr, "^": ast.BitXor, "<<": ast.LShift,
        ">>": ast.RShift}
_CMP = {"<": ast.Lt, "<=": ast.LtE, ">": ast.Gt, ">=": ast.GtE, "==": ast.Eq, "!=": ast.NotEq}
_UN = {"-": ast.USub, "~": ast.Invert, "not": ast.Not}


def _a(attr: str) -> ast.expr:
    return ast.Attribute(value=ast.Name(id=ALIAS, ctx=ast.Load()), attr=attr, ctx=ast.Load())


def to_ast(e: ir.Expr) -> ast.expr:
    """The Python expression that spells `e` in DSL text."""
    if isinstance(e, ir.Const):
        return _const_ast(e.value)
    if isinstance(e, ir.Name):
        return ast.Name(id=e.id, ctx=ast.Load())
    if isinstance(e, ir.Symbol):
        return _a(e.name)
    if isinstance(e, ir.Slice):
        return ast.Slice()
    if isinstance(e, ir.TupleExpr):
        return ast.Tuple(elts=[to_ast(x) for x in e.elts], ctx=ast.Load())
    if isinstance(e, ir.BinOp):
        if e.op in _CMP:
            return ast.Compare(left=to_ast(e.lhs), ops=[_CMP[e.op]()], comparators=[to_ast(e.rhs)])
        return ast.BinOp(left=to_ast(e.lhs), op=_BIN[e.op](), right=to_ast(e.rhs))
    if isinstance(e, ir.UnaryOp):
        return ast.UnaryOp(op=_UN[e.op](), operand=to_ast(e.operand))
    if isinstance(e, ir.Subscript):
        idx = [to_ast(i) for i in e.index]
        sl = idx[0] if len(idx) == 1 else ast.Tuple(elts=idx, ctx=ast.Load())
        return ast.Subscript(value=to_ast(e.base), slice=sl, ctx=ast.Load())
    if isinstance(e, ir.Call):
        return _call_ast(e)
    raise TypeError(f"printer: no rule for IR node {type(e).__name__}")


def _const_ast(value) -> ast.expr:
    """A literal. Negative numbers (and -0.0) print as `-x`, which the parser folds back into
    one constant; infinities print as `1e309`, which parses as inf. No literal spells NaN."""
    if isinstance(value, float) and math.isnan(value):
        raise ValueError("printer: NaN has no DSL spelling (no literal parses to NaN)")
    negative = isinstance(value, int) and not isinstance(value, bool) and value < 0
    if negative or isinstance(value, float) and math.copysign(1.0, value) < 0:
        return ast.UnaryOp(op=ast.USub(), operand=ast.Constant(value=-value))
    return ast.Constant(value=value)


def _call_parts(call: ir.Call) -> tuple[list, list]:
    """The positional arguments and the (name, value) keywords that spell `call`."""
    spec = OPS[call.fn]
    given = dict(call.args)
    args: list[ir.Expr] = []
    keywords: list[tuple[str, ir.Expr]] = []
    if spec.varargs:
        dims = given.get(spec.params[0])
        args = list(dims.elts) if dims is not None else []
    else:
        positional = True
        for i, name in enumerate(spec.params):
            if name not in given or i >= spec.n_positional:
                positional = False
            if name not in given:
                continue
            if call.fn == "range" and name == "step" and given[name] == ir.Const(1):
                continue
            if positional:
                args.append(given[name])
            else:
                keywords.append((name, given[name]))
        for name in spec.kwonly:
            if name in given:
                keywords.append((name, given[name]))
    keywords += list(call.tags)
    return args, keywords


def _call_ast(call: ir.Call) -> ast.Call:
    args, keywords = _call_parts(call)
    return ast.Call(func=_a(call.fn), args=[to_ast(x) for x in args],
                    keywords=[ast.keyword(arg=k, value=to_ast(v)) for k, v in keywords])


def print_expr(e: ir.Expr, memo: dict | None = None) -> str:
    """DSL text of one expression: `ast.unparse` of its Python expression (`to_ast`),
    spelled here directly by the same rules (`tests/ir/test_printer.py` holds the two
    equal). `memo` (id -> (node, text, precedence)), kept by a caller that prints many
    expressions of one program (the checker's messages), spares printing a subexpression
    twice."""
    try:
        return _text(e, _P_TEST, memo if memo is not None else {})
    except _Unusual:
        return ast.unparse(to_ast(e))


class _Unusual(Exception):
    """A node `_text` does not spell: `ast.unparse` spells the expression."""


#: `ast._Precedence` of the nodes the printer makes (the parser's: an operand is
#: parenthesised where its context binds tighter than it does)
_P_TUPLE, _P_TEST, _P_NOT, _P_CMP, _P_EXPR, _P_FACTOR, _P_NEVER = 2, 4, 7, 8, 9, 15, 99
_BIN_PRECEDENCE = {"+": 13, "-": 13, "*": 14, "/": 14, "//": 14, "%": 14, "<<": 12,
                   ">>": 12, "|": 9, "^": 10, "&": 11}
_UNARY_PRECEDENCE = {"-": _P_FACTOR, "~": _P_FACTOR, "not": _P_NOT}


def _text(e: ir.Expr, context: int, memo: dict) -> str:
    """`e` spelled in a context of precedence `context`."""
    hit = memo.get(id(e))
    if hit is None or hit[0] is not e:
        hit = memo[id(e)] = (e, *_bare(e, memo))
    return f"({hit[1]})" if context > hit[2] else hit[1]


def _constant(value) -> str:
    if isinstance(value, (float, complex)):
        return repr(value).replace("inf", ast._INFSTR).replace("nan", f"({ast._INFSTR}-{ast._INFSTR})")
    if value is None or isinstance(value, (bool, int, str)):
        return repr(value)
    raise _Unusual


def _items(elts, memo: dict) -> str:
    if len(elts) == 1:
        return _text(elts[0], _P_TEST, memo) + ","
    return ", ".join(_text(x, _P_TEST, memo) for x in elts)


def _bare(e: ir.Expr, memo: dict) -> tuple[str, int]:
    """(`e`'s text without parentheses, its precedence)."""
    if isinstance(e, ir.Const):
        c = _const_ast(e.value)
        if isinstance(c, ast.UnaryOp):  # a negative number: `-x`
            return "-" + _constant(c.operand.value), _P_FACTOR
        return _constant(c.value), _P_NEVER
    if isinstance(e, ir.Name):
        return e.id, _P_NEVER
    if isinstance(e, ir.Symbol):
        return f"{ALIAS}.{e.name}", _P_NEVER
    if isinstance(e, ir.Slice):
        return ":", _P_NEVER
    if isinstance(e, ir.TupleExpr):
        return _items(e.elts, memo), _P_TUPLE if e.elts else -1
    if isinstance(e, ir.BinOp):
        if e.op in _CMP:
            return f"{_text(e.lhs, _P_EXPR, memo)} {e.op} {_text(e.rhs, _P_EXPR, memo)}", _P_CMP
        p = _BIN_PRECEDENCE.get(e.op)
        if p is None:
            raise _Unusual
        return f"{_text(e.lhs, p, memo)} {e.op} {_text(e.rhs, p + 1, memo)}", p
    if isinstance(e, ir.UnaryOp):
        p = _UNARY_PRECEDENCE.get(e.op)
        if p is None:
            raise _Unusual
        return e.op + ("" if p == _P_FACTOR else " ") + _text(e.operand, p, memo), p
    if isinstance(e, ir.Subscript):
        base = _text(e.base, _P_NEVER, memo)
        if len(e.index) > 1:
            index = _items(e.index, memo)
        elif not e.index:
            index = "()"
        elif isinstance(e.index[0], ir.TupleExpr) and e.index[0].elts:
            index = _items(e.index[0].elts, memo)  # a tuple's parentheses can be omitted
        else:
            index = _text(e.index[0], _P_TEST, memo)
        return f"{base}[{index}]", _P_NEVER
    if isinstance(e, ir.Call):
        args, keywords = _call_parts(e)
        parts = [_text(x, _P_TEST, memo) for x in args]
        parts += [f"{k}={_text(v, _P_TEST, memo)}" for k, v in keywords]
        return f"{ALIAS}.{e.fn}({', '.join(parts)})", _P_NEVER
    raise _Unusual


def _block_ast(stmts: tuple[ir.Stmt, ...]) -> list[ast.stmt]:
    """The statements of a block; `pass` for an empty one, which Python cannot spell."""
    return [_stmt_ast(x) for x in stmts] or [ast.Pass()]


def _stmt_ast(s: ir.Stmt) -> ast.stmt:
    if isinstance(s, ir.Assign):
        if len(s.targets) == 1:
            target = ast.Name(id=s.targets[0], ctx=ast.Store())
        else:
            target = ast.Tuple(elts=[ast.Name(id=t, ctx=ast.Store()) for t in s.targets],
                               ctx=ast.Store())
        return ast.Assign(targets=[target], value=to_ast(s.value), lineno=0)
    if isinstance(s, ir.For):
        return ast.For(target=ast.Name(id=s.var, ctx=ast.Store()), iter=to_ast(s.iter),
                       body=_block_ast(s.body), orelse=[], lineno=0)
    if isinstance(s, ir.If):
        return ast.If(test=to_ast(s.cond), body=_block_ast(s.body),
                      orelse=[_stmt_ast(x) for x in s.orelse])
    if isinstance(s, ir.ExprStmt):
        return ast.Expr(value=to_ast(s.value))
    raise TypeError(f"printer: no rule for IR statement {type(s).__name__}")


def _param_text(p: ir.Param) -> str:
    if p.kind == "tensor":
        dims = ", ".join('"' + d + '"' for d in p.dims)
        if p.order != "row_major":
            dims += f", {ALIAS}.{p.order}"
        return f"{p.name}: {ALIAS}.Tensor[{ALIAS}.{p.dtype}, {dims}]"
    if p.kind == "const":
        return f"{p.name}: {ALIAS}.const = {print_expr(ir.Const(p.default))}"
    text = f"{p.name}: {ALIAS}.{p.dtype}"
    return text if p.default is None else f"{text} = {print_expr(ir.Const(p.default))}"


def print_kernel(k: ir.Kernel) -> str:
    """DSL text of a whole program, starting with the DSL import."""
    opts = ", ".join(f"{name}={print_expr(ir.Const(value))}" for name, value in k.options)
    deco = f"@{ALIAS}.kernel({opts})" if opts else f"@{ALIAS}.kernel"
    params = ",\n".join(f"    {_param_text(p)}" for p in k.params)
    head = f"{deco}\ndef {k.name}(\n{params},\n):\n" if k.params else f"{deco}\ndef {k.name}():\n"
    body_nodes = [_stmt_ast(s) for s in k.body]
    if k.doc is not None:
        body_nodes.insert(0, ast.Expr(value=ast.Constant(value=k.doc)))
    # Unparse the body inside a function, so ast.unparse indents the statements and leaves
    # the text of a multi-line docstring alone; then drop its `def` line for ours.
    fn = ast.FunctionDef(name=k.name, args=ast.arguments(posonlyargs=[], args=[], kwonlyargs=[],
                                                         kw_defaults=[], defaults=[]),
                         body=body_nodes or [ast.Pass()], decorator_list=[], returns=None,
                         lineno=0)
    body = ast.unparse(fn).split("\n", 1)[1]
    return f"{HEADER}\n\n{head}{body}\n"
