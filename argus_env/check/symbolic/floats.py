"""What the symbolic checker knows of float values: enough to see what a reduction adds.

The checker tracks no float value, and it took an element that carries no tag (a
masked-off fill, a constant) to add nothing to a `dot` or a `sum`. That holds for a zero
fill and for `exp` of a "minus infinity" fill, and not for `A.where(mask, a, 1.0)` or a
causal mask filled with 0 instead of -1e30: those add themselves to every sum over a
masked lane, and were proven. Now each float element carries five facts (SV fields, all
formulas over the element's coordinates):

- `zero`: the element is exactly 0 (a masked load's fill, `A.zeros`, `0.0`, a product
  with a zero, `exp` of a low value);
- `low` = (guard, L): the element is at most -L (a fill of -1e30 or -inf, and what stays
  as low through additions of bounded values and positive scales); `high` the same above;
- `maylow` / `mayhigh`: the element may lie beyond the data bound `BOUND` below / above
  (None: it does not). Data (loaded elements and what is computed from them) is assumed
  within |x| < 2^64, the one assumption on values; a constant beyond it, a value of an
  unknown op, or one forgotten around a loop is not.

`zero`, `low` and `high` are under-approximations (a fact where it is claimed), `maylow`
and `mayhigh` over-approximations (a doubt wherever it may apply); facts made from the
existential lanes of a reduction are never claimed (they would be read the wrong way).

A `dot` lane or a `sum` lane where the contracted tags are missing (no index is added)
and no operand is zero adds something that is no data: a *junk* term of the result's
coverage (`JUNK`), which travels as coverage does (through sums, loops, workspaces) and
is a **coverage** violation where an element holding it is stored. A row that is never
stored may hold junk (the padding rows of a tile past the problem's end).
"""

from __future__ import annotations

import math

import z3

from ..magnitudes import (BOUND, EXP_ZERO, F16_MAG, KEEP, LOW_FILL, MAG_LIMIT, exp_mag,
                          grow, plus)
from ..pack import JUNK
from .values import (SV, And, Cov, Not, Or, _app_arg, _app_decl, _ast_id, _ast_kind,
                     _decl_kind, _num_args, simplify, substitution, unique)

TRUE, FALSE = z3.BoolVal(True), z3.BoolVal(False)


def _f(x):
    return x if x is not None else FALSE


def _is_false(x) -> bool:
    return x is None or z3.is_false(x)


def constant(v: float) -> dict:
    """Facts of a float constant."""
    low = (TRUE, -v) if v <= -LOW_FILL else None
    high = (TRUE, v) if v >= LOW_FILL else None
    big = not (abs(v) < BOUND)  # inf and nan too
    return dict(zero=TRUE if v == 0 else None, low=low, high=high,
                maylow=TRUE if big and not v > 0 else None,
                mayhigh=TRUE if big and not v < 0 else None,
                mag=0.0 if big or v == 0 else max(0.0, math.log2(abs(v))))


def unknown() -> dict:
    """Facts of a value the checker cannot follow."""
    return dict(zero=None, low=None, high=None, maylow=TRUE, mayhigh=TRUE, mag=0.0)


def data(zero=None) -> dict:
    """Facts of loaded data (bounded), zero where `zero` holds."""
    return dict(zero=zero, low=None, high=None, maylow=None, mayhigh=None, mag=0.0)


def with_facts(v: SV, facts: dict) -> SV:
    """`v` with `facts`; a magnitude at `MAG_LIMIT` or past it doubts both ways."""
    for k, x in facts.items():
        setattr(v, k, x)
    if v.mag >= MAG_LIMIT:
        v.maylow = v.mayhigh = TRUE
    return v


def _or(*xs):
    """`Or` of the doubts or facts given (None: false), None where all are false."""
    xs = unique([x for x in xs if not _is_false(x)])
    if any(z3.is_true(x) for x in xs):
        return TRUE
    return (xs[0] if len(xs) == 1 else Or(*xs)) if xs else None


def _and(*xs):
    if any(_is_false(x) for x in xs):
        return None
    xs = unique([x for x in xs if not z3.is_true(x)])
    return (xs[0] if len(xs) == 1 else And(*xs)) if xs else TRUE


def _shift(b, by: float):
    """A bound (guard, L) after adding a value within `by`: (guard, L - by), or nothing
    where too little is left to be a fill."""
    if b is None:
        return None
    g, L = b
    L = L - by
    return (g, L) if L >= KEEP else None


def _scale(b, c: float):
    if b is None:
        return None
    g, L = b
    L = L * c
    return (g, L) if L >= KEEP else None


def _join(a, b):
    """Either bound (guard a or guard b), with the smaller L."""
    if a is None:
        return b
    if b is None:
        return a
    return (Or(a[0], b[0]), min(a[1], b[1]))


def _meet(a, b):
    if a is None or b is None:
        return None
    return (And(a[0], b[0]), min(a[1], b[1]))


def _not_beyond(x):
    """Where the value is within the bound (a formula, TRUE where always)."""
    return Not(x) if not _is_false(x) else TRUE


def add(x: SV, y: SV, negate_y: bool) -> dict:
    """Facts of `x + y` (or `x - y`)."""
    ylow, yhigh = (y.high, y.low) if negate_y else (y.low, y.high)
    ymaylow, ymayhigh = (y.mayhigh, y.maylow) if negate_y else (y.maylow, y.mayhigh)
    low = _join(_guarded(_shift(x.low, BOUND), _not_beyond(ymayhigh)),
                _guarded(_shift(ylow, BOUND), _not_beyond(x.mayhigh)))
    high = _join(_guarded(_shift(x.high, BOUND), _not_beyond(ymaylow)),
                 _guarded(_shift(yhigh, BOUND), _not_beyond(x.maylow)))
    mag = plus(x.mag, y.mag)
    return dict(zero=_and(x.zero, y.zero), low=low, high=high,
                maylow=_or(x.maylow, ymaylow), mayhigh=_or(x.mayhigh, ymayhigh), mag=mag)


def _guarded(b, cond):
    if b is None:
        return None
    if z3.is_true(cond):
        return b
    return (And(b[0], cond), b[1])


def mul(x: SV, y: SV, fx: float | None, fy: float | None) -> dict:
    """Facts of `x * y`; a compile-time scalar factor keeps (or swaps) the bounds."""
    zero = _or(_and(x.zero, _not_beyond(_or(y.maylow, y.mayhigh))),
               _and(y.zero, _not_beyond(_or(x.maylow, x.mayhigh))))
    for v, c in ((x, fy), (y, fx)):
        if c is not None and math.isfinite(c) and c != 0:
            if c > 0:
                low, high = _scale(v.low, c), _scale(v.high, c)
                maylow, mayhigh = v.maylow, v.mayhigh
            else:
                low, high = _scale(v.high, -c), _scale(v.low, -c)
                maylow, mayhigh = v.mayhigh, v.maylow
            if abs(c) > 1:  # a large factor can carry a bounded value past the bound
                maylow = mayhigh = _or(maylow, mayhigh, None if abs(c) < 2 ** 16 else TRUE)
            return dict(zero=zero, low=low, high=high, maylow=maylow, mayhigh=mayhigh,
                        mag=max(0.0, v.mag + math.log2(abs(c))))
    doubt = _or(x.maylow, x.mayhigh, y.maylow, y.mayhigh)
    return dict(zero=zero, low=None, high=None, maylow=doubt, mayhigh=doubt,
                mag=x.mag + y.mag)


def div(x: SV, y: SV, fy: float | None) -> dict:
    if fy is not None and math.isfinite(fy) and fy != 0:
        return mul(x, y, None, 1.0 / fy)
    return unknown()


def neg(x: SV) -> dict:
    return dict(zero=x.zero, low=x.high, high=x.low, maylow=x.mayhigh, mayhigh=x.maylow,
                mag=x.mag)


def minmax(fn: str, x: SV, y: SV) -> dict:
    """`A.maximum` / `A.minimum` of two values (a NaN operand gives the other one, as
    Triton's `maximum` does)."""
    mag = max(x.mag, y.mag)
    if fn == "maximum":
        return dict(zero=_and(x.zero, y.zero), low=_meet(x.low, y.low),
                    high=_join(x.high, y.high), maylow=_and(x.maylow, y.maylow),
                    mayhigh=_or(x.mayhigh, y.mayhigh), mag=mag)
    return dict(zero=_and(x.zero, y.zero), low=_join(x.low, y.low),
                high=_meet(x.high, y.high), maylow=_or(x.maylow, y.maylow),
                mayhigh=_and(x.mayhigh, y.mayhigh), mag=mag)


def math_call(fn: str, x: SV) -> dict:
    """`exp`, `exp2`, `log`, `log2`, `sqrt`, `sigmoid`, `abs` of a value.

    A NaN is doubted both ways (a NaN constant, inf - inf, 0 * inf all are), and these
    keep it NaN: where the operand doubts both ways, so does the result. `sqrt` of a
    negative number is NaN, and signs are not followed: it doubts wherever it is not 0.
    `exp` of a value of constants (`where(mask, 0.0, 1000.0)`) can overflow: its
    magnitude grows (`_exp_mag`)."""
    nan = _and(x.maylow, x.mayhigh)
    if fn in ("exp", "exp2"):
        zero = x.low[0] if x.low is not None and x.low[1] >= EXP_ZERO else None
        return dict(zero=zero, low=None, high=None, maylow=nan, mayhigh=_or(x.mayhigh),
                    mag=exp_mag(x.mag, fn == "exp2"))
    if fn == "sigmoid":
        return dict(data(), maylow=nan, mayhigh=nan)
    if fn == "sqrt":
        doubt = _or(x.mayhigh, x.maylow, nonzero(x))
        return dict(zero=x.zero, low=None, high=None, maylow=doubt, mayhigh=doubt,
                    mag=x.mag / 2)
    if fn == "abs":
        return dict(zero=x.zero, low=None, high=_join(x.low, x.high), maylow=nan,
                    mayhigh=_or(x.maylow, x.mayhigh), mag=x.mag)
    return unknown()  # log of 0 is -inf


def reduced(fn: str, x: SV, lane0, n: int = 1) -> dict:
    """Facts of `A.max` / `A.min` / `A.sum` over an axis; `lane0` maps a formula of the
    reduced element to the reduction's first lane (a witness: a maximum is at least the
    first lane's value)."""
    doubt = _or(x.maylow, x.mayhigh)
    anydoubt = TRUE if doubt is not None else None
    def at0(b):
        return (lane0(b[0]), b[1]) if b is not None else None
    if fn == "max":  # at least the first lane's value
        return dict(zero=None, low=None, high=at0(x.high),
                    maylow=lane0(x.maylow) if x.maylow is not None else None,
                    mayhigh=TRUE if x.mayhigh is not None else None, mag=x.mag)
    if fn == "min":
        return dict(zero=None, low=at0(x.low), high=None,
                    maylow=TRUE if x.maylow is not None else None,
                    mayhigh=lane0(x.mayhigh) if x.mayhigh is not None else None, mag=x.mag)
    return dict(zero=None, low=None, high=None, maylow=anydoubt, mayhigh=anydoubt,
                mag=grow(x.mag, n))


def contracted(doubt_a: SV, doubt_b: SV, k: int = 1, acc: SV | None = None) -> dict:
    """Facts of a `dot`'s result (bounded where both operands are), plus `acc`'s."""
    doubt = TRUE if _or(doubt_a.maylow, doubt_a.mayhigh, doubt_b.maylow,
                        doubt_b.mayhigh) is not None else None
    mag = grow(doubt_a.mag + doubt_b.mag, k)
    if acc is not None:
        doubt = _or(doubt, acc.maylow, acc.mayhigh)
        mag = plus(mag, acc.mag)
    return dict(zero=None, low=None, high=None, maylow=doubt, mayhigh=doubt, mag=mag)


def cast(x: SV, dtype: str) -> dict | None:
    """Facts of a cast to `dtype`: to f16, a magnitude past `F16_MAG` may overflow."""
    if dtype == "f16" and x.mag > F16_MAG:
        return dict(maylow=TRUE, mayhigh=TRUE)
    return None


def nonzero(x: SV):
    """Where the element may be nonzero (`not zero`, a double negation taken off: a masked
    load's element is nonzero only where it is read)."""
    if x.zero is None:
        return TRUE
    if z3.is_not(x.zero):
        return x.zero.arg(0)
    return Not(x.zero)


def nonzero_against(x: SV, other: SV):
    """Where `x` does not make a product with `other` zero: `nonzero(x)`, or where
    `other` may lie beyond the bound (0 * inf and 0 * NaN are NaN)."""
    doubt = _or(other.maylow, other.mayhigh)
    nz = nonzero(x)
    if doubt is None or z3.is_true(nz):
        return nz
    return TRUE if z3.is_true(doubt) else Or(nz, doubt)


def conjuncts(e) -> list:
    """The conjuncts of `e` (nested `And`s flattened)."""
    out, todo = [], [e]
    while todo:
        x = todo.pop()
        if z3.is_and(x):
            todo.extend(x.children())
        else:
            out.append(x)
    return out


def implies(a, b) -> bool:
    """Whether `a` implies `b` syntactically: every conjunct of `b` is one of `a`'s (or `b`
    is true). A cheap, sound test that spares a reduction lane's junk term where it is
    empty by construction (a masked load is nonzero only where it carries its index). The
    conjuncts are compared by id (`_conjunct_ids`: those of `conjuncts`, read through z3's
    C accessors)."""
    if z3.is_true(b):
        return True
    mine = _conjunct_ids(a) | _conjunct_ids(simplify(a))
    return _conjunct_ids(b) <= mine or _conjunct_ids(simplify(b)) <= mine


def _conjunct_ids(e) -> set:
    """The ids of `conjuncts(e)`, without a Python object per subterm (`e` is kept alive
    by the caller meanwhile)."""
    ctx = e.ctx
    ref = ctx.ref()
    out, todo = set(), [e.as_ast()]
    while todo:
        x = todo.pop()
        if _ast_kind(ref, x) == z3.Z3_APP_AST and \
                _decl_kind(ref, _app_decl(ref, x)) == z3.Z3_OP_AND:
            todo.extend(_app_arg(ref, x, i) for i in range(_num_args(ref, x)))
        else:
            out.add(_ast_id(ref, x))
    return out


def junk(lane, dom, shape_lane: int) -> Cov:
    """The junk term of lane `lane` where `dom` holds."""
    return Cov((lane,), And(dom, lane >= 0, lane < shape_lane), z3.IntVal(0), "sum")


def placeholder_facts(init: SV, tag: str) -> tuple[dict, z3.BoolRef]:
    """Facts of an accumulator's entry value in the loop's classifying pass: its doubts
    are fresh Booleans (read back by `loop_entry`), its facts the initial value's where
    the fresh Boolean `first` holds (the first iteration)."""
    first = z3.Bool(f"first_{tag}")
    facts = dict(zero=_and(first, init.zero),
                 low=_guarded(init.low, first), high=_guarded(init.high, first),
                 maylow=z3.Bool(f"maylow_{tag}"), mayhigh=z3.Bool(f"mayhigh_{tag}"),
                 mag=init.mag)
    return facts, first


def loop_entry(init: SV, out: SV, placeholder: SV, first, t, at) -> dict:
    """The facts of an accumulator at iteration `t` of its loop, from its initial value
    `init` and the body's result `out` computed from `placeholder` (`placeholder_facts`).
    A doubt the body can only keep or remove (the result doubts only where the entry
    did: a running maximum) is at iteration t at most the initial one, and after the
    first iteration at most what the first iteration left (by induction: the doubt at
    t + 1 implies the doubt at t); any other doubt is one everywhere. Facts (zero, low,
    high) hold at the first iteration only. The magnitude is the initial one where the
    body, from it, does not grow it (a fixpoint); else (`w = w * w`) it doubts both ways."""
    facts = dict(zero=_and(t == 0, init.zero), low=_guarded(init.low, t == 0),
                 high=_guarded(init.high, t == 0), mag=init.mag)
    if out.mag > init.mag:
        return dict(facts, maylow=TRUE, mayhigh=TRUE)
    for name in ("maylow", "mayhigh"):
        got, mark, start = getattr(out, name), getattr(placeholder, name), getattr(init, name)
        if _is_false(start) and (_is_false(got) or _keeps_or_removes(got, mark)):
            facts[name] = None  # never a doubt: none at first, and none can appear
        elif _is_false(got):
            facts[name] = And(t == 0, start)  # the body clears it
        elif not _keeps_or_removes(got, mark):
            facts[name] = TRUE
        else:
            at0 = substitution(list(at(z3.IntVal(0))) + [(mark, start), (first, TRUE)])
            facts[name] = And(start, Or(t == 0, at0(got)))
    return facts


def _keeps_or_removes(got, mark) -> bool:
    """Whether `got` holds only where `mark` does: it is false with `mark` false (the
    doubts are made of And, Or and If branches of doubts, monotone in `mark`)."""
    return z3.is_false(simplify(substitution([(mark, FALSE)])(got)))


__all__ = ["BOUND", "LOW_FILL", "EXP_ZERO", "JUNK", "constant", "unknown", "data",
           "with_facts", "add", "mul", "div", "neg", "minmax", "math_call", "reduced",
           "contracted", "cast", "nonzero", "nonzero_against", "conjuncts", "implies", "junk", "placeholder_facts", "loop_entry"]
