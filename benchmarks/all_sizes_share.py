"""The share of each task's programs proven for all sizes at once (`check_for_all_sizes`):
its DSL programs and a seeded sample of its catalog configurations (structurally valid,
rendered at the task's first shape), each either proven for every value of the task's
varying sizes in [1, 2**30], or checked size by size, with the reason (outside the
fragment, tests its sizes, an undecided query, a violation at some size).

    python benchmarks/all_sizes_share.py --out benchmarks/results/all_sizes_share.json
    python benchmarks/all_sizes_share.py --tasks gemm --sample 50
"""

from __future__ import annotations

import argparse
import collections
import json
import random
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def reason_kind(why: str, report) -> str:
    if report is not None:
        return "proven" if report.ok else "violation at some size"
    for prefix, kind in (("the task proves", "task has no varying sizes"),
                         ("the program tests its sizes", "tests its sizes"),
                         ("not in the fragment", "outside the fragment"),
                         ("undecided", "undecided")):
        if why.startswith(prefix):
            return kind
    return "other"


def run_task(name: str, sample: int, seed: int) -> dict:
    from argus_env.check import check_for_all_sizes, check_program
    from argus_env.task import get_task
    task = get_task(name)
    sizes = dict(task.shape_cases("train")[0].sizes)
    items = [(f"program:{w}", task.program(w)) for w in task.programs]
    space = task.space
    ctx = {"sizes": sizes}
    configs = [c for c in space.configurations() if space.structure_reason(c, ctx) is None]
    rng = random.Random(seed)
    picked = rng.sample(configs, min(sample, len(configs)))
    items += [(f"config:{c.summary() if hasattr(c, 'summary') else c}", space.program(c))
              for c in picked]
    rows = []
    for label, prog in items:
        bound = task.bind(prog, sizes)
        try:  # a configuration halfway through a primitive step is no program to prove
            valid = check_program(bound, sizes, task).ok
        except Exception:  # noqa: BLE001
            valid = False
        t0 = time.perf_counter()
        try:
            report, why = check_for_all_sizes(bound, sizes, task)
        except Exception as e:  # noqa: BLE001 - recorded, not fatal: a share is a count
            report, why = None, f"not in the fragment: {type(e).__name__}: {e}"
        rows.append({"item": label, "proven_at_the_shape": valid,
                     "kind": reason_kind(why, report),
                     "why": why[:200], "ms": round((time.perf_counter() - t0) * 1000, 1)})
        print(json.dumps({"task": name, **rows[-1]}), flush=True)
    kinds = collections.Counter(r["kind"] for r in rows if r["proven_at_the_shape"])
    programs = [r for r in rows if r["item"].startswith("program:")]
    configs_rows = [r for r in rows if r["item"].startswith("config:") and r["proven_at_the_shape"]]
    return {"task": name, "sizes": sizes, "varying": list(getattr(task, "for_all_sizes", ())),
            "structurally_valid_configurations": len(configs), "sampled": len(picked),
            "programs_proven": f"{sum(r['kind'] == 'proven' for r in programs)}/{len(programs)}",
            "configurations_proven": f"{sum(r['kind'] == 'proven' for r in configs_rows)}/"
                                     f"{len(configs_rows)}",
            "sampled_not_proven_at_the_shape": sum(not r["proven_at_the_shape"] for r in rows),
            "kinds": dict(kinds), "rows": rows}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tasks", default="gemm,attention,rmsnorm,moe")
    ap.add_argument("--sample", type=int, default=100, help="catalog configurations per task")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", type=Path)
    args = ap.parse_args(argv)
    from argus_env.envs.record import run_provenance
    tasks = [run_task(t, args.sample, args.seed) for t in args.tasks.split(",")]
    result = {"provenance": {**run_provenance(ROOT), "sample": args.sample, "seed": args.seed},
              "tasks": tasks}
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(result, indent=1))
    print("\nconfigurations: of those sampled that are proven at the shape, how many for all sizes")
    print(f"{'task':<10}{'programs':>10}{'configurations':>16}  reasons (programs proven at the shape)")
    for t in tasks:
        print(f"{t['task']:<10}{t['programs_proven']:>10}{t['configurations_proven']:>16}  {t['kinds']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
