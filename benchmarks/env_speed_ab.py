"""Two checkouts' env step times, run alternately on one machine.

Step times on a small shared machine move by tens of percent between runs (the load
average, other tenants), so a change is judged against its parent played in turns: for
each repetition and each task, `benchmarks/env_speed.py --tasks TASK` in checkout A, then
in checkout B. Writes every run's JSON and a summary (per task: uncached median and p90,
each phase's median, the load average before each run) to --out, and prints a table.

    git worktree add /tmp/before HEAD~1
    python benchmarks/env_speed_ab.py /tmp/before . --out benchmarks/results/env_speed_ab
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path


def run(checkout: Path, task: str, out: Path) -> dict:
    subprocess.run([sys.executable, "benchmarks/env_speed.py", "--tasks", task,
                    "--out", str(out.resolve())], cwd=checkout, check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    data = json.loads(out.read_text())
    t = data["tasks"][task]
    return {"commit": data["provenance"].get("commit"),
            "load_average_before": data["provenance"].get("load_average_before"),
            "uncached_median_ms": t["uncached_median_ms"], "uncached_p90_ms": t["uncached_p90_ms"],
            "phase_median_ms": t["uncached_phase_median_ms"],
            "outcomes": t["uncached_outcomes"], "file": out.name}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("a", type=Path, help="checkout A (the baseline)")
    ap.add_argument("b", type=Path, help="checkout B (the change)")
    ap.add_argument("--tasks", nargs="*", default=["gemm", "attention", "moe", "rmsnorm"])
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    summary: dict = {"a": str(args.a), "b": str(args.b), "tasks": {}}
    for rep in range(1, args.reps + 1):
        for task in args.tasks:
            for side, checkout in (("a", args.a), ("b", args.b)):
                got = run(checkout, task, args.out / f"{side}_{task}_{rep}.json")
                summary["tasks"].setdefault(task, {}).setdefault(side, []).append(got)
                print(f"rep {rep} {task:9s} {side}: median {got['uncached_median_ms']:7.0f} ms "
                      f"p90 {got['uncached_p90_ms']:7.0f} ms", flush=True)
    (args.out / "summary.json").write_text(json.dumps(summary, indent=1))
    print("\ntask       A median (ms)        B median (ms)        A p90          B p90")
    for task, sides in summary["tasks"].items():
        cell = {s: [round(r["uncached_median_ms"]) for r in rs] for s, rs in sides.items()}
        p90 = {s: [round(r["uncached_p90_ms"]) for r in rs] for s, rs in sides.items()}
        print(f"{task:10s} {str(cell['a']):20s} {str(cell['b']):20s} {str(p90['a']):14s} "
              f"{str(p90['b'])}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
