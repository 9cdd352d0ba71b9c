"""Fit the attention cost model's constants to the recorded H200 table and report rank
correlation per shape (Spearman) and whether the model's top-1 configuration is within
10% of the table's best.

    python benchmarks/calibrate_attention_model.py   # writes configs/calibration/attention_h200.json
"""

from __future__ import annotations

import csv
import datetime
import json
import math
import sys
from dataclasses import asdict, fields, replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

FREE = ("mma_efficiency", "softmax_ns_per_kelem", "exp_penalty", "overlap", "step_overhead_ns",
        "tma_gain", "stage_gain", "small_block_penalty")
#: physically meaningful ranges: the fit may not trade one absurd constant for another
BOUNDS = ((0.3, 1.0), (0.05, 20.0), (1.0, 2.0), (0.0, 1.0), (0.0, 2000.0), (0.5, 1.2),
          (0.7, 1.1), (1.0, 3.0))


def load_rows():
    from argus_env.task import get_task
    from argus_env.tasks.attention.model import features
    from argus_env.tasks.attention.space import table_configurations
    task = get_task("attention")
    configs = {c.summary(): c for c in table_configurations()}
    shapes = {c.name: c.sizes for c in task.shape_cases("all")}
    rows = []
    for r in csv.DictReader(Path(task.anchors_file).with_name("table_h200.csv").open()):
        if r["ok"] == "True" and r["summary"] in configs:
            sizes = shapes[r["shape"]]
            program = task.bind(task.space.program(configs[r["summary"]]), sizes)
            rows.append((r["shape"], features(program), sizes, float(r["tflops"])))
    return rows


def predict(rows, params, profile):
    from argus_env.tasks.attention.model import estimate_features
    return [estimate_features(f, s, profile, params)["tflops"] for _, f, s, _ in rows]


def spearman(a, b) -> float:
    def ranks(x):
        order = sorted(range(len(x)), key=lambda i: x[i])
        r = [0.0] * len(x)
        for rank, i in enumerate(order):
            r[i] = rank
        return r
    ra, rb = ranks(a), ranks(b)
    n = len(a)
    ma, mb = sum(ra) / n, sum(rb) / n
    cov = sum((x - ma) * (y - mb) for x, y in zip(ra, rb))
    var = math.sqrt(sum((x - ma) ** 2 for x in ra) * sum((y - mb) ** 2 for y in rb))
    return cov / var if var else 0.0


def report(rows, pred):
    out = {}
    for shape in sorted({r[0] for r in rows}):
        idx = [i for i, r in enumerate(rows) if r[0] == shape]
        meas, mod = [rows[i][3] for i in idx], [pred[i] for i in idx]
        top = max(range(len(idx)), key=lambda j: mod[j])
        out[shape] = {"spearman": spearman(meas, mod), "top1_share_of_best": meas[top] / max(meas),
                      "configs": len(idx)}
    return out


def main() -> int:
    from scipy.optimize import minimize

    from argus_env.measure.model import load_profile
    from argus_env.tasks.attention.model import CALIBRATION, Params
    profile = load_profile("h200")
    rows = load_rows()
    base = Params()

    def loss(x):
        params = replace(base, **dict(zip(FREE, x)))
        pred = predict(rows, params, profile)
        return sum((math.log(p) - math.log(r[3])) ** 2 for p, r in zip(pred, rows)) / len(rows)

    x0 = [getattr(base, k) for k in FREE]
    before = loss(x0)
    res = minimize(loss, x0, method="Powell", bounds=BOUNDS, options={"maxiter": 20000, "xtol": 1e-4})
    fitted = replace(base, **dict(zip(FREE, res.x)))
    pred = predict(rows, fitted, profile)
    per_shape = report(rows, pred)
    out = {"params": {k: getattr(fitted, k) for k in (f.name for f in fields(Params))},
           "provenance": {"table": "tasks/attention/table_h200.csv", "rows": len(rows),
                          "date": datetime.date.today().isoformat(),
                          "mse_log_before": before, "mse_log_after": res.fun},
           "per_shape": per_shape}
    CALIBRATION.parent.mkdir(parents=True, exist_ok=True)
    CALIBRATION.write_text(json.dumps(out, indent=1))
    print(f"mean squared log error: {before:.4f} -> {res.fun:.4f} over {len(rows)} rows")
    print(f"{'shape':<32}{'spearman':>9}{'top-1/best':>11}")
    for shape, m in per_shape.items():
        print(f"{shape:<32}{m['spearman']:>9.3f}{m['top1_share_of_best']:>11.3f}")
    sp = sorted(m["spearman"] for m in per_shape.values())
    print(f"median spearman {sp[len(sp) // 2]:.3f}; top-1 within 10%: "
          f"{sum(m['top1_share_of_best'] >= 0.9 for m in per_shape.values())}/{len(per_shape)}")
    print(json.dumps(asdict(fitted)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
