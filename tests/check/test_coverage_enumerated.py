"""The completeness of a reduction with every binding spelled out (`coverage.enumerated`).

Where the mixed-radix witnesses miss a point that some term covers (an index that is not
affine in its lanes, such as a rotation `(slot + 1) % TOPK`), the completeness query is
asked again with coverage written as one case per binding of each term's few bound
variables: no quantifier, so z3 decides it. The formula is the quantified coverage over
those ranges (checked here by z3 on terms of several shapes); a point it misses is
confirmed before it is reported, so a seeded bug found that way is still a violation of
the same class; and it gives up where a variable has no finite range.
"""

from __future__ import annotations

import types

import pytest
import z3

from argus_env.check import check_program
from argus_env.check.symbolic import coverage
from argus_env.check.symbolic.solver import Vars
from argus_env.check.symbolic.values import Cov
from argus_env.task import get_task

from corpus_moe import CORPUS

MOE = get_task("moe")
BY_NAME = {m.name: m for m in CORPUS}


def _ck() -> types.SimpleNamespace:
    return types.SimpleNamespace(vars=Vars())


def _quantified(terms, x):
    return z3.Or(*[z3.Exists(list(t.bound), z3.And(t.dom, t.idx == x)) for t in terms])


def _equivalent(a, b) -> bool:
    s = z3.Solver()
    s.set("timeout", 10_000)
    s.add(a != b)
    r = s.check()
    assert r != z3.unknown
    return r == z3.unsat


def _terms(ck):
    """Terms of several shapes, each with its lanes' ranges in its domain (as the
    checker's are): a rotation, a rotation with a lane masked off, two lanes in mixed
    radix, a lane guarded by an existential one (`any...`), and two terms at once."""
    v = ck.vars
    l4, l3 = v.fresh("lane", "lane", 0, 4), v.fresh("lane", "lane", 0, 3)
    j2, any3 = v.fresh("lane", "lane", 0, 2), v.fresh("anylane", "lane", 0, 3)
    pid = v.fresh("pid0", "pid", 0, 8)  # the instance: free, not bound
    r4 = z3.And(l4 >= 0, l4 < 4)
    r3 = z3.And(l3 >= 0, l3 < 3)
    r2 = z3.And(j2 >= 0, j2 < 2)
    return [
        ([Cov((l4,), r4, (l4 + 1) % 4)], []),
        ([Cov((l4,), z3.And(r4, l4 < 3), (l4 + 2) % 4)], []),
        ([Cov((l3, j2), z3.And(r3, r2), 3 * j2 + l3)], []),
        ([Cov((l3,), z3.And(r3, any3 >= 0, any3 < 3, any3 + l3 != pid % 3), l3)], [any3]),
        ([Cov((l4,), z3.And(r4, pid < 4), l4), Cov((j2,), z3.And(r2, pid >= 4), 4 + j2)],
         []),
    ]


def test_enumerated_coverage_is_the_quantified_one():
    """For every term shape: `enumerated` holds at exactly the points where some binding
    of some term covers x (z3 proves the two formulas equivalent, the instance free)."""
    ck = _ck()
    x = ck.vars.fresh("missing", "point", None, None)
    for terms, anys in _terms(ck):
        got = coverage.enumerated(ck, terms, x)
        assert got is not None
        want = _quantified(terms, x)  # the guards' existential lanes: some lane
        assert _equivalent(got, z3.Exists(anys, want) if anys else want), terms
        # and it is not vacuous: some point is covered, and one outside is not
        assert not _equivalent(got, z3.BoolVal(False)) and not _equivalent(got, z3.BoolVal(True))


def test_enumerated_gives_up_without_a_finite_range():
    """A bound variable with no upper bound (a loop's iteration), or more bindings than
    `ENUMERATED`: no formula (the obligation stays with the witnesses)."""
    ck = _ck()
    x = ck.vars.fresh("missing", "point", None, None)
    t = ck.vars.fresh("tp", "iter", 0, None)
    assert coverage.enumerated(ck, [Cov((t,), t >= 0, t)], x) is None
    big = ck.vars.fresh("lane", "lane", 0, coverage.ENUMERATED + 1)
    assert coverage.enumerated(ck, [Cov((big,), big >= 0, big)], x) is None
    # a variable the term does not mention is not spelled out
    assert coverage.enumerated(ck, [Cov((big, t), x >= 0, z3.IntVal(0))], x) is not None


def test_a_rotated_combine_has_its_completeness_proven():
    """combine-weights-shifted reads each token's weights at the next slot: the product
    meets two slots (combine), and the slots summed, `(slot + 1) % TOPK`, are each slot
    once; the witnesses cannot name the slot that covers slot 0, the enumeration proves
    it, at the reduction and at the store: no obligation is left undecided."""
    m = BY_NAME["combine-weights-shifted"]
    report = check_program(m.program(), m.sizes, MOE)
    assert report.kinds() == {"combine"} and not report.undecided, report.render()
    enumerated = [p for p in report.proven if "every binding enumerated" in p]
    assert len(enumerated) == 2, report.proven


@pytest.mark.parametrize("name", ["combine-drops-last-slot", "combine-weights-shifted"])
def test_a_point_the_enumeration_finds_missing_is_reported(monkeypatch, name):
    """With every first model of the witnesses' query taken as a false alarm (the confirm
    step made to say its point is covered), the enumerated query must find the slot a
    bug drops and report it as before (combine-drops-last-slot), and still prove a
    complete one (combine-weights-shifted)."""
    real, seen = coverage._missing, []

    def first_is_covered(ck, terms, ctx, x, m, *rest):
        seen.append(m)
        return False if len(seen) == 1 else real(ck, terms, ctx, x, m, *rest)
    monkeypatch.setattr(coverage, "_missing", first_is_covered)
    m = BY_NAME[name]
    report = check_program(m.program(), m.sizes, MOE)
    assert seen, "the witnesses' query found no point"
    assert m.expect <= report.kinds(), report.render()
    if name == "combine-drops-last-slot":
        assert any(v.invariant == "coverage" and "never includes TOPK=" in v.message
                   for v in report.violations), report.render()
    else:
        assert not report.undecided, report.render()
