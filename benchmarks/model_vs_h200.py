"""The analytic cost model against the GEMM suite measured on the project's H200.

For the 12 shapes of `benchmarks/results/gemm_suite_h200_2026-12-03.json` and the two programs
measured there (baseline, expert), prints the model's TFLOP/s next to the measured ones, the
model's limiter, and the Spearman rank correlation over the 24 points. CPU only, a second.

Usage:
    python benchmarks/model_vs_h200.py [--results FILE] [--profile h200]
Expected: Spearman ~0.9; the model tracks the expert within ~10% and the baseline within
~30% (its weakest spots: L2 behaviour of the ungrouped baseline at large shapes).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

DEFAULT_RESULTS = ROOT / "benchmarks" / "results" / "gemm_suite_h200_2026-12-03.json"


def spearman(x: list[float], y: list[float]) -> float:
    """Spearman's rho (scipy's when installed; else Pearson on average ranks)."""
    try:
        from scipy.stats import spearmanr
        return float(spearmanr(x, y)[0])
    except ImportError:
        pass

    def ranks(v: list[float]) -> list[float]:
        order = sorted(range(len(v)), key=v.__getitem__)
        r = [0.0] * len(v)
        i = 0
        while i < len(order):
            j = i
            while j + 1 < len(order) and v[order[j + 1]] == v[order[i]]:
                j += 1
            for t in range(i, j + 1):
                r[order[t]] = (i + j) / 2.0
            i = j + 1
        return r
    rx, ry = ranks(x), ranks(y)
    mx, my = sum(rx) / len(rx), sum(ry) / len(ry)
    cov = sum((a - mx) * (b - my) for a, b in zip(rx, ry))
    vx = sum((a - mx) ** 2 for a in rx) ** 0.5
    vy = sum((b - my) ** 2 for b in ry) ** 0.5
    return cov / (vx * vy)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--results", type=Path, default=DEFAULT_RESULTS)
    ap.add_argument("--profile", default="h200")
    args = ap.parse_args(argv)

    from argus_env.measure.features import extract
    from argus_env.measure.model import load_profile, estimate
    from argus_env.target import Target
    from argus_env.task import get_task

    profile = load_profile(args.profile)
    task = get_task("gemm")
    data = json.loads(args.results.read_text())
    table: dict[str, dict] = {}
    for row in data["rows"]:
        f = extract(task.program(row["program"]), row["sizes"], task,
                    target=Target.from_profile(profile))
        est = estimate(f, profile)
        entry = table.setdefault(row["shape"], {"sizes": row["sizes"]})
        entry[row["program"]] = (row["tflops"], est.tflops, est.bound)

    print(f"model ({profile.name}) vs measured ({data['provenance']['gpu']}, "
          f"{data['provenance']['date'][:10]}), TFLOP/s")
    print(f"{'shape':<12} {'M x N x K':<18} {'base meas':>9} {'model':>7} {'bound':>8}   "
          f"{'exp meas':>8} {'model':>7} {'bound':>8}   {'b/e meas':>8} {'model':>6}")
    measured, predicted = [], []
    for name, e in table.items():
        s = e["sizes"]
        (bm, bp, bb), (em, ep, eb) = e["baseline"], e["expert"]
        measured += [bm, em]
        predicted += [bp, ep]
        dims = f"{s['M']}x{s['N']}x{s['K']}"
        print(f"{name:<12} {dims:<18} {bm:9.1f} {bp:7.1f} {bb:>8}   {em:8.1f} {ep:7.1f} "
              f"{eb:>8}   {bm / em:8.2f} {bp / ep:6.2f}")
    errs = sorted(abs(p / m - 1) for p, m in zip(predicted, measured))
    print(f"\nSpearman rank correlation over {len(measured)} points: "
          f"{spearman(predicted, measured):.3f} (within baseline: "
          f"{spearman(predicted[0::2], measured[0::2]):.3f}, within expert: "
          f"{spearman(predicted[1::2], measured[1::2]):.3f}; 12 points each)")
    print(f"|predicted/measured - 1|: median {errs[len(errs) // 2]:.0%}, max {errs[-1]:.0%}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
