"""Does the compile verdict on the CPU refuse what failed to compile on the GPU?

For a `record_programs.py` folder that a GPU measured (`plan.jsonl` or `plan.jsonl.gz`,
`results.jsonl`): every program the GPU answered with a compile failure, given to the
environment's compile verdict for the folder's hardware (`argus_env.measure.legality`,
specialised as the launch at the program's sizes). CPU only. Writes JSON (--out) and prints
one line per program.

    python benchmarks/verdict_vs_gpu_failures.py benchmarks/results/neighbours_h100 \
        --hardware h100 --out benchmarks/results/neighbours_h100/verdict_vs_gpu.json
"""

from __future__ import annotations

import argparse
import gzip
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def read_plan_items(folder: Path) -> dict:
    path = folder / "plan.jsonl"
    opener = open if path.exists() else gzip.open
    path = path if path.exists() else folder / "plan.jsonl.gz"
    with opener(path, "rt") as f:
        rows = [json.loads(line) for line in f][1:]
    return {(r["task"], r["shape"], r["program_hash"]): r for r in rows}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("folder", type=Path)
    ap.add_argument("--hardware", required=True)
    ap.add_argument("--out", type=Path)
    args = ap.parse_args(argv)
    from argus_env.dsl.program import Program
    from argus_env.envs.record import run_provenance
    from argus_env.measure.legality import Legality
    from argus_env.target import load_target
    from argus_env.task import get_task
    items = read_plan_items(args.folder)
    results = [json.loads(x) for x in (args.folder / "results.jsonl").read_text().splitlines()]
    failed = [r for r in results if not r.get("ok") and r.get("status") == "compile"]
    target, legality, rows = load_target(args.hardware), {}, []
    try:
        for r in failed:
            it = items[(r["task"], r["shape"], r["program_hash"])]
            task = get_task(it["task"])
            leg = legality.setdefault(task.name, Legality(task, target))
            program = Program.from_text(it["program"])
            v = leg.verdict(program, sizes=task.program_sizes(program, it["sizes"]))
            rows.append({"task": it["task"], "shape": it["shape"],
                         "program_hash": it["program_hash"], "summary": it.get("summary"),
                         "gpu_error": r.get("error"), "verdict_ok": v.ok,
                         "verdict_reason": v.reason, "verdict_shared_bytes": v.shared_bytes})
            print(f"{it['task']:10} {it['shape']:28} refused={not v.ok} "
                  f"{v.shared_bytes or '-'} B  {(v.reason or '')[:70]}")
    finally:
        for leg in legality.values():
            leg.close()
    doc = {"folder": str(args.folder), "hardware": args.hardware,
           "gpu_compile_failures": len(rows),
           "refused_by_verdict": sum(not x["verdict_ok"] for x in rows), "rows": rows,
           "provenance": run_provenance(ROOT)}
    print(f"{doc['refused_by_verdict']} of {len(rows)} GPU compile failures refused by the "
          f"verdict on this CPU")
    if args.out:
        args.out.write_text(json.dumps(doc, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
