"""Right at the reduced shapes, wrong at the real one: the class, not one constant.

Numerics run under the interpreter at small shapes (M <= 130 for GEMM), so a program whose
values depend on a size threshold can be right wherever numerics run and wrong at the
episode's size. Two defences, each tested here: the checker follows scalars computed from
the sizes at the real sizes (a factor that is zero there carries no data: a coverage
violation), and the numerics add a small shape in the episode's size regime
(`argus_env.check.regimes`), so a threshold between the reduced and the real size is
crossed before anything is measured.
"""

from __future__ import annotations

import gymnasium as gym
import pytest

import argus_env  # noqa: F401
from argus_env.check import check_program
from argus_env.check.regimes import conditions, realise, regime
from argus_env.dsl import Program
from argus_env.envs.evaluate import _check_shapes, regime_shapes
from argus_env.task import get_task

TASK = get_task("gemm")
BASE = TASK.program("baseline").text
STORE = "    A.store(c[rows, cols], A.cast(acc, A.bf16), mask=(rows < M, cols < N))\n"
REAL = {"M": 4096, "N": 4096, "K": 4096}


def scaled(prelude: str, value: str) -> str:
    """The baseline storing `value` (in terms of `acc`) after `prelude` statements."""
    assert STORE in BASE
    return BASE.replace(STORE, prelude + STORE.replace("A.cast(acc, A.bf16)",
                                                      f"A.cast({value}, A.bf16)"))


# a factor that is 1 at every reduced shape and 0 at the real size: the checker sees it
ZERO_ABOVE = {
    "where": scaled("    f = A.where(M <= 130, 1.0, 0.0)\n", "acc * f"),
    "if": scaled("    if M <= 130:\n        f = 1.0\n    else:\n        f = 0.0\n", "acc * f"),
    "cast": scaled("    f = A.cast(M <= 130, A.f32)\n", "acc * f"),
    "bool": scaled("", "acc * (M <= 130)"),
    "floordiv": scaled("    f = 131 // (M + 1)\n", "acc * f"),
    "clamp": scaled("    f = A.minimum(1, A.maximum(0, 131 - M))\n", "acc * f"),
}
# a factor that is 1 at every reduced shape and something else (not 0) at the real size:
# only numerics in the real size's regime see it
OTHER_ABOVE = {
    "where-2x": scaled("    f = A.where(M <= 130, 1.0, 2.0)\n", "acc * f"),
    "reciprocal": scaled("    f = 1.0 / A.maximum(1, M - 130)\n", "acc * f"),
    "high-threshold": scaled("    f = A.where(M <= 1000, 1.0, 0.5)\n", "acc * f"),
    "two-dims": scaled("    f = A.where((M <= 130) | (N <= 100), 1.0, 3.0)\n", "acc * f"),
}


@pytest.mark.parametrize("name", list(ZERO_ABOVE))
def test_the_checker_follows_size_dependent_zero_factors(name):
    report = check_program(Program.from_text(ZERO_ABOVE[name]), REAL, TASK)
    assert "coverage" in report.kinds(), report.render()
    small = check_program(Program.from_text(ZERO_ABOVE[name]), TASK.env_check_shape, TASK)
    assert small.ok, "at a reduced shape the hack is a correct program: " + small.render()


@pytest.mark.parametrize("name", list(OTHER_ABOVE))
def test_numerics_get_a_shape_in_the_real_sizes_regime(name):
    program = Program.from_text(OTHER_ABOVE[name])
    conds = conditions(program.kernel)
    assert conds, "the size conditions were not found"
    shapes = _check_shapes(TASK, 2)
    assert all(regime(conds, s) != regime(conds, REAL) for s in shapes), "test setup"
    got = regime_shapes(TASK, program, REAL, shapes)
    assert len(got) == len(shapes) + 1 and regime(conds, got[-1]) == regime(conds, REAL), got
    assert all(got[-1][d] <= REAL[d] for d in REAL), got[-1]


# a factor that is 1 at every reduced shape and 2 at the real size, computed by a route the
# size conditions once did not follow (a shift, the grid's extent read back)
HIDDEN_ABOVE = {
    "shift": scaled("    f = A.cast(1 + (M >> 12), A.f32)\n", "acc * f"),
    "shift-compare": scaled("    f = A.where((M >> 8) > 0, 2.0, 1.0)\n", "acc * f"),
    "num-programs": scaled("    f = A.cast(1 + A.num_programs(0) // 60, A.f32)\n", "acc * f"),
}
# sizes reaching a value through what no regime can follow: refused, never run at the
# reduced shapes only
OPAQUE = {
    "sqrt": scaled("    f = A.where(A.sqrt(A.cast(M, A.f32)) > 60.0, 2.0, 1.0)\n", "acc * f"),
    "bf16-rounding": scaled("    f = A.cast(A.cast(M + 1, A.bf16) - A.cast(M, A.bf16), A.f32)\n",
                            "acc * f"),
    "bit-and": scaled("    f = A.cast(1 + (M & 4096), A.f32)\n", "acc * f"),
    "exp": scaled("    f = A.exp(A.cast(M, A.f32) * -0.01)\n", "acc * (1.0 + f)"),
    # compared in floating point: true over the reals (and in float64), false in float32
    # wherever the GPU and the interpreter decide it (1.00000001 is 1.0f)
    "float-compare": scaled("    f = A.where(M * 1.00000001 > M, 1.0, 2.0)\n", "acc * f"),
    "float-if": scaled("    if M * 1.00000001 > M:\n        f = 1.0\n    else:\n        f = 2.0\n",
                       "acc * f"),
    "float-clamp": scaled("    f = A.minimum(M * 1.00000001, M + 0.5) - M\n", "acc * f"),
}


@pytest.mark.parametrize("name", list(HIDDEN_ABOVE))
def test_hidden_size_thresholds_get_a_shape_in_the_real_sizes_regime(name):
    program = Program.from_text(HIDDEN_ABOVE[name])
    conds = conditions(program.kernel)
    assert conds, "the size conditions were not found"
    shapes = _check_shapes(TASK, 2)
    got = regime_shapes(TASK, program, REAL, shapes)
    assert len(got) == len(shapes) + 1, got
    assert all(got[-1][d] <= REAL[d] for d in REAL), got[-1]


@pytest.mark.parametrize("name", list(OPAQUE))
def test_sizes_through_what_no_regime_follows_are_refused(name):
    from argus_env.check import CheckUnsupported
    program = Program.from_text(OPAQUE[name])
    assert any(c.opaque for c in conditions(program.kernel))
    with pytest.raises(CheckUnsupported, match="cannot be followed"):
        regime_shapes(TASK, program, REAL, _check_shapes(TASK, 2))


def test_the_sm_count_is_the_targets_at_the_real_size_and_the_interpreters_below():
    """`A.num_sms()` is 132 on an H200 and 3 under the interpreter: a factor keyed on it is
    right wherever numerics run and wrong on the GPU; no reduced shape can change the SM
    count, so it is refused. A persistent grid's `A.minimum(A.num_sms(), tiles)` is no
    regime (the checker follows the grid at the real size)."""
    from argus_env.check import CheckUnsupported
    program = Program.from_text(scaled("    f = A.cast(1 + A.num_sms() // 100, A.f32)\n",
                                       "acc * f"))
    with pytest.raises(CheckUnsupported, match="num_sms"):
        regime_shapes(TASK, program, REAL, _check_shapes(TASK, 2), sms=132)
    fine = regime_shapes(TASK, program, REAL, _check_shapes(TASK, 2), sms=99)  # 99 // 100 = 0
    assert fine == _check_shapes(TASK, 2)
    assert conditions(TASK.program("expert").kernel) == []


def test_task_programs_have_no_size_regimes():
    """Honest programs keep their numerics shapes: no condition on sizes at all."""
    for task in ("gemm", "attention", "moe", "rmsnorm"):
        task = get_task(task)
        for name in task.programs:
            assert conditions(task.program(name).kernel) == [], (task.name, name)


def test_realise_keeps_sizes_the_conditions_do_not_name():
    conds = conditions(Program.from_text(OTHER_ABOVE["where-2x"]).kernel)
    shape = realise(conds, REAL, TASK.env_check_shape)
    assert shape["M"] == 131 and shape["N"] == TASK.env_check_shape["N"], shape
    conds = conditions(Program.from_text(OTHER_ABOVE["reciprocal"]).kernel)
    assert realise(conds, REAL, TASK.env_check_shape)["M"] >= 132, \
        "at M=131 both sides of the threshold give the same factor"


@pytest.fixture(scope="module")
def env():
    env = gym.make("Argus-GEMM-v0", mode="text")   # model backend, interpreter numerics
    yield env
    env.close()


@pytest.mark.slow
@pytest.mark.parametrize("name", ["where", "where-2x", "reciprocal", "high-threshold", "two-dims",
                                  "shift", "num-programs"])
def test_threshold_hacks_earn_nothing_in_the_environment(env, name):
    text = {**ZERO_ABOVE, **OTHER_ABOVE, **HIDDEN_ABOVE}[name]
    env.reset(seed=0, options={"shape": "square-4096"})
    _, reward, _, _, info = env.step(text)
    assert info["error"] is None, info["error"]
    assert reward <= 0 and not (info["measurement"] or {}).get("ok"), \
        (info["failure"], info["report_text"], info["correctness"])
    if info["report"]["ok"]:
        assert info["failure"] == "mismatch", (info["failure"], info["failure_message"])
    _, bonus, term, _, _ = env.step("submit()")
    assert term and bonus < 0


@pytest.mark.slow
@pytest.mark.parametrize("name", ["sqrt", "bit-and", "float-if"])
def test_opaque_size_values_are_refused_in_the_environment(env, name):
    env.reset(seed=0, options={"shape": "square-4096"})
    _, reward, _, _, info = env.step(OPAQUE[name])
    assert info["error"] and "cannot be followed" in info["error"], info["error"]
    assert reward < 0


def test_an_infinite_literal_is_no_threshold():
    program = Program.from_text(scaled("    zz = 1e999\n    f = A.where(zz > 1.0, 1.0, 1.0)\n", "acc * f"))
    assert conditions(program.kernel) == []
