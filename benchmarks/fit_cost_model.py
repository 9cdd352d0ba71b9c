"""How wrong each task's cost model is, measured against its GPU tables.

For every registered task with recorded tables (`tasks/<task>/table_<gpu>*.csv`): the
analytic model's time for every program that ran, against the measured time; then a
learned correction (scikit-learn gradient boosting on the configuration, the sizes and the
model's estimate) on programs and on shapes the fit never saw (grouped 5-fold). Writes
`tasks/<task>/model_error_<gpu>.json` (what every model-priced measurement carries as its
expected error, `argus_env.measure.learned.expected_error`) and one summary for all tasks.
CPU only; about two minutes on two cores.

    python benchmarks/fit_cost_model.py [--hardware h200] [--task gemm ...] [--out FILE]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

DEFAULT_OUT = ROOT / "benchmarks" / "results" / "cost_model_error.json"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hardware", default="h200")
    ap.add_argument("--task", action="append", help="task name (repeatable; default: all)")
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = ap.parse_args(argv)

    from argus_env.envs.record import run_provenance
    from argus_env.measure.learned import error_file, evaluate
    from argus_env.registry import TASKS
    from argus_env.task import get_task

    names = args.task or list(TASKS)
    provenance = run_provenance(ROOT)
    results = {}
    for name in names:
        task = get_task(name)
        t0 = time.perf_counter()
        r = evaluate(task, args.hardware)
        r["seconds"] = round(time.perf_counter() - t0, 1)
        r["created"] = provenance.get("date")
        r["provenance"] = provenance
        results[name] = r
        path = error_file(task, args.hardware)
        if path is not None and "analytic" in r:
            if path.exists():  # the held-out walk figures are another run's: kept
                kept = json.loads(path.read_text()).get("heldout_walks")
                if kept is not None:
                    r["heldout_walks"] = kept
            path.write_text(json.dumps(r, indent=1, sort_keys=True) + "\n")
        print(f"{name}: {r['rows_used']} rows in {r['seconds']} s", flush=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"hardware": args.hardware, "provenance": provenance,
                                    "tasks": results}, indent=1, sort_keys=True) + "\n")

    def cell(d, key):
        v = (d or {}).get(key)
        return "   -" if v is None else f"{v:5.2f}"
    print(f"\n{'task':10s} {'rows':>5s}  {'analytic':^19s}  {'corrected, new programs':^23s}  "
          f"{'corrected, new shapes':^21s}")
    print(f"{'':10s} {'':5s}  {'rho':>5s} {'med':>5s} {'p90':>5s}   {'rho':>5s} {'med':>5s} "
          f"{'p90':>5s}       {'rho':>5s} {'med':>5s} {'p90':>5s}")
    for name, r in results.items():
        a, p, s = (r.get(k) for k in ("analytic", "corrected_heldout_programs",
                                      "corrected_heldout_shapes"))
        print(f"{name:10s} {r['rows_used']:5d}  " + " ".join(cell(a, k) for k in (
            "spearman_within_shape", "median_abs_log_error", "p90_abs_log_error")) + "   " +
            " ".join(cell(p, k) for k in ("spearman_within_shape", "median_abs_log_error",
                                          "p90_abs_log_error")) + "       " +
            " ".join(cell(s, k) for k in ("spearman_within_shape", "median_abs_log_error",
                                          "p90_abs_log_error")))
    print("rho: within-shape Spearman; med/p90: |log(predicted/measured)|")
    return 0


if __name__ == "__main__":
    sys.exit(main())
