"""Size regimes: the conditions on problem sizes under which a program changes what it does.

The checker proves invariants at the episode's sizes, and numerics run at small reduced
shapes. A program that tests its sizes (`if M <= 130:`, `A.where(M <= 130, 1.0, 0.0)`,
`131 // M`, `A.minimum(1, M - 130)`) can compute the right values at every reduced shape and
wrong ones at the real size. This module finds every such condition: each scalar
sub-expression that depends on problem sizes (and on nothing that varies between program
instances or loop iterations) and at which the program's behaviour can switch — a
comparison (and whether its sides are equal, where both sides of a threshold often meet),
a `where` condition, which side a `minimum`/`maximum` takes, whether an integer division or
remainder has a zero quotient. Its truth values at the episode's sizes are the
episode's *regime*. `realise` finds a small shape in the same regime (a z3 optimisation over
the sizes the reduced shape lets vary), so that the numerics run at least once where the
program behaves as it does at the real size.
"""

from __future__ import annotations

from dataclasses import dataclass

import z3

from ..ir import nodes as ir
from ..ir.printer import print_expr
from .isolated import SEEDS, into
from .z3guard import exclusive

_CMP = {"<": lambda a, b: a < b, "<=": lambda a, b: a <= b, ">": lambda a, b: a > b,
        ">=": lambda a, b: a >= b, "==": lambda a, b: a == b, "!=": lambda a, b: a != b}


@dataclass(frozen=True)
class Condition:
    """One size condition: its formula over `size_<dim>` integers, DSL text and line."""

    formula: z3.BoolRef
    text: str
    line: int
    dims: frozenset


def size_var(dim: str) -> z3.ArithRef:
    return z3.Int(f"size_{dim}")


class _Encoder:
    """Scalar IR expressions over sizes, constants and literals as z3 terms (None when an
    expression depends on anything else: program ids, loop variables, tiles, data)."""

    def __init__(self, kernel: ir.Kernel):
        self.sizes = set(kernel.sizes)
        self.consts = dict(kernel.consts)
        self.env: dict[str, z3.ExprRef] = {}
        self.found: dict[str, Condition] = {}

    def expr(self, e) -> z3.ExprRef | None:
        if isinstance(e, ir.Const):
            v = e.value
            if isinstance(v, bool):
                return z3.BoolVal(v)
            if isinstance(v, int):
                return z3.IntVal(v)
            if isinstance(v, float) and v == v and abs(v) != float("inf"):
                return z3.RealVal(v)
            return None  # an infinite or NaN literal is no size threshold
        if isinstance(e, ir.Name):
            if e.id in self.env:
                return self.env[e.id]
            if e.id in self.sizes:
                return size_var(e.id)
            v = self.consts.get(e.id)
            return None if v is None else self.expr(ir.Const(v))
        if isinstance(e, ir.BinOp):
            return self._binop(e)
        if isinstance(e, ir.UnaryOp):
            x = self.expr(e.operand)
            if x is None:
                return None
            if e.op in ("not", "~") and z3.is_bool(x):
                return z3.Not(x)
            return -x if e.op == "-" and not z3.is_bool(x) else x if e.op == "+" else None
        if isinstance(e, ir.Call):
            return self._call(e)
        return None

    def _binop(self, e: ir.BinOp):
        a, b = self.expr(e.lhs), self.expr(e.rhs)
        if a is None or b is None:
            return None
        a, b = _num(a, b), _num(b, a)
        if e.op in _CMP:
            return self._note(e, _CMP[e.op](a, b), a, b)
        if e.op in ("&", "|", "^") and z3.is_bool(a) and z3.is_bool(b):
            return {"&": z3.And, "|": z3.Or, "^": z3.Xor}[e.op](a, b)
        if z3.is_bool(a) or z3.is_bool(b):
            a, b = _arith(a), _arith(b)
        if e.op in ("+", "-", "*"):
            return {"+": a + b, "-": a - b, "*": a * b}[e.op]
        if e.op == "/":
            return z3.ToReal(a) / z3.ToReal(b) if z3.is_int(a) and z3.is_int(b) else a / b
        if e.op in ("//", "%") and z3.is_int(a) and z3.is_int(b):
            self._note(e, z3.Abs(a) < z3.Abs(b))  # the quotient is zero (a threshold)
            q = z3.If(a * b >= 0, z3.Abs(a) / z3.Abs(b), -(z3.Abs(a) / z3.Abs(b)))
            return q if e.op == "//" else a - b * q  # Triton's: truncating toward zero
        return None

    def _call(self, e: ir.Call):
        args = {k: v for k, v in e.args}
        if e.fn == "where":
            c, x, y = (self.expr(args.get(k)) for k in ("cond", "x", "y"))
            if c is not None and z3.is_bool(c):
                self._note(args["cond"], c)
            if c is None or x is None or y is None or not z3.is_bool(c):
                return None
            x, y = _num(x, y), _num(y, x)
            return z3.If(c, x, y) if x.sort() == y.sort() else None
        if e.fn in ("minimum", "maximum"):
            a, b = self.expr(args.get("a")), self.expr(args.get("b"))
            if a is None or b is None:
                return None
            a, b = _num(_arith(a), b), _num(_arith(b), a)
            le = self._note(e, a <= b, a, b)
            return z3.If(le, a, b) if e.fn == "minimum" else z3.If(le, b, a)
        if e.fn == "cdiv":
            a, b = self.expr(args.get("a")), self.expr(args.get("b"))
            return None if a is None or b is None or not (z3.is_int(a) and z3.is_int(b)) \
                else (a + b - 1) / b
        if e.fn == "cast":
            x, dtype = self.expr(args.get("x")), args.get("dtype")
            if x is None or not isinstance(dtype, ir.Symbol):
                return None
            if dtype.name.startswith(("f", "bf")):
                return z3.ToReal(_arith(x)) if not z3.is_real(x) else x
            if dtype.name.startswith(("i", "u")):
                return _arith(x) if not z3.is_real(x) else z3.ToInt(x)
            return None
        if e.fn == "abs":
            x = self.expr(args.get("x"))
            return None if x is None or z3.is_bool(x) else z3.Abs(x)
        return None

    def _note(self, e, formula: z3.BoolRef, a=None, b=None) -> z3.BoolRef:
        """Record a condition; for a comparison of `a` and `b` also whether they are equal,
        since at the boundary both sides of a threshold often give the same value."""
        names = {str(v) for v in _free(formula)}
        dims = frozenset(n.removeprefix("size_") for n in names if n.startswith("size_"))
        text = print_expr(e)
        if dims and text not in self.found:
            self.found[text] = Condition(formula, text, e.loc.line, dims)
            if a is not None:
                self.found[text + " (its sides equal)"] = Condition(a == b, text + " (its "
                                                                    "sides equal)", e.loc.line, dims)
        return formula


def _num(x, other):
    """Mix an integer with a real as Python does."""
    if z3.is_int(x) and z3.is_real(other):
        return z3.ToReal(x)
    return x


def _arith(x):
    return z3.If(x, z3.IntVal(1), z3.IntVal(0)) if z3.is_bool(x) else x


def _free(e) -> set:
    out, todo, seen = set(), [e], set()
    while todo:
        t = todo.pop()
        if t.get_id() in seen:
            continue
        seen.add(t.get_id())
        if z3.is_const(t) and t.decl().kind() == z3.Z3_OP_UNINTERPRETED:
            out.add(t)
        todo.extend(t.children())
    return out


@exclusive
def conditions(kernel: ir.Kernel) -> list[Condition]:
    """Every size condition of the kernel, in source order."""
    enc = _Encoder(kernel)
    _block(enc, kernel.body)
    return sorted(enc.found.values(), key=lambda c: c.line)


def _exprs(e):
    """`e` and every sub-expression, children first."""
    for child in _children(e):
        yield from _exprs(child)
    yield e


def _children(e):
    if isinstance(e, ir.BinOp):
        return (e.lhs, e.rhs)
    if isinstance(e, ir.UnaryOp):
        return (e.operand,)
    if isinstance(e, ir.Call):
        return tuple(v for _, v in e.args) + tuple(v for _, v in e.tags)
    if isinstance(e, ir.TupleExpr):
        return e.elts
    if isinstance(e, ir.Subscript):
        return (e.base, *e.index)
    return ()


def _visit(enc: _Encoder, e) -> z3.ExprRef | None:
    for sub in _exprs(e):  # conditions anywhere, also inside tile expressions
        enc.expr(sub)
    return enc.expr(e)


def _assigned(stmts) -> set[str]:
    out = set()
    for s in stmts:
        if isinstance(s, ir.Assign):
            out |= set(s.targets)
        elif isinstance(s, ir.For):
            out |= {s.var} | _assigned(s.body)
        elif isinstance(s, ir.If):
            out |= _assigned(s.body) | _assigned(s.orelse)
    return out


def _block(enc: _Encoder, stmts) -> None:
    for s in stmts:
        if isinstance(s, ir.Assign):
            v = _visit(enc, s.value)
            for name in s.targets:
                enc.env.pop(name, None)
            if v is not None and len(s.targets) == 1:
                enc.env[s.targets[0]] = v
        elif isinstance(s, ir.ExprStmt):
            _visit(enc, s.value)
        elif isinstance(s, ir.For):
            _visit(enc, s.iter)
            for name in _assigned([s]):  # values carried around the loop are not scalars
                enc.env.pop(name, None)
            _block(enc, s.body)
            for name in _assigned([s]):
                enc.env.pop(name, None)
        elif isinstance(s, ir.If):
            _branch(enc, s)


def _branch(enc: _Encoder, s: ir.If) -> None:
    cond = _visit(enc, s.cond)
    before = dict(enc.env)
    sides = []
    for body in (s.body, s.orelse):
        enc.env = dict(before)
        _block(enc, body)
        sides.append(enc.env)
    enc.env = dict(before)
    for name in _assigned([s]):
        enc.env.pop(name, None)
        a, b = sides[0].get(name), sides[1].get(name)
        if cond is not None and z3.is_bool(cond) and a is not None and b is not None \
                and a.sort() == b.sort():
            enc.env[name] = z3.If(cond, a, b)


@exclusive
def regime(conds: list[Condition], sizes: dict) -> tuple[bool | None, ...]:
    """The truth value of each condition at `sizes` (None where a size is missing)."""
    out = []
    for c in conds:
        if not all(d in sizes for d in c.dims):
            out.append(None)
            continue
        v = z3.simplify(z3.substitute(c.formula, *[(size_var(d), z3.IntVal(int(sizes[d])))
                                                   for d in c.dims]))
        out.append(True if z3.is_true(v) else False if z3.is_false(v) else None)
    return tuple(out)


@exclusive
def realise(conds: list[Condition], real: dict, base: dict,
            timeout_ms: int = 2000) -> dict | None:
    """The smallest shape (least sum of sizes) that differs from `base` only in sizes the
    conditions name and `base` does not share with `real`, takes those in [1, real], and
    puts every condition on them the way `real` does; None if z3 finds none in time."""
    want = regime(conds, real)
    named = frozenset().union(*[c.dims for c in conds]) if conds else frozenset()
    free = [d for d in base if d in real and d in named and int(base[d]) != int(real[d])]
    facts = []
    for d in base:
        v = size_var(d)
        if d in free:
            facts += [v >= 1, v <= max(int(real[d]), 1)]
        else:
            facts.append(v == int(base[d]))
    for c, w in zip(conds, want):
        if w is not None and all(d in base for d in c.dims):
            facts.append(c.formula if w else z3.Not(c.formula))
    # in a z3 context of its own, with fixed seeds: the answer depends on the problem
    # alone, not on what the process solved before (`isolated`)
    ctx = z3.Context()
    opt = z3.Optimize(ctx=ctx)
    for key, value in SEEDS:
        opt.set(key, value)
    opt.set("timeout", timeout_ms)
    opt.add(into(ctx, facts))
    total = z3.Sum([size_var(d) for d in free]) if free else z3.IntVal(0)
    opt.minimize(total.translate(ctx))
    if opt.check() != z3.sat:
        return None
    m = opt.model()
    return {d: (m.eval(size_var(d).translate(ctx), model_completion=True).as_long()
                if d in free else int(base[d])) for d in base}


__all__ = ["Condition", "conditions", "realise", "regime"]
