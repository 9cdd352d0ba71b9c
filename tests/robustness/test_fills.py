"""Masked-off elements the checker takes as zero fills.

The checker tracks no float: a masked load's unread elements are fills that a `dot` or a
sum adds nothing of. With `other=1.0` on both operands of the GEMM's dot, every masked
lane of a partial K tile adds 1 to every output element: wrong wherever K is not a
multiple of BK (K = 1000 with BK = 16, the ragged-1000 shape), right at the reduced shapes
(K = 80 and 64, whole tiles), and it was proven there and passed numerics. A masked float
load's `other` is now 0 (or absent), or the program is refused.

The same through `A.where`, and its attention form (a masked score filled with 0, not
-1e30, before `exp`): the checker follows which float elements are zero or -inf-like
(`argus_env/check/symbolic/floats.py`) and refutes a store of an element that a reduction
lane of no data added to.
"""

from __future__ import annotations

import pytest

from argus_env.check import CheckUnsupported, check_program
from argus_env.dsl import Program
from argus_env.envs.evaluate import _check_shapes, regime_shapes
from argus_env.task import get_task

GEMM = get_task("gemm")
BASE = GEMM.program("baseline").text.replace("BK: A.const = 32", "BK: A.const = 16")
RAGGED = {"M": 1000, "N": 1000, "K": 1000}


@pytest.mark.parametrize("fill", ["1.0", "-1.0", "float('inf')", "1e-30"])
def test_a_nonzero_fill_of_a_masked_load_is_refused(fill):
    if fill == "float('inf')":
        fill = "1e39"  # parses as a float literal past f32: inf where it is stored
    program = Program.from_text(BASE.replace("other=0.0", f"other={fill}"))
    with pytest.raises(CheckUnsupported, match="fills masked-off elements"):
        check_program(program, RAGGED, GEMM)


def test_the_numerics_would_not_have_seen_it():
    """Why the refusal matters: the reduced shapes have whole K tiles, so the numerics
    pass, while at K = 1000 (and its small analogue K = 40) the result is off."""
    from argus_env.lower.build import load
    from argus_env.measure import oracle
    program = Program.from_text(BASE.replace("other=0.0", "other=1.0"))
    shapes = regime_shapes(GEMM, program, RAGGED, _check_shapes(GEMM, 2))
    launch = load(program, interpret=True)
    assert all(oracle.check(program, GEMM, s, launch).ok for s in shapes)
    assert not oracle.check(program, GEMM, {"M": 64, "N": 64, "K": 40}, launch).ok


def test_zero_fills_and_unmasked_fills_are_followed():
    assert check_program(Program.from_text(BASE), RAGGED, GEMM).ok
    assert check_program(Program.from_text(BASE.replace("other=0.0", "other=0")),
                         RAGGED, GEMM).ok


@pytest.mark.parametrize("fills", [("1.0", "1.0"), ("2.0", "-1.0")])
def test_a_nonzero_where_fill_in_a_dot_is_refuted(fills):
    """The same hole through `A.where` instead of `other`: the masked lanes of the last K
    tile hold the fills, whose product each output element adds. The checker follows
    which float elements are zero (`check/symbolic/floats.py`) and names a stored
    element that holds such a product."""
    program = Program.from_text(BASE.replace(
        "acc = A.dot(a_tile, b_tile, acc)",
        f"acc = A.dot(A.where(ks[None, :] < K, a_tile, {fills[0]}), "
        f"A.where(ks[:, None] < K, b_tile, {fills[1]}), acc)"))
    report = check_program(program, RAGGED, GEMM)
    assert not report.ok
    v = report.violations[0]
    assert v.invariant == "coverage" and v.tensor == "c" and v.op == "store"
    assert v.program_id is not None and v.element is not None and v.line > 0


@pytest.mark.parametrize("fills", [("1.0", "0.0"), ("0.0", "0.0"), ("0.0", "3.0")])
def test_a_where_fill_against_a_zero_operand_is_proven(fills):
    """A nonzero fill on one side meets the other side's zero fill: the product is 0."""
    program = Program.from_text(BASE.replace(
        "acc = A.dot(a_tile, b_tile, acc)",
        f"acc = A.dot(A.where(ks[None, :] < K, a_tile, {fills[0]}), "
        f"A.where(ks[:, None] < K, b_tile, {fills[1]}), acc)"))
    assert check_program(program, RAGGED, GEMM).ok


def test_the_where_fill_is_wrong_on_the_interpreter():
    """The refuted program is wrong where K is not a multiple of BK (the numerics at a
    reduced shape with a partial K tile), and right with zero fills."""
    from argus_env.lower.build import load
    from argus_env.measure import oracle
    ragged = {"M": 64, "N": 64, "K": 40}
    for fill, ok in (("1.0", False), ("0.0", True)):
        program = Program.from_text(BASE.replace(
            "acc = A.dot(a_tile, b_tile, acc)",
            f"acc = A.dot(A.where(ks[None, :] < K, a_tile, {fill}), "
            f"A.where(ks[:, None] < K, b_tile, {fill}), acc)"))
        assert oracle.check(program, GEMM, ragged, load(program, interpret=True)).ok is ok


ATTENTION = get_task("attention")
ATT_BASE = ATTENTION.program("baseline").text
ATT_SIZES = {"B": 1, "H": 2, "KVH": 2, "SQ": 200, "SK": 200, "D": 128}


def _sizes(causal: int, **kw) -> dict:
    return {**ATT_SIZES, **kw, "CAUSAL": causal}


def _attention(fill: str, causal: int) -> Program:
    text = ATT_BASE.replace("s = A.where(keep, s, -1e+30)", f"s = A.where(keep, s, {fill})")
    assert fill == "-1e+30" or text != ATT_BASE
    return Program.from_text(text.replace("CAUSAL: A.const = 0", f"CAUSAL: A.const = {causal}"))


@pytest.mark.parametrize("causal", [0, 1])
@pytest.mark.parametrize("fill", ["0.0", "-1.0", "-1e+3"])
def test_a_masked_score_that_exp_does_not_zero_is_refuted(fill, causal):
    """A causal (or past-the-end) key masked with 0 instead of -1e30 adds exp(0 - m) to
    the row sum and its value row to the output: every invariant on tags held, and it
    was proven. -1e3 is not -inf-like either: data may be that negative."""
    report = check_program(_attention(fill, causal), _sizes(causal), ATTENTION)
    assert not report.ok
    assert {v.invariant for v in report.violations} == {"coverage"}
    v = report.violations[0]
    assert v.tensor == "o" and v.coords is not None


@pytest.mark.parametrize("causal", [0, 1])
@pytest.mark.parametrize("fill", ["-1e+30", "-1e+39"])
def test_a_minus_infinity_mask_is_proven(fill, causal):
    assert check_program(_attention(fill, causal), _sizes(causal), ATTENTION).ok


def test_the_zero_masked_attention_is_wrong_on_the_interpreter():
    from argus_env.lower.build import load
    from argus_env.measure import oracle
    sizes = _sizes(1, H=1, KVH=1, SQ=40, SK=40)
    for fill, ok in (("0.0", False), ("-1e+30", True)):
        program = _attention(fill, 1)
        assert oracle.check(program, ATTENTION, sizes, load(program, interpret=True)).ok is ok


def _with_consts(text: str) -> str:
    return text.replace("SCALE: A.const", "FILL: A.const = 1e30,\n    ONE: A.const = 1.0,\n"
                        "    MONE: A.const = -1.0,\n    SCALE: A.const")


@pytest.mark.parametrize("method", ["symbolic", "concrete"])
def test_a_negated_constant_is_negated(method):
    """`-ONE` is -1.0: the unary minus of a compile-time float changed its facts but kept
    its value, so a score scaled by it was taken as scaled by +1 (masked lanes at +1e30,
    exp of them infinite, taken as zero). A fill spelled `-FILL` is -inf-like."""
    def check(old, new):
        program = Program.from_text(_with_consts(ATT_BASE.replace(old, new)))
        return check_program(program, _sizes(0), ATTENTION, method=method)
    p_line = "p = A.exp(s - m_new[:, None])"
    assert not check(p_line, "p = A.exp((s - m_new[:, None]) * (-ONE))").ok
    assert check(p_line, "p = A.exp((s - m_new[:, None]) * (-MONE))").ok
    assert check("s = A.where(keep, s, -1e+30)", "s = A.where(keep, s, -FILL)").ok
