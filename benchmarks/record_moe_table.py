"""Record the MoE measurement table: the configurations of `tasks.moe.space.table_configurations`
at every shape of the suite, each timed against the torch pipeline anchor in the same process.

For each (shape, configuration) pair not yet in the table: render the configuration's DSL
program, lower and compile it, check it at the full shape against the float32 reference,
and time it alternately with the anchor by the protocol of `argus_env.measure.gpu`. Rows are
appended to a CSV as they are measured (resumable: a rerun skips what is recorded;
`--time-limit` stops cleanly). Needs torch, triton, numpy and pyyaml only.

    PYTHONPATH=. python benchmarks/record_moe_table.py --table tasks/moe/table_h200.csv
    PYTHONPATH=. python benchmarks/record_moe_table.py --interpret --smoke --table /tmp/t.csv
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

FIELDS = ["shape", "T", "D", "F", "E", "TOPK", "SKEW", "config", "summary", "program_hash", "ok",
          "error", "ms", "tflops", "anchor_ms", "anchor_tflops", "ratio", "max_rel_err",
          "interpreter", "timestamp"]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--table", type=Path, default=Path("tasks/moe/table_h200.csv"))
    ap.add_argument("--interpret", action="store_true", help="Triton interpreter on CPU")
    ap.add_argument("--smoke", action="store_true", help="tiny shapes, three configurations")
    ap.add_argument("--time-limit", type=float, default=300)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--rep-ms", type=int, default=20)
    ap.add_argument("--first", default="",
                    help="comma-separated shape names to record before the others")
    args = ap.parse_args(argv)
    if args.interpret:  # before anything imports Triton
        os.environ["TRITON_INTERPRET"] = "1"
    from argus_env.measure import provenance
    from argus_env.task import get_task
    from moe_suite import SMOKE, measure
    from argus_env.tasks.moe.space import table_configurations
    task = get_task("moe")
    configs = table_configurations()
    shapes = [(c.name, c.sizes) for c in task.shape_cases("all")]
    first = [n for n in args.first.split(",") if n]
    unknown = sorted(set(first) - {n for n, _ in shapes})
    if unknown:
        raise SystemExit(f"unknown shape(s) {unknown}; known: {[n for n, _ in shapes]}")
    shapes.sort(key=lambda s: (first.index(s[0]) if s[0] in first else len(first)))
    if args.smoke:
        configs, shapes = configs[:3], SMOKE[:1]
    done = set()
    if args.table.exists():
        done = {(r["shape"], r["summary"]) for r in csv.DictReader(args.table.open())}
    new = not args.table.exists()
    args.table.parent.mkdir(parents=True, exist_ok=True)
    if new:
        args.table.with_suffix(".json").write_text(json.dumps(provenance.collect(), indent=1,
                                                              default=str))
    start, count = time.time(), 0
    with args.table.open("a", newline="") as f:
        w = csv.DictWriter(f, FIELDS)
        if new:
            w.writeheader()
        for name, sizes in shapes:
            for cfg in configs:
                if (name, cfg.summary()) in done:
                    continue
                if time.time() - start > args.time_limit:
                    print(f"time limit reached after {count} rows; rerun to continue", flush=True)
                    return 0
                program = task.bind(task.space.program(cfg), sizes)
                row = {"shape": name, **{k: sizes[k] for k in FIELDS[1:7]},
                       "config": repr(cfg), "summary": cfg.summary(),
                       "program_hash": program.hash, "ok": False, "error": "",
                       "interpreter": args.interpret}
                try:
                    res = measure(program, task, sizes, args.interpret, args.rounds, args.rep_ms)
                    row["max_rel_err"] = res.get("max_rel_err")
                    if res.get("ok"):
                        row.update({k: res.get(k) for k in ("ms", "tflops", "anchor_ms",
                                                            "anchor_tflops", "ratio")}, ok=True)
                    else:
                        row["error"] = f"{res.get('status')}: {res.get('message', '')}"[:300]
                except Exception as e:  # a failing configuration is a row
                    row["error"] = f"{type(e).__name__}: {e}"[:300]
                row["timestamp"] = round(time.time(), 1)
                w.writerow(row)
                f.flush()
                count += 1
                print(json.dumps({"shape": name, "config": cfg.summary(), "ok": row["ok"],
                                  "tflops": row.get("tflops"), "ratio": row.get("ratio"),
                                  "error": row["error"][:120]}), flush=True)
    print(f"recorded {count} rows in {time.time() - start:.0f} s -> {args.table}")
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    sys.exit(main())
