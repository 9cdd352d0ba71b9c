"""Two live recordings of the same kernels on the same GPU model, side by side: how well
the live figures reproduce from run to run, per env and shape, for the kernel's own time
and for the library anchor's (the score is their ratio, so an anchor that moves moves
every score at that shape).

    python benchmarks/live_rerun_compare.py A/live_h100.json B/live_h100.json \
        --out benchmarks/results/leaderboard/rerun_h100_2026-12-06.json

CPU only; reads the `live_<gpu>.json` files `benchmarks/record_programs.py append`
writes (or the copy a `measure` run leaves in its folder).
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
from pathlib import Path


def _figures(path: Path) -> tuple[dict, dict]:
    data = json.loads(path.read_text())
    figs = {(f["env_id"], f["shape"], f["program_hash"]): f for f in data["figures"]}
    return figs, data.get("provenance", {})


def _spread(xs: list[float]) -> dict:
    logs = sorted(abs(math.log(x)) for x in xs)
    return {"n": len(xs), "median": round(statistics.median(xs), 4),
            "min": round(min(xs), 4), "max": round(max(xs), 4),
            "p90_abs_log": round(logs[min(len(logs) - 1, int(0.9 * len(logs)))], 4)}


def compare(first: Path, second: Path) -> dict:
    a, pa = _figures(first)
    b, pb = _figures(second)
    both = [k for k in b if k in a and a[k].get("ok") and b[k].get("ok")]
    groups: dict = {}
    for k in both:
        g = groups.setdefault((k[0], k[1]), {"kernel": [], "anchor": [], "score": []})
        g["kernel"].append(b[k]["ms"] / a[k]["ms"])
        g["anchor"].append(b[k]["anchor_ms"] / a[k]["anchor_ms"])
        g["score"].append(b[k]["frac_anchor"] / a[k]["frac_anchor"])
    rows = [{"env_id": env, "shape": shape, **{f"{what}_second_over_first": _spread(v)
                                               for what, v in g.items()}}
            for (env, shape), g in sorted(groups.items())]
    per_env: dict = {}
    for k in both:
        e = per_env.setdefault(k[0], {"kernel": [], "anchor": [], "score": []})
        e["kernel"].append(b[k]["ms"] / a[k]["ms"])
        e["anchor"].append(b[k]["anchor_ms"] / a[k]["anchor_ms"])
        e["score"].append(b[k]["frac_anchor"] / a[k]["frac_anchor"])
    return {"first": {"file": str(first), "provenance": pa},
            "second": {"file": str(second), "provenance": pb},
            "programs_in_both": len(both),
            "only_first": len([k for k in a if k not in b]),
            "only_second": len([k for k in b if k not in a]),
            "failed_in_either": len([k for k in b if k in a and not (a[k].get("ok") and
                                                                    b[k].get("ok"))]),
            "per_env": {env: {f"{w}_second_over_first": _spread(v) for w, v in g.items()}
                        for env, g in sorted(per_env.items())},
            "per_shape": rows}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("first", type=Path)
    ap.add_argument("second", type=Path)
    ap.add_argument("--out", type=Path)
    args = ap.parse_args(argv)
    out = compare(args.first, args.second)
    print(f"{'env':20s} {'shape':28s} {'n':>3s} {'kernel':>7s} {'anchor':>7s} {'score':>7s}"
          "  (second / first, medians)")
    for r in out["per_shape"]:
        print(f"{r['env_id']:20s} {r['shape']:28s} {r['kernel_second_over_first']['n']:3d} "
              + " ".join(f"{r[f'{w}_second_over_first']['median']:7.3f}"
                         for w in ("kernel", "anchor", "score")))
    if args.out:
        args.out.write_text(json.dumps(out, indent=1) + "\n")
        print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
