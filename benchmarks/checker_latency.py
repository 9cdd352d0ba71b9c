"""Latency of the symbolic invariant checker on the GEMM task's programs.

For each program and problem size, the median wall time of a full check (a fresh
checker each time, no cache) over several repeats. The proof never enumerates the
problem, so the time should not grow with the sizes: the script reports the ratio
between 16384^3 and 1024^3 for each program.

    python benchmarks/checker_latency.py --out benchmarks/results/checker_latency.json
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

SIZES = [(1024, 1024, 1024), (4096, 4096, 4096), (8192, 8192, 8192), (16384, 16384, 16384),
         (4096, 14336, 4096), (16, 4096, 4096), (3000, 5000, 2000)]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--out", type=Path)
    args = ap.parse_args(argv)

    import z3

    from argus_env.check.symbolic import check
    from argus_env.task import get_task

    task = get_task("gemm")
    rows = []
    for which in task.programs:
        prog = task.program(which)
        check(prog, {"M": 64, "N": 64, "K": 64}, task)  # warm imports
        for m, n, k in SIZES:
            sizes = {"M": m, "N": n, "K": k}
            times, ok = [], True
            for _ in range(args.repeats):
                t0 = time.perf_counter()
                report = check(prog, sizes, task)
                times.append((time.perf_counter() - t0) * 1000)
                ok = ok and report.ok and not report.notes
            rows.append({"program": which, "sizes": sizes, "median_ms": statistics.median(times),
                         "max_ms": max(times), "queries": report.queries, "clean": ok})
            print(json.dumps(rows[-1]), flush=True)
    summary = {}
    for which in task.programs:
        mine = {tuple(r["sizes"].values()): r["median_ms"] for r in rows if r["program"] == which}
        summary[which] = {"median_ms_all_sizes": statistics.median(mine.values()),
                          "ratio_16384_to_1024": mine[(16384,) * 3] / mine[(1024,) * 3]}
    result = {"provenance": {"date": time.strftime("%Y-%m-%d"), "python": platform.python_version(),
                             "z3": z3.get_version_string(), "machine": platform.machine(),
                             "processor": platform.processor() or platform.machine(),
                             "repeats": args.repeats},
              "rows": rows, "summary": summary}
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(result, indent=1))
    print(f"\n{'program':<10}{'median ms':>10}{'16384/1024':>12}")
    for which, s in summary.items():
        print(f"{which:<10}{s['median_ms_all_sizes']:>10.1f}{s['ratio_16384_to_1024']:>12.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
