"""The cost models' recorded error: rows of the GPU tables matched to the programs they
timed, scores that rank within shapes, a correction never fitted on what it is scored on,
and the recorded figures every model-priced measurement carries."""

from __future__ import annotations

import math

import pytest

from argus_env.measure import learned
from argus_env.measure.learned import Sample, parse_config_text, scores
from argus_env.registry import TASKS
from argus_env.task import get_task


def test_configuration_texts_are_parsed_never_evaluated():
    assert parse_config_text("MoEConfig(block_m=64, stages=None, tma=False)") == \
        {"block_m": 64, "stages": None, "tma": False}
    assert parse_config_text("block_m=64,stages=None,tma_loads=True") == \
        {"block_m": 64, "stages": None, "tma_loads": True}
    assert parse_config_text("64x64 blocks, 4 warps, exp") is None  # a summary
    # a call in a value is not a literal: refused, not run
    assert parse_config_text("Cfg(block_m=__import__('os').getpid())") is None
    assert parse_config_text("Cfg(1, 2)") is None


@pytest.mark.parametrize("name", ["gemm", "moe"])
def test_table_rows_are_matched_to_the_programs_they_timed(name):
    task = get_task(name)
    rows, skipped = learned.samples(task, limit=12)
    assert rows, skipped
    # the row's recorded program hash is the hash of the program recovered from its text
    assert sum(s.hash_matches for s in rows) >= len(rows) - 2, \
        [(s.shape, s.program_hash) for s in rows if not s.hash_matches]
    for s in rows:
        assert s.model_ok and s.model_ms > 0 and s.measured_ms > 0
        assert set(task.anchor_dims) <= set(s.sizes) <= set(task.size_names())


def _sample(shape, measured, predicted, i=0):
    return Sample(shape, {"M": 1}, ("c", i), "h", True, measured, predicted, True)


def test_scores_rank_within_each_shape_and_measure_log_error():
    # in shape a the model ranks right, in shape b exactly backwards
    batch = [_sample("a", m, m, i) for i, m in enumerate((1.0, 2.0, 3.0))] + \
            [_sample("b", m, 4.0 - m, i) for i, m in enumerate((1.0, 2.0, 3.0))]
    got = scores(batch, [s.model_ms for s in batch])
    assert got["shapes_ranked"] == 2 and got["spearman_within_shape"] == pytest.approx(0.0)
    # errors: 0, 0, 0 in a; log 3, 0, log 3 in b
    assert got["median_abs_log_error"] == pytest.approx(0.0, abs=1e-12)
    assert got["p90_abs_log_error"] == got["max_abs_log_error"] == pytest.approx(math.log(3.0))


def test_a_held_out_group_is_never_in_its_own_fit(monkeypatch):
    seen = []

    class Recording:
        def __init__(self, seed=0):
            pass

        def fit(self, train):
            seen.append({s.shape for s in train})
            return self

        def ms(self, batch):
            held = {s.shape for s in batch}
            assert not held & seen[-1], "a held-out shape was in the fit"
            return [s.model_ms for s in batch]
    monkeypatch.setattr(learned, "Correction", Recording)
    batch = [_sample(f"s{i % 5}", 1.0 + i, 1.0 + i, i) for i in range(20)]
    out = learned.cross_validated(batch, lambda s: s.shape, k=5)
    assert len(seen) == 5 and all(len(x) == 4 for x in seen)
    assert out == [s.model_ms for s in batch]


@pytest.mark.parametrize("name", sorted(TASKS))
def test_every_task_carries_its_recorded_model_error(name):
    err = learned.expected_error(get_task(name), "h200")
    assert err is not None, f"no recorded model error for {name}: run benchmarks/fit_cost_model.py"
    assert 0 <= err["median_abs_log_error"] <= err["p90_abs_log_error"]
    assert err["programs"] >= 10 and err["source"].endswith("model_error_h200.json")
    assert learned.expected_error(get_task(name), "a100") is None  # nothing recorded there


@pytest.mark.parametrize("name", sorted(TASKS))
def test_every_model_priced_figure_says_it_is_an_estimate_with_its_error(name):
    """A figure the model prices carries `estimate` and the recorded error; a figure the
    table recorded on the GPU carries neither; a table miss is model-priced and says so."""
    from argus_env.measure.analytic import ModelBackend, TableBackend
    task = get_task(name)
    program = task.program("baseline")
    sizes = dict(task.shapes[0].sizes)
    m = ModelBackend("h200", estimator="analytic").measure(program, sizes, task)
    assert m.details["estimate"] is True and m.details["estimator"] == "analytic"
    assert m.details["expected_error"] == learned.expected_error(task, "h200")
    # priced with the learned correction: its own held-out error, its factor, the analytic
    # time it corrected
    from argus_env.measure.correction import correction_for
    c = ModelBackend("h200").measure(program, sizes, task)
    used = correction_for(task, "h200")
    assert c.details["estimate"] is True
    if used is not None:
        assert c.details["estimator"] == "corrected"
        assert c.details["expected_error"] == used.expected_error
        assert c.details["correction"]["analytic_ms"] == pytest.approx(m.ms)
        assert c.ms >= m.ms * c.details["correction"]["factor"] * (1 - 1e-9)
    other = ModelBackend("a100").measure(program, sizes, task)
    assert other.details["estimate"] is True
    assert other.details["expected_error"]["median_abs_log_error"] is None
    assert "not recorded" in other.details["expected_error"]["note"]
    # the table: a recorded row is a measurement, a miss an estimate
    table, hits = TableBackend("h200"), 0
    recorded = [s for s in learned.samples(task, limit=8)[0] if s.hash_matches][:3]
    pairs = [(c.sizes, program) for c in task.shapes] + \
        [(s.sizes, task.bind(task.space.program(s.config), s.sizes)) for s in recorded]
    for sizes, prog in pairs:
        t = table.measure(prog, dict(sizes), task)
        if t.details.get("table_miss"):
            assert t.details["estimate"] is True and t.details["expected_error"] is not None
        else:
            hits += 1
            assert "estimate" not in t.details and "expected_error" not in t.details
    assert hits, f"{name}: no recorded row is answered by the table"


def test_held_out_walk_figures_are_the_expected_error_once_recorded(tmp_path, monkeypatch):
    """The table fit sees only chosen programs; random walks timed on the GPU are what an
    agent meets. Once recorded they are the error every estimate carries, the fit's figures
    stay beside them, and a re-fit keeps them."""
    import json
    from types import SimpleNamespace
    from argus_env.measure import recorded
    anchors = tmp_path / "anchors.json"
    task = SimpleNamespace(anchors_file=str(anchors), name="t")
    fit = {"analytic": {"median_abs_log_error": 0.07, "p90_abs_log_error": 0.2,
                        "spearman_within_shape": 0.92, "programs": 300}, "created": "d0"}
    (tmp_path / "model_error_h100.json").write_text(json.dumps(fit))
    recorded._recorded.cache_clear()
    err = learned.expected_error(task, "h100")
    assert err["basis"] == "recorded rows" and err["median_abs_log_error"] == 0.07
    walks = {"median_abs_log_error": 0.5, "p90_abs_log_error": 0.88,
             "spearman_within_shape": 0.81, "model_priced_with_live": 90, "created": "d1"}
    assert recorded.record_heldout_error(task, "h100", walks) == tmp_path / "model_error_h100.json"
    err = learned.expected_error(task, "h100")
    assert err["basis"] == "held-out walks" and err["median_abs_log_error"] == 0.5
    assert err["programs"] == 90 and err["on_recorded_rows"]["median_abs_log_error"] == 0.07
    # nothing to hold the figures on a GPU with no fit: refused, not invented
    assert recorded.record_heldout_error(task, "a100", walks) is None
    # a re-fit of the tables keeps the walk figures
    import importlib.util
    from pathlib import Path
    script = Path(__file__).resolve().parents[2] / "benchmarks" / "fit_cost_model.py"
    spec = importlib.util.spec_from_file_location("fit_cost_model", script)
    fit_script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(fit_script)
    refit = {"analytic": {**fit["analytic"], "median_abs_log_error": 0.09}, "rows_used": 300}
    monkeypatch.setattr(learned, "evaluate", lambda task, hardware: dict(refit))
    monkeypatch.setattr(learned, "error_file", lambda task, hardware: tmp_path / f"model_error_{hardware}.json")
    assert fit_script.main(["--hardware", "h100", "--task", "gemm",
                            "--out", str(tmp_path / "summary.json")]) == 0
    recorded._recorded.cache_clear()
    err = learned.expected_error(task, "h100")
    assert err["basis"] == "held-out walks" and err["on_recorded_rows"]["median_abs_log_error"] == 0.09


@pytest.mark.parametrize("name", sorted(TASKS))
def test_h100_estimates_carry_the_error_measured_on_held_out_walks(name):
    """The committed H100 figures: random legal walks at the board's shapes, never in the
    tables, timed on an H100 (benchmarks/results/heldout_walks_h100/)."""
    from pathlib import Path
    err = learned.expected_error(get_task(name), "h100")
    assert err is not None and err["basis"] == "held-out walks"
    assert err["programs"] >= 50 and 0 < err["median_abs_log_error"] <= err["p90_abs_log_error"]
    data = __import__("json").loads(Path(get_task(name).anchors_file).with_name(
        "model_error_h100.json").read_text())
    root = Path(__file__).resolve().parents[2]
    assert (root / data["heldout_walks"]["evaluation"]).exists()
