"""`benchmarks/live_rerun_compare.py`: two live recordings side by side, per shape, for the
kernel's time, the anchor's and the score."""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from benchmarks.live_rerun_compare import compare  # noqa: E402


def _live(path: Path, figures) -> Path:
    rows = [{"env_id": e, "shape": s, "program_hash": h, "ok": ok, "ms": ms,
             "anchor_ms": a, "frac_anchor": a / ms} for e, s, h, ok, ms, a in figures]
    path.write_text(json.dumps({"hardware": "h100", "provenance": {"gpu": "x"},
                                "figures": rows}))
    return path


def test_a_moved_anchor_shows_in_the_anchor_and_the_score_not_the_kernel(tmp_path):
    first = _live(tmp_path / "a.json", [("E", "s1", "p", True, 2.0, 4.0),
                                        ("E", "s2", "q", True, 1.0, 3.0),
                                        ("E", "s2", "r", True, 1.0, 3.0),
                                        ("E", "s2", "gone", True, 1.0, 3.0)])
    second = _live(tmp_path / "b.json", [("E", "s1", "p", True, 2.0, 4.0),
                                         ("E", "s2", "q", True, 1.0, 4.5),
                                         ("E", "s2", "r", False, 1.0, 3.0),
                                         ("E", "s3", "new", True, 1.0, 1.0)])
    out = compare(first, second)
    assert out["programs_in_both"] == 2 and out["failed_in_either"] == 1
    assert out["only_first"] == 1 and out["only_second"] == 1
    by = {r["shape"]: r for r in out["per_shape"]}
    assert by["s1"]["score_second_over_first"]["median"] == 1.0
    assert by["s2"]["kernel_second_over_first"]["median"] == 1.0
    assert by["s2"]["anchor_second_over_first"]["median"] == 1.5
    assert by["s2"]["score_second_over_first"]["median"] == 1.5
