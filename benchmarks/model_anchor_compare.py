"""A task's expert priced by the cost model at held-out shapes against the library's figure
two ways (`model_anchor`): 0.9 x the roofline ("roofline", how records made before the
option were priced) and the library as the GPU's tables timed it at the shape ("measured"),
beside the expert's own table row there (a GPU measurement), on one hardware profile.

    python benchmarks/model_anchor_compare.py --hardware h100 \
        --out benchmarks/results/model_anchor_compare_h100_2026-12-07.json
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

#: (task, shape): the held-out shapes where the roofline anchor was furthest off on the
#: H100 board (`benchmarks/results/heldout-h100/live_vs_best_known.json`)
CASES = (("rmsnorm", "llama405b-decode-1"), ("rmsnorm", "deepseek-prefill-4096"),
         ("rmsnorm", "qwen3-prefill-65536"), ("moe", "qwen3-decode-256-balanced"))


def main(argv=None) -> int:
    from argus_env.envs.record import run_provenance
    from argus_env.measure.analytic import ModelBackend, TableBackend
    from argus_env.task import get_task
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hardware", default="h100")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args(argv)
    rows = []
    print(f"{'task':8s} {'shape':28s} {'roofline':>9s} {'measured':>9s} {'table':>7s} by")
    for task_name, shape in CASES:
        task = get_task(task_name)
        sizes = next(c for c in task.shapes if c.name == shape).sizes
        program = task.bind(task.program("expert"), sizes)
        old = ModelBackend(args.hardware, model_anchor="roofline").measure(program, sizes, task)
        new = ModelBackend(args.hardware).measure(program, sizes, task)
        table = TableBackend(args.hardware).measure(program, sizes, task)
        rows.append({"task": task_name, "shape": shape, "roofline": old.frac_anchor,
                     "measured": new.frac_anchor, "measured_anchor_from": new.details["anchor"],
                     "table": table.frac_anchor, "table_backend": table.backend})
        print(f"{task_name:8s} {shape:28s} {old.frac_anchor:9.3f} {new.frac_anchor:9.3f} "
              f"{table.frac_anchor:7.3f} {table.backend}")
    if args.out:
        args.out.write_text(json.dumps({"hardware": args.hardware,
                                        "provenance": run_provenance(ROOT),
                                        "command": "python benchmarks/model_anchor_compare.py "
                                                   + " ".join(sys.argv[1:] if argv is None
                                                              else argv),
                                        "rows": rows}, indent=1) + "\n")
        print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
