"""The checker's term constructors made by z3's C API (`symbolic.values`) make the terms
z3's Python API makes: the same term (z3's `eq`), of the same Python class, in the same
context, and the same error where z3 refuses the operands. They spare the Python-side
coercion of every operand, which was a large share of a check's time; a difference here
would change the queries a check asks, and with them its answers."""

from __future__ import annotations

import itertools

import pytest
import z3

from argus_env.check.symbolic import values as V
from argus_env.check.symbolic.solver import Vars, const_value, interval, numeral

X, Y = z3.Ints("x y")
OTHER = z3.Context()
#: operands of every kind the checker meets, and some it must leave to z3: integer terms
#: and numerals, Python ints (one past 64 bits), reals, booleans, floats, None, and terms
#: of another context
LEFT = [X, X + 1, z3.IntVal(3), z3.Real("r"), 5, z3.Bool("b"), z3.Int("x", OTHER),
        z3.IntVal(5, OTHER)]
RIGHT = [Y, 0, 7, -3, 10**30, z3.IntVal(2), z3.Real("r"), z3.Bool("b"), True, 2.5,
         z3.Int("x", OTHER), None, z3.IntVal(4, OTHER), z3.RealVal(1)]
OPERATORS = {"ge": lambda a, b: a >= b, "gt": lambda a, b: a > b, "le": lambda a, b: a <= b,
             "lt": lambda a, b: a < b, "eq": lambda a, b: a == b, "ne": lambda a, b: a != b,
             "add": lambda a, b: a + b, "sub": lambda a, b: a - b, "mul": lambda a, b: a * b,
             "div": lambda a, b: a / b, "mod": lambda a, b: a % b}


def _outcome(f, *args):
    try:
        return f(*args), None
    except Exception as e:  # z3's refusal (a sort or context mismatch, a None)
        return None, type(e)


def _same(got, want) -> bool:
    if isinstance(want, z3.AstRef):
        return isinstance(got, z3.AstRef) and type(got) is type(want) and \
            got.ctx is want.ctx and got.eq(want)
    return got == want and type(got) is type(want)


@pytest.mark.parametrize("name", sorted(OPERATORS))
def test_arithmetic_is_the_operator(name):
    """Every operand pair: the operator's term, including Python's reflected comparison
    where the right operand's class is a subclass of the left's (`x >= IntVal(2)` is
    `2 <= x`), and its error."""
    fast, slow = getattr(V, name), OPERATORS[name]
    for a, b in itertools.product(LEFT, RIGHT):
        (got, err), (want, want_err) = _outcome(fast, a, b), _outcome(slow, a, b)
        assert err == want_err, (name, a, b, err, want_err)
        assert _same(got, want), (name, a, b, got, want)


def test_reflected_comparisons_are_kept():
    """The case that tells a reimplementation from the operator: a numeral on the right."""
    assert V.ge(X, z3.IntVal(2)).eq(z3.IntVal(2) <= X)
    assert not V.ge(X, z3.IntVal(2)).eq(z3.BoolRef(z3.z3core.Z3_mk_ge(
        X.ctx_ref(), X.as_ast(), z3.IntVal(2).as_ast()), X.ctx))


def test_junctions_are_z3s():
    """And, Or and Not of formulas, Python bools, one list, nothing, other contexts."""
    p, q = z3.Bools("p q")
    cases = [(p,), (p, q), (p, True), (False, q, p), ([p, q],), ((p,),), (), (True, False),
             (p, z3.Bool("p", OTHER)), (p, X)]
    for fast, slow in ((V.And, z3.And), (V.Or, z3.Or)):
        for args in cases:
            (got, err), (want, want_err) = _outcome(fast, *args), _outcome(slow, *args)
            assert err == want_err and _same(got, want), (fast, args, got, want)
    for a in (p, z3.Not(q), True, X):
        (got, err), (want, want_err) = _outcome(V.Not, a), _outcome(z3.Not, a)
        assert err == want_err and _same(got, want), (a, got, want)
    for a, b in itertools.product((p, z3.Exists([X], X > 0), True, X, z3.Bool("p", OTHER)),
                                  repeat=2):
        (got, err), (want, want_err) = _outcome(V.Implies, a, b), _outcome(z3.Implies, a, b)
        assert err == want_err and _same(got, want), (a, b, got, want)


def test_calls_are_z3s():
    """An uninterpreted function of integers applied to integer terms, numerals and Python
    ints; anything else (another sort, another context, a real, too many arguments, a
    function of another domain or range) is left to the call."""
    f = z3.Function("f", z3.IntSort(), z3.IntSort())
    g = z3.Function("g", z3.IntSort(), z3.IntSort(), z3.IntSort())
    h = z3.Function("h", z3.IntSort(), z3.BoolSort())
    k = z3.Function("k", z3.RealSort(), z3.IntSort())
    other = z3.Function("f", z3.IntSort(OTHER), z3.IntSort(OTHER))
    args = [X, X + 1, z3.IntVal(3), 0, -2, 10**30, z3.Real("r"), z3.Bool("b"), True, 2.5,
            z3.Int("x", OTHER), None]
    for fn in (f, h, k, other):
        for a in [(x,) for x in args] + [()]:
            (got, err), (want, want_err) = _outcome(V.call, fn, *a), _outcome(fn, *a)
            assert err == want_err and _same(got, want), (fn, a, got, want)
    for a, b in itertools.product(args, repeat=2):
        (got, err), (want, want_err) = _outcome(V.call, g, a, b), _outcome(g, a, b)
        assert err == want_err and _same(got, want), (g, a, b, got, want)
    (got, err), (want, want_err) = _outcome(V.call, f, X, Y), _outcome(f, X, Y)
    assert err == want_err and _same(got, want)


def test_sums_are_z3s():
    """Sums of integer terms (one, several, a list, a tuple), and what it leaves to z3:
    Python ints, reals, nothing, another context."""
    cases = [(X,), (X, Y), ([X, Y, X + 1],), ((X, z3.IntVal(2)),), (X, 3), (3, 4), (),
             ([],), (X, z3.Real("r")), (z3.Real("r"), z3.Real("s")), (X, z3.Int("x", OTHER)),
             ([X],), (z3.IntVal(1), z3.IntVal(2))]
    for args in cases:
        (got, err), (want, want_err) = _outcome(V.Sum, *args), _outcome(z3.Sum, *args)
        assert err == want_err and _same(got, want), (args, got, want)


def test_if_is_z3s():
    """If of formulas, of integer terms and numerals, and everything else it leaves to z3
    (Python ints and bools, reals, mixed sorts, another context)."""
    c = z3.Bool("c")
    branches = [X, z3.IntVal(1), 0, 2, z3.Bool("p"), True, z3.Real("r"), z3.Int("x", OTHER)]
    for cond in (c, X > 1, True, z3.Bool("c", OTHER)):
        for a, b in itertools.product(branches, branches):
            (got, err), (want, want_err) = _outcome(V.If, cond, a, b), \
                _outcome(z3.If, cond, a, b)
            assert err == want_err and _same(got, want), (cond, a, b, got, want)


def test_variables_numerals_and_sorts():
    assert _same(V.int_var("pid0!7"), z3.Int("pid0!7"))
    for v in (0, 1, -1, 4096, 4097, -5000, 10**40):
        assert _same(V.int_val(v), z3.IntVal(v))
        assert _same(V.int_val(v, OTHER), z3.IntVal(v, OTHER))
    for e in (X, X + 1, z3.IntVal(2), z3.Real("r"), z3.Bool("b"), 3, None,
              z3.Int("x", OTHER), z3.ToReal(X)):
        assert V.is_int(e) == z3.is_int(e), e


def test_truth_is_z3s():
    p = z3.Bool("p")
    for e in (z3.BoolVal(True), z3.BoolVal(False), p, z3.Not(p), z3.And(p, True), X, X > 1,
              z3.IntVal(1), z3.BoolVal(True, OTHER), True, None, z3.simplify(z3.And(p, False))):
        want = True if z3.is_true(e) else False if z3.is_false(e) else None
        assert V.truth(e) is want, e


def test_substitution_is_z3s():
    """A substitution's term and class as z3.substitute's, for terms it changes (a
    formula, a quantifier, an integer term that becomes a numeral) and terms it leaves
    alone (then the term itself)."""
    p = z3.Bool("p")
    pairs = [(X, z3.IntVal(0)), (p, z3.BoolVal(True))]
    apply = V.substitution(pairs)
    for e in (X, Y, X + Y, X + 1, p, z3.And(p, X > 1), z3.Exists([Y], Y > X),
              z3.ForAll([X], X > Y), z3.IntVal(3), Y > 2, z3.Real("r") + 1, z3.If(p, X, Y)):
        assert _same(apply(e), z3.substitute(e, *pairs)), e
    assert apply(Y + 2) is not None and apply(None) is None
    again = V.substitution([(X, z3.IntVal(0)), (p, z3.BoolVal(True))])  # the memo's answers
    for e in (X + Y, z3.And(p, X > 1), Y, z3.Exists([Y], Y > X)):
        assert _same(again(e), z3.substitute(e, *pairs)) and _same(again(e), apply(e)), e


def test_numerals_are_read_as_z3_reads_them():
    r = z3.Real("r")
    for t in (z3.IntVal(0), z3.IntVal(-7), z3.IntVal(10**40), X, X + 1, z3.RealVal(2),
              z3.RealVal("1/2"), z3.BoolVal(True), z3.IntVal(3) + 4, (X + 3) - X, r,
              z3.IntVal(5, OTHER)):
        assert numeral(t) == (t.as_long() if z3.is_int_value(t) else None), t
        s = z3.simplify(t)
        assert const_value(t) == (s.as_long() if z3.is_int_value(s) else None), t


def test_simplify_is_z3s_and_forgets():
    """The memo answers z3.simplify's term, until `forget` empties it."""
    e = X + 0 * Y - X + 3 > 2
    assert V.simplify(e).eq(z3.simplify(e))
    assert V.simplify(e) is V.simplify(e)
    first = V.simplify(e)
    V.forget()
    assert V.simplify(e) is not first and V.simplify(e).eq(first)
    other = z3.Int("x", OTHER) + 0 > 1
    assert V.simplify(other).eq(z3.simplify(other))


def test_interval_bounds_terms():
    """The walk over z3's C accessors bounds each kind of term it knows, and no other."""
    vs = Vars()
    i, j = vs.fresh("pid0", "pid", 0, 8), vs.fresh("lane", "lane", 2, 5)
    u = vs.fresh("unknown", "point", None, None)
    cases = {i: (0, 7), j: (2, 4), i + j: (2, 11), i - j: (-4, 5), -i: (-7, 0),
             3 * i: (0, 21), i * j: (0, 28), (i - j) * j: (-16, 20), i / 2: (0, 3),
             i % 3: (0, 2),
             z3.If(i <= j, i, j): (0, 4), z3.If(i >= j, i, j): (2, 7),
             z3.If(i > 3, i, j): (0, 7), z3.IntVal(-6): (-6, -6), u: None, i + u: None,
             z3.If(u > 0, i, u): None, z3.ToReal(i) + 1: None}
    for e, want in cases.items():
        assert interval(e, vs) == want, (e, interval(e, vs), want)


def test_an_origin_is_printed_when_read():
    """A value's `origin` (`values.Text`) prints its expression on first read, once."""
    printed = []

    def show(e):
        printed.append(e)
        return f"A.load(x[{e}])"
    text = V.Text(show, "i")
    assert printed == []
    assert str(text) == f"{text}" == "A.load(x[i])" and text == "A.load(x[i])"
    assert printed == ["i"]


def _evaluated(model, e):
    """`values.evaluate` as it was written with z3's Python API."""
    if e is None or isinstance(e, (int, bool)):
        return e
    try:
        r = model.eval(e, model_completion=True)
    except z3.Z3Exception:
        return None
    if z3.is_int_value(r):
        return r.as_long()
    return True if z3.is_true(r) else False if z3.is_false(r) else None


def test_evaluate_reads_the_model_as_z3_does():
    """Integers, booleans, uninterpreted functions, reals and bit-vectors (no value: None),
    quantifiers, unconstrained terms (model completion), another context's term."""
    p, r = z3.Bool("p"), z3.Real("r")
    f = z3.Function("f", z3.IntSort(), z3.IntSort())
    s = z3.Solver()
    s.add(X == 3, Y > X, f(X) == 7, p, r == 1.5)
    assert s.check() == z3.sat
    m = s.model()
    for e in (X, Y, X + Y, f(X), f(Y), p, z3.Not(p), X > 2, r, r + 1, z3.IntVal(10**30),
              z3.Int("unbound"), z3.BoolVal(False), z3.If(p, X, Y), z3.Int("q", OTHER), 5,
              True, None, z3.BitVecVal(3, 8), z3.Exists([Y], Y > X), z3.IntVal(-4)):
        got, want = V.evaluate(m, e), _evaluated(m, e)
        assert got == want and type(got) is type(want), (e, got, want)


def _through_data_by_python_api(e, v) -> bool:
    """`whole._through_data` as it was written with z3's Python API."""
    seen, todo, inside = set(), [(e, False)], False
    while todo:
        x, under = todo.pop()
        if (x.get_id(), under) in seen:
            continue
        seen.add((x.get_id(), under))
        if z3.is_const(x):
            if x.eq(v):
                if not under:
                    return False
                inside = True
            continue
        if not z3.is_app(x):
            return False
        data = x.decl().kind() == z3.Z3_OP_UNINTERPRETED and x.num_args() > 0
        todo.extend((c, under or data) for c in x.children())
    return inside


def test_through_data_walks_as_the_python_api_did():
    from argus_env.check.symbolic.whole import _through_data
    p = z3.Int("p")
    f = z3.Function("data_sorted_ids", z3.IntSort(), z3.IntSort())
    g = z3.Function("g2", z3.IntSort(), z3.IntSort(), z3.IntSort())
    for t in (X, X + 1, f(X), f(X) / 2, f(X) + X, f(p * 64 + X) % 2, z3.If(X > 1, f(X), 0),
              g(Y, f(X)), z3.IntVal(3), p, f(p), z3.If(f(X) >= 0, f(X), -f(X)) / 2,
              z3.If(z3.Exists([Y], Y > X), f(X), 1)):
        for v in (X, Y, p):
            assert _through_data(t, v) == _through_data_by_python_api(t, v), (t, v)


def test_a_copier_renames_as_a_substitution_of_every_twin():
    """`Vars.copier` registers a twin for every variable of its kinds, in order, and makes
    a twin's term only where a renamed term has it: the same term as substituting them
    all, and `pairs` all of them."""
    vs = Vars()
    i, j = vs.fresh("pid0", "pid", 0, 8), vs.fresh("lane", "lane", 0, 4)
    n = vs.fresh("size", "size", 1, 9)  # not of the kinds: not renamed
    copy = vs.copier("~1")
    assert [name for name, v in vs.vars.items() if v.twin] == [
        f"{v}~1.3" for v in ("pid0!0", "lane!1")]
    everything = [(i, z3.Int("pid0!0~1.3")), (j, z3.Int("lane!1~1.3"))]
    for e in (i + j * n, n + 1, i > 2, z3.And(j == 1, i < n), z3.IntVal(4)):
        assert _same(copy(e), z3.substitute(e, *everything)), e
    assert copy(None) is None
    assert all(a.eq(b) and c.eq(d) for (a, c), (b, d) in zip(copy.pairs, everything))
