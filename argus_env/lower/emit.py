"""IR -> the body of a `@triton.jit` kernel, as Python `ast` nodes.

The emitter walks the program once with the program's `Typer` (the type check's, which
remembers every expression's type), so every op is lowered knowing the shapes and dtypes
of its operands. Expressions become Python expressions over `tl`; the printer is
`ast.unparse`, which gets precedence right.
Lowering rules are a table keyed by op name; an op without a rule fails with its name.

Global tensors become a base pointer plus one stride per dim (`a_ptr`, `stride_am`,
`stride_ak`), or a TMA tensor descriptor (`a_desc`) when every access uses `tma=True`.
TMA accesses need block indices `start + A.arange(n)`; the emitter resolves index names
to their definitions (`Defs`) to find `start`.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field

from ..dsl import dtypes as D
from ..dsl.errors import DSLTypeError
from ..dsl.semantic import KernelInfo, Scope, Typer, _runtime
from ..ir.rewrite import assigned as _assigned
from ..dsl.types import RefT, ScalarT, TileT, TupleT, shape_of
from ..ir import nodes as ir
from ..ir.printer import print_expr
from ..ir.rewrite import walk


def _name(id: str) -> ast.Name:
    return ast.Name(id=id, ctx=ast.Load())


def _tl(attr: str) -> ast.Attribute:
    return ast.Attribute(value=_name("tl"), attr=attr, ctx=ast.Load())


def _call(func: ast.expr, args=(), **kw) -> ast.Call:
    return ast.Call(func=func, args=list(args),
                    keywords=[ast.keyword(arg=k, value=v) for k, v in kw.items()])


def _const(v) -> ast.expr:
    if isinstance(v, (int, float)) and not isinstance(v, bool) and v < 0:
        return ast.UnaryOp(op=ast.USub(), operand=ast.Constant(-v))
    return ast.Constant(v)


def py_literal(value, doc: bool = False) -> str:
    """Python source that evaluates to exactly `value` (a string, number, bool, None, or a
    tuple of them); `doc`: a string as a triple-quoted docstring. Every string from the
    DSL reaches generated code through here, so no docstring or name can end a literal
    early or hold an escape the parser rejects."""
    if isinstance(value, tuple):
        items = [py_literal(v) for v in value]
        return "(" + ", ".join(items) + ("," if len(items) == 1 else "") + ")"
    if isinstance(value, str):
        return _str_literal(value, doc)
    if value is None or isinstance(value, (bool, int, float)):
        return ast.unparse(_const(value))
    raise TypeError(f"no literal for a {type(value).__name__} in generated code")


def _str_literal(text: str, doc: bool) -> str:
    r"""`repr` on one line; a docstring or a multi-line text stays readable as a
    triple-quoted literal in which backslashes and quotes are escaped, and so is every
    character that is not printable (NUL, tabs, carriage returns, `\u2028`: nothing but
    `\n` breaks a line)."""
    if not doc and "\n" not in text:
        return repr(text)
    return '"""' + "".join("\n" if c == "\n" else _escaped(c) for c in text) + '"""'


def _escaped(c: str) -> str:
    if c in "\\\"":
        return "\\" + c
    return c if c.isprintable() else c.encode("unicode_escape").decode("ascii")


def _binop(a: ast.expr, op: ast.operator, b: ast.expr) -> ast.BinOp:
    return ast.BinOp(left=a, op=op, right=b)


def _expand(e: ast.expr, axis: int, rank: int) -> ast.expr:
    """`e[:, None]`-style reshape of a 1-D tile onto `axis` of a rank-`rank` tile."""
    if rank == 1:
        return e
    idx = [ast.Slice() if i == axis else ast.Constant(None) for i in range(rank)]
    return ast.Subscript(value=e, slice=ast.Tuple(elts=idx, ctx=ast.Load()), ctx=ast.Load())


def _and(parts: list[ast.expr]) -> ast.expr | None:
    out = None
    for p in parts:
        out = p if out is None else _binop(out, ast.BitAnd(), p)
    return out


class Names:
    """The names generated per tensor, each distinct from every name the program uses and
    from one another: a readable name already taken (`stride_am` of tensor `a` with dim
    `M`, and of tensor `am` with dim `"M"`... or of dims `M` and `m`) gets a number."""

    def __init__(self, taken):
        self.taken = set(taken)

    def fresh(self, want: str) -> str:
        name, n = want, 1
        while name in self.taken:
            n += 1
            name = f"{want}_{n}"
        self.taken.add(name)
        return name


def program_names(kernel: ir.Kernel) -> set[str]:
    """Every name the DSL program binds or reads, its kernel's name included."""
    names = {kernel.name, *(p.name for p in kernel.params), *kernel.sizes}
    for node in walk(kernel):
        if isinstance(node, ir.Name):
            names.add(node.id)
        elif isinstance(node, ir.Assign):
            names.update(node.targets)
        elif isinstance(node, ir.For):
            names.add(node.var)
    return names


@dataclass
class TensorArgs:
    """How one global tensor reaches the kernel, under names taken from `names`."""

    param: ir.Param
    names: Names
    pointer: bool = False             # passed as base pointer + strides
    descriptors: dict[tuple[int, ...], str] = field(default_factory=dict)  # block -> name
    blocks: dict[str, list[ir.Expr]] = field(default_factory=dict)  # name -> block dims (DSL)
    ptr: str = field(init=False)
    strides: list[str] = field(init=False)
    wide: str = field(init=False)     # the constexpr flag for 64-bit outermost offsets

    def __post_init__(self):
        name, dims = self.param.name, self.param.dims
        self.ptr = self.names.fresh(f"{name}_ptr")
        self.strides = [self.names.fresh(f"stride_{name}" + (
            d.lower() if dims.count(d) == 1 else str(i))) for i, d in enumerate(dims)]
        self.wide = self.names.fresh(f"I64_{name}")

    def stride(self, dim: int) -> str:
        return self.strides[dim]

    @property
    def outer_stride(self) -> str:
        from .runtime import outer_dim
        return self.stride(outer_dim(self.param.order, len(self.param.dims)))


class Defs:
    """The defining expression of each name, valid while the names it reads are unchanged."""

    def __init__(self):
        self.version: dict[str, int] = {}
        self.defs: dict[str, tuple[ir.Expr, dict[str, int]]] = {}

    def assign(self, name: str, value: ir.Expr | None) -> None:
        self.version[name] = self.version.get(name, 0) + 1
        if value is None:
            self.defs.pop(name, None)
            return
        reads = {n.id for n in walk(value) if isinstance(n, ir.Name)}
        self.defs[name] = (value, {r: self.version.get(r, 0) for r in reads})

    def kill(self, names) -> None:
        for n in names:
            self.assign(n, None)

    def resolve(self, e: ir.Expr) -> ir.Expr:
        """Follow names to their still-valid definitions (a few levels)."""
        for _ in range(8):
            if not isinstance(e, ir.Name) or e.id not in self.defs:
                return e
            value, reads = self.defs[e.id]
            if any(self.version.get(r, 0) != v for r, v in reads.items()):
                return e
            e = value
        return e


class KernelEmitter:
    """Emits the statements of one kernel's body."""

    def __init__(self, info: KernelInfo, tensors: dict[str, TensorArgs],
                 typer: Typer | None = None):
        self.info = info
        self.kernel = info.kernel
        self.typer = typer or Typer(self.kernel)  # the program's own: types already known
        self.tensors = tensors
        self.defs = Defs()

    # ------------------------------------------------------------ statements
    def body(self, stmts=None) -> list[ast.stmt]:
        """The statements of one launch (by default the first), from a fresh scope."""
        from ..dsl.semantic import launches
        scope = self.typer.initial_scope()
        self.defs = Defs()
        stmts = launches(self.kernel)[0][1] if stmts is None else stmts
        return self.block(stmts, scope) or [ast.Pass()]

    def block(self, stmts, scope: Scope) -> list[ast.stmt]:
        out: list[ast.stmt] = []
        for s in stmts:
            out.extend(self.stmt(s, scope))
        return out

    def stmt(self, s: ir.Stmt, scope: Scope) -> list[ast.stmt]:
        if isinstance(s, ir.Assign):
            value = self.expr(s.value, scope)
            t = self.typer.expr(s.value, scope)
            values = list(t.elts) if isinstance(t, TupleT) else [t]
            for name, v in zip(s.targets, values):
                scope.names[name] = v
                self.defs.assign(name, s.value if len(s.targets) == 1 else None)
            target = (ast.Name(id=s.targets[0], ctx=ast.Store()) if len(s.targets) == 1 else
                      ast.Tuple(elts=[ast.Name(id=n, ctx=ast.Store()) for n in s.targets],
                                ctx=ast.Store()))
            return [ast.Assign(targets=[target], value=value, lineno=0)]
        if isinstance(s, ir.ExprStmt):
            return self.effect(s.value, scope)
        if isinstance(s, ir.For):
            return [self.loop(s, scope)]
        if isinstance(s, ir.If):
            return [self.branch(s, scope)]
        raise DSLTypeError(f"lowering: no rule for statement {type(s).__name__}", s.loc.line)

    def loop(self, s: ir.For, scope: Scope) -> ast.For:
        carried = _assigned(s.body)
        self.defs.kill(carried | {s.var})
        inner = scope.copy()
        for n in carried & set(inner.names):
            inner.names[n] = _runtime(inner.names[n])
        inner.names[s.var] = ScalarT(D.i32)
        it = self.iterator(s.iter, scope)
        body = self.block(s.body, inner) or [ast.Pass()]
        self.defs.kill(carried | {s.var})
        for n in carried & set(scope.names):
            scope.names[n] = _runtime(scope.names[n])
        return ast.For(target=ast.Name(id=s.var, ctx=ast.Store()), iter=it, body=body,
                       orelse=[], lineno=0)

    def iterator(self, it: ir.Call, scope: Scope) -> ast.expr:
        if it.fn == "static_range":
            return _call(_tl("static_range"), [self.expr(it.arg("n"), scope)])
        args = [self.expr(it.arg(k), scope) for k in ("start", "stop", "step")]
        if args[2] == ast.Constant(1) or (isinstance(it.arg("step"), ir.Const)
                                          and it.arg("step").value == 1):
            args = args[:2]
        kw = {}
        if it.has("stages"):
            kw["num_stages"] = self.expr(it.arg("stages"), scope)
        for k in ("warp_specialize", "flatten"):
            if it.has(k):
                kw[k] = self.expr(it.arg(k), scope)
        return _call(_tl("range") if kw else _name("range"), args, **kw)

    def branch(self, s: ir.If, scope: Scope) -> ast.If:
        cond = self.expr(s.cond, scope)
        then, other = scope.copy(), scope.copy()
        body = self.block(s.body, then) or [ast.Pass()]
        orelse = self.block(s.orelse, other)
        changed = _assigned(s.body) | _assigned(s.orelse)
        self.defs.kill(changed)
        for n in changed:
            if n in then.names and n in other.names:
                a = then.names[n]
                scope.names[n] = a if a == other.names[n] else _runtime(a)
        return ast.If(test=cond, body=body, orelse=orelse)

    def effect(self, call: ir.Call, scope: Scope) -> list[ast.stmt]:
        if call.fn == "assert_tags":
            text = ", ".join(f"{k}={print_expr(v)}" for k, v in call.tags)
            # the lowering does not know whether the checker proved it: it states the claim
            return [comment(f"tag assertion (checked by `argus check`, not by this code): "
                            f"{print_expr(call.arg('x'))} has {text}")]
        if call.fn in ("store", "atomic_add"):
            return [ast.Expr(value=self.write(call, scope))]
        raise DSLTypeError(f"lowering: A.{call.fn} cannot be a statement here", call.loc.line)

    # ------------------------------------------------------------ expressions
    def expr(self, e: ir.Expr, scope: Scope) -> ast.expr:
        if isinstance(e, ir.Const):
            return _const(e.value)
        if isinstance(e, ir.Name):
            return _name(e.id)
        if isinstance(e, ir.Symbol):
            if e.name in D.DTYPES:
                return _tl(D.DTYPES[e.name].triton.split(".")[1])
            raise DSLTypeError(f"lowering: policy A.{e.name} is not a value", e.loc.line)
        if isinstance(e, ir.TupleExpr):
            return ast.Tuple(elts=[self.expr(x, scope) for x in e.elts], ctx=ast.Load())
        if isinstance(e, ir.BinOp):
            return self.binop(e, scope)
        if isinstance(e, ir.UnaryOp):
            operand = self.expr(e.operand, scope)
            if e.op == "not" and isinstance(self.typer.expr(e.operand, scope), TileT):
                return ast.UnaryOp(op=ast.Invert(), operand=operand)
            op = {"-": ast.USub, "~": ast.Invert, "not": ast.Not}[e.op]()
            return ast.UnaryOp(op=op, operand=operand)
        if isinstance(e, ir.Subscript):
            idx = [ast.Slice() if isinstance(i, ir.Slice) else self.expr(i, scope) for i in e.index]
            sl = idx[0] if len(idx) == 1 else ast.Tuple(elts=idx, ctx=ast.Load())
            return ast.Subscript(value=self.expr(e.base, scope), slice=sl, ctx=ast.Load())
        if isinstance(e, ir.Call):
            rule = _RULES.get(e.fn)
            if rule is None:
                raise DSLTypeError(f"lowering: op A.{e.fn} has no Triton rule", e.loc.line)
            return rule(self, e, scope)
        raise DSLTypeError(f"lowering: no rule for {type(e).__name__}", e.loc.line)

    def binop(self, e: ir.BinOp, scope: Scope) -> ast.expr:
        lhs, rhs = self.expr(e.lhs, scope), self.expr(e.rhs, scope)
        cmp = {"<": ast.Lt, "<=": ast.LtE, ">": ast.Gt, ">=": ast.GtE, "==": ast.Eq,
               "!=": ast.NotEq}
        if e.op in cmp:
            return ast.Compare(left=lhs, ops=[cmp[e.op]()], comparators=[rhs])
        ops = {"+": ast.Add, "-": ast.Sub, "*": ast.Mult, "/": ast.Div, "//": ast.FloorDiv,
               "%": ast.Mod, "&": ast.BitAnd, "|": ast.BitOr, "^": ast.BitXor,
               "<<": ast.LShift, ">>": ast.RShift}
        return _binop(lhs, ops[e.op](), rhs)

    # ------------------------------------------------------------ memory
    def pointer(self, ref_e: ir.Subscript, ref: RefT, scope: Scope) -> ast.expr:
        ta = self.tensors[ref.tensor.name]
        ta.pointer = True
        rank = len(ref.shape)
        out: ast.expr = _name(ta.ptr)
        axis = 0
        for dim, (idx, it) in enumerate(zip(ref_e.index, ref.index_types)):
            term = self.expr(idx, scope)
            if ref.orthogonal and shape_of(it):
                term = _expand(term, axis, rank)
                axis += 1
            out = _binop(out, ast.Add(), _binop(term, ast.Mult(), _name(ta.stride(dim))))
        return out

    def mask(self, call: ir.Call, ref: RefT, scope: Scope) -> ast.expr | None:
        m = call.arg("mask")
        if m is None or (isinstance(m, ir.Const) and m.value is None):
            return None
        if not isinstance(m, ir.TupleExpr):
            return self.expr(m, scope)
        rank, axis, parts = len(ref.shape), 0, []
        for part, it in zip(m.elts, ref.index_types):
            tile = bool(shape_of(it))
            if not (isinstance(part, ir.Const) and part.value is None):
                e = self.expr(part, scope)
                parts.append(_expand(e, axis, rank) if ref.orthogonal and tile else e)
            axis += tile and ref.orthogonal
        return _and(parts)

    def tma_offsets(self, call: ir.Call, ref_e: ir.Subscript, ref: RefT,
                    scope: Scope) -> list[ast.expr]:
        offs = []
        for idx, it in zip(ref_e.index, ref.index_types):
            if not shape_of(it):  # a scalar index: a block of one along that dim
                offs.append(self.expr(idx, scope))
                continue
            start = _block_start(self.defs.resolve(idx), shape_of(it)[0], self.defs)
            if start is None:
                raise DSLTypeError(
                    f"A.{call.fn} with tma=True: index `{print_expr(idx)}` of "
                    f"`{ref.tensor.name}` must be a block `start + A.arange(n)`",
                    call.loc.line, call.loc.col)
            offs.append(self.expr(start, scope))
        return offs

    def access(self, call: ir.Call, scope: Scope) -> tuple[ir.Subscript, RefT]:
        ref_e = call.arg("ref")
        return ref_e, self.typer.expr(ref_e, scope)

    def descriptor(self, ref: RefT, ref_e: ir.Subscript) -> tuple[str, bool]:
        """The TMA descriptor for this block shape of the tensor (registered on first use)."""
        ta = self.tensors[ref.tensor.name]
        full = _full_block(ref)
        if full not in ta.descriptors:
            name = f"{ta.param.name}_desc"
            if ta.descriptors:
                name += "_" + "x".join(map(str, full))
            name = ta.names.fresh(name)
            blocks = [_block_len(self.defs.resolve(i), self.defs) if shape_of(it) else ir.Const(1)
                      for i, it in zip(ref_e.index, ref.index_types)]
            ta.descriptors[full] = name
            ta.blocks[name] = blocks
        return ta.descriptors[full], ta.param.order == "col_major"

    def block_dims(self, ref: RefT) -> list[ast.expr] | None:
        """The tile's dims as the descriptor's block names them, when the access has scalar
        (block-of-one) dims that a reshape must drop or add; else None."""
        if len(ref.shape) == len(ref.index_types):
            return None
        ta = self.tensors[ref.tensor.name]
        blocks = ta.blocks[ta.descriptors[_full_block(ref)]]
        return [self.expr(b, None) for b, it in zip(blocks, ref.index_types) if shape_of(it)]

    def write(self, call: ir.Call, scope: Scope) -> ast.expr:
        ref_e, ref = self.access(call, scope)
        value = self.expr(call.arg("value"), scope)
        if call.fn == "store" and _flag(call, "tma"):
            offs = self.tma_offsets(call, ref_e, ref, scope)
            desc, transposed = self.descriptor(ref, ref_e)
            if transposed:
                offs, value = offs[::-1], _call(_tl("trans"), [value])
            dims = self.block_dims(ref)
            if dims is not None:
                full = [ast.Constant(1) if not shape_of(it) else None for it in ref.index_types]
                it = iter(dims)
                value = _call(ast.Attribute(value=value, attr="reshape", ctx=ast.Load()),
                              [x if x is not None else next(it) for x in full])
            return _call(ast.Attribute(value=_name(desc), attr="store", ctx=ast.Load()),
                         [ast.List(elts=offs, ctx=ast.Load()), value])
        kw = {}
        mask = self.mask(call, ref, scope)
        if mask is not None:
            kw["mask"] = mask
        fn = "store" if call.fn == "store" else "atomic_add"
        return _call(_tl(fn), [self.pointer(ref_e, ref, scope), value], **kw)


COMMENT_MARK = "\x00comment:"


def comment(text: str) -> ast.stmt:
    """A statement that `render` turns into a `# text` line (kept on that one line)."""
    text = "".join(c if c.isprintable() else _escaped(c) for c in text)
    return ast.Expr(value=ast.Constant(COMMENT_MARK + text))


MAX_LINE = 100


def render(nodes: list[ast.stmt]) -> str:
    """`ast.unparse` with comment markers turned into comments and long calls wrapped."""
    lines = []
    for line in ast.unparse(ast.Module(body=nodes, type_ignores=[])).splitlines():
        stripped = line.lstrip()
        if stripped.startswith(repr(COMMENT_MARK)[:-1]):
            text = ast.literal_eval(stripped)[len(COMMENT_MARK):]
            line = line[:len(line) - len(stripped)] + "# " + text
        lines.extend(wrap_call(line))
    return "\n".join(lines)


def wrap_call(line: str, width: int = MAX_LINE) -> list[str]:
    """A too-long `x = f(a, b, k=v)` or `f(...)` line as one argument per line."""
    if len(line) <= width:
        return [line]
    indent = line[:len(line) - len(line.lstrip())]
    try:
        body = ast.parse(line.strip()).body
    except SyntaxError:
        return [line]
    if len(body) != 1:
        return [line]
    stmt = body[0]
    call = stmt.value if isinstance(stmt, (ast.Assign, ast.Expr)) else None
    if not isinstance(call, ast.Call):
        return [line]
    head = ""
    if isinstance(stmt, ast.Assign):
        target = stmt.targets[0]
        names = target.elts if isinstance(target, ast.Tuple) else [target]
        one = isinstance(target, ast.Tuple) and len(names) == 1  # `n, = ...` keeps its comma
        head = ", ".join(ast.unparse(n) for n in names) + ("," if one else "") + " = "
    out = [f"{indent}{head}{ast.unparse(call.func)}("]
    out += [f"{indent}    {ast.unparse(a)}," for a in call.args]
    out += [f"{indent}    {k.arg}={ast.unparse(k.value)}," for k in call.keywords]
    return out + [f"{indent})"]


def _flag(call: ir.Call, name: str) -> bool:
    v = call.arg(name)
    return isinstance(v, ir.Const) and v.value is True


def _is_arange(e: ir.Expr, n: int) -> bool:
    if not (isinstance(e, ir.Call) and e.fn == "arange"):
        return False
    arg = e.arg("n")
    return True if not isinstance(arg, ir.Const) else arg.value == n


def _full_block(ref: RefT) -> tuple[int, ...]:
    """The descriptor's block: the tile's extent along tile-indexed dims, 1 along scalar ones."""
    dims, it = [], iter(ref.shape)
    for t in ref.index_types:
        dims.append(next(it) if shape_of(t) else 1)
    return tuple(dims)


def _addends(e: ir.Expr, defs: Defs) -> list[ir.Expr]:
    """The terms of a sum, looking through names to their still-valid definitions."""
    r = defs.resolve(e)
    if isinstance(r, ir.BinOp) and r.op == "+":
        return _addends(r.lhs, defs) + _addends(r.rhs, defs)
    return [r if isinstance(r, ir.Call) and r.fn == "arange" else e]


def _split_block(e: ir.Expr, defs: Defs):
    """(start, n) when `e` sums to `start + A.arange(n)` with one arange, else None."""
    terms = _addends(e, defs)
    ranges = [t for t in terms if isinstance(t, ir.Call) and t.fn == "arange"]
    if len(ranges) != 1:
        return None
    rest = [t for t in terms if t is not ranges[0]]
    start: ir.Expr = ir.Const(0)
    for t in rest:
        start = t if start == ir.Const(0) else ir.BinOp("+", start, t)
    return start, ranges[0].arg("n")


def _block_len(e: ir.Expr, defs: Defs) -> ir.Expr:
    """The `n` of the `A.arange(n)` inside a block index (checked by `_block_start`)."""
    found = _split_block(e, defs)
    if found is None:
        raise AssertionError("not a block index")
    return found[1]


def _block_start(e: ir.Expr, n: int, defs: Defs) -> ir.Expr | None:
    """`start` when `e` is `start + A.arange(n)`, the terms in any order and through names."""
    found = _split_block(e, defs)
    return found[0] if found is not None else None


# ---------------------------------------------------------------- op rules
def _load(em: KernelEmitter, e: ir.Call, scope: Scope) -> ast.expr:
    ref_e, ref = em.access(e, scope)
    if _flag(e, "tma"):
        offs = em.tma_offsets(e, ref_e, ref, scope)
        desc, transposed = em.descriptor(ref, ref_e)
        load = _call(ast.Attribute(value=_name(desc), attr="load", ctx=ast.Load()),
                     [ast.List(elts=offs[::-1] if transposed else offs, ctx=ast.Load())])
        dims = em.block_dims(ref)
        if dims is not None:
            load = _call(ast.Attribute(value=load, attr="reshape", ctx=ast.Load()), dims)
        return ast.Attribute(value=load, attr="T", ctx=ast.Load()) if transposed else load
    kw = {}
    mask = em.mask(e, ref, scope)
    if mask is not None:
        kw["mask"] = mask
        other = e.arg("other")
        if other is not None and not (isinstance(other, ir.Const) and other.value is None):
            kw["other"] = em.expr(other, scope)
        else:  # Triton leaves masked-off elements undefined without `other`; the checker
            kw["other"] = ast.Constant(0)  # and the interpreter read them as zero fills
    return _call(_tl("load"), [em.pointer(ref_e, ref, scope)], **kw)


def _simple(tl_name: str, *params: str):
    def rule(em: KernelEmitter, e: ir.Call, scope: Scope) -> ast.expr:
        return _call(_tl(tl_name), [em.expr(e.arg(p), scope) for p in params if e.has(p)])
    return rule


def _arange(em, e, scope):
    return _call(_tl("arange"), [ast.Constant(0), em.expr(e.arg("n"), scope)])


def _zeros(em, e, scope):
    return _call(_tl("zeros"), [em.expr(e.arg("shape"), scope)],
                 dtype=em.expr(e.arg("dtype"), scope))


def _full(em, e, scope):
    return _call(_tl("full"), [em.expr(e.arg("shape"), scope), em.expr(e.arg("value"), scope)],
                 dtype=em.expr(e.arg("dtype"), scope))


def _dot(em, e, scope):
    args = [em.expr(e.arg("a"), scope), em.expr(e.arg("b"), scope)]
    acc = e.arg("acc")
    if acc is not None and not (isinstance(acc, ir.Const) and acc.value is None):
        args.append(em.expr(acc, scope))
    kw = {}
    prec = e.arg("precision")
    if isinstance(prec, ir.Symbol):
        kw["input_precision"] = ast.Constant(prec.name)
    return _call(_tl("dot"), args, **kw)


def _reduce(em, e, scope):
    x = em.expr(e.arg("x"), scope)
    xt = em.typer.expr(e.arg("x"), scope)
    if e.fn == "sum" and xt.dtype in (D.bf16, D.f16):
        x = _call(ast.Attribute(value=x, attr="to", ctx=ast.Load()), [_tl("float32")])
    return _call(_tl(e.fn), [x], axis=em.expr(e.arg("axis"), scope))


def _cast(em, e, scope):
    x = em.expr(e.arg("x"), scope)
    dt = em.expr(e.arg("dtype"), scope)
    if isinstance(em.typer.expr(e.arg("x"), scope), TileT):
        return _call(ast.Attribute(value=x, attr="to", ctx=ast.Load()), [dt])
    return _call(_tl("cast"), [x, dt])


def _minmax(em, e, scope):
    t = em.typer.expr(e, scope)
    if isinstance(t, ScalarT) and t.value is not None:
        return _const(t.value)
    return _call(_tl(e.fn), [em.expr(e.arg("a"), scope), em.expr(e.arg("b"), scope)])


def _tag(em, e, scope):
    return em.expr(e.arg("x"), scope)


def _num_sms(em, e, scope):
    return _name("NUM_SMS")


def _covers(em, e, scope):
    raise DSLTypeError("A.covers is a tag relation; use it only inside A.assert_tags",
                       e.loc.line)


_RULES = {
    "program_id": _simple("program_id", "axis"), "num_programs": _simple("num_programs", "axis"),
    "num_sms": _num_sms, "cdiv": _simple("cdiv", "a", "b"), "minimum": _minmax,
    "maximum": _minmax, "arange": _arange, "zeros": _zeros, "full": _full, "load": _load,
    "dot": _dot, "trans": _simple("trans", "x"), "max": _reduce, "min": _reduce, "sum": _reduce,
    "where": _simple("where", "cond", "x", "y"), "cast": _cast, "tag": _tag, "covers": _covers,
    **{n: _simple(n, "x") for n in ("exp", "exp2", "log", "log2", "sqrt", "abs", "sigmoid")},
}
