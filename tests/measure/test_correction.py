"""The learned correction the cost models price with: exported trees that predict exactly
what scikit-learn predicts, committed fits whose held-out evaluation decides whether they
are used, prices no faster than the roofline, and environments and board lines that say
which estimator priced them."""

from __future__ import annotations

import json
import math
import random

import pytest

from argus_env.measure import correction as C
from argus_env.measure.analytic import ModelBackend
from argus_env.measure.learned import decide
from argus_env.registry import TASKS
from argus_env.task import get_task


def _fitted(seed: int = 0):
    from sklearn.ensemble import GradientBoostingRegressor

    from argus_env.measure.learned import LEARNER
    rng = random.Random(seed)
    # integer-valued and boolean inputs, as the executed structure has, plus a log time
    X = [[rng.choice([16, 32, 64, 128, 256]), rng.choice([0.0, 1.0]), rng.uniform(-3, 3)]
         for _ in range(300)]
    y = [0.3 * math.log2(a) - 0.5 * b + 0.2 * math.sin(3 * c) for a, b, c in X]
    return GradientBoostingRegressor(random_state=seed, **LEARNER).fit(X, y), X


def test_an_exported_correction_predicts_exactly_what_scikit_learn_predicts():
    model, X = _fitted()
    names = ["block", "flag", "log_model_ms"]
    trees = C.TreeCorrection(C.export(model, names))
    rng = random.Random(1)
    probes = X[:50] + [[rng.choice([8, 48, 100, 512]), rng.random(), rng.uniform(-5, 5)]
                       for _ in range(200)]
    want = model.predict(probes)
    for x, w in zip(probes, want):
        got = trees.log_ratio(dict(zip(names, x)))
        assert got == pytest.approx(float(w), abs=1e-9), x
    # the JSON round trip changes nothing
    again = C.TreeCorrection(json.loads(json.dumps(C.export(model, names))))
    assert again.log_ratio(dict(zip(names, probes[7]))) == trees.log_ratio(
        dict(zip(names, probes[7])))


def test_a_correction_stays_within_the_range_its_fit_saw():
    model, _ = _fitted()
    t = C.TreeCorrection(C.export(model, ["block", "flag", "log_model_ms"],
                                  log_ratio_range=[-0.01, 0.01]))
    for x in ([16, 0, 0], [256, 1, 2], [128, 0, -2]):
        assert -0.01 <= t.log_ratio(dict(zip(["block", "flag", "log_model_ms"], x))) <= 0.01


def test_a_file_of_another_format_is_refused():
    with pytest.raises(ValueError, match="format"):
        C.TreeCorrection({"format": 99, "features": [], "init": 0, "learning_rate": 1,
                          "trees": []})


def test_the_structure_reads_what_executes_never_names():
    from dataclasses import dataclass

    @dataclass
    class F:
        task: str = "gemm"
        block_m: int = 128
        persistent: bool = True
        mma: str = "wgmma"
        tma_pitches: tuple = (("a", 128),)

    s = C.structure(F(), {"M": 1024, "N": 1, "skew": "zipf"}, 0.5)
    assert s["block_m"] == 128 and s["persistent"] == 1.0 and s["log2_M"] == 10.0
    assert s["log_model_ms"] == pytest.approx(math.log(0.5))
    assert "task" not in s and "tma_pitches" not in s and "log2_skew" not in s


@pytest.mark.parametrize("hardware", ["h100", "h200"])
@pytest.mark.parametrize("name", sorted(TASKS))
def test_every_task_has_a_committed_correction_whose_evaluation_decided_its_use(name, hardware):
    task = get_task(name)
    c = C.load_correction(task, hardware)
    assert c is not None, f"no correction for {name} on {hardware}: run " \
        f"benchmarks/fit_cost_model.py --hardware {hardware} --export"
    d = c.data
    assert d["task"] == name and d["hardware"] == hardware and d["rows"] >= 10
    ev = d["evaluation"]
    # the recorded decision is the rule applied to the recorded evaluation
    assert decide(ev["analytic"], ev["corrected"])[0] == c.use
    err = c.expected_error
    assert err["basis"] == ev["basis"] and err["basis"] in ("held-out walks", "held-out shapes")
    assert err["median_abs_log_error"] == ev["corrected"]["median_abs_log_error"]
    assert d["provenance"]["date"] and d["trees"]
    if hardware == "h100":   # random legal walks were timed there: the harder test set
        assert err["basis"] == "held-out walks"


def test_the_decision_rule_refuses_a_correction_that_ranks_worse_or_errs_more():
    a = {"median_abs_log_error": 0.2, "spearman_within_shape": 0.8}
    assert decide(a, {"median_abs_log_error": 0.1, "spearman_within_shape": 0.78})[0]
    assert not decide(a, {"median_abs_log_error": 0.25, "spearman_within_shape": 0.9})[0]
    assert not decide(a, {"median_abs_log_error": 0.1, "spearman_within_shape": 0.7})[0]
    assert not decide(a, {"median_abs_log_error": None, "spearman_within_shape": None})[0]


def _constant(log_ratio: float, use: bool = True) -> C.TreeCorrection:
    """A correction of one leaf: every program's time times exp(log_ratio)."""
    return C.TreeCorrection({"format": C.FORMAT, "features": ["log_model_ms"], "init": 0.0,
                             "learning_rate": 1.0, "use": use,
                             "log_ratio_range": [-50, 50],
                             "trees": [{"feature": [-2], "threshold": [-2.0], "left": [-1],
                                        "right": [-1], "value": [log_ratio]}],
                             "expected_error": {"median_abs_log_error": 0.1,
                                                "basis": "held-out shapes"}})


@pytest.mark.parametrize("name", sorted(TASKS))
def test_corrected_prices_are_the_analytic_times_the_factor_and_never_beat_the_roofline(
        name, monkeypatch):
    task = get_task(name)
    program = task.program("expert")
    sizes = dict(task.shapes[0].sizes)
    analytic = ModelBackend("h200", estimator="analytic").measure(program, sizes, task)
    assert analytic.ok
    monkeypatch.setattr("argus_env.measure.analytic.correction_for",
                        lambda task, hw, fit=None: _constant(math.log(1.5)))
    slower = ModelBackend("h200").measure(program, sizes, task)
    assert slower.ms == pytest.approx(analytic.ms * 1.5)
    assert slower.details["correction"]["factor"] == pytest.approx(1.5)
    assert slower.details["expected_error"]["basis"] == "held-out shapes"
    # a correction that would make it 1e6 times faster stops at the roofline
    monkeypatch.setattr("argus_env.measure.analytic.correction_for",
                        lambda task, hw, fit=None: _constant(math.log(1e-6)))
    fast = ModelBackend("h200").measure(program, sizes, task)
    assert fast.ok and fast.tflops <= fast.roofline_tflops * (1 + 1e-9)
    assert fast.ms > analytic.ms * 1e-6


def test_an_unused_correction_leaves_the_analytic_price(monkeypatch):
    task = get_task("gemm")
    program, sizes = task.program("baseline"), dict(task.shapes[0].sizes)
    analytic = ModelBackend("h200", estimator="analytic").measure(program, sizes, task)
    monkeypatch.setattr("argus_env.measure.correction.load_correction",
                        lambda task, hw: _constant(math.log(3.0), use=False))
    m = ModelBackend("h200").measure(program, sizes, task)
    assert m.ms == analytic.ms and m.details["estimator"] == "analytic"


def test_an_environment_names_its_estimator_and_refuses_an_unknown_one():
    import gymnasium as gym

    import argus_env  # noqa: F401
    with pytest.raises(ValueError, match="estimator"):
        gym.make("Argus-GEMM-v0", estimator="oracle")
    for est in ("analytic", "corrected"):
        env = gym.make("Argus-GEMM-v0", measure="model", estimator=est, correctness="none")
        _, info = env.reset(seed=0, options={"shape": "ragged-1000"})
        assert info["measurement"]["details"]["estimator"] == est
        assert env.unwrapped.env_state()["kwargs"]["estimator"] == est
        env.close()


def test_a_board_line_made_before_the_correction_replays_with_the_analytic_model():
    from argus_env.bench import results as R
    from argus_env.bench.schema import check_line
    line = {"measure": "table"}
    assert R.line_setting(line, "estimator") == "analytic"
    assert R.line_setting({"measure": "gpu"}, "estimator") is None
    assert R.line_setting({"measure": "model", "estimator": "corrected"}, "estimator") == \
        "corrected"
    # the field is optional, and checked where present
    from pathlib import Path
    text = Path("benchmarks/results/leaderboard-h100/leaderboard-h100.jsonl").read_text()
    first = json.loads(text.splitlines()[0])
    assert first["estimator"] == "corrected" and not check_line(first)
    first.pop("estimator")             # a line written before the field
    assert not check_line(first)
    assert not check_line({**first, "estimator": "corrected"})
    assert check_line({**first, "estimator": "guess"})


def test_a_refit_changes_no_price_a_record_pinned_to_its_fit(tmp_path, monkeypatch):
    """A record names the fit it was priced with (`fit_id`); a refit keeps the old fit in
    `corrections/` (`archive`), the current price moves and the pinned one does not; a fit
    that is not kept, or a fit with the analytic estimator, is refused."""
    task = get_task("gemm")
    real = C.correction_path(task, "h100")
    monkeypatch.setattr(C, "correction_path", lambda task, hw: tmp_path / f"correction_{hw}.json")
    monkeypatch.setattr(C, "archive_path", lambda task, hw, fit:
                        tmp_path / "corrections" / f"correction_{hw}_{fit}.json")
    current = tmp_path / "correction_h100.json"
    current.write_bytes(real.read_bytes())
    program, sizes = task.program("baseline"), {"M": 3000, "N": 5000, "K": 2000}
    before = ModelBackend("h100").measure(program, sizes, task)
    fit = ModelBackend("h100").fit_of(task)
    assert fit == C.fit_id(current) and before.details["correction"]["factor"] > 0
    assert C.archive(task, "h100").exists()
    data = json.loads(current.read_text())
    data["init"] += 0.3
    data["log_ratio_range"] = [-50.0, 50.0]
    current.write_text(json.dumps(data))                       # the refit
    after = ModelBackend("h100").measure(program, sizes, task)
    assert ModelBackend("h100").fit_of(task) != fit
    assert after.ms == pytest.approx(before.ms * math.exp(0.3), rel=1e-6)
    pinned = ModelBackend("h100", fit=fit)
    assert pinned.measure(program, sizes, task).ms == before.ms and pinned.fit_of(task) == fit
    with pytest.raises(ValueError, match="neither"):
        ModelBackend("h100", fit="0" * 12).measure(program, sizes, task)
    with pytest.raises(ValueError, match="12 hex"):
        ModelBackend("h100", fit="latest").measure(program, sizes, task)
    with pytest.raises(ValueError, match="estimator='corrected'"):
        ModelBackend("h100", "analytic", fit=fit)


def test_an_environment_prices_with_the_fit_it_is_given():
    import gymnasium as gym

    import argus_env  # noqa: F401
    from argus_env.bench import results as R
    env = gym.make("Argus-GEMM-v0", measure="table", hardware="h100", correctness="none")
    env.reset(seed=0, options={"shape": "ragged-3000"})
    fit = R.content_hashes(env)["correction"]
    assert fit == C.fit_id(C.correction_path(get_task("gemm"), "h100"))
    env.close()
    pinned = gym.make("Argus-GEMM-v0", measure="table", hardware="h100", correctness="none",
                      correction_fit=fit)
    assert pinned.unwrapped.evaluator.backend.fit == fit
    pinned.close()
    with pytest.raises(ValueError, match="estimator='corrected'"):
        gym.make("Argus-GEMM-v0", measure="model", estimator="analytic", correction_fit=fit)
