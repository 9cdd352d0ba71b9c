"""A step's compile verdict stops after Triton's shared-memory allocation
(`measure.legality.verdict_stage`); the submitted program's runs the whole compiler,
ptxas included, and a program it refuses is submitted as one that does not compile."""

import dataclasses

import gymnasium as gym
import pytest

import argus_env  # noqa: F401
from argus_env.measure.legality import Legality

pytestmark = pytest.mark.slow


@pytest.fixture
def compiling(monkeypatch, tmp_path):
    monkeypatch.setenv("ARGUS_LEGALITY", "1")
    monkeypatch.setenv("ARGUS_VERDICT_STAGE", "alloc")
    monkeypatch.setenv("ARGUS_CACHE_DIR", str(tmp_path))


def _play(env):
    env.unwrapped.evaluator.legality._table.clear()   # compile now, not from the table
    _, info = env.reset(seed=0, options={"shape": "decode-16"})
    catalog = env.unwrapped.catalog
    first = next(i for i, ok in enumerate(info["action_mask"])
                 if ok and catalog[i][0] not in ("undo", "submit"))
    _, _, _, _, moved = env.step(first)
    _, reward, terminated, _, done = env.step(catalog.index(("submit", None)))
    return moved, reward, terminated, done


def test_the_submission_is_confirmed_by_the_whole_compile(compiling):
    env = gym.make("Argus-GEMM-v0", measure="model", correctness="none")
    try:
        moved, reward, terminated, done = _play(env)
    finally:
        env.close()
    assert moved["measurement"]["ok"], moved["measurement"]
    assert moved["measurement"]["details"]["legality"]["stage"] == "alloc"
    assert terminated and done["submitted"] and done["measurement"]["ok"]
    whole = done["measurement"]["details"]["legality"]
    assert whole["stage"] == "cubin" and whole["ok"] and whole["registers"] > 0, whole


def test_a_submission_the_whole_compiler_refuses_is_not_priced(compiling, monkeypatch):
    real = Legality.verdict

    def refusing(self, program, request=None, sizes=None, stage=None):
        v = real(self, program, request, sizes, stage)
        if (stage or self.stage) == "cubin":
            return dataclasses.replace(v, ok=False, compiled=False, reason="ptxas: seeded")
        return v
    monkeypatch.setattr(Legality, "verdict", refusing)
    env = gym.make("Argus-GEMM-v0", measure="model", correctness="none")
    try:
        moved, reward, terminated, done = _play(env)
        final = env.unwrapped.state.evaluation
    finally:
        env.close()
    assert moved["measurement"]["ok"]                   # the step's verdict took it
    assert terminated and not done["measurement"]["ok"]
    assert done["measurement"]["details"]["status"] == "compile"
    assert final.error == "compile" and "seeded" in final.message
    assert reward < 0, reward                           # the unmeasured penalty, no bonus
