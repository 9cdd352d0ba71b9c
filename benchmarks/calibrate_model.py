"""Fit the analytic cost model's free constants to a recorded measurement table.

Every correct row of the table (one configuration at one shape) is rebuilt into its
`KernelFeatures` (config key -> `GemmConfig` via the recording script's `configurations()`,
rendered and extracted), and the constants named in `FIT` are chosen to minimise the mean
squared log error of predicted vs measured TFLOP/s. What counts for the agents is ranking,
so the report is per shape: Spearman's rho between model and table over the
configurations, and whether the model's top-1 configuration measures within 10% of the
table's best at that shape. Overfitting is checked first: fit on half the shapes, report
on the other half (both ways round), then fit on all and write the constants to
configs/calibration/<profile>.json, where `CalibrationParams.load` finds them.

Usage (CPU only, about two minutes; scipy's Powell if installed, else a coordinate search):
    python benchmarks/calibrate_model.py | tee benchmarks/results/calibration_h200.txt
Expected on the 2026-12-03 H200 table: rho median ~0.92 over 12 shapes (min ~0.81,
decode-64), top-1 within 10% of the best at all 12 shapes, |log error| median ~0.07.
"""

from __future__ import annotations

import argparse
import csv
import datetime
import hashlib
import json
import math
import statistics
import sys
from dataclasses import asdict, dataclass, fields, replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from argus_env.measure.features import KernelFeatures, extract  # noqa: E402
from argus_env.target import Target  # noqa: E402
from argus_env.bench.results import shown  # noqa: E402
from argus_env.measure.model import (  # noqa: E402
    CALIBRATION_DIR, CalibrationParams, HardwareProfile, estimate, load_profile)

DEFAULT_TABLE = ROOT / "tasks" / "gemm" / "table_h200.csv"
TOP1_WITHIN = 0.10
# the fitted constants and the physically sensible range of each
FIT = {
    "sustained_fraction": (0.6, 1.0),
    "wgmma_efficiency": (0.5, 1.0),
    "overlap_plain": (0.0, 1.0),
    "latency_scale": (0.2, 5.0),
    "l2_reuse_onset": (0.05, 0.95),
    "dram_efficiency": (0.4, 1.0),
    "unaligned_feed": (0.05, 1.0),
    "step_overhead_us": (0.0, 0.3),
    "tma_latency_us": (0.0, 2.0),
    "atomic_us": (0.0, 1.0),
    "unaligned_atomic": (1.0, 100.0),
}


@dataclass(frozen=True)
class Row:
    """One correct measurement: a configuration's features and its measured throughput."""

    shape: str
    config: str
    features: KernelFeatures
    tflops: float


def load_rows(table: Path, profile: HardwareProfile) -> tuple[list[Row], list[str]]:
    """The table's correct rows with features, and notes on rows left out."""
    from argus_env.task import get_task
    from benchmarks.record_gemm_table import configurations
    task = get_task("gemm")
    target = Target.from_profile(profile)
    programs = {}
    for cfg in configurations():
        program = task.space.program(cfg)
        key = extract(program, {"M": 4096, "N": 4096, "K": 4096}, task, target=target).key()
        assert key not in programs, f"two configurations share the key {key}"
        programs[key] = program
    rows, notes = [], []
    with table.open() as fh:
        for r in csv.DictReader(fh):
            if r["ok"] != "True":
                notes.append(f"{r['shape']}, {short(r['config'])}: {r['error'].split(';')[0]}")
                continue
            program = programs.get(r["config"])
            if program is None:
                notes.append(f"{r['shape']}: no configuration has the key {r['config']}")
                continue
            if program.hash != r["program_hash"]:
                notes.append(f"{r['shape']}, {short(r['config'])}: program hash "
                             f"{program.hash} != recorded {r['program_hash']} (rendered anew)")
            sizes = {d: int(r[d]) for d in ("M", "N", "K")}
            f = extract(program, sizes, task, target=target)
            assert same_execution(f.key(), r["config"]), (f.key(), r["config"])
            rows.append(Row(r["shape"], r["config"], f, float(r["tflops"])))
    return rows, notes


def same_execution(executed: str, recorded: str) -> bool:
    """Whether the features' key (what the program executes at the row's shape) is the
    recorded configuration's: equal, or differing only in a tile order that moves no tile
    at that shape (GROUP_M at least the number of row tiles: features read it as 1)."""
    a = dict(kv.split("=") for kv in executed.split(","))
    b = dict(kv.split("=") for kv in recorded.split(","))
    differ = {k for k in a.keys() | b.keys() if a.get(k) != b.get(k)}
    return not differ or (differ == {"group_m"} and a["group_m"] == "1")


def short(key: str) -> str:
    """A configuration key in a few words: '128x256x64 8w 3s group8 tma ws persistent'."""
    v = dict(kv.split("=") for kv in key.split(","))
    words = [f"{v['block_m']}x{v['block_n']}x{v['block_k']}", f"{v['num_warps']}w",
             f"{v['stages']}s"]
    if v["group_m"] != "1":
        words.append(f"group{v['group_m']}")
    if v["split_k"] != "1":
        words.append(f"splitk{v['split_k']}")
    words += [w for w, k in (("tma", "tma_loads"), ("ws", "warp_specialize"),
                             ("persistent", "persistent")) if v[k] == "True"]
    return " ".join(words)


# ---------------------------------------------------------------- metrics
def spearman(x: list[float], y: list[float]) -> float:
    """Spearman's rho: Pearson's correlation of average ranks (ties share a rank)."""
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
    mx, my = statistics.fmean(rx), statistics.fmean(ry)
    cov = sum((a - mx) * (b - my) for a, b in zip(rx, ry))
    var = math.sqrt(sum((a - mx) ** 2 for a in rx) * sum((b - my) ** 2 for b in ry))
    return cov / var if var else 0.0


@dataclass
class ShapeResult:
    """The model against the table at one shape."""

    shape: str
    configs: int
    rho: float
    top1_ratio: float       # measured TFLOP/s of the model's pick / the table's best
    best_tflops: float
    top1_config: str        # the model's pick
    best_config: str        # the table's best
    best_predicted: float   # the model's TFLOP/s for the table's best
    mean_abs_log: float

    @property
    def top1_ok(self) -> bool:
        return self.top1_ratio >= 1.0 - TOP1_WITHIN


def evaluate(rows: list[Row], profile: HardwareProfile,
             params: CalibrationParams) -> dict[str, ShapeResult]:
    """Per shape (in table order): rank correlation, top-1 quality, log error."""
    by_shape: dict[str, list[tuple[Row, float]]] = {}
    for r in rows:
        by_shape.setdefault(r.shape, []).append((r, estimate(r.features, profile, params).tflops))
    out = {}
    for shape, pairs in by_shape.items():
        meas, pred = [r.tflops for r, _ in pairs], [p for _, p in pairs]
        pick = max(range(len(pairs)), key=pred.__getitem__)
        best = max(range(len(pairs)), key=meas.__getitem__)
        out[shape] = ShapeResult(shape, len(pairs), spearman(pred, meas), meas[pick] / max(meas),
                                 max(meas), pairs[pick][0].config, pairs[best][0].config,
                                 pred[best],
                                 statistics.fmean(abs(math.log(p / m)) for p, m in zip(pred, meas)))
    return out


def log_errors(rows: list[Row], profile: HardwareProfile, params: CalibrationParams) -> list[float]:
    return [math.log(max(estimate(r.features, profile, params).tflops, 1e-9) / r.tflops)
            for r in rows]


def summary(rows: list[Row], profile: HardwareProfile, params: CalibrationParams) -> dict:
    """The figures the report and the calibration file carry."""
    res = evaluate(rows, profile, params)
    errs = [abs(e) for e in log_errors(rows, profile, params)]
    rhos = [r.rho for r in res.values()]
    return {"rho_median": statistics.median(rhos), "rho_min": min(rhos),
            "shapes_rho_ge_0.8": sum(r >= 0.8 for r in rhos),
            "shapes_top1_within_10pct": sum(r.top1_ok for r in res.values()),
            "shapes": len(res), "abs_log_err_median": statistics.median(errs),
            "abs_log_err_mean": statistics.fmean(errs),
            "msle": statistics.fmean(e * e for e in errs),
            "per_shape": {s: {"rho": round(r.rho, 4), "top1_ratio": round(r.top1_ratio, 4),
                              "mean_abs_log_err": round(r.mean_abs_log, 4)}
                          for s, r in res.items()}}


# ---------------------------------------------------------------- the fit
def fit(rows: list[Row], profile: HardwareProfile, start: CalibrationParams,
        names: dict[str, tuple[float, float]] = FIT) -> CalibrationParams:
    """The constants in `names` that minimise the mean squared log error over `rows`."""
    keys, bounds = list(names), list(names.values())

    def params(x) -> CalibrationParams:
        return replace(start, **{k: float(v) for k, v in zip(keys, x)})

    def loss(x) -> float:
        return statistics.fmean(e * e for e in log_errors(rows, profile, params(x)))

    x0 = [min(max(getattr(start, k), lo), hi) for k, (lo, hi) in zip(keys, bounds)]
    try:
        from scipy.optimize import minimize
    except ImportError:
        return params(_coordinate_search(loss, x0, bounds))
    res = minimize(loss, x0, method="Powell", bounds=bounds,
                   options={"xtol": 1e-4, "ftol": 1e-7, "maxfev": 20000})
    return params(res.x)


def _coordinate_search(loss, x: list[float], bounds, rounds: int = 40) -> list[float]:
    """Without scipy: move one constant at a time by a shrinking step while the loss falls."""
    x, best = list(x), loss(x)
    steps = [(hi - lo) / 4 for lo, hi in bounds]
    for _ in range(rounds):
        moved = False
        for i, (lo, hi) in enumerate(bounds):
            for sign in (1, -1):
                trial = list(x)
                trial[i] = min(hi, max(lo, x[i] + sign * steps[i]))
                value = loss(trial)
                if value < best:
                    x, best, moved = trial, value, True
                    break
        if not moved:
            steps = [s / 2 for s in steps]
    return x


# ---------------------------------------------------------------- report
def print_shapes(title: str, before: dict[str, ShapeResult], after: dict[str, ShapeResult]) -> None:
    print(f"\n{title}")
    print(f"{'shape':<12} {'n':>3} {'rho before':>10} {'after':>6}   {'top1/best before':>16} "
          f"{'after':>6}   {'|log err| before':>16} {'after':>6}")
    for s, a in after.items():
        b = before[s]
        print(f"{s:<12} {a.configs:>3} {b.rho:>10.3f} {a.rho:>6.3f}   "
              f"{b.top1_ratio:>15.3f}{'' if b.top1_ok else '*'} {a.top1_ratio:>5.3f}"
              f"{'' if a.top1_ok else '*'}   {b.mean_abs_log:>16.3f} {a.mean_abs_log:>6.3f}")
    print("(* the model's top-1 measures more than 10% below the table's best)")


def print_summary(label: str, s: dict) -> None:
    print(f"{label:<34} rho median {s['rho_median']:.3f} min {s['rho_min']:.3f}; "
          f"rho>=0.8 at {s['shapes_rho_ge_0.8']}/{s['shapes']}; top-1 within 10% at "
          f"{s['shapes_top1_within_10pct']}/{s['shapes']}; |log err| median "
          f"{s['abs_log_err_median']:.3f} mean {s['abs_log_err_mean']:.3f}")


def held_out(rows: list[Row], profile: HardwareProfile, hand: CalibrationParams) -> dict:
    """Fit on every other shape and report on the rest, both ways round."""
    shapes = list(dict.fromkeys(r.shape for r in rows))
    halves = (shapes[0::2], shapes[1::2])
    out = {}
    for i, train in enumerate(halves):
        test = halves[1 - i]
        fitted = fit([r for r in rows if r.shape in train], profile, hand)
        test_rows = [r for r in rows if r.shape in test]
        fold = out[f"fold{i + 1}"] = {"train": train, "test": test,
                                      "before": summary(test_rows, profile, hand),
                                      "after": summary(test_rows, profile, fitted)}
        print(f"\nheld out, fold {i + 1}: fit on {', '.join(train)}; report on {', '.join(test)}")
        print_summary("  hand-set constants", fold["before"])
        print_summary("  fitted on the other half", fold["after"])
        print_shapes("  held-out shapes", evaluate(test_rows, profile, hand),
                     evaluate(test_rows, profile, fitted))
    return out


def record(table: Path, rows: list[Row], fitted: CalibrationParams, metrics: dict,
           profile: HardwareProfile) -> dict:
    """The calibration file: the constants, what they were fitted to, and how well."""
    meta_file = table.with_suffix(".json")
    meta = json.loads(meta_file.read_text()) if meta_file.exists() else {}
    return {
        "profile": profile.name,
        "params": asdict(fitted),
        "fitted": list(FIT),
        "objective": "mean squared log error of predicted vs measured TFLOP/s, correct rows",
        "table": shown(table),
        "table_sha256": hashlib.sha256(table.read_bytes()).hexdigest(),
        "table_recorded": [run.get("date") for run in meta.get("runs", [])],
        "rows": len(rows), "shapes": list(dict.fromkeys(r.shape for r in rows)),
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "script": "benchmarks/calibrate_model.py",
        "metrics_note": "hand_set: this model with CalibrationParams() defaults (its newer "
                        "mechanisms off); held_out: fitted on one half of the shapes, "
                        "figures on the other",
        "metrics": metrics,
    }


def print_fit(rows: list[Row], profile: HardwareProfile, hand: CalibrationParams,
              fitted: CalibrationParams) -> None:
    """The constants before and after, each shape's pick, and the per-shape table."""
    for f in fields(CalibrationParams):
        old, new = getattr(hand, f.name), getattr(fitted, f.name)
        mark = "fitted" if f.name in FIT else "hand-set"
        print(f"  {f.name:<20} {old:>8.4g} -> {new:>8.4g}   ({mark})")
    final = evaluate(rows, profile, fitted)
    print("\nthe fitted model's pick, and the table's best (measured, predicted TFLOP/s)")
    for s, r in final.items():
        best = "the same" if r.top1_config == r.best_config else short(r.best_config)
        print(f"  {s:<12} pick {short(r.top1_config):<38} {r.top1_ratio:.3f} of best; best "
              f"{best} ({r.best_tflops:.0f}, {r.best_predicted:.0f})")
    print_shapes("all shapes, hand-set -> fitted constants", evaluate(rows, profile, hand), final)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--table", type=Path, default=DEFAULT_TABLE)
    ap.add_argument("--profile", default="h200")
    ap.add_argument("--out", type=Path, default=None,
                    help="default: configs/calibration/<profile>.json")
    args = ap.parse_args(argv)

    profile = load_profile(args.profile)
    rows, notes = load_rows(args.table, profile)
    shapes = list(dict.fromkeys(r.shape for r in rows))
    print(f"{shown(args.table)}: {len(rows)} correct rows over {len(shapes)} shapes; left out:")
    for n in notes:
        print(f"  {n}")
    hand = CalibrationParams()
    before = summary(rows, profile, hand)
    heldout = held_out(rows, profile, hand)
    fitted = fit(rows, profile, hand)
    after = summary(rows, profile, fitted)
    out = args.out or CALIBRATION_DIR / f"{profile.name}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    metrics = {"hand_set": before, "fitted": after, "held_out": heldout}
    out.write_text(json.dumps(record(args.table, rows, fitted, metrics, profile), indent=1) + "\n")

    print(f"\nfitted on all {len(shapes)} shapes -> {shown(out)}")
    print_fit(rows, profile, hand, fitted)
    print()
    print_summary("hand-set constants (all shapes)", before)
    for name, h in heldout.items():
        print_summary(f"held out ({name}, {len(h['test'])} shapes)", h["after"])
    print_summary("fitted on all shapes", after)
    return 0


if __name__ == "__main__":
    sys.exit(main())
