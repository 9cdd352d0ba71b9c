"""The text front end: DSL source text -> IR, by parsing with `ast` against a whitelist.

Nothing here executes the text. A program is a module holding (optionally) a docstring
and the import `from argus_env import dsl as A`, and exactly one function decorated with
`@A.kernel`. Inside it only the DSL's constructs are accepted; anything else (imports,
attribute access beyond `A.<op>`, dunder names, calls of non-DSL functions, `while`
loops, comprehensions, ...) is rejected with a `DSLSyntaxError` naming the line and the
construct. Size limits are enforced with a `DSLLimitError`; they are checked without
recursion before the recursive parser runs, so no text can overflow the Python stack,
and they bound every number literal, so no value is too large to print or convert.
Names the generated Triton module uses are refused (`RESERVED`, `GENERATED_NAME`).
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass

from ..ir import nodes as ir
from ..ir.ops import BIN_OPS, DTYPE_NAMES, KERNEL_OPTIONS, OPS, ORDERS, SYMBOL_NAMES
from .errors import DSLLimitError, DSLSyntaxError

_BIN = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.FloorDiv: "//",
        ast.Mod: "%", ast.BitAnd: "&", ast.BitOr: "|", ast.BitXor: "^", ast.LShift: "<<",
        ast.RShift: ">>"}
_CMP = {ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">=", ast.Eq: "==", ast.NotEq: "!="}
_UN = {ast.USub: "-", ast.Invert: "~", ast.Not: "not"}
assert set(_BIN.values()) == set(BIN_OPS)

#: Names a program may not bind or use: the generated module's imports, runtime helpers
#: and launch locals, the builtins it calls, and the names Triton's interpreter adds to a
#: kernel's code (3.6-3.9). A DSL name equal to one would shadow it.
RESERVED = frozenset({"tl", "triton", "torch", "TensorDescriptor", "bind_sizes",
                      "check_tensors", "num_sms", "wide_offsets", "NUM_SMS", "grid", "range",
                      "min", "max", "interpreter_semantic", "_InterpreterComparison"})

#: The shapes of the names generated per tensor, kernel and launch (`a_ptr`, `stride_am`,
#: `I64_a`, `a_desc`, `a_desc_64x32`, `gemm_kernel`, `moe_kernel_2`, `grid_1`).
GENERATED_NAME = re.compile(r"\w*_ptr|\w*_desc(_\d+(x\d+)*)?|\w*_kernel(_\d+)?|stride_\w*"
                            r"|I64_\w*|grid_\d+")

#: What each rejected Python construct is called in error messages, with a hint.
_REJECTED = {
    ast.While: "`while` loop (unbounded loops are not allowed; use `for i in A.range(...)`)",
    ast.Import: "import statement", ast.ImportFrom: "import statement",
    ast.FunctionDef: "nested function definition", ast.AsyncFunctionDef: "async function",
    ast.ClassDef: "class definition", ast.Lambda: "lambda", ast.With: "`with` statement",
    ast.Try: "`try` statement", ast.Raise: "`raise` statement", ast.Global: "`global`",
    ast.Nonlocal: "`nonlocal`", ast.Delete: "`del` statement",
    ast.Assert: "Python `assert` (use `A.assert_tags`)", ast.Return: "`return` (kernels write "
    "results with `A.store`)", ast.ListComp: "list comprehension", ast.SetComp: "set "
    "comprehension", ast.DictComp: "dict comprehension", ast.GeneratorExp: "generator "
    "expression", ast.IfExp: "conditional expression (use `A.where`)", ast.BoolOp: "`and`/`or` "
    "(use `&` and `|` on conditions)", ast.JoinedStr: "f-string", ast.Dict: "dict",
    ast.Set: "set", ast.List: "list (use a tuple)", ast.NamedExpr: "`:=` assignment",
    ast.Await: "`await`", ast.Yield: "`yield`", ast.YieldFrom: "`yield from`",
    ast.Starred: "`*` unpacking", ast.AnnAssign: "annotated assignment",
    ast.AsyncFor: "async for", ast.AsyncWith: "async with", ast.Match: "`match` statement",
}


@dataclass(frozen=True)
class Limits:
    """Size limits on programs written as text (generous for real kernels)."""

    max_chars: int = 100_000
    max_nodes: int = 6_000
    max_statements: int = 600
    max_depth: int = 6
    max_unroll: int = 64  # product of nested `A.static_range` trip counts
    max_expr_depth: int = 100  # nesting of one expression (`-(-(-x))`, `1 + 1 + ...`)
    max_int_bits: int = 64  # an integer literal's magnitude is below 2**max_int_bits
    max_literal_chars: int = 100  # the spelling of one number literal


DEFAULT_LIMITS = Limits()


def parse_program(text: str, filename: str = "<program>", line_offset: int = 0,
                  limits: Limits = DEFAULT_LIMITS) -> ir.Kernel:
    """Parse DSL program text into a `Kernel`, rejecting anything outside the DSL."""
    if not isinstance(text, str):
        raise DSLSyntaxError(f"program text must be a string, got {type(text).__name__}",
                             filename=filename)
    if len(text) > limits.max_chars:
        raise DSLLimitError(f"program is {len(text)} characters; the limit is {limits.max_chars}",
                            filename=filename)
    try:
        tree = ast.parse(text, filename=filename)
    except SyntaxError as e:
        if "Exceeds the limit" in str(e.msg) and "digits" in str(e.msg):
            raise DSLLimitError(f"a number literal has too many digits ({e.msg.split(';')[0]}); "
                                f"integer literals must fit in {limits.max_int_bits} bits",
                                (e.lineno or 0) + line_offset, e.offset or 0, filename) from None
        raise DSLSyntaxError(f"invalid syntax: {e.msg}", (e.lineno or 0) + line_offset,
                             e.offset or 0, filename) from None
    except UnicodeEncodeError as e:  # a lone surrogate: no source file can hold it
        line = text.count("\n", 0, e.start) + 1
        raise DSLSyntaxError(f"text is not valid Unicode ({e.reason} at position {e.start})",
                             line + line_offset, 0, filename) from None
    except (RecursionError, MemoryError):
        # CPython's own parser gives up on deeply nested expressions this way
        raise DSLLimitError("expressions nest too deeply for Python's parser (the DSL allows "
                            f"{limits.max_expr_depth} levels)", filename=filename) from None
    count = sum(1 for _ in ast.walk(tree))
    if count > limits.max_nodes:
        raise DSLLimitError(f"program has {count} syntax nodes; the limit is {limits.max_nodes}",
                            filename=filename)
    big = _oversized_number(tree, limits)
    if big is not None:
        bits = abs(big.value).bit_length() if isinstance(big.value, int) else 0
        what = (f"an integer literal of {bits} bits; integer literals must fit in "
                f"{limits.max_int_bits} bits" if bits > limits.max_int_bits else
                f"a number literal of {big.end_col_offset - big.col_offset} characters; the "
                f"limit is {limits.max_literal_chars}")
        raise DSLLimitError(f"{what}: `{_Parser.snippet_of(text, big)}`",
                            big.lineno + line_offset, big.col_offset, filename)
    deep = _too_deep(tree, limits.max_expr_depth)
    if deep is not None:
        raise DSLLimitError(f"an expression nests more than {limits.max_expr_depth} deep: "
                            f"`{_Parser.snippet_of(text, deep)}`",
                            getattr(deep, "lineno", 0) + line_offset,
                            getattr(deep, "col_offset", 0), filename)
    return _Parser(text, filename, line_offset, limits).module(tree)


def _oversized_number(tree: ast.AST, limits: Limits) -> ast.Constant | None:
    """The first number literal too large to be a kernel value: an integer past
    `max_int_bits` bits (a hex literal of thousands of digits, which Python parses but
    cannot print), or one spelled in more than `max_literal_chars` characters. Such values
    reached the checker and the emitter, where printing or converting them failed."""
    for node in ast.walk(tree):
        if not isinstance(node, ast.Constant) or isinstance(node.value, (bool, str, bytes)) \
                or node.value is None or node.value is Ellipsis:
            continue
        v = node.value
        if isinstance(v, int) and abs(v).bit_length() > limits.max_int_bits:
            return node
        if node.end_lineno != node.lineno or \
                node.end_col_offset - node.col_offset > limits.max_literal_chars:
            return node
    return None


def _too_deep(tree: ast.AST, limit: int) -> ast.expr | None:
    """The first expression (in source order) nested more than `limit` expressions deep.

    Iterative, so it is safe on any tree `ast.parse` returns; the recursive parser (and
    everything downstream that walks expressions recursively) runs only on shallow trees."""
    stack: list[tuple[ast.AST, int]] = [(tree, 0)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, ast.expr):
            depth += 1
            if depth > limit:
                return node
        stack.extend(reversed([(child, depth) for child in ast.iter_child_nodes(node)]))
    return None


class _Parser:
    def __init__(self, text: str, filename: str, line_offset: int, limits: Limits):
        self.text = text
        self.filename = filename
        self.offset = line_offset
        self.limits = limits
        self.alias = "A"
        self.imported = False  # whether the text imports the DSL (and so fixes the alias)
        self.consts: dict[str, object] = {}
        self.statements = 0

    # ------------------------------------------------------------ helpers
    def loc(self, node: ast.AST) -> ir.Loc:
        return ir.Loc(getattr(node, "lineno", 0) + self.offset, getattr(node, "col_offset", 0))

    def snippet(self, node: ast.AST) -> str:
        return self.snippet_of(self.text, node)

    @staticmethod
    def snippet_of(text: str, node: ast.AST) -> str:
        """The source of `node`, on one line and at most 60 characters."""
        seg = ast.get_source_segment(text, node) or type(node).__name__
        seg = " ".join(seg.split())
        return seg if len(seg) <= 60 else seg[:57] + "..."

    def error(self, node: ast.AST, message: str, cls=DSLSyntaxError):
        loc = self.loc(node)
        return cls(message, loc.line, loc.col, self.filename)

    def reject(self, node: ast.AST, what: str | None = None):
        what = what or _REJECTED.get(type(node), f"Python construct `{type(node).__name__}`")
        return self.error(node, f"{what} is not allowed in a DSL program: `{self.snippet(node)}`")

    def is_alias_attr(self, node: ast.AST) -> bool:
        return (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
                and node.value.id == self.alias)

    def check_name(self, node: ast.AST, name: str) -> str:
        if not name.isascii():
            raise self.error(node, f"name `{name}` is not ASCII; DSL names must be ASCII, so "
                             "that two names cannot look alike (Latin `a`, Cyrillic `а`)")
        if name.startswith("__"):
            raise self.error(node, f"dunder name `{name}` is not allowed in a DSL program")
        if name in RESERVED or name == self.alias:
            raise self.error(node, f"name `{name}` is reserved (the generated Triton module "
                             "uses it) and cannot be used in a DSL program")
        if GENERATED_NAME.fullmatch(name):
            raise self.error(node, f"name `{name}` is reserved for generated code (names ending "
                             "in _ptr, _desc[_<shape>] or _kernel[_<n>], starting with stride_ "
                             "or I64_, and grid_<n>)")
        return name

    # ------------------------------------------------------------ module and kernel
    def module(self, tree: ast.Module) -> ir.Kernel:
        funcs = []
        for node in tree.body:
            if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) \
                    and isinstance(node.value.value, str):
                continue  # a module docstring
            if isinstance(node, ast.ImportFrom) and node.module == "argus_env" and node.level == 0 \
                    and len(node.names) == 1 and node.names[0].name == "dsl":
                self.alias = node.names[0].asname or "dsl"
                self.imported = True
                if not self.alias.isascii():
                    raise self.error(node, f"alias `{self.alias}` is not ASCII; import the DSL "
                                     "as `A`")
                continue
            if isinstance(node, ast.FunctionDef):
                funcs.append(node)
                continue
            what = _REJECTED.get(type(node), f"top-level `{type(node).__name__}`")
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                what += " (only `from argus_env import dsl as A` may be imported)"
            raise self.reject(node, what)
        if len(funcs) != 1:
            raise DSLSyntaxError(f"a program holds exactly one `@A.kernel` function; found "
                                 f"{len(funcs)}", funcs[1].lineno + self.offset if len(funcs) > 1
                                 else 0, filename=self.filename)
        return self.kernel(funcs[0])

    def kernel(self, fn: ast.FunctionDef) -> ir.Kernel:
        options = self.decorator(fn)
        if fn.returns is not None:
            raise self.reject(fn.returns, "return annotation (kernels return nothing)")
        if getattr(fn, "type_params", None):  # `def k[T]()`, Python 3.12+
            raise self.reject(fn, "type parameters")
        params = self.params(fn)
        body = list(fn.body)
        doc = None
        if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
                and isinstance(body[0].value.value, str):
            doc = body.pop(0).value.value
        stmts = self.block(body, depth=0, unroll=1)
        return ir.Kernel(self.check_name(fn, fn.name), params, stmts, options, doc,
                         loc=self.loc(fn))

    def decorator(self, fn: ast.FunctionDef) -> tuple:
        if len(fn.decorator_list) != 1:
            raise self.error(fn, f"function `{fn.name}` needs exactly one decorator, `@A.kernel`")
        deco = fn.decorator_list[0]
        call = deco if isinstance(deco, ast.Call) else None
        target = call.func if call else deco
        if not (isinstance(target, ast.Attribute) and target.attr == "kernel"
                and isinstance(target.value, ast.Name)
                and (target.value.id == self.alias or not self.imported)):
            raise self.error(deco, f"unknown decorator `{self.snippet(deco)}`; use "
                             f"`@{self.alias}.kernel`")
        self.alias = target.value.id  # without the import (an @A.kernel function's source)
        options = {}
        if call:
            if call.args:
                raise self.error(call, "`@A.kernel` takes keyword options only")
            for kw in call.keywords:
                if kw.arg not in KERNEL_OPTIONS:
                    raise self.error(kw.value, f"unknown kernel option `{kw.arg}`; known: "
                                     f"{', '.join(KERNEL_OPTIONS)}")
                options[kw.arg] = self.literal(kw.value, f"kernel option {kw.arg}")
        return tuple(sorted(options.items()))

    def literal(self, node: ast.AST, what: str):
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            value = self.literal(node.operand, what)
            if not isinstance(value, bool):
                return -value
        if isinstance(node, ast.Constant) and isinstance(node.value, (int, float, bool)):
            return node.value
        raise self.error(node, f"{what} must be a number literal, got `{self.snippet(node)}`")

    def params(self, fn: ast.FunctionDef) -> tuple[ir.Param, ...]:
        a = fn.args
        if a.posonlyargs or a.vararg or a.kwarg or a.kwonlyargs:
            raise self.error(fn, "kernel parameters must be plain `name: annotation` parameters")
        defaults = [None] * (len(a.args) - len(a.defaults)) + list(a.defaults)
        out = []
        for arg, default in zip(a.args, defaults):
            out.append(self.param(arg, default))
        names = [p.name for p in out]
        dup = {n for n in names if names.count(n) > 1}
        if dup:
            raise self.error(fn, f"duplicate parameter {sorted(dup)[0]}")
        kinds = {p.name: p for p in out}
        for p in out:  # a dim may name a compile-time constant (a workspace's split count)
            for d in p.dims:
                q = kinds.get(d)
                if q is None:
                    continue
                if q.kind != "const" or isinstance(q.default, bool) or \
                        not isinstance(q.default, int) or q.default < 1:
                    raise self.error(fn, f"tensor `{p.name}`: dim \"{d}\" names parameter "
                                     f"`{d}`, which is not a positive integer constant; a dim "
                                     "is a problem size or an `A.const` integer >= 1")
        return tuple(out)

    def param(self, arg: ast.arg, default: ast.AST | None) -> ir.Param:
        name = self.check_name(arg, arg.arg)
        ann = arg.annotation
        loc = self.loc(arg)
        if ann is None:
            raise self.error(arg, f"parameter `{name}` needs an annotation: A.Tensor[...], "
                             f"A.const or a scalar type such as A.f32")
        if isinstance(ann, ast.Subscript) and self.is_alias_attr(ann.value) \
                and ann.value.attr == "Tensor":
            return self.tensor_param(name, ann, default, loc)
        if self.is_alias_attr(ann) and ann.attr == "const":
            if default is None:
                raise self.error(arg, f"constant `{name}` needs a value: `{name}: A.const = 64`")
            value = self.literal(default, f"constant {name}")
            self.consts[name] = value
            return ir.Param(name, "const", default=value, loc=loc)
        if self.is_alias_attr(ann) and ann.attr in DTYPE_NAMES:
            value = None if default is None else self.literal(default, f"scalar {name}")
            return ir.Param(name, "scalar", dtype=ann.attr, default=value, loc=loc)
        raise self.error(ann, f"unknown annotation `{self.snippet(ann)}` for parameter `{name}`")

    def tensor_param(self, name, ann: ast.Subscript, default, loc) -> ir.Param:
        if default is not None:
            raise self.error(ann, f"tensor parameter `{name}` cannot have a default")
        items = ann.slice.elts if isinstance(ann.slice, ast.Tuple) else [ann.slice]
        if not items or not (self.is_alias_attr(items[0]) and items[0].attr in DTYPE_NAMES):
            raise self.error(ann, f"tensor `{name}`: write A.Tensor[A.<dtype>, \"dim\", ...]")
        order = "row_major"
        if len(items) > 1 and self.is_alias_attr(items[-1]) and items[-1].attr in ORDERS:
            order = items[-1].attr
            items = items[:-1]
        dims = []
        for it in items[1:]:
            if not (isinstance(it, ast.Constant) and isinstance(it.value, str)
                    and it.value.isidentifier()):
                raise self.error(it, f"tensor `{name}`: dims are size names such as \"M\", got "
                                 f"`{self.snippet(it)}`")
            dims.append(self.check_name(it, it.value))
        if not dims:
            raise self.error(ann, f"tensor `{name}` needs at least one dim")
        if order != "row_major" and len(dims) != 2:
            raise self.error(ann, f"tensor `{name}`: A.{order} applies to 2-D tensors only")
        return ir.Param(name, "tensor", dtype=items[0].attr, dims=tuple(dims), order=order,
                        loc=loc)

    # ------------------------------------------------------------ statements
    def block(self, nodes: list[ast.stmt], depth: int, unroll: int) -> tuple[ir.Stmt, ...]:
        if depth > self.limits.max_depth:
            raise self.error(nodes[0], f"blocks nest {depth} deep; the limit is "
                             f"{self.limits.max_depth}", DSLLimitError)
        out = []
        for node in nodes:
            self.statements += 1
            if self.statements > self.limits.max_statements:
                raise self.error(node, f"program has more than {self.limits.max_statements} "
                                 "statements", DSLLimitError)
            stmt = self.stmt(node, depth, unroll)
            if stmt is not None:
                out.append(stmt)
        return tuple(out)

    def stmt(self, node: ast.stmt, depth: int, unroll: int) -> ir.Stmt | None:
        loc = self.loc(node)
        if isinstance(node, ast.Pass):
            return None
        if isinstance(node, ast.Assign):
            if len(node.targets) != 1:
                raise self.reject(node, "chained assignment `a = b = ...`")
            return ir.Assign(self.targets(node.targets[0]), self.expr(node.value), loc=loc)
        if isinstance(node, ast.AugAssign):
            if not isinstance(node.target, ast.Name) or type(node.op) not in _BIN:
                raise self.reject(node, "augmented assignment to a non-name")
            name = self.check_name(node.target, node.target.id)
            value = ir.BinOp(_BIN[type(node.op)], ir.Name(name, loc=loc), self.expr(node.value),
                             loc=loc)
            return ir.Assign((name,), value, loc=loc)
        if isinstance(node, ast.For):
            return self.for_loop(node, depth, unroll)
        if isinstance(node, ast.If):
            return ir.If(self.expr(node.test), self.block(node.body, depth + 1, unroll),
                         self.block(node.orelse, depth + 1, unroll) if node.orelse else (),
                         loc=loc)
        if isinstance(node, ast.Expr):
            if isinstance(node.value, ast.Call):
                call = self.call(node.value, context="stmt")
                return ir.ExprStmt(call, loc=loc)
            raise self.reject(node, "an expression statement without effect")
        raise self.reject(node)

    def targets(self, node: ast.expr) -> tuple[str, ...]:
        if isinstance(node, ast.Name):
            return (self.check_name(node, node.id),)
        if isinstance(node, ast.Tuple) and all(isinstance(e, ast.Name) for e in node.elts):
            return tuple(self.check_name(e, e.id) for e in node.elts)
        raise self.reject(node, f"assignment target `{self.snippet(node)}` (assign to names; "
                          "write to tensors with `A.store`)")

    def for_loop(self, node: ast.For, depth: int, unroll: int) -> ir.For:
        if node.orelse:
            raise self.reject(node, "`for ... else`")
        if not isinstance(node.target, ast.Name):
            raise self.reject(node.target, "loop target other than a single name")
        if not isinstance(node.iter, ast.Call):
            raise self.reject(node.iter, "loop over something other than `A.range` or "
                              "`A.static_range`")
        it = self.call(node.iter, context="iter")
        if it.fn == "static_range":
            unroll *= self.static_trips(node.iter, it.arg("n"))
            if unroll > self.limits.max_unroll:
                raise self.error(node, f"nested A.static_range loops unroll {unroll} times; "
                                 f"the limit is {self.limits.max_unroll}", DSLLimitError)
        return ir.For(self.check_name(node.target, node.target.id), it,
                      self.block(node.body, depth + 1, unroll), loc=self.loc(node))

    def static_trips(self, node: ast.AST, n: ir.Expr) -> int:
        value = n.value if isinstance(n, ir.Const) else (
            self.consts.get(n.id) if isinstance(n, ir.Name) else None)
        if not isinstance(value, int) or isinstance(value, bool):
            raise self.error(node, "A.static_range needs a compile-time integer (a literal or an "
                             "A.const)")
        return value if value > 0 else 1

    # ------------------------------------------------------------ expressions
    def expr(self, node: ast.expr) -> ir.Expr:
        loc = self.loc(node)
        if isinstance(node, ast.Constant):
            if isinstance(node.value, (bool, int, float)) or node.value is None:
                return ir.Const(node.value, loc=loc)
            raise self.reject(node, f"{type(node.value).__name__} literal")
        if isinstance(node, ast.Name):
            return ir.Name(self.check_name(node, node.id), loc=loc)
        if isinstance(node, ast.Attribute):
            if self.is_alias_attr(node) and node.attr in SYMBOL_NAMES:
                return ir.Symbol(node.attr, loc=loc)
            if self.is_alias_attr(node) and node.attr in OPS:
                raise self.error(node, f"`{self.alias}.{node.attr}` must be called")
            raise self.reject(node, f"attribute access `{self.snippet(node)}`")
        if isinstance(node, ast.Call):
            return self.call(node, context="expr")
        if isinstance(node, ast.BinOp) and type(node.op) in _BIN:
            return ir.BinOp(_BIN[type(node.op)], self.expr(node.left), self.expr(node.right),
                            loc=loc)
        if isinstance(node, ast.Compare):
            if len(node.ops) != 1 or type(node.ops[0]) not in _CMP:
                raise self.reject(node, "chained or non-arithmetic comparison")
            return ir.BinOp(_CMP[type(node.ops[0])], self.expr(node.left),
                            self.expr(node.comparators[0]), loc=loc)
        if isinstance(node, ast.UnaryOp) and type(node.op) in _UN:
            operand = self.expr(node.operand)
            if isinstance(node.op, ast.USub) and isinstance(operand, ir.Const) \
                    and isinstance(operand.value, (int, float)) and not isinstance(operand.value, bool):
                return ir.Const(-operand.value, loc=loc)
            return ir.UnaryOp(_UN[type(node.op)], operand, loc=loc)
        if isinstance(node, ast.Subscript):
            items = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
            return ir.Subscript(self.expr(node.value), tuple(self.index(i) for i in items), loc=loc)
        if isinstance(node, ast.Tuple):
            return ir.TupleExpr(tuple(self.expr(e) for e in node.elts), loc=loc)
        raise self.reject(node)

    def index(self, node: ast.expr) -> ir.Expr:
        if isinstance(node, ast.Slice):
            if node.lower or node.upper or node.step:
                raise self.reject(node, "slice with bounds (only `:` is allowed in tile "
                                  "subscripts; index tensors with A.arange tiles)")
            return ir.Slice(loc=self.loc(node))
        return self.expr(node)

    def call(self, node: ast.Call, context: str) -> ir.Call:
        func = node.func
        if not self.is_alias_attr(func):
            name = self.snippet(func)
            raise self.error(node, f"call of `{name}` is not allowed: only DSL ops "
                             f"`{self.alias}.<op>` may be called")
        spec = OPS.get(func.attr)
        if spec is None:
            raise self.error(node, f"`{self.alias}.{func.attr}` is not a DSL op")
        if spec.context != context:
            want = {"stmt": "as a statement", "iter": "as a loop iterator", "expr": "as a value"}
            raise self.error(node, f"`{self.alias}.{spec.name}` is used {want[spec.context]}, "
                             f"not {want[context]}")
        return self.bind(node, spec)

    def bind(self, node: ast.Call, spec) -> ir.Call:
        loc = self.loc(node)
        for a in node.args:
            if isinstance(a, ast.Starred):
                raise self.reject(a)
        args: dict[str, ir.Expr] = {}
        if spec.varargs:
            args[spec.params[0]] = ir.TupleExpr(tuple(self.expr(a) for a in node.args), loc=loc)
        else:
            if len(node.args) > len(spec.params):
                raise self.error(node, f"`{self.alias}.{spec.name}` takes at most "
                                 f"{len(spec.params)} positional arguments "
                                 f"({', '.join(spec.params)}), got {len(node.args)}")
            for name, a in zip(spec.params, node.args):
                args[name] = self.expr(a)
        tags = []
        for kw in node.keywords:
            if kw.arg is None:
                raise self.reject(kw.value, "`**` unpacking")
            if kw.arg in spec.params or kw.arg in spec.kwonly:
                if kw.arg in args:
                    raise self.error(node, f"`{self.alias}.{spec.name}`: argument `{kw.arg}` "
                                     "given twice")
                args[kw.arg] = self.expr(kw.value)
            elif spec.tags:
                tags.append((self.check_name(kw.value, kw.arg), self.expr(kw.value)))
            else:
                known = ", ".join(spec.params + spec.kwonly) or "none"
                raise self.error(node, f"`{self.alias}.{spec.name}` has no argument `{kw.arg}`; "
                                 f"its arguments: {known}")
        if spec.name == "range":
            args = self.range_args(node, args)
        missing = [p for p in spec.params[:spec.required] if p not in args]
        if missing:
            raise self.error(node, f"`{self.alias}.{spec.name}` is missing argument "
                             f"`{missing[0]}`")
        order = spec.params + spec.kwonly
        bound = tuple((name, args[name]) for name in order if name in args)
        return ir.Call(spec.name, bound, tuple(tags), loc=loc)

    def range_args(self, node: ast.Call, args: dict) -> dict:
        """`A.range(n)` means `A.range(0, n, 1)`, as in Python; store the canonical form."""
        if "stop" not in args and "start" in args and len(node.args) == 1:
            args["stop"] = args.pop("start")
        if "stop" not in args:
            raise self.error(node, "`A.range` needs a stop value")
        args.setdefault("start", ir.Const(0, loc=self.loc(node)))
        args.setdefault("step", ir.Const(1, loc=self.loc(node)))
        return args
