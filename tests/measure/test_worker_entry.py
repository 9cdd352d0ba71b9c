"""The worker process starts without a second copy of its module: `python -m` of a module
the package's own imports load made runpy warn on every start, on the user's terminal."""

from __future__ import annotations

import subprocess
import sys


def test_a_worker_starts_without_warnings_on_stderr(tmp_path):
    code = ("import gymnasium as gym, argus_env\n"
            "env = gym.make('Argus-GEMM-v0')\n"
            "env.reset(seed=0, options={'shape': 'decode-16'})\n"
            "env.step(0)\n"
            "env.close()\n"
            "print('stepped')\n")
    done = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "stepped" in done.stdout
    assert "RuntimeWarning" not in done.stderr and "sys.modules" not in done.stderr, done.stderr
