"""W&B tracking: offline by default, files under the given folder, CleanRL run names."""

import re

import gymnasium as gym
import pytest

import argus_env  # noqa: F401

pytest.importorskip("wandb")
from argus_env.agents import load_agent  # noqa: E402
from argus_env.agents.tracking import run_name, start_run  # noqa: E402


def test_offline_run_writes_under_the_dir_with_its_name(tmp_path, monkeypatch):
    monkeypatch.delenv("WANDB_MODE", raising=False)      # offline must be the default
    tracker = start_run("Argus-GEMM-v0", "ppo", 3, {"lr": 3e-4, "hiddens": [64]},
                        dir=str(tmp_path))
    try:
        assert re.fullmatch(r"Argus-GEMM-v0__ppo__3__\d+", tracker.name), tracker.name
        assert tracker.run.settings.mode == "offline", tracker.run.settings.mode
        tracker.log({"episode_return_mean": 0.5, "learner": {"total_loss": 1.0}}, step=1)
    finally:
        tracker.finish()
    runs = list((tmp_path / "wandb").glob(f"offline-run-*-{tracker.name}"))
    assert len(runs) == 1, list(tmp_path.rglob("*"))[:20]
    assert (runs[0] / f"run-{tracker.name}.wandb").stat().st_size > 0


def test_run_names_follow_cleanrl():
    assert run_name("Argus-GEMM-v0", "greedy", 1, when=1700000000.5) == \
        "Argus-GEMM-v0__greedy__1__1700000000"


def test_search_agent_tracks_when_asked(tmp_path, monkeypatch):
    monkeypatch.setenv("WANDB_DIR", str(tmp_path))
    module = load_agent("random")
    rec = module.run(gym.make("Argus-GEMM-v0", correctness="none"),
                     module.Args(budget=4, seed=2, shape="decode-16", track=True))
    assert rec.submitted, rec
    runs = list((tmp_path / "wandb").glob("offline-run-*-Argus-GEMM-v0__random__2__*"))
    assert len(runs) == 1, list(tmp_path.rglob("*"))[:20]
