"""The mixed-radix rewrite of a query's divisions (`symbolic.radix`): the same models, and
a grouped swizzle's injectivity proven within the fast try's work limit at any size."""

import random

import z3

from argus_env.check.symbolic.checker import FAST_RLIMIT, RADIX_RLIMIT
from argus_env.check.symbolic.radix import radix_form


def _swizzle(v, group_tiles=512, group=8):
    """A grouped swizzle's tile origin of linear tile index v (GEMM `expert`, 16384^3)."""
    return (v / group_tiles * group + v % group) * 128, v % group_tiles / group * 256


def _fast(f):
    s = z3.SimpleSolver()
    s.set("rlimit", FAST_RLIMIT)
    s.add(f)
    return s.check()


def test_rewrite_keeps_the_values_of_divisions():
    v, x, y, z = z3.Ints("v x y z")
    f = z3.And(x == v / 512 * 8 + v % 8, y == v % 512 / 8, z == (v / 8) % 64 + 3 * (v % 512))
    g = radix_form(f)
    assert g is not None
    rng = random.Random(0)
    for value in [0, 7, 8, 511, 512, 513, -1, -513] + [rng.randrange(-10**6, 10**6)
                                                     for _ in range(20)]:
        s = z3.Solver()
        s.add(g, v == value)
        assert s.check() == z3.sat
        m = s.model()
        want = (value // 512 * 8 + value % 8, value % 512 // 8,
                (value // 8) % 64 + 3 * (value % 512))
        assert tuple(m.eval(t).as_long() for t in (x, y, z)) == want
        s.add(z3.Or(x != want[0], y != want[1], z != want[2]))
        assert s.check() == z3.unsat  # the digits are unique: no other value


def test_grouped_swizzle_injective_within_the_fast_limit():
    v1, v2 = z3.Ints("v1 v2")
    tiles = 128 * 64
    facts = [v1 >= 0, v1 < tiles, v2 >= 0, v2 < tiles, v1 != v2]
    a, b = _swizzle(v1), _swizzle(v2)
    query = z3.And(*facts, a[0] == b[0], a[1] == b[1])
    assert _fast(radix_form(query)) == z3.unsat
    # a map that is not injective (the row within a group dropped) stays satisfiable
    bad = z3.And(*facts, v1 / 512 == v2 / 512, a[1] == b[1])
    assert _fast(radix_form(bad)) != z3.unsat
    assert z3.Solver().check(bad) == z3.sat


def test_no_division_no_rewrite():
    v = z3.Int("v")
    assert radix_form(v + 1 > 0) is None


def test_a_divisor_off_the_chain_stays_a_division_of_v():
    """4 and 6 form no chain: the digits are those of 6 (of two chains of one, the
    larger), and `v / 4` stays a division of v, which the digits equal: the same models."""
    v = z3.Int("v")
    f = z3.And(v % 6 == 1, v / 4 == 2)
    g = radix_form(f)
    assert g is not None and "v/4" in str(g).replace(" ", "") and "v%6" not in str(g)
    for value in range(-30, 30):
        s = z3.Solver()
        s.add(g, v == value)
        assert (s.check() == z3.sat) == (value % 6 == 1 and value // 4 == 2), value


def _grouped(v, blocks, group, col_tiles, col_rows=True):
    """MoE's grouped order (`tasks/moe/space.py`) as the checker writes it: the last
    group's rows min(blocks - first, group) expanded into one case per value it can take
    (`solver._divmod`), so `v % rows` is a remainder by 15 beside 16 at 1151 blocks.
    `col_rows` False: a seeded bug, the column stepped by the group's width everywhere."""
    per_group = group * col_tiles
    first = v / per_group * group
    rows = z3.If(group >= blocks - first, blocks - first, group)
    block, col = v % group, v % per_group / group
    for c in range(max(1, blocks - (blocks - 1) // group * group), group):
        block = z3.If(rows == c, v % c, block)
        if col_rows:
            col = z3.If(rows == c, v % per_group / c, col)
    return (first + block) * 128, col * 256


def _radix_check(f):
    s = z3.SimpleSolver()
    s.set("rlimit", RADIX_RLIMIT)
    s.add(radix_form(f))
    return s.check()


def _two_instances(blocks, group, col_tiles, col_rows=True):
    v1, v2 = z3.Ints("v1 v2")
    tiles = blocks * col_tiles
    a = _grouped(v1, blocks, group, col_tiles, col_rows)
    b = _grouped(v2, blocks, group, col_tiles, col_rows)
    return z3.And(v1 >= 0, v1 < tiles, v2 >= 0, v2 < tiles, v1 != v2,
                  a[0] == b[0], a[1] == b[1])


def test_a_grouped_order_with_a_short_last_group_is_injective_within_the_radix_limit():
    """The divisors of v are 15, 16 and 16 * col_tiles, no chain: the digits of 16 and
    16 * col_tiles make the two-instance query linear but for the short group's
    remainders, and z3's core proves it within `RADIX_RLIMIT` (the default solver took
    up to seconds at these sizes)."""
    for blocks, group, col_tiles in ((1151, 16, 8), (1151, 16, 3), (3000, 16, 6),
                                     (1151, 8, 16), (35, 16, 6), (2047, 8, 6)):
        assert _radix_check(_two_instances(blocks, group, col_tiles)) == z3.unsat, \
            (blocks, group, col_tiles)


def test_a_seeded_bug_in_the_short_group_is_never_proven():
    """The column stepped by the group's width in the short last group too: two tiles of
    that group share an origin; the rewrite keeps the model (never `unsat`)."""
    bad = _two_instances(1151, 16, 8, col_rows=False)
    assert _radix_check(bad) != z3.unsat
    assert z3.Solver().check(bad) == z3.sat


def test_tile_terms_worked_out_in_python_fold_as_z3_does():
    """`tiles._simplified`: a term whose variables all have integers is computed in
    Python; the value is the one z3's simplifier folds it to (division and remainder by
    negative numbers included), and a term it cannot finish is left to z3."""
    from argus_env.check.symbolic.tiles import _simplified, _integer, _truth
    a, b, c, x = z3.Ints("a b c x")
    terms = [a / b, a % b, (a + 3 * b) / 7 - c % 5, z3.If(a < b, a * c, b - c),
             z3.And(a >= 0, z3.Or(b < 2, c != a)), z3.Not(a == b), z3.Distinct(a, b, c),
             z3.Implies(a > 0, b > 0), -a / (b - 1), a - b - c, (a + x) % 4,
             z3.And(a < a - 1, x > 0)]
    rng = random.Random(1)
    for _ in range(200):
        vals = [rng.randrange(-20, 21) for _ in range(3)]
        pairs = [(v, z3.IntVal(n)) for v, n in zip((a, b, c), vals)]
        got = _simplified(terms, pairs)
        for t, g in zip(terms, got):
            want = z3.simplify(z3.substitute(t, *pairs))
            if z3.is_int_value(want):
                assert _integer(g) == want.as_long(), (t, vals, g, want)
            elif z3.is_true(want) or z3.is_false(want):
                assert _truth(g) == z3.is_true(want), (t, vals, g, want)
            else:  # not folded (x has no value, or a division by zero): left to z3
                assert isinstance(g, z3.ExprRef) and g.eq(want), (t, vals, g, want)


def test_an_enumerated_instance_carries_its_integers_and_folds_as_z3_does():
    """`tiles._Instance`: the integers an enumerated instance carries beside its z3 pairs
    are the pairs' own values, and a term worked out from them (with the terms compiled
    once, as `_judged` does) folds as z3 does; a variable that is not a constant takes
    the instance off the Python path."""
    from argus_env.check.symbolic.tiles import (_Instance, _extended, _int, _integer,
                                                _simplified, _truth, _compiled)
    a, b, c = z3.Ints("a b c")
    terms = [a / b, a % b, (a + 3 * b) / 7 - c % 5, z3.If(a < b, a * c, b - c),
             z3.And(a >= 0, z3.Or(b < 2, c != a)), -a / (b - 1)]
    fns = [_compiled(t) for t in terms]
    rng = random.Random(2)
    for _ in range(200):
        vals = [rng.randrange(-20, 21) for _ in range(3)]
        inst = _extended(_extended(_Instance((), {}), [(a, vals[0])], True),
                         [(b, vals[1]), (c, vals[2])], True)
        assert inst.env == {v.get_id(): n for v, n in zip((a, b, c), vals)}
        assert [(v.get_id(), x.as_long()) for v, x in inst] == \
            [(v.get_id(), n) for v, n in zip((a, b, c), vals)]
        got = _simplified(terms, inst, fns)
        for t, g in zip(terms, got):
            want = z3.simplify(z3.substitute(t, *list(inst)))
            if z3.is_int_value(want):
                assert _integer(g) == want.as_long() == _int(t, inst), (t, vals, g, want)
            elif z3.is_true(want) or z3.is_false(want):
                assert _truth(g) == z3.is_true(want), (t, vals, g, want)
            else:  # a division by zero: left to z3
                assert isinstance(g, z3.ExprRef) and g.eq(want), (t, vals, g, want)
    assert _extended(_Instance((), {}), [(a + 1, 3)], False).env is None


def test_reports_are_the_same_with_instances_enumerated_on_z3_terms_only(monkeypatch):
    """The checker's verdicts do not depend on the integers an enumerated instance
    carries: with every instance made a plain list of z3 pairs (the integers read back
    from z3, as before they were carried), the reports on programs whose writes are
    enumerated (persistent grids, a subtiled store, stream-K) are the same."""
    import json

    from argus_env.check import check_program
    from argus_env.check.symbolic import tiles
    from argus_env.dsl.program import Program
    from argus_env.task import get_task
    from argus_env.tasks.gemm.space import GemmConfig, render

    task = get_task("gemm")
    sizes = {"M": 1000, "N": 1000, "K": 1000}
    configs = [GemmConfig(128, 128, 64, 8, 3, tma=True, persistent=True, group_m=8),
               GemmConfig(128, 256, 64, 8, 3, tma=True, persistent=True, subtile=2),
               GemmConfig(64, 128, 64, 4, 4, tma=True, kmajor_b=True, stream_k=True)]
    made = []
    real = tiles._extended

    def counted(*a):
        made.append(1)
        return real(*a)

    def reports():
        out = []
        for c in configs:
            program = task.bind(Program.from_text(render(c)), sizes)
            r = check_program(program, sizes, task, num_sms=132).to_dict()
            r.pop("milliseconds", None)
            out.append(json.dumps(r, sort_keys=True, default=str))
        return out

    monkeypatch.setattr(tiles, "_extended", counted)
    with_integers = reports()
    assert made, "no write was enumerated: the test does not reach the path it checks"
    monkeypatch.setattr(tiles, "_extended",
                        lambda pairs, more, consts: list(pairs) + [(v, z3.IntVal(i))
                                                                   for v, i in more])
    assert reports() == with_integers
