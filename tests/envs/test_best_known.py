"""An episode is reported against the best program known at its shape: the fastest that
ran in the task's GPU tables (`argus_env.measure.optimum`)."""

from __future__ import annotations

import csv
import math

import gymnasium as gym
import pytest

import argus_env  # noqa: F401
from argus_env.measure.learned import table_paths
from argus_env.measure.optimum import best_known, regret
from argus_env.registry import TASKS
from argus_env.task import get_task


def _rows(task):
    for path in table_paths(task, "h200"):
        with path.open() as f:
            yield from csv.DictReader(f)


@pytest.mark.parametrize("name", sorted(TASKS))
def test_the_best_known_is_the_fastest_row_that_ran_at_the_shape(name):
    task = get_task(name)
    case = task.shape_cases("all")[0]
    known = best_known(task, case.sizes, "h200")
    assert known is not None, f"the tables hold no row at {case.name}"
    at_shape = [r for r in _rows(task)
                if all(int(r[d]) == case.sizes[d] for d in task.anchor_dims)]
    ran = [float(r["ratio"]) for r in at_shape if r["ok"] == "True"]
    assert known["frac_anchor"] == max(ran)
    best = next(r for r in at_shape if r["ok"] == "True" and float(r["ratio"]) == max(ran))
    assert known["program_hash"] == best["program_hash"] and known["tflops"] == float(best["tflops"])
    assert best_known(task, case.sizes, "a100") is None  # no table recorded there
    assert best_known(task, {**case.sizes, task.anchor_dims[0]: 12345}, "h200") is None


def test_regret_is_best_found_over_best_known():
    assert regret(0.5, {"frac_anchor": 1.0}) == 0.5
    assert math.isnan(regret(0.5, None))


def test_the_environment_reports_its_best_against_the_best_known():
    env = gym.make("Argus-GEMM-v0", measure="table", correctness="none")
    try:
        _, info = env.reset(seed=0, options={"shape": "square-4096"})
        known = best_known(get_task("gemm"), {"M": 4096, "N": 4096, "K": 4096}, "h200")
        assert info["best_known_frac_anchor"] == known["frac_anchor"]
        assert info["regret"] == pytest.approx(info["best_frac_anchor"] / known["frac_anchor"])
        assert 0 < info["regret"] <= 1.0 + 1e-9  # the baseline is one of the table's rows
    finally:
        env.close()
