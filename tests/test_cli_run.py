"""`argus run` as a user pipes it: whole code, custom shapes, agent arguments."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from argus_env import cli
from argus_env.lower import source
from argus_env.dsl import Program


def _run(tmp_path, *extra):
    proc = subprocess.run([sys.executable, "-m", "argus_env.cli", "run", "--task", "gemm",
                           "--agent", "greedy", "--budget", "3", "--out-dir", str(tmp_path),
                           *extra], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "TRITON_INTERPRET": "1", "COLUMNS": "60"})
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc


@pytest.mark.slow
def test_piped_output_carries_the_code_whole_and_files_beside_the_record(tmp_path):
    proc = _run(tmp_path, "--shape", "M=777,N=1234,K=4096", "--agent-arg", "perturb=1")
    record = json.loads(next(tmp_path.glob("*__greedy__0__*[0-9].json")).read_text())
    assert record["sizes"] == {"M": 777, "N": 1234, "K": 4096}, record["sizes"]
    dsl = next(tmp_path.glob("*.dsl.py")).read_text()
    triton = next(tmp_path.glob("*.triton.py")).read_text()
    assert dsl == record["best_program"]
    assert triton == source(Program.from_text(dsl))
    longest = max(triton.splitlines(), key=len)
    assert len(longest) > 60 and longest in proc.stdout, "a long line was cut when piped"
    assert dsl.strip() in proc.stdout


def test_agent_args_are_typed_and_checked():
    from argus_env.agents.search.greedy import Args
    assert cli._agent_args(Args, ["perturb=3", "min_gain=0.5"]) == {"perturb": 3, "min_gain": 0.5}
    with pytest.raises(ValueError, match="KEY one of"):
        cli._agent_args(Args, ["restarts=1"])
    with pytest.raises(ValueError, match="is not a"):
        cli._agent_args(Args, ["perturb=many"])
