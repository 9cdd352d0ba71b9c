"""The mixed-radix rewrite of a query's divisions (`symbolic.radix`): the same models, and
a grouped swizzle's injectivity proven within the fast try's work limit at any size."""

import random

import z3

from argus_env.check.symbolic.checker import FAST_RLIMIT
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


def test_no_chain_no_rewrite():
    v = z3.Int("v")
    assert radix_form(z3.And(v % 6 == 1, v / 4 == 2)) is None  # 4 and 6: no chain
    assert radix_form(v + 1 > 0) is None
