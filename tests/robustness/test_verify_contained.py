"""`argus verify` on a hostile program: refused by the checker, never run in-process."""

from __future__ import annotations

import json
import subprocess
import sys

from argus_env.task import get_task

BASE = get_task("gemm").program("baseline").text
STORE = "mask=(rows < M, cols < N))\n"


def test_verify_refuses_an_out_of_bounds_store_without_crashing(tmp_path):
    assert BASE.endswith(STORE)
    bad = tmp_path / "oob.py"
    bad.write_text(BASE[: -len(STORE)] + ")\n")  # the store's mask removed
    out = tmp_path / "out"
    proc = subprocess.run([sys.executable, "-m", "argus_env.cli", "verify", "gemm", "--cpu",
                           "--program", str(bad), "--out-dir", str(out)],
                          capture_output=True, text=True, timeout=300,
                          env={**__import__("os").environ, "TRITON_INTERPRET": "1"})
    assert proc.returncode == 1, (proc.returncode, proc.stderr[-2000:])
    assert "Traceback" not in proc.stderr, proc.stderr[-2000:]
    rows = json.loads(next(out.glob("*.json")).read_text())["rows"]
    refused = [r for r in rows if not r["ok"]]
    assert refused and all(r["status"] == "violation" for r in refused), rows
    assert all("bounds" in r["message"] and "not run" in r["message"] for r in refused), refused


def test_verify_still_passes_the_task_programs(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "argus_env.cli", "verify", "gemm", "--cpu",
                           "--shapes", "1", "--out-dir", str(tmp_path)],
                          capture_output=True, text=True, timeout=300,
                          env={**__import__("os").environ, "TRITON_INTERPRET": "1"})
    assert proc.returncode == 0, (proc.stdout[-2000:], proc.stderr[-2000:])
    rows = json.loads(next(tmp_path.glob("*.json")).read_text())["rows"]
    assert len(rows) == len(get_task("gemm").programs) and all(r["ok"] for r in rows), rows
