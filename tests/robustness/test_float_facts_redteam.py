"""Red-team cases of the float facts (`check/symbolic/floats.py`, SEMANTICS.md "Float facts").

Each program multiplies the GEMM's A tile by a factor that is exactly 1.0 on live K lanes
and something else on the masked lanes of the last K tile: the masked lane's A element
is the zero fill, so the product is 0 *unless the factor is inf or NaN* (0 * inf and
0 * NaN are NaN), and then every output element is NaN at a ragged K (K = 40 with BK =
16), while at whole K tiles the result is exact. All were proven before these fixes:

- `sqrt` of a negative number is NaN (signs are not followed): `sqrt` doubts wherever
  its operand is not zero;
- `sigmoid` and `abs` (then `-` and `exp`) of a NaN are NaN: they keep a both-ways doubt;
- `exp(1000.0)`, `exp2(1000.0)`, `1e19 ** 3`, `1e19 * 60000^5` and `A.cast(1e10, f16)` are
  inf, made of constants within the data bound: the magnitude (`SV.mag`, log2 of how far
  constants carried data) doubts both ways past 2^16;
- a `dot` lane where one operand is the zero fill and the other inf (`A.where(mask, b,
  1e39)`) is NaN: a zero makes a product zero only against a value within the bound;
- a `dot` with an accumulator that may be inf keeps the accumulator's doubts.

The numerics (Triton's interpreter) confirm each is wrong at the small ragged shape.
"""

from __future__ import annotations

import pytest

from argus_env.check import check_program
from argus_env.dsl import Program
from argus_env.task import get_task

GEMM = get_task("gemm")
BASE = GEMM.program("baseline").text.replace("BK: A.const = 32", "BK: A.const = 16")
RAGGED = {"M": 1000, "N": 1000, "K": 1000}
SMALL = {"M": 64, "N": 64, "K": 40}
DOT = "acc = A.dot(a_tile, b_tile, acc)"
F = "A.full((1, BK), {}, A.f32)"


def _factor(w: str) -> str:
    return BASE.replace(DOT, f"acc = A.dot(A.cast(a_tile * A.where(ks[None, :] < K, 1.0, {w}), "
                             "A.bf16), b_tile, acc)")


WRONG = {
    "sqrt-of-negative": _factor(f"A.sqrt({F.format('-1.0')})"),
    "sigmoid-of-nan": _factor(f"A.sigmoid({F.format('1e39')} - {F.format('1e39')})"),
    "abs-of-nan": _factor(f"A.exp(-A.abs({F.format('1e39')} - {F.format('1e39')}))"),
    "exp-overflow": _factor(f"A.exp({F.format('1000.0')})"),
    "exp2-overflow": _factor(f"A.exp2({F.format('1000.0')})"),
    "cube-of-constants": _factor(" * ".join([F.format("1e19")] * 3)),
    "scale-chain": _factor(F.format("1e19") + " * 60000.0" * 5),
    "f16-overflow": _factor(f"A.cast(A.cast({F.format('1e10')}, A.f16), A.f32)"),
    "zero-times-inf-in-dot": BASE.replace(
        DOT, "acc = A.dot(a_tile, A.cast(A.where(ks[:, None] < K, b_tile, 1e39), A.bf16), acc)"),
    "squared-in-a-loop": BASE.replace(
        "acc = A.zeros((BM, BN), A.f32)",
        f"acc = A.zeros((BM, BN), A.f32)\n    w = {F.format('2.0')}").replace(
        DOT, "w = w * w\n        acc = A.dot(A.cast(a_tile * A.where(ks[None, :] < K, 1.0, w), "
             "A.bf16), b_tile, acc)"),
}


@pytest.mark.parametrize("name", sorted(WRONG))
def test_inf_or_nan_against_a_zero_fill_is_refuted(name):
    report = check_program(Program.from_text(WRONG[name]), RAGGED, GEMM)
    assert not report.ok
    v = report.violations[0]
    assert v.invariant == "coverage" and v.tensor == "c" and v.op == "store"


@pytest.mark.parametrize("name", ["sqrt-of-negative", "zero-times-inf-in-dot"])
def test_the_concrete_interpreter_agrees(name):
    small = {"M": 64, "N": 64, "K": 40}
    report = check_program(Program.from_text(WRONG[name]), small, GEMM, method="concrete")
    assert not report.ok and report.violations[0].invariant == "coverage"


@pytest.mark.slow
@pytest.mark.parametrize("name", ["sqrt-of-negative", "exp-overflow", "zero-times-inf-in-dot"])
def test_the_numerics_see_it_at_a_ragged_shape(name):
    from argus_env.lower.build import load
    from argus_env.measure import oracle
    program = Program.from_text(WRONG[name])
    assert not oracle.check(program, GEMM, SMALL, load(program, interpret=True)).ok


@pytest.mark.parametrize("w", [F.format("60000.0"), "A.exp(" + F.format("-1e30") + ")",
                               "A.sqrt(" + F.format("0.0") + ")"])
def test_bounded_factors_are_still_proven(w):
    """0 times a bounded factor is 0: a factor below 2^16, exp of a -inf-like fill, sqrt
    of a zero."""
    assert check_program(Program.from_text(_factor(w)), RAGGED, GEMM).ok
