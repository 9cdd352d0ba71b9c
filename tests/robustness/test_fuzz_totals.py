"""fuzz_totals.py: clean runs count, runs with problems are listed but not counted, and
`--since` keeps the runs at or after a commit."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))


def _summary(env_id, actions, problems, commit):
    return {"env_id": env_id, "actions": actions, "problems": problems,
            "outcomes": {"refused": actions - 2, "measured": 2},
            "provenance": {"commit": commit, "dirty": False}}


def test_totals_count_clean_runs_and_those_since_a_commit(tmp_path):
    import fuzz_totals
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True,
                          text=True).stdout.strip()
    first = subprocess.run(["git", "rev-list", "--max-parents=0", "HEAD"], cwd=ROOT,
                           capture_output=True, text=True).stdout.split()[0]
    runs = [("a", _summary("E", 100, {"internal-error-contained": 1}, first)),
            ("b", _summary("E", 50, {"hang": 1}, head)),
            ("c", _summary("E", 30, {}, head))]
    out = fuzz_totals.totals(runs, since=head)["envs"]["E"]
    assert out["actions"] == 130 and out["actions_in_runs_with_problems"] == 50
    assert out["measured"] == 4 and out["problems_found"]["hang"] == 1
    assert [r["clean"] for r in out["runs"]] == [True, False, True]
    assert out["actions_since"] == (30 if first != head else 130)
    # the command line: exit status 1 while the target is not met, the record written
    files = []
    for name, s in runs:
        (tmp_path / f"{name}.json").write_text(json.dumps(s))
        files.append(str(tmp_path / f"{name}.json"))
    res = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "fuzz_totals.py"), *files,
                          "--target", "131", "--out", str(tmp_path / "t.json")],
                         capture_output=True, text=True)
    assert res.returncode == 1, res.stdout + res.stderr
    assert json.loads((tmp_path / "t.json").read_text())["envs"]["E"]["actions"] == 130
    res = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "fuzz_totals.py"), *files,
                          "--target", "130"], capture_output=True, text=True)
    assert res.returncode == 0 and "130" in res.stdout, res.stdout + res.stderr


def test_totals_refuse_a_file_that_is_not_a_summary(tmp_path):
    bad = tmp_path / "x.json"
    bad.write_text(json.dumps({"env_id": "E"}))
    res = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "fuzz_totals.py"), str(bad)],
                         capture_output=True, text=True)
    assert res.returncode != 0 and "not a fuzz_envs.py summary" in res.stderr, res.stderr
