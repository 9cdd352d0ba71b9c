"""Two cost-model corrections on the same held-out programs: the fits a git revision held
(`tasks/<task>/correction_<gpu>.json` there) against the current ones.

The test set is the held-out random walks of a `record_programs.py` folder timed on that
GPU (`fit_cost_model.walk_samples`: those the tables lack today and the compile verdict
accepts), so both fits are scored on one set even after the tables grew. CPU only.

    python benchmarks/compare_fits.py --hardware h100 --against 9bd5ddd^ \
        --walks benchmarks/results/heldout_walks_h100 \
        --out benchmarks/results/compare_fits_h100_2026-12-06.json
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hardware", default="h100")
    ap.add_argument("--against", required=True, help="git revision holding the other fits")
    ap.add_argument("--walks", type=Path, required=True)
    ap.add_argument("--task", action="append", help="task name (default: every task)")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args(argv)
    import fit_cost_model as F
    from argus_env.envs.record import run_provenance
    import hashlib
    from argus_env.measure.correction import TreeCorrection, correction_path, fit_id
    from argus_env.measure.learned import scores
    from argus_env.registry import TASKS
    from argus_env.task import get_task
    out = {}
    for name in args.task or sorted(TASKS):
        task = get_task(name)
        path = correction_path(task, args.hardware)
        if path is None or not path.exists():
            continue
        rel = path.resolve().relative_to(ROOT)
        old = subprocess.run(["git", "show", f"{args.against}:{rel}"], cwd=ROOT,
                             capture_output=True, check=True).stdout
        fits = {"then": (TreeCorrection(json.loads(old)), hashlib.sha256(old).hexdigest()[:12]),
                "now": (TreeCorrection(json.loads(path.read_text())), fit_id(path))}
        test = [s for s in F.walk_samples(args.walks, task, args.hardware) if s.model_ok]
        row = {"programs": len(test)}
        for which, (fit, ident) in fits.items():
            sc = scores(test, [s.model_ms * fit.factor(s.structure) for s in test])
            row[which] = {"fit": ident, "spearman_within_shape": sc["spearman_within_shape"],
                          "median_abs_log_error": sc["median_abs_log_error"],
                          "p90_abs_log_error": sc["p90_abs_log_error"]}
            print(f"{name:10} {which:5} fit {ident}  Spearman "
                  f"{sc['spearman_within_shape']:.3f}  median {sc['median_abs_log_error']:.3f}"
                  f"  ({len(test)} programs)")
        out[name] = row
    if args.out:
        args.out.write_text(json.dumps({"hardware": args.hardware, "against": args.against,
                                        "walks": str(args.walks), "tasks": out,
                                        "provenance": run_provenance(ROOT)}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
