"""Right at small indices, wrong past them: floats keyed on an element's position.

The checker proves data flow at the real size and tracks no float; numerics run at reduced
shapes, whose indices stay small. A program that computes its float values differently
past some row (`A.where(rows < 4096, acc, 2.0 * acc)`, `acc + A.cast(rows // 4096, A.f32)`)
has the same tags and coverage either way, is right at every reduced shape, and was proven,
passed and measured while wrong at the episode's size. So is a float carried around a loop and
scaled or shifted by a constant at each step (`A.dot(a, b, acc * 1.003)`): right at the
reduced shapes' few steps, twice the product at K=8192. Such a float is refused
(`argus_env.check.uniform`); masks (one side data, the other a fill) stay, since the
checker follows them element by element.
"""

from __future__ import annotations

import random
import sys
from pathlib import Path

import gymnasium as gym
import pytest

import argus_env  # noqa: F401
from argus_env.check import CheckUnsupported
from argus_env.check.uniform import positional
from argus_env.dsl import Program
from argus_env.envs.evaluate import _check_shapes, regime_shapes
from argus_env.task import get_task

TASK = get_task("gemm")
BASE = TASK.program("baseline").text
STORE = "A.store(c[rows, cols], A.cast(acc, A.bf16)"
REAL = {"M": 8192, "N": 8192, "K": 8192}


def storing(value: str, prelude: str = "") -> str:
    assert STORE in BASE
    return BASE.replace("    " + STORE, prelude + "    " + STORE.replace("A.cast(acc,", f"A.cast({value},"))


POSITIONAL = {
    "where-two-values": storing("A.where(rows[:, None] < 4096, acc, acc * 2.0)"),
    "where-two-constants": storing("acc * A.where(rows[:, None] < 4096, 1.0, 2.0)"),
    "cast-index": storing("acc + A.cast(rows // 4096, A.f32)[:, None]"),
    "bool-arithmetic": storing("acc * (1 + (cols[None, :] >= 4096))"),
    "program-id": storing("acc * f", "    f = A.cast(pid_m // 64, A.f32) + 1.0\n"),
    "if-on-index": storing("acc * f", "    f = 1.0\n    if pid_m > 63:\n        f = 2.0\n"),
    "loop-counter": storing("acc * A.cast(1 + n // 128, A.f32)", "    n = 0\n"
                            "    for j in A.range(0, K, BK):\n        n = n + 1\n"),
    "full": storing("acc * A.full((BM, BN), pid_n // 64, A.f32)"),
    "true-division": storing("acc * (1.0 + pid_m / 1000000)"),
    # an index condition laundered through data (a term that is always zero)
    "laundered-condition": storing(
        "A.where(rows[:, None] + A.cast(acc * 0.0, A.i32) < 4096, acc, acc * 2.0)"),
    "laundered-if": storing("acc * f", "    f = 1.0\n    if pid_m + A.cast(A.max(A.max(acc, axis=1), axis=0) * 0.0, A.i32) > 63:\n"
                            "        f = 2.0\n"),
}
LOOP_DOT = "        acc = A.dot(a_tile, b_tile, acc)"
# a float carried around the k loop and scaled by a constant at each step: 1.003 ** 2 at
# the reduced shapes, 1.003 ** 256 (2.15) at K=8192 with BK=32
POSITIONAL["trip-count-factor"] = storing("acc * f", "").replace(
    "    acc = A.zeros((BM, BN), A.f32)\n", "    acc = A.zeros((BM, BN), A.f32)\n    f = 1.0\n"
).replace(LOOP_DOT, LOOP_DOT + "\n        f = f * 1.003")
POSITIONAL["trip-count-accumulator"] = BASE.replace(
    LOOP_DOT, "        acc = A.dot(a_tile, b_tile, acc * 1.003)")
POSITIONAL["trip-count-through-a-name"] = BASE.replace(
    LOOP_DOT, "        grown = acc + 0.01\n        acc = A.dot(a_tile, b_tile, grown)")


@pytest.mark.parametrize("name", list(POSITIONAL))
def test_positional_floats_are_found_and_refused(name):
    program = Program.from_text(POSITIONAL[name])
    assert positional(program.kernel) is not None, name
    with pytest.raises(CheckUnsupported, match="position"):
        regime_shapes(TASK, program, REAL, _check_shapes(TASK, 2))


def test_masks_and_honest_programs_are_not_positional():
    for t in ("gemm", "attention", "moe", "rmsnorm"):
        task = get_task(t)
        for name in task.programs:
            assert positional(task.program(name).kernel) is None, (t, name)
    # a mask's fill on one side, data on the other: the checker follows it
    masked = storing("A.where(rows[:, None] < M, acc, 0.0)")
    assert positional(Program.from_text(masked).kernel) is None


def test_sampled_configurations_are_not_positional():
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    from benchmarks.record_programs import draw_configuration
    for t in ("gemm", "attention", "moe", "rmsnorm"):
        space = get_task(t).space
        rng, fields = random.Random(1), space.field_values()
        for _ in range(60):
            config = draw_configuration(rng, space.baseline(), fields)
            if config is None:
                continue
            try:
                program = Program.from_text(space.render(config))
            except Exception:  # noqa: BLE001 - a draw the space does not render
                continue
            assert positional(program.kernel) is None, (t, config)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["where-two-values", "cast-index", "trip-count-accumulator"])
def test_positional_hacks_earn_nothing_in_the_environment(name):
    env = gym.make("Argus-GEMM-v0", mode="text")   # model backend, interpreter numerics
    try:
        env.reset(seed=0, options={"shape": {"M": 8192, "N": 8192, "K": 8192}})
        _, reward, _, _, info = env.step(POSITIONAL[name])
        assert info["error"] and "position" in info["error"], (info["error"], info["correctness"])
        assert reward < 0
    finally:
        env.close()
