"""`benchmarks/learning_curve_table.py`: budgets read off the best-so-far curves, and PPO
called outside the spread only where its worst seed beats random's best seed."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("lc_table", ROOT / "benchmarks" / "learning_curve_table.py")
lct = importlib.util.module_from_spec(spec)
spec.loader.exec_module(lct)


def result(ppo: list[list[float]], random: list[list[float]]) -> dict:
    return {"config": {"env_id": "Argus-X-v0", "use_budget": True, "no_repeats": False},
            "agents": {"random": {"per_seed": {str(i): {"curve": c} for i, c in enumerate(random)}},
                       "ppo": {"per_seed": {str(i): {"final_curve": c, "points": [{"env_steps": 64}]}
                                            for i, c in enumerate(ppo)}}}}


def ramp(at5: float, at30: float) -> list[float]:
    return [at5 if i < 30 else at30 for i in range(31)]


def test_outside_the_spread_compares_worst_ppo_seed_with_best_random_seed():
    text = lct.table([result(ppo=[ramp(0.7, 0.8), ramp(0.6, 0.81)],
                             random=[ramp(0.5, 0.79), ramp(0.65, 0.7)])])
    row = next(ln for ln in text.splitlines() if "worst seed above" in ln)
    # 5 steps: PPO worst 0.6 < random best 0.65; 30 steps: 0.8 > 0.79
    assert row.split("|")[-5:-1] == [" no ", " no ", " no ", " yes "], row
    assert "ppo (use budget; 64 training steps) | 2 | 0.650 (0.600-0.700)" in text, text


def test_a_file_that_is_not_a_results_file_is_refused(tmp_path):
    bad = tmp_path / "x.json"
    bad.write_text(json.dumps({"what": 1}))
    with pytest.raises(SystemExit, match="not a learning_curve.py results file"):
        lct.main([str(bad)])
