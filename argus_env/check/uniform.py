"""Index values in floating-point data: what the reduced shapes cannot stand for.

The checker proves data flow at the episode's sizes (which elements reach which output,
each once) and tracks no floating-point value; numerics run at small reduced shapes. Their
verdict stands for the real size only where every element's float arithmetic is the same
function of its data: then an element at row 8000 is computed as one at row 10. A float
that depends on an element's *position* — an index (program id, `A.arange`, loop variable)
cast to a float, mixed into float arithmetic, or selecting between two float values of
which neither is a mask's fill (`A.where(rows < 4096, acc, 2.0 * acc)`) — can be right at
every position a reduced shape reaches and wrong past them, and the checker sees nothing
(the tags and coverage are the same either way).

A float carried around a loop and combined, at each iteration, with a value carrying no
data (`f = f * 1.003`, `A.dot(a, b, acc * 1.003)`) depends on the trip count, which the
reduced shapes keep small: refused too (a running softmax rescales by data, `alpha`).

Masks stay allowed: `A.where(cond, x, c)` with one side carrying data and the other none
(a fill constant) is followed by the checker element by element (a fill carries no data:
a wrong mask is a coverage violation at the real size), and so are load and store masks;
a mask's value does not carry its condition's index on. Data in a condition does not
excuse its index (`rows + A.cast(acc * 0.0, A.i32) < 4096` is still positional). A value
carried around a loop is positional when no data reaches it (a counter); one that carries
data is left to the trip-count rule below.
Integer index arithmetic (addresses, masks) is the checker's too. `positional` names the
first index-dependent float of a kernel, or None; the environment refuses such a program
(`CheckUnsupported`) rather than trusting its numerics to the reduced shapes.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..ir import nodes as ir
from ..ir.printer import print_expr
from ..ir.rewrite import assigned as _assigned

#: values that differ between instances or elements (indices)
_INDEX_CALLS = frozenset({"program_id", "arange"})
#: values read from memory or computed from it (data)
_DATA_CALLS = frozenset({"load", "dot", "atomic_add"})
_FLOAT_CALLS = frozenset({"exp", "exp2", "log", "log2", "sqrt", "sigmoid", "dot"})


@dataclass(frozen=True)
class Kind:
    index: bool = False   # depends on an index
    data: bool = False    # carries data
    float: bool = False   # a floating-point value
    fill: bool = False    # an index-free constant (a mask's fill)

    def __or__(self, other: "Kind") -> "Kind":
        return Kind(self.index or other.index, self.data or other.data,
                    self.float or other.float, False)


@dataclass(frozen=True)
class Positional:
    text: str
    line: int
    why: str


class _Walk:
    def __init__(self, kernel: ir.Kernel):
        self.kernel = kernel
        self.tensors = {p.name: p for p in kernel.tensors}
        self.consts = dict(kernel.consts)
        self.env: dict[str, Kind] = {}
        self.found: Positional | None = None
        self.carried: set[str] = set()   # floats carried around the loop being walked

    def flag(self, e, why: str) -> None:
        if self.found is None:
            self.found = Positional(print_expr(e), e.loc.line, why)

    def kind(self, e) -> Kind:
        if isinstance(e, ir.Const):
            return Kind(float=isinstance(e.value, float), fill=True)
        if isinstance(e, ir.Name):
            if e.id in self.env:
                return self.env[e.id]
            v = self.consts.get(e.id)
            return Kind(float=isinstance(v, float), fill=True)
        if isinstance(e, ir.Symbol) or e is None:
            return Kind(fill=True)
        if isinstance(e, ir.TupleExpr):
            return _union(self.kind(x) for x in e.elts)
        if isinstance(e, ir.Subscript):
            k = _union(self.kind(x) for x in (e.base, *e.index))
            return Kind(k.index, k.data, self.kind(e.base).float, False)
        if isinstance(e, ir.UnaryOp):
            k = self.kind(e.operand)
            return Kind(k.index, k.data, k.float, k.fill)
        if isinstance(e, ir.BinOp):
            return self._binop(e)
        if isinstance(e, ir.Call):
            return self._call(e)
        return Kind()

    def _binop(self, e: ir.BinOp) -> Kind:
        a, b = self.kind(e.lhs), self.kind(e.rhs)
        out = a | b
        if e.op in ("<", "<=", ">", ">=", "==", "!="):
            return Kind(out.index, out.data, False, False)
        is_float = a.float or b.float or e.op == "/"
        if self.carried and e.op in ("+", "-", "*", "/"):
            for x, y, kx in ((e.lhs, e.rhs, a), (e.rhs, e.lhs, b)):
                other = b if kx is a else a
                if kx.float and _names(x) & self.carried and not _names(y) & self.carried \
                        and not other.data:
                    self.flag(e, "a float carried around a loop is combined with a value "
                                 "carrying no data at each iteration, so it depends on the "
                                 "trip count")
        for x, y in ((a, b), (b, a)):
            if is_float and not x.float and x.index and not x.data and e.op != "/" \
                    or e.op == "/" and x.index and not x.data and not x.float:
                self.flag(e, "an index enters float arithmetic")
        return Kind(out.index, out.data, is_float, a.fill and b.fill)

    def _call(self, e: ir.Call) -> Kind:
        args = dict(e.args)
        kids = [self.kind(v) for _, v in e.args] + [self.kind(v) for _, v in e.tags]
        if e.fn in _INDEX_CALLS:
            return Kind(index=True)
        if e.fn == "load":
            t = args.get("ref")
            base = t.base if isinstance(t, ir.Subscript) else t
            p = self.tensors.get(base.id) if isinstance(base, ir.Name) else None
            other = self.kind(args.get("other")) if args.get("other") is not None else Kind()
            if other.index and not other.data:
                self.flag(e, "a load's fill value depends on an index")
            return Kind(data=True, float=bool(p and p.dtype and p.dtype.startswith(("f", "bf"))))
        if e.fn in _DATA_CALLS:
            return Kind(data=True, float=True)
        if e.fn == "cast":
            x, dtype = self.kind(args.get("x")), args.get("dtype")
            to_float = isinstance(dtype, ir.Symbol) and dtype.name.startswith(("f", "bf"))
            if to_float and not x.float and x.index and not x.data:
                self.flag(e, "an index is cast to a float")
            return Kind(x.index, x.data, to_float if isinstance(dtype, ir.Symbol) else x.float,
                        x.fill)
        if e.fn == "where":
            c, x, y = (self.kind(args.get(k)) for k in ("cond", "x", "y"))
            is_float = x.float or y.float
            # a mask: one side carries data, the other is an index-free fill; the checker
            # follows it element by element, so its condition's index does not pass on
            mask = (x.data and y.fill) or (y.data and x.fill)
            if is_float and c.index:
                if not mask:  # data in the condition does not launder the index
                    self.flag(e, "an index selects between two float values, neither a "
                                 "mask's fill")
                elif (x.index and not x.data) or (y.index and not y.data):
                    self.flag(e, "an index selects a float value")
            if mask:
                out = x | y
                return Kind(out.index, out.data or c.data, is_float, False)
            out = c | x | y
            return Kind(out.index, out.data, is_float, False)
        if e.fn == "full":
            v, dtype = self.kind(args.get("value")), args.get("dtype")
            to_float = isinstance(dtype, ir.Symbol) and dtype.name.startswith(("f", "bf"))
            if to_float and v.index and not v.data:
                self.flag(e, "a float tile is filled with an index")
            return Kind(v.index, v.data, to_float, v.fill)
        if e.fn == "zeros":
            dtype = args.get("dtype")
            return Kind(float=isinstance(dtype, ir.Symbol) and dtype.name.startswith(("f", "bf")),
                        fill=True)
        if e.fn in ("minimum", "maximum"):
            a, b = self.kind(args.get("a")), self.kind(args.get("b"))
            if (a.float or b.float):
                for x in (a, b):
                    if not x.float and x.index and not x.data:
                        self.flag(e, "an index enters float arithmetic")
            out = a | b
            return Kind(out.index, out.data, a.float or b.float, a.fill and b.fill)
        out = _union(kids)
        return Kind(out.index, out.data, out.float or e.fn in _FLOAT_CALLS,
                    all(k.fill for k in kids))

    def block(self, stmts) -> None:
        for s in stmts:
            if isinstance(s, ir.Assign):
                k = self.kind(s.value)
                derived = bool(_names(s.value) & self.carried)
                for name in s.targets:
                    self.env[name] = k
                    if derived and k.float:  # this iteration's value of a carried float
                        self.carried = self.carried | {name}
            elif isinstance(s, ir.ExprStmt):
                self.kind(s.value)
            elif isinstance(s, ir.For):
                it = self.kind(s.iter)
                self.env[s.var] = Kind(index=True, data=it.data)
                outer = self.carried
                self.carried = outer | {n for n in _exposed(s.body, set()) & _assigned(s.body)
                                        if n in self.env and self.env[n].float}
                # values carried around the loop depend on the iteration: twice, so that
                # what the first pass assigned is seen carried by the second
                for _ in range(2):
                    self.block(s.body)
                    # (a value carrying data is followed by the carried-float rule
                    # instead: combined with data at each step, it is not positional)
                    for name in _assigned(s.body):
                        k = self.env.get(name, Kind())
                        self.env[name] = Kind(k.index or not k.data, k.data, k.float, False)
                self.carried = outer
            elif isinstance(s, ir.If):
                c = self.kind(s.cond)
                before = dict(self.env)
                sides = []
                for body in (s.body, s.orelse):
                    self.env = dict(before)
                    self.block(body)
                    sides.append(self.env)
                self.env = dict(before)
                for name in _assigned([s]):
                    a, b = sides[0].get(name, Kind()), sides[1].get(name, Kind())
                    k = a | b
                    if c.index and (a.float or b.float):
                        self.flag(s.cond, "an index chooses a float value")
                    self.env[name] = Kind(k.index or c.index, k.data or c.data,
                                          a.float or b.float, False)


def _exposed(stmts, assigned: set[str]) -> set[str]:
    """Names `stmts` read before assigning them (in order; a name assigned on one way of
    an `if` only is still unassigned after it): the values a loop body carries."""
    out: set[str] = set()
    for s in stmts:
        if isinstance(s, ir.Assign):
            out |= _names(s.value) - assigned
            assigned = assigned | set(s.targets)
        elif isinstance(s, ir.ExprStmt):
            out |= _names(s.value) - assigned
        elif isinstance(s, ir.For):
            out |= _names(s.iter) - assigned
            out |= _exposed(s.body, assigned | {s.var})
        elif isinstance(s, ir.If):
            out |= _names(s.cond) - assigned
            out |= _exposed(s.body, assigned) | _exposed(s.orelse, assigned)
            assigned = assigned | (_assigned(s.body) & _assigned(s.orelse))
    return out


def _names(e) -> set[str]:
    if isinstance(e, ir.Name):
        return {e.id}
    if isinstance(e, ir.BinOp):
        return _names(e.lhs) | _names(e.rhs)
    if isinstance(e, ir.UnaryOp):
        return _names(e.operand)
    if isinstance(e, ir.Call):
        return set().union(*[_names(v) for _, v in (*e.args, *e.tags)])
    if isinstance(e, ir.TupleExpr):
        return set().union(*[_names(x) for x in e.elts])
    if isinstance(e, ir.Subscript):
        return set().union(_names(e.base), *[_names(x) for x in e.index])
    return set()


def _union(kinds) -> Kind:
    out = Kind()
    for k in kinds:
        out = out | k
    return out



def positional(kernel: ir.Kernel) -> Positional | None:
    """The first float value of `kernel` that depends on an element's position other than
    through a mask, or None."""
    w = _Walk(kernel)
    w.block(kernel.body)
    return w.found


__all__ = ["Positional", "positional"]
