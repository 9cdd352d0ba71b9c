"""The worker is a plain subprocess: an unguarded script is never re-imported in it, a
daemonic process may start it (async vector envs), and a worker killed from outside is not
a verdict on the program (not remembered)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import gymnasium as gym
import numpy as np
import pytest

import argus_env  # noqa: F401
from argus_env.measure.worker import Worker
from argus_env.task import get_task

TASK = get_task("gemm")

UNGUARDED = textwrap.dedent("""
    import gymnasium as gym, argus_env
    print("MAIN RAN", flush=True)
    env = gym.make("Argus-GEMM-v0", mode="text")
    env.reset(seed=0, options={"shape": "ragged-1000"})
    _, _, _, _, info = env.step("tile_m(128)")
    print("RESULT", info["failure"], bool(info["measurement"].get("ok")), flush=True)
    env.close()
""")


@pytest.mark.slow
@pytest.mark.parametrize("how", ["file", "stdin"])
def test_an_unguarded_script_runs_once_and_is_measured(tmp_path, how):
    path = tmp_path / "train.py"
    path.write_text(UNGUARDED)
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    if how == "file":
        proc = subprocess.run([sys.executable, str(path)], capture_output=True, text=True,
                              timeout=300, env=env, cwd=tmp_path)
    else:
        proc = subprocess.run([sys.executable, "-"], input=UNGUARDED, capture_output=True,
                              text=True, timeout=300, env=env, cwd=tmp_path)
    assert proc.stdout.count("MAIN RAN") == 1, proc.stdout + proc.stderr[-2000:]
    assert "RESULT None True" in proc.stdout, proc.stdout + proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr, proc.stderr[-2000:]


@pytest.mark.slow
@pytest.mark.parametrize("make", [
    lambda: gym.make_vec("Argus-GEMM-v0", num_envs=2, vectorization_mode="async",
                         vector_kwargs={"context": "spawn"}),
    lambda: gym.vector.AsyncVectorEnv([lambda: gym.make("Argus-GEMM-v0")] * 2),
], ids=["make_vec", "AsyncVectorEnv"])
def test_async_vector_envs_measure_programs(make):
    venv = make()
    try:
        obs, _ = venv.reset(seed=0, options={"shape": "ragged-1000"})
        for _ in range(2):
            actions = np.array([int(np.flatnonzero(m)[0]) for m in obs["action_mask"]])
            obs, reward, _, _, info = venv.step(actions)
        assert info["measurement"]["ok"].all(), info["failure_message"]
        assert np.isfinite(reward).all()
    finally:
        venv.close()


@pytest.mark.slow
def test_a_transient_fault_is_not_remembered():
    """The evaluator asks again: the same correct program is measured on the next try."""
    from argus_env.envs.evaluate import Evaluator
    from argus_env.measure.backends import ModelBackend

    class KilledOnce(Worker):
        calls = 0

        def run(self, *a, **k):
            KilledOnce.calls += 1
            if KilledOnce.calls == 1:
                return {"status": "fault", "ok": False, "transient": True, "message": "killed"}
            return super().run(*a, **k)

    worker = KilledOnce(interpret=True)
    ev = Evaluator(TASK, ModelBackend("h200"), worker=worker)
    try:
        program = TASK.program("baseline")
        sizes = {"M": 1000, "N": 1000, "K": 1000}
        first = ev.evaluate(program, sizes)
        assert first.error == "fault" and not first.measured
        second = ev.evaluate(program, sizes)
        assert second.measured and second.error is None, (second.error, second.message)
    finally:
        worker.stop()


def test_workers_fuse_floating_point_as_every_supported_triton_does(monkeypatch):
    """The workers say Triton's FP-contraction default explicitly (on, as in 3.6-3.9), so a
    Triton that changes its default does not change the kernels; a user's choice stands."""
    from argus_env.measure import worker
    monkeypatch.delenv(worker.FP_FUSION, raising=False)
    assert worker._environment(interpret=False)[worker.FP_FUSION] == "1"
    assert worker._environment(interpret=True)[worker.FP_FUSION] == "1"
    monkeypatch.setenv(worker.FP_FUSION, "0")
    assert worker._environment(interpret=False)[worker.FP_FUSION] == "0"
