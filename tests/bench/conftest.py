"""A tiny benchmark suite (1 shape per track, 2 seeds, budget 6, random and greedy), run
once per session: through `argus bench` in a subprocess, then again in-process."""

import subprocess
import sys
from pathlib import Path

import pytest

TINY = """\
name: tiny
envs: [Argus-GEMM-v0]
tracks: [train, test]
shapes:
  Argus-GEMM-v0: {train: [decode-16], test: [square-2048]}
seeds: [0, 1]
budget: 6
measure: table
hardware: h200
agents: {random: {}, greedy: {}}
"""


@pytest.fixture(scope="session")
def tiny_config(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("suite") / "tiny.yaml"
    path.write_text(TINY)
    return path


@pytest.fixture(scope="session")
def tiny_results(tiny_config, tmp_path_factory) -> Path:
    """results/tiny.jsonl written by `argus bench` (the command line, in a subprocess)."""
    out = tmp_path_factory.mktemp("results")
    proc = subprocess.run([sys.executable, "-m", "argus_env.cli", "bench", "--config",
                           str(tiny_config), "--out-dir", str(out), "--quiet"],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    assert "8 episode(s) run" in proc.stdout, proc.stdout
    return out / "tiny.jsonl"
