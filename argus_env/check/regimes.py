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
episode's *regime*. The SM count `A.num_sms()` reads is a size of its own (`NUM_SMS`): the
target's at the episode's size, the interpreter's at the reduced shapes (no shape changes
it); `A.num_programs` reads the launch's extents back. A value computed from the sizes alone
(the same in every instance) that the encoder cannot follow (a bit operation, a math
function, a cast that rounds) is an *opaque* condition: where it switches is unknown, so
the program is refused rather than trusted to the reduced shapes. `realise` finds a small shape in the same regime (a z3 optimisation over
the sizes the reduced shape lets vary), so that the numerics run at least once where the
program behaves as it does at the real size.
"""

from __future__ import annotations

from dataclasses import dataclass

import z3

from ..ir import nodes as ir
from ..ir.printer import print_expr
from ..ir.rewrite import assigned as _assigned
from .isolated import SEEDS, into
from .z3guard import exclusive

_CMP = {"<": lambda a, b: a < b, "<=": lambda a, b: a <= b, ">": lambda a, b: a > b,
        ">=": lambda a, b: a >= b, "==": lambda a, b: a == b, "!=": lambda a, b: a != b}


@dataclass(frozen=True)
class Condition:
    """One size condition: its formula over `size_<dim>` integers, DSL text and line. An
    *opaque* condition (`formula` None) is a value the program computes from its sizes in
    a way this module cannot follow (a bit operation, a math function, a rounding cast):
    where it switches is unknown, so no reduced shape can be shown to behave as the
    episode's size does."""

    formula: z3.BoolRef | None
    text: str
    line: int
    dims: frozenset

    @property
    def opaque(self) -> bool:
        return self.formula is None


#: the streaming multiprocessors `A.num_sms()` reads, a size of its own in a regime: the
#: target's at the episode's size, `lower.runtime.INTERPRETER_NUM_SMS` under the interpreter
NUM_SMS = "@num_sms"

#: calls whose value is the same in every instance and iteration only if their arguments
#: are; the others below make values that vary (ids, index tiles, data)
_VARYING_CALLS = frozenset({"program_id", "arange", "load", "dot", "atomic_add"})
#: calls that compute a value (a size-dependent one the encoder cannot follow is opaque);
#: `grid`, `range`, `store`, `assert_tags`, `covers`, `tag` are structure, checked at the
#: episode's size by the checker
_VALUE_CALLS = frozenset({"cdiv", "minimum", "maximum", "where", "cast", "abs", "exp",
                          "exp2", "log", "log2", "sqrt", "sigmoid", "full", "sum", "max",
                          "min", "trans", "num_programs", "num_sms"})
#: float types whose rounding of an integer loses precision where sizes live (above 2**8,
#: 2**11): their casts of size values are opaque
_ROUNDING = ("bf16", "f16", "fp8", "f8", "e4m3", "e5m2")


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
        self.varying: set[str] = set()   # names whose value varies (instances, iterations)
        self.sized: set[str] = set()     # names whose value depends on the sizes
        self.grid: tuple = ()            # the current launch's extents (None: not followed)
        self.in_grid = False             # encoding a launch's extents (`_block`)

    def is_varying(self, e) -> bool:
        """Whether `e` can differ between instances, iterations or elements (a program id,
        an index tile, data, a loop variable or a value carried around a loop)."""
        if isinstance(e, ir.Name):
            return e.id in self.varying
        if isinstance(e, ir.Call) and e.fn in _VARYING_CALLS:
            return True
        return any(self.is_varying(c) for c in _children(e))

    def is_sized(self, e) -> bool:
        """Whether `e`'s value depends on the problem sizes (or on the SM count)."""
        if isinstance(e, ir.Name):
            return e.id in self.sizes or e.id in self.sized
        if isinstance(e, ir.Call) and e.fn in ("num_programs", "num_sms"):
            return True
        return any(self.is_sized(c) for c in _children(e))

    def opaque(self, e) -> None:
        """Record `e`, a value computed from the sizes alone that `expr` cannot follow."""
        text = print_expr(e)
        if text not in self.found:
            self.found[text] = Condition(None, text, e.loc.line,
                                         frozenset(self.sizes & _names(e)))

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
            if e.op == "~" and z3.is_int(x):
                return -x - 1  # two's complement
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
            if z3.is_real(a) or z3.is_real(b):
                # compared in floating point: the GPU rounds in float32 (a literal, a size
                # converted past 2**24, every product), which real arithmetic does not
                # follow (`M * 1.00000001 > M` holds over the reals, never in float32)
                return None
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
        if e.op in ("<<", ">>") and z3.is_int(a) and z3.is_int(b):
            amount = z3.simplify(b)
            if not z3.is_int_value(amount) or not 0 <= amount.as_long() < 64:
                return None  # a shift by an amount that is not a known constant: opaque
            scale = z3.IntVal(2 ** amount.as_long())
            if e.op == "<<":
                return a * scale
            self._note(e, z3.And(a >= 0, a < scale))  # the (floor) quotient is zero
            return a / scale  # an arithmetic shift: z3's integer division floors too
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
            if z3.is_real(a) or z3.is_real(b):
                return None  # which side is taken, decided in float32: not followed
            le = self._note(e, a <= b, a, b)
            return z3.If(le, a, b) if e.fn == "minimum" else z3.If(le, b, a)
        if e.fn == "num_programs":
            axis = args.get("axis")
            if not (isinstance(axis, ir.Const) and isinstance(axis.value, int)):
                return None
            return self.grid[axis.value] if axis.value < len(self.grid) else z3.IntVal(1)
        if e.fn == "num_sms":
            return size_var(NUM_SMS)
        if e.fn == "cdiv":
            a, b = self.expr(args.get("a")), self.expr(args.get("b"))
            return None if a is None or b is None or not (z3.is_int(a) and z3.is_int(b)) \
                else (a + b - 1) / b
        if e.fn == "cast":
            x, dtype = self.expr(args.get("x")), args.get("dtype")
            if x is None or not isinstance(dtype, ir.Symbol):
                return None
            if dtype.name.startswith(_ROUNDING) or "fp8" in dtype.name:
                return None  # rounds integers past 2**8 (or 2**11): opaque
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
        if self.in_grid and NUM_SMS in dims:
            return formula
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


def _names(e) -> set[str]:
    return {x.id for x in _exprs(e) if isinstance(x, ir.Name)}


def _visit(enc: _Encoder, e) -> z3.ExprRef | None:
    for sub in _exprs(e):  # conditions anywhere, also inside tile expressions
        v = enc.expr(sub)
        if v is None and _is_value(sub) and enc.is_sized(sub) and not enc.is_varying(sub) \
                and all(enc.expr(c) is not None for c in _children(sub)
                        if _is_value(c) and enc.is_sized(c) and not enc.is_varying(c)):
            enc.opaque(sub)  # the innermost such value: its children are followed
    return enc.expr(e)


def _is_value(e) -> bool:
    """Whether `e` computes a value (an operator or a value call), not structure."""
    return isinstance(e, (ir.BinOp, ir.UnaryOp)) or \
        (isinstance(e, ir.Call) and e.fn in _VALUE_CALLS)



def _block(enc: _Encoder, stmts) -> None:
    for s in stmts:
        if isinstance(s, ir.Assign):
            v = _visit(enc, s.value)
            varying, sized = enc.is_varying(s.value), enc.is_sized(s.value)
            for name in s.targets:
                enc.env.pop(name, None)
                (enc.varying.add if varying else enc.varying.discard)(name)
                (enc.sized.add if sized else enc.sized.discard)(name)
            if v is not None and len(s.targets) == 1:
                enc.env[s.targets[0]] = v
        elif isinstance(s, ir.ExprStmt):
            # a grid's extents decide how many instances run, which the checker follows at
            # the episode's size; the SM count's side there (a persistent grid's
            # `A.minimum(A.num_sms(), tiles)`) is no regime of the values computed. Where
            # a value reads it back (`A.num_programs`), its conditions are noted there
            enc.in_grid = s.value.fn == "grid"
            _visit(enc, s.value)
            if s.value.fn == "grid":  # a launch: `A.num_programs` reads its extents
                dims = dict(s.value.args).get("dims")
                elts = dims.elts if isinstance(dims, ir.TupleExpr) else (dims,)
                enc.grid = tuple(None if d is None else enc.expr(d) for d in elts)
            enc.in_grid = False
        elif isinstance(s, ir.For):
            _visit(enc, s.iter)
            # the loop variable and values carried around the loop vary by iteration (and
            # after it, with the trip count)
            for name in _assigned([s]):
                enc.env.pop(name, None)
                enc.varying.add(name)
            _block(enc, s.body)
            for name in _assigned([s]):
                enc.env.pop(name, None)
                enc.varying.add(name)
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
    if enc.is_varying(s.cond):  # assigned on one way or the other, instance by instance
        enc.varying |= _assigned([s])
    if enc.is_sized(s.cond):
        enc.sized |= _assigned([s])
    for name in _assigned([s]):
        enc.env.pop(name, None)
        a, b = sides[0].get(name), sides[1].get(name)
        if cond is not None and z3.is_bool(cond) and a is not None and b is not None \
                and a.sort() == b.sort():
            enc.env[name] = z3.If(cond, a, b)


@exclusive
def regime(conds: list[Condition], sizes: dict) -> tuple[bool | None, ...]:
    """The truth value of each condition at `sizes` (None where a size is missing, and for
    an opaque condition). `sizes` may name `NUM_SMS`, the SM count `A.num_sms()` reads."""
    out = []
    for c in conds:
        if c.opaque or not all(d in sizes for d in c.dims):
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
    # a name of the machine (`NUM_SMS`), not of the shape, keeps its value in `base`
    free = [d for d in base if d in real and d in named and int(base[d]) != int(real[d])
            and not d.startswith("@")]
    facts = []
    for d in base:
        v = size_var(d)
        if d in free:
            facts += [v >= 1, v <= max(int(real[d]), 1)]
        else:
            facts.append(v == int(base[d]))
    for c, w in zip(conds, want):
        if w is not None and not c.opaque and all(d in base for d in c.dims):
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
                if d in free else int(base[d])) for d in base if not d.startswith("@")}


__all__ = ["NUM_SMS", "Condition", "conditions", "realise", "regime"]
