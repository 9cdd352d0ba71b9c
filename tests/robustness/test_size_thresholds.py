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


def test_task_programs_have_no_size_regimes():
    """Honest programs keep their numerics shapes: no condition on sizes at all."""
    for name in TASK.programs:
        assert conditions(TASK.program(name).kernel) == [], name


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
@pytest.mark.parametrize("name", ["where", "where-2x", "reciprocal", "high-threshold", "two-dims"])
def test_threshold_hacks_earn_nothing_in_the_environment(env, name):
    text = {**ZERO_ABOVE, **OTHER_ABOVE}[name]
    env.reset(seed=0, options={"shape": "square-4096"})
    _, reward, _, _, info = env.step(text)
    assert info["error"] is None, info["error"]
    assert reward <= 0 and not (info["measurement"] or {}).get("ok"), \
        (info["failure"], info["report_text"], info["correctness"])
    if info["report"]["ok"]:
        assert info["failure"] == "mismatch", (info["failure"], info["failure_message"])
    _, bonus, term, _, _ = env.step("submit()")
    assert term and bonus < 0


def test_an_infinite_literal_is_no_threshold():
    program = Program.from_text(scaled("    zz = 1e999\n    f = A.where(zz > 1.0, 1.0, 1.0)\n", "acc * f"))
    assert conditions(program.kernel) == []
