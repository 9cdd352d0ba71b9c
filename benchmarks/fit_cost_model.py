"""How wrong each task's cost model is, measured against its GPU tables.

For every registered task with recorded tables (`tasks/<task>/table_<gpu>*.csv`): the
analytic model's time for every program that ran, against the measured time; then a
learned correction (scikit-learn gradient boosting on the configuration, the sizes and the
model's estimate) on programs and on shapes the fit never saw (grouped 5-fold). Writes
`tasks/<task>/model_error_<gpu>.json` (what every model-priced measurement carries as its
expected error, `argus_env.measure.learned.expected_error`) and one summary for all tasks.
CPU only; about two minutes on two cores.

`--export` also fits the correction on every row and writes it for pricing,
`tasks/<task>/correction_<gpu>.json` (`argus_env/measure/correction.py`), with the
held-out evaluation that decides whether the environments price with it: on the held-out
random legal walks of a `record_programs.py` folder timed on that GPU (`--walks`; programs
the tables never held), else on shapes the fit never saw.

    python benchmarks/fit_cost_model.py [--hardware h200] [--task gemm ...] [--out FILE]
    python benchmarks/fit_cost_model.py --hardware h100 --export \
        --walks benchmarks/results/heldout_walks_h100
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


def walk_samples(folder: Path, task, hardware: str) -> list:
    """The held-out walks of `folder` that the environment prices with the model today (the
    tables lack them and the compile verdict accepts them) and that ran on the GPU, as
    `Sample`s with their live time."""
    import math
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import record_programs as rp
    rp.namespace()
    from argus_env.dsl.program import Program
    from argus_env.measure.analytic import ModelBackend, TableBackend
    from argus_env.measure.learned import Sample
    evaluation = json.loads((folder / "evaluation.json").read_text())
    if evaluation.get("hardware", hardware) != hardware:
        raise SystemExit(f"{folder}: its walks were timed on {evaluation.get('hardware')}, "
                         f"not {hardware}")
    rows = {(r["task"], r["shape"], r["program_hash"]): r for r in evaluation["rows"]}
    plan = rp.read_plan(folder / "plan.jsonl")
    model, table = ModelBackend(hardware, estimator="analytic"), TableBackend(hardware)
    out = []
    for it in plan["items"]:
        r = rows.get((it.task, it.shape, it.program_hash))
        if it.task != task.name or r is None or not r.get("live_tflops") or \
                r.get("legality") == "refused":
            continue
        program = Program.from_text(it.program)
        if table.measure(program, it.sizes, task).backend == "table":
            continue   # recorded since: priced from the tables, not by the model
        m = model.measure(program, it.sizes, task)
        inputs = model.correction_inputs(program, it.sizes, task) if m.ok else None
        if inputs is None:
            continue
        live_ms = task.flops(it.sizes) / (r["live_tflops"] * 1e12) * 1e3
        out.append(Sample(it.shape, dict(it.sizes), None, it.program_hash, True, live_ms,
                          float(m.ms), True, inputs))
    return out


def export_correction(task, hardware: str, walks: Path | None, provenance: dict) -> dict:
    from argus_env.measure.correction import archive, correction_path
    from argus_env.measure.learned import fit_export
    heldout = walk_samples(walks, task, hardware) if walks is not None else None
    data = fit_export(task, hardware, heldout or None, created=provenance.get("date"),
                      provenance=provenance,
                      walks=None if walks is None else (
                          str(walks.resolve().relative_to(ROOT))
                          if walks.resolve().is_relative_to(ROOT) else str(walks)))
    path = correction_path(task, hardware)
    archive(task, hardware)   # the fit being replaced: records priced with it still replay
    path.write_text(json.dumps(data, sort_keys=True) + "\n")
    archive(task, hardware)   # and the new one, from the start
    return data


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hardware", default="h200")
    ap.add_argument("--task", action="append", help="task name (repeatable; default: all)")
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT)
    ap.add_argument("--export", action="store_true",
                    help="also write tasks/<task>/correction_<gpu>.json for pricing")
    ap.add_argument("--walks", type=Path, default=None,
                    help="a record_programs.py folder whose held-out walks were timed on "
                         "this GPU (plan.jsonl, evaluation.json): the correction's test set")
    args = ap.parse_args(argv)
    if args.walks is not None and not (args.walks / "evaluation.json").exists():
        raise SystemExit(f"--walks {args.walks}: no evaluation.json there (run "
                         f"record_programs.py evaluate --out {args.walks} --to "
                         f"{args.walks}/evaluation.json first)")

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
        if args.export and "analytic" in r:
            exported = export_correction(task, args.hardware, args.walks, provenance)
            r["correction"] = {k: exported[k] for k in ("use", "decision", "expected_error",
                                                        "evaluation")}
            print(f"  correction: {'used' if exported['use'] else 'NOT used'} "
                  f"({exported['decision']}; basis: {exported['expected_error']['basis']})",
                  flush=True)
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
