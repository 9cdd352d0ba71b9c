"""The MoE GPU scripts run on CPU (`--interpret --smoke`) without gymnasium, z3 or ray,
as they must on the bare GPU machine."""

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BLOCK = "import sys\nfor n in ('z3', 'gymnasium', 'hypothesis', 'ray'):\n    sys.modules[n] = None\n"


def _run(script: str, args: list[str]) -> subprocess.CompletedProcess:
    code = BLOCK + textwrap.dedent(f"""
        import runpy
        sys.argv = [{script!r}] + {args!r}
        sys.path.insert(0, 'benchmarks')
        runpy.run_path({script!r}, run_name='__main__')
    """)
    return subprocess.run([sys.executable, "-c", code], cwd=ROOT, text=True,
                          capture_output=True, timeout=300)


@pytest.mark.slow
def test_moe_suite_smoke(tmp_path):
    out = tmp_path / "suite.json"
    r = _run("benchmarks/moe_suite.py", ["--interpret", "--smoke", "--shape", "skewed",
                                         "--catalog", "--out", str(out)])
    assert r.returncode == 0, r.stderr[-3000:]
    data = json.loads(out.read_text())
    row = data["shapes"]["smoke-skewed"]
    assert row["pipeline_ok"] and row["routing_ms"] > 0, row
    assert row["fused_ok"] and row["fused_config"]["block_m"] == 16, row
    assert all(p["ok"] for p in row["programs"].values()), row
    assert all(p["fused_anchor_ms"] > 0 and p["fused_ratio"] > 0
               for p in row["programs"].values()), row
    assert "exp/torch" in r.stdout and "exp/fused" in r.stdout
    # --catalog: catalog-reachable configurations timed beside the expert, named by summary
    catalog = {n: p for n, p in row["programs"].items() if n.startswith("catalog:")}
    assert len(catalog) >= 3 and all(p["summary"] for p in catalog.values()), row
    assert "best catalog" in r.stdout
    assert r.stdout.splitlines()[-1].startswith("smoke-skewed")


@pytest.mark.slow
def test_moe_suite_anchors_only_smoke(tmp_path):
    out = tmp_path / "suite.json"
    r = _run("benchmarks/moe_suite.py", ["--interpret", "--smoke", "--anchors-only",
                                         "--out", str(out)])
    assert r.returncode == 0, r.stderr[-3000:]
    data = json.loads(out.read_text())
    assert data["anchors_only"] and set(data["shapes"]) == {"smoke-balanced", "smoke-skewed"}
    for row in data["shapes"].values():
        assert row["fused_ok"] and row["pipeline_ok"] and not row["programs"], row
        assert row["anchors"]["fused_anchor_ms"] > 0 and row["anchors"]["anchor_ms"] > 0, row
    assert "torch/fused" in r.stdout


@pytest.mark.slow
def test_record_moe_table_smoke(tmp_path):
    table = tmp_path / "t.csv"
    r = _run("benchmarks/record_moe_table.py", ["--interpret", "--smoke", "--table", str(table)])
    assert r.returncode == 0, r.stderr[-3000:]
    rows = table.read_text().splitlines()
    assert len(rows) == 4 and all(",True," in x for x in rows[1:]), rows
    r2 = _run("benchmarks/record_moe_table.py", ["--interpret", "--smoke", "--table", str(table)])
    assert "recorded 0 rows" in r2.stdout, r2.stdout   # resumable: nothing twice
