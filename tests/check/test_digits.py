"""The digits form of a query dividing an index by a tile count (`symbolic.digits`): every
model of the query is one of the rewritten formula (so its `unsat` is the query's), the
exact parts keep their values, and a grouped order's tile map, nonlinear in the sizes,
becomes a formula z3's SMT core decides."""

import itertools

import z3

from argus_env.check.symbolic.digits import digits_form, selectors, twins


def _form(f):
    got = digits_form(f, lambda F: True, lambda name: name.startswith("size"))
    assert got is not None
    return got


def _sat(f) -> bool:
    s = z3.SimpleSolver()
    s.set("timeout", 5000)
    s.add(f)
    r = s.check()
    assert r != z3.unknown
    return r == z3.sat


def test_every_model_of_a_tile_map_is_one_of_its_digits_form():
    """For each small tile count F, row count T and index v in range: the facts fixing
    v's quotients and remainders by F and GROUP*F to their true values hold in the
    digits form too, and a wrong value of any of them does not."""
    v, size = z3.Ints("v size_N")
    F = (size + 3) / 4  # a tile count: cdiv(N, 4)
    group = 3
    for n, T in itertools.product((1, 2, 5, 8), (1, 2, 4)):
        f_val = -(-n // 4)
        for value in range(T * f_val):
            truth = {"q": value // (group * f_val), "r": value % (group * f_val),
                     "a": value // f_val, "b": value % f_val}
            terms = {"q": v / (group * F), "r": v % (group * F), "a": v / F, "b": v % F}
            base = [size == n, v == value, v >= 0, v < T * F]
            form, _ = _form(z3.And(*base, *[terms[k] == truth[k] for k in truth]))
            assert _sat(form), (n, T, value)
            for k in truth:  # one of them wrong
                wrong = [terms[j] == (truth[j] + (j == k)) for j in truth]
                form, _ = _form(z3.And(*base, *wrong))
                assert not _sat(form), (n, T, value, k)


def test_a_range_past_the_tiles_stays_satisfiable():
    """`v < T*F` is read as `v // F < T`: an index at the last tile is in range, one past
    it is not, for a tile count that is a term of the sizes."""
    v, size = z3.Ints("v size_N")
    F = (size + 255) / 256
    T = z3.Int("size_M")
    inside = z3.And(size >= 1, size <= 2**30, T >= 1, T <= 2**20, v >= 0, v < T * F,
                    v / F == T - 1)
    assert _sat(_form(inside)[0])
    outside = z3.And(size >= 1, size <= 2**30, T >= 1, T <= 2**20, v >= 0, v < T * F,
                     v / F >= T)
    assert not _sat(_form(outside)[0])


def _grouped(v, tm, tn, group=8):
    first = v / (group * tn) * group
    width = z3.If(tm - first <= group, tm - first, group)
    # the checker's division by a bounded divisor: one case per value
    pm, pn = v % group, v % (group * tn) / group
    for c in range(group - 1, 0, -1):
        pm = z3.If(width == c, v % c, pm)
        pn = z3.If(width == c, v % (group * tn) / c, pn)
    return first + pm, pn


def test_a_grouped_order_is_injective_and_in_range_in_digits():
    """Two indices of a grouped order with the same tile are the same index, and every
    tile is inside the grid, for all sizes: unsatisfiable in digits once split on the
    group's width (as `Checker._digits_unsat` splits it), with a work limit."""
    M, N = z3.Ints("size_M size_N")
    tm, tn = (M + 127) / 128, (N + 255) / 256
    v, w = z3.Ints("v v~2")
    sizes = [M >= 1, M <= 2**30, N >= 1, N <= 2**30]
    rng = lambda x: [x >= 0, x < tm * tn]  # noqa: E731
    (pm, pn), (qm, qn) = _grouped(v, tm, tn), _grouped(w, tm, tn)
    outside = z3.And(*sizes, *rng(v), z3.Or(pm < 0, pm >= tm, pn < 0, pn >= tn))
    same = z3.And(*sizes, *rng(v), *rng(w), v != w, pm == qm, pn == qn)
    for f in (outside, same):
        form, tops = _form(f)
        assert _split_unsat(form, tops)
    # a group seven rows wide for eight: index 23 of 16 x 3 tiles reads tile (2, 3),
    # past the third column; the digits form keeps that model
    def seven(x):
        first = x / (8 * tn) * 8
        width = z3.If(tm - first <= 7, tm - first, 7)
        return first + x % width, x % (8 * tn) / width
    am, an = seven(v)
    past = z3.And(*sizes, *rng(v), an >= tn, M == 16 * 128, N == 3 * 256)
    assert _sat(past) and _sat(_form(past)[0])


def _split_unsat(form, tops) -> bool:
    def unsat(f, *extra):
        s = z3.SimpleSolver()
        s.set("rlimit", 400_000)
        s.add(f, *extra)
        return s.check() == z3.unsat
    if unsat(form):
        return True
    pins = [(b, a) for a, b in twins(tops) if unsat(form, a != b)]
    base = z3.substitute(form, *pins) if pins else form
    cases = selectors(base)
    if not cases:
        return unsat(base)
    term, values, conds = cases[0]
    for c in values:
        value = z3.IntVal(c)
        if not unsat(z3.simplify(z3.substitute(base, (term, value))), term == value):
            return False
    rest = z3.simplify(z3.substitute(base, *[(c, z3.BoolVal(False)) for c in conds]))
    return unsat(rest, *[term != c for c in values])
