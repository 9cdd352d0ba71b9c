"""The attention cost model, calibrated on the recorded H200 table."""

import csv
import json
import math
import statistics

from argus_env.measure.backends import make_backend
from argus_env.task import get_task
from argus_env.tasks.attention.model import CALIBRATION, Params
from argus_env.tasks.attention.space import BASELINE, EXPERT, table_configurations

TASK = get_task("attention")


def _rows():
    configs = {c.summary(): c for c in table_configurations()}
    shapes = {c.name: c.sizes for c in TASK.shape_cases("all")}
    rows = csv.DictReader(open(TASK.anchors_file.with_name("table_h200.csv")))
    return [(shapes[r["shape"]], configs[r["summary"]], float(r["tflops"]), r["shape"])
            for r in rows if r["ok"] == "True" and r["summary"] in configs]


def test_calibrated_constants_load_and_stay_in_range():
    data = json.loads(CALIBRATION.read_text())
    p = Params.load()
    assert p.mma_efficiency == data["params"]["mma_efficiency"]
    assert 0.3 <= p.mma_efficiency <= 1.0 and 1.0 <= p.exp_penalty <= 2.0


def test_model_predicts_the_table_within_a_few_percent_and_finds_the_best():
    backend = make_backend("model")
    errors, by_shape = [], {}
    for sizes, config, measured, shape in _rows():
        m = backend.measure(TASK.bind(TASK.space.program(config), sizes), sizes, TASK)
        assert m.ok and m.tflops <= backend.profile.bf16_tflops_achievable
        errors.append(abs(math.log(m.tflops / measured)))
        by_shape.setdefault(shape, []).append((m.tflops, measured))
    assert statistics.median(errors) < 0.12, statistics.median(errors)
    top1 = sum(max(v)[1] >= 0.9 * max(x for _, x in v) for v in by_shape.values())
    assert top1 >= 8, f"model's top-1 within 10% of the best at {top1}/{len(by_shape)} shapes"


def test_expert_predicted_faster_than_baseline_everywhere():
    backend = make_backend("model")
    for case in TASK.shape_cases("all"):
        s = case.sizes
        fast, slow = (backend.measure(TASK.bind(TASK.space.program(c), s), s, TASK).tflops
                      for c in (EXPERT, BASELINE))
        assert fast > slow, (case.name, fast, slow)
