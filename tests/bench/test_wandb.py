"""`argus run --wandb` and `argus bench --wandb` log episodes to W&B: offline unless
WANDB_MODE says otherwise, files under WANDB_DIR, one run per episode with its
`env__agent__seed__time` name, every env step logged once."""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import gymnasium as gym
import pytest

import argus_env  # noqa: F401
from argus_env.agents import load_agent

pytest.importorskip("wandb")
from argus_env.agents.tracking import StepLog  # noqa: E402

SUITE = """\
name: wb
envs: [Argus-GEMM-v0]
tracks: [train]
shapes:
  Argus-GEMM-v0: {train: [decode-16]}
seeds: [0]
budget: 4
measure: table
hardware: h200
agents: {greedy: {}}
"""


def _argus(args: list[str], tmp_path: Path, **env) -> subprocess.CompletedProcess:
    """The `argus` command with W&B's folders (and caches) inside `tmp_path`."""
    base = {k: v for k, v in os.environ.items() if k != "WANDB_MODE"}
    base.update(WANDB_DIR=str(tmp_path / "wb"), XDG_CACHE_HOME=str(tmp_path / "xdg"),
                WANDB_CONFIG_DIR=str(tmp_path / "wbconfig"), **env)
    proc = subprocess.run([sys.executable, "-m", "argus_env.cli", *args], capture_output=True,
                          text=True, timeout=600, env=base, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    return proc


def _runs(tmp_path: Path, pattern: str) -> list[Path]:
    folder = tmp_path / "wb" / "wandb"
    return [p for p in folder.glob("offline-run-*") if re.fullmatch(pattern, p.name)] \
        if folder.exists() else []


@pytest.mark.slow
def test_argus_run_logs_an_offline_run_named_after_the_episode(tmp_path):
    _argus(["run", "--agent", "random", "--budget", "4", "--shape", "decode-16", "--seed", "2",
            "--out-dir", str(tmp_path / "runs")], tmp_path, WANDB_MODE="offline")
    assert _runs(tmp_path, ".*") == [], "no W&B run without --wandb"
    _argus(["run", "--agent", "random", "--budget", "4", "--shape", "decode-16", "--seed", "2",
            "--out-dir", str(tmp_path / "runs"), "--wandb"], tmp_path, WANDB_MODE="offline")
    runs = _runs(tmp_path, r"offline-run-\d{8}_\d{6}-Argus-GEMM-v0__random__2__\d{10}")
    assert len(runs) == 1, list((tmp_path / "wb").rglob("*"))[:20]
    name = runs[0].name.split("-", 3)[-1]
    data = (runs[0] / f"run-{name}.wandb").read_bytes()
    for key in (b"reward", b"best_frac_anchor", b"final_frac_anchor", b"submitted"):
        assert key in data, key


@pytest.mark.slow
def test_argus_bench_logs_each_episode_offline_by_default(tmp_path):
    """WANDB_MODE unset: offline all the same. The results line is the one a plain run
    writes (the agent's args untouched)."""
    (tmp_path / "wb.yaml").write_text(SUITE)
    _argus(["bench", "--config", str(tmp_path / "wb.yaml"), "--out-dir", str(tmp_path / "res"),
            "--quiet", "--wandb"], tmp_path)
    runs = _runs(tmp_path, r"offline-run-\d{8}_\d{6}-Argus-GEMM-v0__greedy__0__\d{10}__decode-16")
    assert len(runs) == 1, list((tmp_path / "wb").rglob("*"))[:20]
    line, = (json.loads(t) for t in (tmp_path / "res" / "wb.jsonl").read_text().splitlines())
    assert line["agent_args"]["track"] is False and line["env_steps"] <= 4, line["agent_args"]


class _Tracker:
    def __init__(self):
        self.rows: list = []

    def log(self, metrics: dict, step: int | None = None) -> None:
        self.rows.append((step, metrics))


def test_every_env_step_is_logged_once_in_order():
    """The evolutionary search resets for every genome: each env step gets one row, with
    its best fraction so far (the trace spans the resets), and the last episode's steps
    their rewards."""
    module = load_agent("evolutionary")
    env = gym.make("Argus-GEMM-v0", correctness="none", max_episode_steps=20)
    tracker = _Tracker()
    log = StepLog(tracker)
    rec = module.run(env, module.Args(budget=12, seed=0, shape="decode-16", population=3,
                                      genome_length=2), log)
    log.log(rec)
    assert rec.env_steps > rec.steps, "resets: more env steps than the last episode's"
    assert [s for s, _ in tracker.rows] == list(range(1, rec.env_steps + 1))
    assert [m["best_frac_anchor"] for _, m in tracker.rows] == [v for _, v in rec.trace]
    last = tracker.rows[rec.env_steps - rec.steps:]
    assert [m["reward"] for _, m in last] == rec.rewards


def test_steps_the_agent_did_not_report_are_logged_after_it():
    """An agent that reports no progress at all: its steps are logged when it returns."""
    module = load_agent("random")
    tracker = _Tracker()
    rec = module.run(gym.make("Argus-GEMM-v0", correctness="none"),
                     module.Args(budget=6, seed=1, shape="decode-16"))
    StepLog(tracker).log(rec)
    assert [s for s, _ in tracker.rows] == list(range(1, rec.env_steps + 1)) and rec.env_steps
    assert [m["reward"] for _, m in tracker.rows] == rec.rewards
    assert tracker.rows[-1][1]["return"] == rec.return_
