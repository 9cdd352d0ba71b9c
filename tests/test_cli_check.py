"""`argus check` as strong as the environment: task constants bound per shape, every
suite shape and small ragged shapes by default, `--sizes` merged, clean usage errors."""

from __future__ import annotations

import json

import pytest

from argus_env import cli
from argus_env.task import get_task


def _write(tmp_path, text: str, name: str = "prog.py"):
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def test_a_row_mask_right_only_at_tile_multiples_is_caught_by_default(tmp_path, capsys):
    text = get_task("gemm").program("baseline").text
    assert "mask=(rows < M, cols < N))" in text
    bad = _write(tmp_path, text.replace("mask=(rows < M, cols < N))", "mask=(rows <= M, cols < N))"))
    assert cli.main(["check", bad]) == 1
    out = capsys.readouterr().out
    assert "bounds" in out and "not proven at" in out, out
    # at the first suite shape alone (8192 divides every tile) it would pass
    assert cli.main(["check", bad, "--sizes", "M=8192"]) == 0


def test_the_tasks_constants_are_bound_per_shape(tmp_path, capsys):
    """The expert file says CAUSAL=0; checked at a causal shape it is bound to 1 (no false
    alarm), and a causal bug (the diagonal block unmasked) is found there."""
    text = get_task("attention").program("expert").text
    assert cli.main(["check", _write(tmp_path, text), "--json"]) == 0
    results = json.loads(capsys.readouterr().out)
    assert any(r["sizes"].get("CAUSAL") for r in results) and all(r["report"]["ok"] for r in results)
    mask = "A.where((cols[None, :] <= rows[:, None]) & (cols < SK)[None, :], s, -1e+30)"
    assert mask in text
    bad = _write(tmp_path, text.replace(mask, "A.where((cols < SK)[None, :], s, -1e+30)"))
    assert cli.main(["check", bad]) == 1
    assert "[causal]" in capsys.readouterr().out


def test_sizes_are_merged_and_usage_errors_exit_2(tmp_path, capsys):
    path = _write(tmp_path, get_task("gemm").program("baseline").text)
    assert cli.main(["check", path, "--sizes", "M=100", "--json"]) == 0
    (only,) = json.loads(capsys.readouterr().out)
    assert only["sizes"] == {**get_task("gemm").shapes[0].sizes, "M": 100}
    assert cli.main(["check", path, "--task", "gemmm"]) == 2
    assert "did you mean 'gemm'" in capsys.readouterr().err
    assert cli.main(["check", path, "--sizes", "Q=3"]) == 2
    assert "no size 'Q'" in capsys.readouterr().err


def test_json_into_a_closed_pipe_is_not_a_traceback(tmp_path):
    import subprocess
    import sys
    path = _write(tmp_path, get_task("gemm").program("baseline").text)
    proc = subprocess.run(f"{sys.executable} -m argus_env.cli check {path} --json | head -c 10",
                          shell=True, capture_output=True, text=True, timeout=300)
    assert "Traceback" not in proc.stderr and "BrokenPipe" not in proc.stderr, proc.stderr


def test_lower_claims_no_proof_for_a_program_the_checker_rejects(tmp_path, capsys):
    text = get_task("gemm").program("baseline").text
    bad = _write(tmp_path, text.replace("mask=(rows < M, cols < N))", "mask=(rows <= M, cols < N))"))
    assert cli.main(["check", bad]) == 1
    capsys.readouterr()
    assert cli.main(["lower", bad]) == 0
    src = capsys.readouterr().out
    assert "proven" not in src.lower(), [ln for ln in src.splitlines() if "proven" in ln.lower()]
    assert "tag assertion" in src
