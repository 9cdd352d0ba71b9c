"""Tile origins that pin their instance (`whole._pinned`, `solver.linear`): a write whose
every tile origin coordinate is `k * u + r`, with `u` the one instance variable in it and
`r` free of them, writes each element once, and no query is asked for it. The
coefficients are read off the origin's syntax, never guessed; every time the shortcut
says so, z3 agrees that no two different instances share an origin, over the programs and
seeded bugs of every task; and a map that folds instances together is left to z3."""

from __future__ import annotations

import pytest
import z3

from argus_env.check import check_program
from argus_env.check.symbolic import whole
from argus_env.check.symbolic.solver import Vars, linear
from argus_env.task import get_task

import corpus
import corpus_attention
import corpus_moe

P, Q, T = z3.Ints("p q t")
N = z3.Int("size_N")
F = z3.Function("data_ids", z3.IntSort(), z3.IntSort())


def test_linear_reads_coefficients_off_the_syntax():
    names = ["p", "q", "t"]
    cases = {P * 64: {"p": 64}, 64 * P + 3: {"p": 64}, P * 64 + Q * 32 + N: {"p": 64, "q": 32},
             P * 64 - P * 64: {}, -(P * 2) + N: {"p": -2}, (P + 1) * 4: {"p": 4},
             0 + T * 32: {"t": 32}, (P + T) * 2 - T * 2: {"p": 2}, N + 3: {},
             z3.IntVal(5): {}, (P / 2) * 64: None, P * Q: None, F(P): None, N * P: None,
             z3.If(N > 1, P, 0): None, P % 4: None}
    for e, want in cases.items():
        got = linear(e, names)
        assert got == want, (e, got, want)
        if got is not None:  # and it is the term: e == sum(k * v) + e at v = 0, for all values
            zero = z3.substitute(e, *[(v, z3.IntVal(0)) for v in (P, Q, T)])
            s = z3.Solver()
            s.add(e != sum((k * z3.Int(n) for n, k in got.items()), z3.IntVal(0)) + zero)
            assert s.check() == z3.unsat, e


def _ck(*kinds_of):
    vs = Vars()
    made = [vs.fresh(name, kind, 0, 8) for name, kind in kinds_of]
    vs.fresh("size", "size", 1, 9)
    return type("Ck", (), {"vars": vs})(), made


def test_a_folding_map_is_not_pinned():
    ck, (p, q) = _ck(("pid0", "pid"), ("pid1", "pid"))
    n = ck.vars.vars["size!2"].expr
    assert whole._pinned(ck, [p * 64, q * 32 + n], [p, q])
    assert not whole._pinned(ck, [(p / 2) * 64, q * 32], [p, q])    # p and p + 1 share one
    assert not whole._pinned(ck, [p * 64 + q * 64], [p, q])         # (1, 0) and (0, 1)
    assert not whole._pinned(ck, [p * 64], [p, q])                  # q free
    assert not whole._pinned(ck, [p * 0 + 5, q * 32], [p, q])       # p vanishes
    assert whole._pinned(ck, [], [])                                 # one instance


CASES = [("gemm", p) for p in get_task("gemm").programs] + \
    [("attention", p) for p in get_task("attention").programs] + \
    [("moe", p) for p in get_task("moe").programs] + \
    [("gemm", m) for m in corpus.CORPUS[::4]] + \
    [("attention", m) for m in corpus_attention.CORPUS[::4]] + \
    [("moe", m) for m in corpus_moe.CORPUS[::4]]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c[1] if isinstance(c[1], str) else c[1].name)
def test_z3_agrees_wherever_the_origins_pin(monkeypatch, case):
    """Every `True` of `_pinned` during a check: z3 finds no two instances that differ in
    a pinned variable with equal origins (without the write's path: a stronger claim)."""
    name, what = case
    task = get_task(name)
    if isinstance(what, str):
        sizes = dict(task.shapes[0].sizes)
        program = task.bind(task.program(what), sizes)
        if name == "gemm" and what == "streamk":
            pytest.skip("stream-K is offered only at some sizes")
        kw = {}
    else:
        program, sizes = what.program(), what.sizes
        kw = {"num_sms": what.num_sms} if getattr(what, "num_sms", None) else {}
    real, agreed = whole._pinned, []

    def checked(ck, bases, vs, kinds=whole._COPIED):
        got = real(ck, bases, vs, kinds)
        if got and vs:
            copy = ck.vars.copier("~t", kinds)
            s = z3.Solver()
            s.add(*[b == copy(b) for b in bases], z3.Or(*[v != copy(v) for v in vs]))
            assert s.check() == z3.unsat, (bases, vs)
            agreed.append(bases)
        return got
    monkeypatch.setattr(whole, "_pinned", checked)
    report = check_program(program, sizes, task, **kw)
    if isinstance(what, str):
        assert report.status == "proven", report.render()
        assert agreed or (name, what) != ("gemm", "baseline"), "the shortcut was not taken"
    else:
        assert what.expect <= report.kinds(), report.render()
