"""Per shape, a board's submitted kernels timed live against the best known program there
(both GPU figures), at each budget: the mean live fraction of the library over seeds, over
the best known as timed again in the same live run (its table figure where the run did not
time it), and each env's geometric mean and minimum over its shapes.

    python benchmarks/live_vs_best_known.py benchmarks/results/heldout-h100/live_h100.json \
        --agent kb --out benchmarks/results/heldout-h100/live_vs_best_known.json

The live file is `record_programs.py append`'s (`lines`: one per board episode with
`live_frac_anchor`; `best_known`: per env and shape, the tables' fastest correct program
and, where the run timed it, `live_frac_anchor`). A kernel that failed live counts 0.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
from collections import defaultdict
from pathlib import Path


def table(live: dict, agent: str | None = None) -> dict:
    known = {(b["env_id"], b["shape"]): b for b in live["best_known"]}
    runs = defaultdict(list)
    recorded = defaultdict(list)
    for ln in live["lines"]:
        if agent and ln["agent"] != agent:
            continue
        key = (ln["env_id"], ln["shape"], int(ln["budget"]))
        runs[key].append(float(ln.get("live_frac_anchor") or 0.0))
        recorded[key].append((float(ln.get("recorded_frac_anchor") or 0.0),
                              ln.get("final_measured_by")))
    rows = []
    for (env, shape, budget), fracs in sorted(runs.items()):
        best = known.get((env, shape))
        if best is None:
            continue
        ref = best.get("live_frac_anchor") or best["frac_anchor"]
        mean = statistics.mean(fracs)
        rows.append({"env_id": env, "shape": shape, "budget": budget, "seeds": len(fracs),
                     "live": mean, "best_known": ref,
                     "best_known_timed_live": best.get("live_frac_anchor") is not None,
                     "of_best_known": mean / ref if ref > 0 else 0.0,
                     "recorded": statistics.mean(r for r, _ in recorded[(env, shape, budget)]),
                     "recorded_by": sorted({b for _, b in recorded[(env, shape, budget)]})})
    envs = defaultdict(list)
    for r in rows:
        envs[(r["env_id"], r["budget"])].append(r["of_best_known"])
    summary = [{"env_id": e, "budget": b, "shapes": len(v),
                "geomean_of_best_known": math.exp(sum(math.log(max(x, 1e-2)) for x in v) / len(v)),
                "min_of_best_known": min(v), "shapes_at_0.95": sum(x >= 0.95 for x in v)}
               for (e, b), v in sorted(envs.items())]
    return {"rows": rows, "summary": summary}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("live", type=Path)
    ap.add_argument("--agent")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args(argv)
    live = json.loads(args.live.read_text())
    out = table(live, args.agent)
    print(f"{'env':20s} {'shape':32s} {'budget':>6s} {'live':>6s} {'known':>6s} {'ratio':>6s} "
          f"{'recorded':>8s} by")
    for r in out["rows"]:
        print(f"{r['env_id']:20s} {r['shape']:32s} {r['budget']:6d} {r['live']:6.3f} "
              f"{r['best_known']:6.3f} {r['of_best_known']:6.3f} {r['recorded']:8.3f} "
              f"{','.join(r['recorded_by'])}")
    for s in out["summary"]:
        print(f"{s['env_id']:20s} budget {s['budget']:3d}: geomean {s['geomean_of_best_known']:.3f}"
              f" of the best known, min {s['min_of_best_known']:.3f}, "
              f"{s['shapes_at_0.95']}/{s['shapes']} shapes at 0.95")
    if args.out:
        out["source"] = {"live": str(args.live), "hardware": live.get("hardware"),
                         "provenance": live.get("provenance"), "agent": args.agent,
                         "command": "python benchmarks/live_vs_best_known.py " +
                                    " ".join(sys.argv[1:] if argv is None else argv)}
        args.out.write_text(json.dumps(out, indent=1) + "\n")
        print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
