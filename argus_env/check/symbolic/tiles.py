"""Tile maps worked out on integers: the tile origins a write's instances reach, and the
write nearest to an element no instance writes.

`origins` enumerates a block-form write's instances (program ids, then the iterations of
each enclosing loop, whose bounds are integers once the outer variables are) and evaluates
its tile origin at each: where the counting proof of `whole._count_tiles` cannot count
the instances (a grid-stride loop whose stride is not the grid, say), the set of origins
decides "every tile written" without a quantified query. It gives up (None) past `limit`
instances or on a value it cannot evaluate (data read from memory). A term whose variables
all have integers at an instance is worked out in Python (`_compiled`: z3's Euclidean
division and remainder, compiled once per term), to the value z3's simplifier would fold
it to; any other is simplified by z3.

`nearest` names, for an element nobody writes, the instance and tile element of a write
closest to it (least L1 distance between coordinates): a counterexample of the bijection
invariant then shows where the tile map went, not only what it missed.
"""

from __future__ import annotations

import itertools
import math

import z3

from ..isolated import back
from .values import axis_ranges, evaluate

#: most instances `origins` enumerates
LIMIT = 4096


def _int(e, pairs) -> int | None:
    return _integer(_simplified([e], pairs)[0])


class _Instance(list):
    """One instance's substitution pairs (variable, z3 integer), with the same values as
    Python integers by the variable's z3 id (`env`; None where a variable is not a
    constant), so that a term worked out in Python (`_compiled`) need not read them back
    from z3 at every instance."""

    __slots__ = ("env",)

    def __init__(self, pairs=(), env: dict | None = None):
        super().__init__(pairs)
        self.env = env


def _extended(pairs: _Instance, more: list, consts: bool) -> _Instance:
    """`pairs` and the (variable, Python integer) pairs `more`, as an `_Instance`;
    `consts`: whether every variable of `more` is a z3 constant."""
    env = None
    if pairs.env is not None and consts:
        env = dict(pairs.env)
        env.update((v.get_id(), i) for v, i in more)
    return _Instance(list(pairs) + [(v, _intval(i)) for v, i in more], env)


#: z3 integers by value, made once each (an enumeration names the same few thousands)
_INTS: dict = {}


def _intval(i: int):
    v = _INTS.get(i)
    if v is None:
        if len(_INTS) > 65_536:
            _INTS.clear()
        v = _INTS[i] = z3.IntVal(i)
    return v


def _truth(v) -> bool | None:
    if isinstance(v, bool):
        return v
    return True if z3.is_true(v) else False if z3.is_false(v) else None


def _integer(v) -> int | None:
    if isinstance(v, int) and not isinstance(v, bool):
        return v
    return v.as_long() if isinstance(v, z3.ExprRef) and z3.is_int_value(v) else None


class _Unknown(Exception):
    """A term `_compiled` cannot work out on integers (a variable without a value, a
    division by zero, an operation it has no rule for)."""


_NO = object()
#: compiled terms by z3 id, each with its term (kept alive: ids are not reused); bounded
_COMPILED: dict = {}


def _compiled(e):
    """`e` as a Python function of {variable id: integer} computing the value z3's
    simplifier folds it to when every variable has a value (raising `_Unknown` where it
    would not fold), or None when `e` has an operation without a rule here."""
    hit = _COMPILED.get(e.get_id())
    if hit is not None and hit[0].eq(e):
        return hit[1]
    if len(_COMPILED) > 20_000:
        _COMPILED.clear()
    try:
        fn = _make(compile(_source(e, {}), "<tile map>", "eval"))
    except _Unknown:
        fn = None
    _COMPILED[e.get_id()] = (e, fn)
    return fn


def _make(code):
    scope = {"_div": _div, "_mod": _mod, "_distinct": _distinct}

    def fn(env):
        try:
            return eval(code, scope, {"env": env})
        except KeyError:
            raise _Unknown() from None
    return fn


def _div(a, b):
    """z3's integer division (Euclidean): floor for b > 0, ceiling for b < 0."""
    if b == 0:
        raise _Unknown()
    return a // b if b > 0 else -(a // -b)


def _mod(a, b):
    """z3's remainder (Euclidean): in [0, |b|)."""
    if b == 0:
        raise _Unknown()
    return a % abs(b)


def _distinct(*xs):
    return len(set(xs)) == len(xs)


_INFIX = {z3.Z3_OP_ADD: "+", z3.Z3_OP_SUB: "-", z3.Z3_OP_MUL: "*", z3.Z3_OP_LE: "<=",
          z3.Z3_OP_LT: "<", z3.Z3_OP_GE: ">=", z3.Z3_OP_GT: ">", z3.Z3_OP_EQ: "==",
          z3.Z3_OP_AND: "and", z3.Z3_OP_OR: "or"}


def _source(e, memo) -> str:
    """Python source computing term `e` from `env` (raises `_Unknown` on an operation
    without a rule)."""
    key = e.get_id()
    if key in memo:
        return memo[key]
    if z3.is_int_value(e):
        src = f"({e.as_long()})"
    elif z3.is_true(e):
        src = "True"
    elif z3.is_false(e):
        src = "False"
    elif z3.is_const(e) and z3.is_int(e):
        src = f"env[{key}]"
    elif z3.is_app(e) and (z3.is_int(e) or z3.is_bool(e)):
        k = e.decl().kind()
        kids = [_source(c, memo) for c in e.children()]
        if k in _INFIX and kids and (k not in (z3.Z3_OP_EQ, z3.Z3_OP_LE, z3.Z3_OP_LT,
                                               z3.Z3_OP_GE, z3.Z3_OP_GT) or len(kids) == 2):
            src = "(" + f" {_INFIX[k]} ".join(kids) + ")"
        elif k == z3.Z3_OP_UMINUS and len(kids) == 1:
            src = f"(-{kids[0]})"
        elif k == z3.Z3_OP_IDIV and len(kids) == 2:
            src = f"_div({kids[0]}, {kids[1]})"
        elif k == z3.Z3_OP_MOD and len(kids) == 2:
            src = f"_mod({kids[0]}, {kids[1]})"
        elif k == z3.Z3_OP_NOT and len(kids) == 1:
            src = f"(not {kids[0]})"
        elif k == z3.Z3_OP_IMPLIES and len(kids) == 2:
            src = f"((not {kids[0]}) or {kids[1]})"
        elif k == z3.Z3_OP_ITE and len(kids) == 3:
            src = f"({kids[1]} if {kids[0]} else {kids[2]})"
        elif k == z3.Z3_OP_DISTINCT and kids:
            src = f"_distinct({', '.join(kids)})"
        else:
            raise _Unknown()
    else:
        raise _Unknown()
    if len(src) > 20_000:  # a term sharing subterms over and over: left to z3
        raise _Unknown()
    memo[key] = src
    return src


def _simplified(exprs, pairs, fns: list | None = None) -> list:
    """`exprs` with `pairs` substituted, each simplified, as z3 terms or, where every
    variable of one has its integer in `pairs`, as its Python value (`_compiled`: z3's
    arithmetic worked out in Python, which is what the simplifier would fold it to); the
    others by one substitution and one simplification for all of them (as arguments of
    one application, which the simplifier rewrites argument by argument, as it would each
    alone). `fns`: `_compiled` of each of `exprs`, where the caller already has them."""
    env = _env_of(pairs)
    out, rest = [], []
    for i, e in enumerate(exprs):
        f = (_compiled(e) if fns is None else fns[i]) if env is not None else None
        try:
            out.append(f(env) if f is not None else _NO)
        except _Unknown:
            out.append(_NO)
        if out[-1] is _NO:
            rest.append(i)
    if rest:
        for i, v in zip(rest, _z3_simplified([exprs[i] for i in rest], pairs)):
            out[i] = v
    return out


def _env_of(pairs) -> dict | None:
    """{variable id: integer} of `pairs`, or None where a variable is not a constant or a
    value not an integer."""
    env = getattr(pairs, "env", _NO)
    if env is not _NO:
        return env
    env = {}
    for var, value in pairs:
        if not z3.is_const(var) or not z3.is_int_value(value):
            return None
        env[var.get_id()] = value.as_long()
    return env


def _z3_simplified(exprs, pairs) -> list:
    if len(exprs) < 2:
        return [z3.simplify(z3.substitute(e, *pairs)) if pairs else z3.simplify(e)
                for e in exprs]
    pack = z3.Function("tiles!pack", *[e.sort() for e in exprs], z3.BoolSort())
    app = pack(*exprs)
    v = z3.simplify(z3.substitute(app, *pairs)) if pairs else z3.simplify(app)
    return v.children()


def instances(ck, w, limit: int = LIMIT):
    """Substitutions naming each instance of write `w` (program ids and loop iterations,
    with a grid-stride loop's linear index), or None when they cannot be enumerated."""
    if None in ck.grid or math.prod(max(n, 1) for n in ck.grid) > limit:
        return None
    out = [_Instance((), {})]
    for p, n in zip(ck.pids, ck.grid):
        const = z3.is_const(p)
        out = [_extended(pairs, [(p, i)], const) for pairs in out for i in range(max(n, 1))]
    for f in w.frames:
        if f.kind != "loop":
            continue
        grown = []
        linear = f.value is not None and z3.is_const(f.value) and not f.value.eq(f.var)
        const = z3.is_const(f.var) and (not linear or z3.is_const(f.value))
        for pairs in out:
            start, stop, step = (_int(x, pairs) for x in (f.start, f.stop, f.step))
            if None in (start, stop, step) or step <= 0:
                return None
            trips = max(0, -(-(stop - start) // step))
            if len(grown) + trips > limit:
                return None
            for t in range(trips):
                extra = [(f.var, t)]
                if linear:
                    extra.append((f.value, start + t * step))  # linear index
                grown.append(_extended(pairs, extra, const))
            if len(grown) > limit:
                return None
        out = grown
    return out


def _judged(ck, w, limit: int) -> list | None:
    """`instances` of write `w`, each with its path constraints evaluated on integers
    (True, False, or None where one does not reduce: a constraint on tile elements);
    cached on the write."""
    memo = getattr(w, "_judged", None)
    if memo is not None and memo[0] >= limit:
        return memo[1] if memo[1] is None or len(memo[1]) <= limit else None
    insts = instances(ck, w, limit)
    fns = [_compiled(e) for e in w.path] if insts is not None else None
    judged = None if insts is None else \
        [(pairs, [_truth(v) for v in _simplified(w.path, pairs, fns)]) for pairs in insts]
    w._judged = (limit, judged)
    return judged


def live_instances(ck, w, limit: int = LIMIT) -> list | None:
    """`instances` of write `w` less those its path excludes on integers (a constraint
    that does not reduce to true or false, one on tile elements say, keeps the instance)."""
    judged = _judged(ck, w, limit)
    if judged is None:
        return None
    return [pairs for pairs, on in judged if False not in on]


def origin_at(bases, pairs, w=None, ids: tuple | None = None) -> tuple | None:
    """A tile origin's integers at one instance (`pairs`), or None where not integers.
    With the write `w` whose enumerated instance `pairs` is (`instances`, kept on the
    write), the answer is kept on the write too. `ids`: the bases' z3 ids, where the
    caller has read them once for many instances."""
    memo = key = None
    if w is not None:
        memo = w.__dict__.setdefault("_origin_at", {})
        key = (ids if ids is not None else tuple(b.get_id() for b in bases), id(pairs))
        hit = memo.get(key)
        if hit is not None and hit[0] is pairs:
            return hit[1]
    fns = None
    if memo is not None:  # the bases' compiled terms, once per write and bases
        compiled = w.__dict__.setdefault("_origin_fns", {})
        held = compiled.get(key[0])  # (the terms kept: their ids are not reused)
        if held is None:
            held = compiled[key[0]] = (tuple(bases), [_compiled(b) for b in bases])
        fns = held[1]
    o = tuple(_integer(v) for v in _simplified(bases, pairs, fns))
    o = None if None in o else o
    if memo is not None:
        memo[key] = (pairs, o, bases)  # the terms kept: their ids are not reused
    return o


def origins(ck, w, bases, limit: int = LIMIT) -> frozenset | None:
    """The tile origins the instances of block-form write `w` reach where its path holds,
    or None when that cannot be worked out on integers. Kept on the write, by the bases
    and `limit` (a write's pairs with each other write ask for its origins again,
    `whole._apart`: thousands of instances each time)."""
    memo = w.__dict__.setdefault("_origins", {})
    ids = tuple(b.get_id() for b in bases)
    hit = memo.get((ids, limit))
    if hit is not None:
        return hit[1]
    found = _origins(ck, w, bases, limit, ids)
    memo[(ids, limit)] = (tuple(bases), found)  # the terms kept: their ids are not reused
    return found


def _origins(ck, w, bases, limit: int, ids: tuple) -> frozenset | None:
    judged = _judged(ck, w, limit)
    if judged is None:
        return None
    reached = set()
    for pairs, on in judged:
        if None in on:
            return None
        if not all(on):
            continue
        o = origin_at(bases, pairs, w, ids)
        if o is None:
            return None
        reached.add(o)
    return frozenset(reached)


def missing_origin(sizes, blocks, reached: set[tuple]) -> tuple | None:
    """The first tile origin of a tensor of `sizes` in tiles of `blocks` not in `reached`."""
    for o in itertools.product(*[range(0, n, b) for n, b in zip(sizes, blocks)]):
        if o not in reached:
            return o
    return None


def nearest(ck, ws, y) -> tuple | None:
    """(model, write) of the element written closest to `y` (L1 distance of coordinates),
    or None when no write has a live element or the query is undecided.

    The least distance is found by bisection on one incremental solver (a live element
    first, then `distance <= d` for halving d): z3's optimiser took up to hundreds of
    milliseconds on these small problems. Every model is a live element of the write;
    where a bound is left undecided the closest one found so far is named."""
    best = None
    for w in ws:
        cons = list(w.path) + axis_ranges(w.shape) + [w.live]
        names = frozenset().union(*[ck._var_names([c]) for c in cons + list(w.coords)])
        dist = sum(z3.If(c >= v, c - v, v - c) for c, v in zip(w.coords, y))
        # in the check's own z3 context, as every query of the check (`isolated`)
        s = ck.scope.solver(simple=True)
        s.add(ck.scope.into([*cons, *ck._links(names)]))
        dist = dist.translate(ck.scope.ctx) if isinstance(dist, z3.ExprRef) else dist
        m = _check(ck, s)
        if m is None:
            continue
        d, lo = evaluate(m, dist), 0
        while d is not None and lo < d:
            mid = (lo + d) // 2
            s.push()
            s.add(dist <= mid)
            closer = _check(ck, s, keep_unknown=True)
            s.pop()
            if closer is False:  # undecided: keep the closest found
                break
            if closer is None:
                lo = mid + 1
            else:
                m, d = closer, evaluate(closer, dist)
        if d is not None and (best is None or d < best[0]):
            best = (d, m, w)
    return None if best is None else (back(best[1]), best[2])


def _check(ck, s, keep_unknown: bool = False):
    """The model of one query of `nearest` (counted), None when there is none; False when
    undecided and `keep_unknown`, else None then too."""
    s.set("timeout", ck.query_timeout_ms())
    ck.report.queries += 1
    r = s.check()
    if r == z3.sat:
        return s.model()
    if r == z3.unknown and ("interrupted" in s.reason_unknown() or
                            "canceled" in s.reason_unknown()):
        raise KeyboardInterrupt(f"invariant check interrupted ({s.reason_unknown()})")
    return False if r == z3.unknown and keep_unknown else None


__all__ = ["LIMIT", "instances", "live_instances", "origin_at", "missing_origin", "nearest", "origins"]
