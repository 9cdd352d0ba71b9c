"""Symbolic values of the checker: what one element of a tile is, as z3 formulas.

A value of shape `(d0, d1, ...)` describes its element at tile coordinates given by the
canonical axis variables `X0, X1, ...` (`AXES`): its integer or boolean `val`, its `tags`
(name -> (guard, value): the tag is present where the guard holds) and its `cov`erage
(name -> terms; each term is the multiset {idx : bound variables satisfying dom}).
Guards may mention fresh lane variables that are only ever read existentially ("some
lane contributes"); violation queries are existential, so this is sound for them.

Operations that move elements between axes (broadcasting, `x[:, None]`, `trans`, the
operands of `dot`) are substitutions of axis variables. `merge` is the value of a name
after both branches of an `if`; `evaluate` reads a term in a counterexample's model.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

import z3

from ..pack import FINAL, SUMS

AXES = tuple(z3.Int(f"X{i}") for i in range(4))
_FALSE = z3.BoolVal(False)


@dataclass(frozen=True)
class Cov:
    """One term of a coverage multiset: {idx : bound vars with dom} (a set for max/min).

    `defaults` pairs bound variables with the values they take at a given point of the
    others (a workspace element's writer, from its coordinates): the completeness proof
    substitutes them where the index alone does not pin a bound variable down.

    `picks` are the writer's instances enumerated on integers, each a tuple of (bound
    variable, integer) pairs (`whole._writer_picks`): where the index is not affine in the
    bound variables (a stream-K program's k offset is a maximum over its program id), the
    completeness proof tries each instance, at which the rest is affine."""

    bound: tuple[z3.ArithRef, ...]
    dom: z3.BoolRef
    idx: z3.ArithRef
    kind: str = "sum"
    defaults: tuple = ()
    picks: tuple = ()

    def map(self, fn) -> "Cov":
        return Cov(self.bound, fn(self.dom), fn(self.idx), self.kind,
                   tuple((v, fn(e)) for v, e in self.defaults), self.picks)

    def guard(self, cond) -> "Cov":
        """The term restricted to where `cond` holds."""
        return replace(self, dom=And(cond, self.dom))


@dataclass
class SV:
    """A symbolic scalar (shape ()) or tile."""

    shape: tuple[int, ...]
    val: z3.ExprRef | None = None
    tags: dict[str, tuple[z3.BoolRef, z3.ArithRef]] = field(default_factory=dict)
    cov: dict[str, list[Cov]] = field(default_factory=dict)
    carried: bool = False     # a loop-carried value (e.g. a prefetched tile)
    frag: str | None = None   # fragment layout policy for thread naming ("mma" for dots)
    origin: "str | Text" = ""  # the DSL text that produced it, for messages
    fval: float | None = None  # a compile-time float's value (softmax scales)
    #: a compile-time integer of the generated code (a literal, an `A.const`, arithmetic
    #: on those only): a Python int there, exact, divided with Python's floor
    ctime: bool = False
    #: a 64-bit integer (an `A.cast(x, A.i64)`, i64 data, a constant past 32 bits, or
    #: arithmetic with one): other integers are 32-bit and wrap (`rules.no_wrap`)
    wide: bool = False
    #: what the checker knows of a float element's magnitude (`floats.py`; None: nothing
    #: where it is a fact, bounded where it is a doubt): `zero` where it is exactly 0,
    #: `low`/`high` (guard, L) where it is at most -L / at least L (a "minus infinity"
    #: fill), `maylow`/`mayhigh` where it may lie beyond the data bound below / above
    zero: z3.BoolRef | None = None
    low: tuple | None = None
    high: tuple | None = None
    maylow: z3.BoolRef | None = None
    mayhigh: z3.BoolRef | None = None
    #: log2 of how far constants (a factor of 1e10, an `exp` of 1000.0) carry it past data:
    #: 0 for data and what is computed from data alone (`magnitudes.MAG_LIMIT`)
    mag: float = 0.0

    def map(self, fn) -> "SV":
        """Apply a formula transformation (a substitution) to every field."""
        return replace(self, val=fn(self.val) if self.val is not None else None,
                       tags={n: (fn(g), fn(v)) for n, (g, v) in self.tags.items()},
                       cov={n: [t.map(fn) for t in ts] for n, ts in self.cov.items()},
                       zero=fn(self.zero) if self.zero is not None else None,
                       low=(fn(self.low[0]), self.low[1]) if self.low is not None else None,
                       high=(fn(self.high[0]), self.high[1]) if self.high is not None else None,
                       maylow=fn(self.maylow) if self.maylow is not None else None,
                       mayhigh=fn(self.mayhigh) if self.mayhigh is not None else None)

    def live(self) -> z3.BoolRef:
        """The element carries data: some tag is present (the order rules' marks say
        something of data an element carries, they are none themselves)."""
        guards = [g for n, (g, _) in self.tags.items()
                  if not (n.startswith(FINAL) or n.startswith(SUMS))]
        return Or(*guards) if guards else z3.BoolVal(False)

    @property
    def tagged(self) -> bool:
        return bool(self.tags or self.cov)


def And(*args) -> z3.BoolRef:
    """`z3.And`: the same term, made without the Python-side coercion of every argument
    where each is a formula of one context or a Python bool (the checker's conjunctions,
    a check's most frequent terms); anything else goes to `z3.And`."""
    return _junction(args, _mk_and, z3.And)


def Or(*args) -> z3.BoolRef:
    """`z3.Or`, made as `And` is."""
    return _junction(args, _mk_or, z3.Or)


def Not(a) -> z3.BoolRef:
    """`z3.Not` of a formula (anything else goes to `z3.Not`)."""
    if isinstance(a, z3.BoolRef):
        ctx = a.ctx
        return z3.BoolRef(_mk_not(ctx.ref(), a.as_ast()), ctx)
    return z3.Not(a)


def Implies(a, b) -> z3.BoolRef:
    """`z3.Implies` of two formulas of one context, made as `And` is."""
    if isinstance(a, z3.BoolRef) and isinstance(b, z3.BoolRef) and a.ctx is b.ctx:
        ctx = a.ctx
        return z3.BoolRef(_mk_implies(ctx.ref(), a.as_ast(), b.as_ast()), ctx)
    return z3.Implies(a, b)


def _junction(args, mk, slow):
    if len(args) == 1 and isinstance(args[0], (list, tuple)):
        args = args[0]
    ctx = None
    for a in args:
        if isinstance(a, z3.BoolRef):
            ctx = a.ctx
            break
    if ctx is None:  # no formula (only bools, or none at all): z3's own rules
        return slow(*args)
    n = len(args)
    arr, keep = (_Ast * n)(), []
    for i, a in enumerate(args):
        if isinstance(a, z3.BoolRef) and a.ctx is ctx:
            arr[i] = a.as_ast()
        elif isinstance(a, bool):
            keep.append(z3.BoolVal(a, ctx))
            arr[i] = keep[-1].as_ast()
        else:  # another sort, another context: z3's checks and messages
            return slow(*args)
    return z3.BoolRef(mk(ctx.ref(), n, arr), ctx)


def ge(a, b) -> z3.BoolRef:
    """`a >= b` for an integer term `a` and an integer term or Python int `b`: the same
    term Python's operator makes (the reflected `b <= a` where `b`'s class is a subclass
    of `a`'s, a numeral's: Python asks it first), made by z3's C API without the
    Python-side coercion of the operands (a check's index arithmetic is made of these);
    anything else goes to the operator."""
    if _reflected(a, b):
        return le(b, a)
    got = _ints(a, b)
    return z3.BoolRef(_mk_ge(got[0].ref(), got[1], got[2]), got[0]) if got else a >= b


def gt(a, b) -> z3.BoolRef:
    """`a > b`, made as `ge` makes `a >= b`."""
    if _reflected(a, b):
        return lt(b, a)
    got = _ints(a, b)
    return z3.BoolRef(_mk_gt(got[0].ref(), got[1], got[2]), got[0]) if got else a > b


def le(a, b) -> z3.BoolRef:
    """`a <= b`, made as `ge` makes `a >= b`."""
    if _reflected(a, b):
        return ge(b, a)
    got = _ints(a, b)
    return z3.BoolRef(_mk_le(got[0].ref(), got[1], got[2]), got[0]) if got else a <= b


def lt(a, b) -> z3.BoolRef:
    """`a < b`, made as `ge` makes `a >= b`."""
    if _reflected(a, b):
        return gt(b, a)
    got = _ints(a, b)
    return z3.BoolRef(_mk_lt(got[0].ref(), got[1], got[2]), got[0]) if got else a < b


def eq(a, b) -> z3.BoolRef:
    """`a == b` of integers, made as `ge` makes `a >= b`."""
    if _reflected(a, b):
        return eq(b, a)
    got = _ints(a, b)
    return z3.BoolRef(_mk_eq(got[0].ref(), got[1], got[2]), got[0]) if got else a == b


def ne(a, b) -> z3.BoolRef:
    """`a != b` of integers (z3's `distinct`), made as `ge` makes `a >= b`."""
    if _reflected(a, b):
        return ne(b, a)
    got = _ints(a, b)
    if not got:
        return a != b
    args = (_Ast * 2)(got[1], got[2])
    return z3.BoolRef(_mk_distinct(got[0].ref(), 2, args), got[0])


def If(c, a, b):
    """`z3.If(c, a, b)` of a formula and two formulas or two integer terms of its
    context: the same term, made by z3's C API (a branch's and an elementwise choice's
    every tag is one); anything else goes to `z3.If`."""
    if isinstance(c, z3.BoolRef) and isinstance(a, z3.ExprRef) and isinstance(b, z3.ExprRef):
        ctx = c.ctx
        if a.ctx is ctx and b.ctx is ctx:
            ref = ctx.ref()
            x, y = a.as_ast(), b.as_ast()
            kind = _sort_kind(ref, _get_sort(ref, x))
            if kind in (z3.Z3_BOOL_SORT, z3.Z3_INT_SORT) and \
                    kind == _sort_kind(ref, _get_sort(ref, y)):
                ast = _mk_ite(ref, c.as_ast(), x, y)
                if kind == z3.Z3_BOOL_SORT:
                    return z3.BoolRef(ast, ctx)
                if _ast_kind(ref, ast) == z3.Z3_NUMERAL_AST:
                    return z3.IntNumRef(ast, ctx)
                return z3.ArithRef(ast, ctx)
    return z3.If(c, a, b)


def _reflected(a, b) -> bool:
    """Python makes `a op b` with `b`'s reflected comparison when `b`'s class is a proper
    subclass of `a`'s (a numeral against a term)."""
    return type(b) is not type(a) and isinstance(b, type(a))


def add(a, b) -> z3.ArithRef:
    """`a + b` of integers, made as `ge` makes `a >= b`."""
    got = _ints(a, b)
    return _arith(_mk_add, got) if got else a + b


def sub(a, b) -> z3.ArithRef:
    """`a - b` of integers, made as `ge` makes `a >= b`."""
    got = _ints(a, b)
    return _arith(_mk_sub, got) if got else a - b


def mul(a, b) -> z3.ArithRef:
    """`a * b` of integers, made as `ge` makes `a >= b`."""
    got = _ints(a, b)
    return _arith(_mk_mul, got) if got else a * b


def div(a, b) -> z3.ArithRef:
    """`a / b` of integers (z3's `div`), made as `ge` makes `a >= b` (z3's reflected
    operator makes the same term)."""
    got = _ints(a, b)
    if not got:
        return a / b
    ctx, x, y = got
    return z3.ArithRef(_mk_div(ctx.ref(), x, y), ctx)


def mod(a, b) -> z3.ArithRef:
    """`a % b` of integers, made as `div`."""
    got = _ints(a, b)
    if not got:
        return a % b
    ctx, x, y = got
    return z3.ArithRef(_mk_mod(ctx.ref(), x, y), ctx)


def Sum(*args) -> z3.ArithRef:
    """`z3.Sum` of integer terms of one context (one list, or the terms): the same n-ary
    sum, made by z3's C API; anything else goes to `z3.Sum`."""
    terms = args[0] if len(args) == 1 and isinstance(args[0], (list, tuple)) else args
    if terms and all(isinstance(t, z3.ArithRef) for t in terms):
        ctx = terms[0].ctx
        ref = ctx.ref()
        arr = (_Ast * len(terms))()
        for i, t in enumerate(terms):
            if t.ctx is not ctx or _sort_kind(ref, _get_sort(ref, t.as_ast())) != z3.Z3_INT_SORT:
                return z3.Sum(*args)
            arr[i] = t.as_ast()
        return z3.ArithRef(_mk_add(ref, len(terms), arr), ctx)
    return z3.Sum(*args)


def call(f, *args) -> z3.ExprRef:
    """`f(*args)` of a function declaration from integers to integers, each argument an
    integer term of its context or a Python int (made the numeral z3's call would make),
    made by z3's C API without a sort object per argument; anything else goes to the
    call itself."""
    n = len(args)
    if not isinstance(f, z3.FuncDeclRef) or not n:
        return f(*args)
    ctx = f.ctx
    ref, decl = ctx.ref(), f.ast
    if _arity(ref, decl) != n or _sort_kind(ref, _range(ref, decl)) != z3.Z3_INT_SORT:
        return f(*args)
    arr, keep = (_Ast * n)(), []
    for i, a in enumerate(args):
        if _sort_kind(ref, _domain(ref, decl, i)) != z3.Z3_INT_SORT:
            return f(*args)
        if type(a) is int:
            keep.append(int_val(a, ctx))
            arr[i] = keep[-1].as_ast()
        elif isinstance(a, z3.ArithRef) and a.ctx is ctx and \
                _sort_kind(ref, _get_sort(ref, a.as_ast())) == z3.Z3_INT_SORT:
            arr[i] = a.as_ast()
        else:
            return f(*args)
    return z3.ArithRef(_mk_app(ref, decl, n, arr), ctx)


def _ints(a, b) -> tuple | None:
    """(context, a's pointer, b's pointer) where `a` is an integer term and `b` one of its
    context or a Python int (made the integer numeral z3's operator would make), else
    None: z3's own operator, with its coercions and its errors."""
    if not isinstance(a, z3.ArithRef):
        return None
    ctx = a.ctx
    ref = ctx.ref()
    x = a.as_ast()
    if _sort_kind(ref, _get_sort(ref, x)) != z3.Z3_INT_SORT:
        return None
    if type(b) is int:
        y = int_val(b, ctx).as_ast()
    elif isinstance(b, z3.ArithRef) and b.ctx is ctx:
        y = b.as_ast()
        if _sort_kind(ref, _get_sort(ref, y)) != z3.Z3_INT_SORT:
            return None
    else:
        return None
    return ctx, x, y


def _arith(mk, got) -> z3.ArithRef:
    ctx, x, y = got
    args = (_Ast * 2)(x, y)
    ast = mk(ctx.ref(), 2, args)
    # as z3's operator wraps it (`_to_expr_ref`): a numeral is an `IntNumRef`
    if _ast_kind(ctx.ref(), ast) == z3.Z3_NUMERAL_AST:
        return z3.IntNumRef(ast, ctx)
    return z3.ArithRef(ast, ctx)


def int_val(v: int, ctx=None) -> z3.IntNumRef:
    """`z3.IntVal(v, ctx)`; the global context's small numerals are made once."""
    if ctx is None or ctx is _MAIN:
        hit = _NUMERALS.get(v)
        if hit is None:
            hit = z3.IntVal(v)
            if -4096 <= v <= 4096:
                _NUMERALS[v] = hit
        return hit
    return z3.IntVal(v, ctx)


_NUMERALS: dict[int, z3.IntNumRef] = {}  # small integer numerals of the global context


def int_var(name: str) -> z3.ArithRef:
    """`z3.Int(name)` of the global context, made by z3's C API (a check makes hundreds:
    every variable and each of its copies for a two-instance query)."""
    ref = _MAIN.ref()
    return z3.ArithRef(_mk_const(ref, _mk_symbol(ref, name), _INT.ast), _MAIN)


def is_int(e) -> bool:
    """`z3.is_int(e)`: an integer-sorted expression, without a sort object per call."""
    if not isinstance(e, z3.ArithRef):
        return False
    ctx = e.ctx.ref()
    return _sort_kind(ctx, _get_sort(ctx, e.as_ast())) == z3.Z3_INT_SORT


def truth(e) -> bool | None:
    """True or False for the boolean literal `e` (`z3.is_true`, `z3.is_false`), read
    through z3's C accessors; None for any other term."""
    if not isinstance(e, z3.BoolRef):
        return None
    ref = e.ctx.ref()
    a = e.as_ast()
    if _ast_kind(ref, a) != z3.Z3_APP_AST or _num_args(ref, a):
        return None
    op = _decl_kind(ref, _app_decl(ref, a))
    return True if op == z3.Z3_OP_TRUE else False if op == z3.Z3_OP_FALSE else None


class Text:
    """The DSL text of an IR expression, printed when it is first read (`str`): a value's
    `origin` is made at every assignment and read by no rule, only by a message."""

    __slots__ = ("_print", "_expr", "_text")

    def __init__(self, print_, expr):
        self._print, self._expr, self._text = print_, expr, None

    def __str__(self) -> str:
        if self._text is None:
            self._text = self._print(self._expr)
        return self._text

    def __format__(self, spec: str) -> str:
        return format(str(self), spec)

    def __repr__(self) -> str:
        return repr(str(self))

    def __eq__(self, other) -> bool:
        return str(self) == str(other)

    def __hash__(self) -> int:
        return hash(str(self))


def unique(vs) -> list:
    """`vs` without repeats (z3 terms, by their id), in order."""
    seen, out = set(), []
    for v in vs:
        if v.get_id() not in seen:
            seen.add(v.get_id())
            out.append(v)
    return out


def subst(e, pairs):
    """`e` with each `(old, new)` of `pairs` replaced simultaneously (`z3.substitute`)."""
    if e is None or not pairs:
        return e
    return substitution(pairs)(e)


def substitution(pairs):
    """The function `e -> e` with each `(old, new)` of `pairs` replaced simultaneously:
    `z3.substitute`, with the pairs' arrays built once for every term it is applied to
    and without the Python-side sort checks per call (z3's C API refuses a pair of two
    sorts itself: `Z3Exception`). None stays None. Of the global context's terms, each
    result is kept for the process (`_SUBST`): a substitution is a function of the
    terms, and a check's terms and variables (named alike from check to check) recur in
    the next check's, of the same program at other sizes or of a program made from it."""
    pairs = list(pairs)
    n = len(pairs)
    if not n:
        return lambda e: e
    src, dst = (_Ast * n)(), (_Ast * n)()
    for i, (a, b) in enumerate(pairs):
        src[i], dst[i] = a.as_ast(), b.as_ast()
    main = all(a.ctx is _MAIN and b.ctx is _MAIN for a, b in pairs)
    ids = tuple(_ast_id(_MAIN_REF, x) for x in (*src, *dst)) if main else None

    def apply(e):
        if e is None:
            return None
        if not isinstance(e, z3.ExprRef):
            return z3.substitute(e, *pairs)
        ctx = e.ctx
        a = e.as_ast()
        key = None
        if ids is not None and ctx is _MAIN:
            key = (ids, _ast_id(_MAIN_REF, a))
            hit = _SUBST.get(key)
            if hit is not None:
                return hit[2]
        out = _substitute(ctx.ref(), a, n, src, dst)
        if out.value == a.value:  # none of the variables: the same term
            got = e
        elif type(e) is z3.BoolRef:  # a formula (no quantifier) stays one
            got = z3.BoolRef(out, ctx)
        else:
            got = _to_expr_ref(out, ctx)
        if key is not None:
            if len(_SUBST) > 100_000:
                _SUBST.clear()
            _SUBST[key] = (e, pairs, got)  # the terms kept alive: their ids stay theirs
        return got
    apply.pairs = pairs  # keeps the terms of the arrays alive
    return apply


#: (ids of a substitution's pairs, id of a term) -> (the term, the pairs, the result):
#: `substitution`'s memo of the global context's terms, bounded
_SUBST: dict = {}


def axis_ranges(shape: tuple[int, ...], axes=AXES) -> list[z3.BoolRef]:
    if axes is AXES:  # the module's constant axes: the same terms for every check
        hit = _RANGES.get(shape)
        if hit is None:
            if len(_RANGES) > 256:
                _RANGES.clear()
            hit = _RANGES[shape] = [And(AXES[i] >= 0, AXES[i] < n)
                                    for i, n in enumerate(shape)]
        return list(hit)
    return [And(axes[i] >= 0, axes[i] < n) for i, n in enumerate(shape)]


#: shape -> the ranges of `AXES` over it: immutable terms of module constants (z3 makes
#: equal terms one term anyway), bounded
_RANGES: dict[tuple, list] = {}


def align(v: SV, shape: tuple[int, ...]) -> SV:
    """`v` broadcast to `shape` (numpy rules: trailing axes align, size-1 axes repeat)."""
    if v.shape == shape:
        return v
    off = len(shape) - len(v.shape)
    pairs = []
    for i, n in enumerate(v.shape):
        target = z3.IntVal(0) if n == 1 and shape[i + off] != 1 else AXES[i + off]
        if not target.eq(AXES[i]):
            pairs.append((AXES[i], target))
    out = v.map(substitution(pairs))
    out.shape = shape
    return out


def move_axes(v: SV, mapping: dict[int, int], shape: tuple[int, ...]) -> SV:
    """Rename axis i of `v` to axis mapping[i] (simultaneously); result has `shape`."""
    pairs = [(AXES[i], AXES[j]) for i, j in mapping.items() if i != j]
    out = v.map(substitution(pairs))
    out.shape = shape
    return out


_FREE: dict[int, tuple] = {}  # expr id -> (expr, names of its variables); keeps ids valid
_SIMPLE: dict[int, tuple] = {}  # expr id -> (expr, z3.simplify of it): `simplify`


def simplify(e):
    """`z3.simplify(e)`, once per term of the global context (the checker's rules simplify
    the same scalars and conditions again and again: a loop's body is run twice, an
    operand is read by every op that uses it; and a check's terms recur in the next
    check's, of the same program at other sizes or of a program made from the same one:
    each call of z3's costs tens of microseconds, its rewriter made anew). The memo is the
    process's, bounded: its answer is the term z3.simplify makes of the term when asked
    again later (so on every call over every task's programs and corpora, checked when it
    was made the process's; `tests/check/test_determinism.py`: a check's report alone and
    after other checks). Each entry keeps its term alive, so that its id is not reused;
    `forget` empties the memo."""
    if e.ctx is not _MAIN:
        return z3.simplify(e)
    key = e.get_id()
    hit = _SIMPLE.get(key)
    if hit is None:
        if len(_SIMPLE) > 100_000:
            _SIMPLE.clear()
        hit = _SIMPLE[key] = (e, z3.simplify(e))
    return hit[1]


def forget() -> None:
    """Empty the memo of `simplify`."""
    _SIMPLE.clear()


def free_names(e) -> frozenset:
    """Names of the variables in z3 expression `e` (memoised per subexpression). The walk
    reads subterms through z3's C accessors (no Python object per subterm); each memo
    entry keeps the expression walked from, and with it the subterm whose id it is."""
    key = e.get_id()
    hit = _FREE.get(key)
    if hit is not None:
        return hit[1]
    if len(_FREE) > 500_000:
        _FREE.clear()
    ref = e.ctx
    return _free(ref.ref(), ref, e.as_ast(), e)


def _free(ctx, ref, a, root) -> frozenset:
    key = _ast_id(ctx, a)
    hit = _FREE.get(key)
    if hit is not None:
        return hit[1]
    k = _ast_kind(ctx, a)
    if k == _APP_AST:
        n = _num_args(ctx, a)
        if n == 0:
            d = _app_decl(ctx, a)
            names = frozenset((_symbol2py(ref, _decl_name(ctx, d)),)) \
                if _decl_kind(ctx, d) == _UNINTERPRETED else _NONE
        else:
            names = _NONE  # the union of the arguments' (a new set only where it grows)
            for i in range(n):
                c = _free(ctx, ref, _app_arg(ctx, a, i), root)
                if c and c is not names:
                    names = c if not names else names if c <= names else names | c
    elif k == _QUANTIFIER_AST:
        names = _free(ctx, ref, _quantifier_body(ctx, a), root)
    else:  # a numeral, a bound variable
        names = _NONE
    _FREE[key] = (root, names)
    return names


_NONE: frozenset = frozenset()
_APP_AST, _QUANTIFIER_AST = z3.Z3_APP_AST, z3.Z3_QUANTIFIER_AST
_UNINTERPRETED, _symbol2py = z3.Z3_OP_UNINTERPRETED, z3.z3._symbol2py


def _raw(fn):
    """The C function a z3core binding wraps, without its error-code check (the accessors
    used here cannot fail on a live term), or the binding where its layout differs."""
    f = getattr((fn.__defaults__ or (None,))[-1], "f", None)
    return f if f is not None else fn


_core = z3.z3core
_ast_id, _ast_kind = _raw(_core.Z3_get_ast_id), _raw(_core.Z3_get_ast_kind)
_num_args, _app_arg = _raw(_core.Z3_get_app_num_args), _raw(_core.Z3_get_app_arg)
_app_decl, _decl_name = _raw(_core.Z3_get_app_decl), _raw(_core.Z3_get_decl_name)
_decl_kind, _quantifier_body = _raw(_core.Z3_get_decl_kind), _raw(_core.Z3_get_quantifier_body)
_substitute, _Ast, _to_expr_ref = _core.Z3_substitute, z3.z3.Ast, z3.z3._to_expr_ref
_mk_and, _mk_or, _mk_not = _core.Z3_mk_and, _core.Z3_mk_or, _core.Z3_mk_not
_mk_implies = _core.Z3_mk_implies
_mk_const, _mk_symbol = _core.Z3_mk_const, _core.Z3_mk_string_symbol
_mk_ge, _mk_gt, _mk_le, _mk_lt = _core.Z3_mk_ge, _core.Z3_mk_gt, _core.Z3_mk_le, _core.Z3_mk_lt
_mk_eq, _mk_distinct, _mk_ite = _core.Z3_mk_eq, _core.Z3_mk_distinct, _core.Z3_mk_ite
_mk_add, _mk_sub, _mk_mul = _core.Z3_mk_add, _core.Z3_mk_sub, _core.Z3_mk_mul
_get_sort, _sort_kind = _raw(_core.Z3_get_sort), _raw(_core.Z3_get_sort_kind)
_mk_div, _mk_mod, _mk_app = _core.Z3_mk_div, _core.Z3_mk_mod, _core.Z3_mk_app
_arity, _range = _raw(_core.Z3_get_arity), _raw(_core.Z3_get_range)
_domain = _raw(_core.Z3_get_domain)
_model_eval, _numeral_string = _core.Z3_model_eval, _core.Z3_get_numeral_string
_MAIN = z3.main_ctx()
_MAIN_REF = _MAIN.ref()
_INT = z3.IntSort(_MAIN)


def depends_on(e, var) -> bool:
    """Whether z3 expression `e` mentions `var` once simplified (x - x does not)."""
    if e is None:
        return False
    name = var.decl().name()
    return name in free_names(e) and name in free_names(simplify(e))


def merge(cond: z3.BoolRef, a: SV, b: SV) -> SV:
    """The value of a name after `if cond: ... else: ...` assigned it in both branches."""
    shape = a.shape if len(a.shape) >= len(b.shape) else b.shape
    a, b = align(a, shape), align(b, shape)
    val = None
    if a.val is not None and b.val is not None and a.val.sort() == b.val.sort():
        val = If(cond, a.val, b.val)
    tags = {}
    for n in dict.fromkeys([*a.tags, *b.tags]):  # in order, not a set's (string hashing)
        ga, va = a.tags.get(n, (z3.BoolVal(False), None))
        gb, vb = b.tags.get(n, (z3.BoolVal(False), None))
        value = va if vb is None else vb if va is None else If(cond, va, vb)
        tags[n] = (If(cond, ga, gb), value)
    cov = {}
    for n in dict.fromkeys([*a.cov, *b.cov]):
        cov[n] = [t.guard(cond) for t in a.cov.get(n, [])]
        cov[n] += [t.guard(Not(cond)) for t in b.cov.get(n, [])]
    out = SV(shape, val, tags, cov, a.carried or b.carried, a.frag or b.frag, a.origin,
             wide=a.wide or b.wide)
    return merge_facts(cond, a, b, out)


def _fact(x):
    return x if x is not None else _FALSE


def _bound(f):
    return f if f is not None else (_FALSE, math.inf)


def merge_facts(cond, a: SV, b: SV, out: SV) -> SV:
    """`out` with the float facts of `a` where `cond` holds and of `b` elsewhere."""
    def pick(x, y):
        if x is None and y is None:
            return None
        return If(cond, _fact(x), _fact(y))

    def pick_bound(x, y):
        if x is None and y is None:
            return None
        (gx, lx), (gy, ly) = _bound(x), _bound(y)
        return (If(cond, gx, gy), min(lx, ly))
    out.zero, out.maylow, out.mayhigh = pick(a.zero, b.zero), pick(a.maylow, b.maylow), \
        pick(a.mayhigh, b.mayhigh)
    out.low, out.high = pick_bound(a.low, b.low), pick_bound(a.high, b.high)
    out.mag = max(a.mag, b.mag)
    return out


def evaluate(model, e):
    """`e` evaluated in `model` as a Python int or bool, or None. (`model.eval` with model
    completion, its value read through z3's C accessors: a violation's report and a
    counterexample's routing evaluate hundreds of terms.)"""
    if e is None or isinstance(e, (int, bool)):
        return e
    if not isinstance(e, z3.ExprRef) or not isinstance(model, z3.ModelRef) or \
            e.ctx is not model.ctx:
        return _evaluate(model, e)
    ctx = model.ctx
    out = (_Ast * 1)()
    try:
        ok = _model_eval(ctx.ref(), model.model, e.as_ast(), True, out)
    except z3.Z3Exception:  # another context's term, say
        return None
    if not ok:
        return None
    r = z3.AstRef(out[0], ctx)  # held (a reference counted) while it is read
    ref, a = ctx.ref(), r.as_ast()
    kind = _ast_kind(ref, a)
    if kind == z3.Z3_NUMERAL_AST:
        if _sort_kind(ref, _get_sort(ref, a)) == z3.Z3_INT_SORT:
            return int(_numeral_string(ref, a))
        return None
    if kind == z3.Z3_APP_AST and _num_args(ref, a) == 0:
        op = _decl_kind(ref, _app_decl(ref, a))
        if op == z3.Z3_OP_TRUE:
            return True
        if op == z3.Z3_OP_FALSE:
            return False
    return None


def _evaluate(model, e):
    """`evaluate` by z3's Python API, for anything but a term and a model."""
    try:
        r = model.eval(e, model_completion=True)
    except z3.Z3Exception:
        return None
    if z3.is_int_value(r):
        return r.as_long()
    if z3.is_true(r):
        return True
    if z3.is_false(r):
        return False
    return None
