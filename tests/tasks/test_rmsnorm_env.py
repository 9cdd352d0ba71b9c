"""`Argus-RMSNorm-v0`: Gymnasium's checker in both action modes, a greedy episode from the
command line, and the invariant report of a text program that normalises by the wrong row."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import gymnasium as gym
import pytest
from gymnasium.utils.env_checker import check_env

import argus_env  # noqa: F401  (registers the ids)
from argus_env.tasks.rmsnorm.space import EXPERT, render


@pytest.mark.parametrize("mode", ["discrete", "text"])
def test_check_env_passes(mode):
    env = gym.make("Argus-RMSNorm-v0", **({} if mode == "discrete" else {"mode": "text"}))
    check_env(env.unwrapped, skip_render_check=True)
    obs, info = env.reset(seed=0, options={"shape": "llama70b-decode-64"})
    assert info["sizes"] == {"T": 64, "H": 8192} and info["measurement"]["ok"], info
    assert info["report"]["ok"] and obs["action_mask"].any()
    env.close()


def test_a_text_program_with_a_neighbours_statistic_is_refuted():
    env = gym.make("Argus-RMSNorm-v0", mode="text")
    env.reset(seed=0, options={"shape": "qwen14b-ragged-3000"})
    text = render(EXPERT).replace(
        "    rstd = 1.0 / A.sqrt(A.sum(r * r, 1) / H + EPS)\n",
        "    nxt = A.minimum(rows + 1, T - 1)\n"
        "    rn = A.cast(A.load(x[nxt, cols], mask=(live, cols < H), other=0.0), A.f32) + "
        "A.cast(A.load(residual[nxt, cols], mask=(live, cols < H), other=0.0), A.f32)\n"
        "    rstd = 1.0 / A.sqrt(A.sum(rn * rn, 1) / H + EPS)\n")
    _, reward, _, _, info = env.step(text)
    kinds = {v["invariant"] for v in info["report"]["violations"]}
    assert "row_stat" in kinds and not info["report"]["ok"], info["report_text"]
    assert reward < 0
    env.close()


def test_greedy_episode_from_the_command_line(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "argus_env.cli", "run", "--task", "rmsnorm",
                           "--agent", "greedy", "--budget", "20", "--out-dir", str(tmp_path)],
                          capture_output=True, text=True, timeout=600,
                          env={**os.environ, "TRITON_INTERPRET": "1"})
    assert proc.returncode == 0, proc.stderr[-2000:]
    record = json.loads(next(tmp_path.glob("*__greedy__0__*[0-9].json")).read_text())
    assert record["env_id"] == "Argus-RMSNorm-v0", list(record)
    assert 0 < len(record["actions"]) <= 20
    assert record["best_tflops"] > record["baseline_tflops"] > 0, record
