"""Latency of the symbolic invariant checker, per task: task programs at every suite shape
and at scaled sizes, and every seeded bug of the checker's corpora.

Each figure is a full check (a fresh checker, no cache): the median over `--repeats` runs
for the task programs, one run per corpus case (each is a different program). The proof
never enumerates the problem, so the time should not grow with the sizes: for each task
program the script reports the ratio of the median at the largest scaled size to the
smallest (GEMM 16384^3 against 1024^3, attention sequence 16384 against 1024, MoE 65,536
tokens against 1,024, RMSNorm 65,536 rows against 1,024).

    python benchmarks/checker_latency.py --out benchmarks/results/checker_latency.json
    python benchmarks/checker_latency.py --tasks gemm --repeats 3      # a quick look
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests" / "check"))  # the corpora

#: sizes scaled from small to large per task (the other sizes from the task's first shape)
SCALED = {
    "gemm": [{"M": n, "N": n, "K": n} for n in (1024, 4096, 8192, 16384)],
    "attention": [{"SQ": n, "SK": n} for n in (1024, 4096, 16384)],
    "moe": [{"T": n} for n in (1024, 8192, 65536)],
    "rmsnorm": [{"T": n} for n in (1024, 8192, 65536)],
}
CORPORA = {"gemm": "corpus", "attention": "corpus_attention", "moe": "corpus_moe"}


def _time(check, prog, sizes, task, **kw) -> tuple[float, object]:
    t0 = time.perf_counter()
    report = check(prog, sizes, task, **kw)
    return (time.perf_counter() - t0) * 1000, report


def program_rows(name: str, repeats: int, check) -> list[dict]:
    from argus_env.task import get_task
    task = get_task(name)
    base = dict(task.shapes[0].sizes)
    cases = [(s.name, dict(s.sizes)) for s in task.shapes]
    cases += [("scaled-" + "-".join(str(v) for v in s.values()), {**base, **s})
              for s in SCALED.get(name, [])]
    rows = []
    for which in task.programs:
        for label, sizes in cases:
            prog = task.bind(task.program(which), sizes)
            _time(check, prog, sizes, task)  # warm: imports, first-use caches
            runs = [_time(check, prog, sizes, task) for _ in range(repeats)]
            times, report = [t for t, _ in runs], runs[-1][1]
            rows.append({"task": name, "program": which, "shape": label, "sizes": sizes,
                         "median_ms": round(statistics.median(times), 2),
                         "max_ms": round(max(times), 2), "queries": report.queries,
                         "status": report.status})
            print(json.dumps(rows[-1]), flush=True)
    return rows


def corpus_rows(name: str, check) -> list[dict]:
    from argus_env.task import get_task
    if name not in CORPORA:
        return []
    module = __import__(CORPORA[name])
    task = get_task(name)
    rows = []
    # the first check in a process pays for imports and first-use caches: one untimed
    # check first, as a long-lived environment has made before
    first = module.CORPUS[0]
    check(first.program(), first.sizes, task,
          **({"num_sms": first.num_sms} if getattr(first, "num_sms", None) else {}))
    for m in module.CORPUS:
        prog = m.program()
        # a case's own A.num_sms() where it has one (a persistent MoE bug shows only when
        # the grid is smaller than the work)
        kw = {"num_sms": m.num_sms} if getattr(m, "num_sms", None) else {}
        ms, report = _time(check, prog, m.sizes, task, **kw)
        caught = set(m.expect) <= report.kinds()
        rows.append({"task": name, "case": m.name, "sizes": m.sizes, "ms": round(ms, 2),
                     "queries": report.queries, "caught": caught,
                     "undecided": len(report.undecided)})
        print(json.dumps(rows[-1]), flush=True)
    return rows


def summarise(programs: list[dict], corpus: list[dict]) -> dict:
    out = {}
    for name in dict.fromkeys([r["task"] for r in programs + corpus]):
        mine = [r for r in programs if r["task"] == name]
        cases = [r for r in corpus if r["task"] == name]
        scaled = {}
        for which in dict.fromkeys(r["program"] for r in mine):
            s = [r for r in mine if r["program"] == which and r["shape"].startswith("scaled-")]
            if len(s) >= 2:
                scaled[which] = round(s[-1]["median_ms"] / s[0]["median_ms"], 2)
        all_ms = [r["median_ms"] for r in mine] + [r["ms"] for r in cases]
        out[name] = {
            "programs_median_ms": round(statistics.median([r["median_ms"] for r in mine]), 1),
            "programs_worst_ms": round(max(r["max_ms"] for r in mine), 1),
            "corpus_median_ms": round(statistics.median([r["ms"] for r in cases]), 1) if cases else None,
            "corpus_worst_ms": round(max(r["ms"] for r in cases), 1) if cases else None,
            "median_ms": round(statistics.median(all_ms), 1), "worst_ms": round(max(
                [r["max_ms"] for r in mine] + [r["ms"] for r in cases]), 1),
            "largest_over_smallest_scaled": scaled,
            "corpus_caught": f"{sum(r['caught'] for r in cases)}/{len(cases)}",
            "undecided": sum(r["undecided"] for r in cases)
            + sum(r["status"] == "undecided" for r in mine),
        }
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tasks", default="gemm,attention,moe,rmsnorm")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--no-corpus", action="store_true")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args(argv)

    from argus_env.check.symbolic import check
    from argus_env.envs.record import run_provenance

    programs, corpus = [], []
    for name in args.tasks.split(","):
        programs += program_rows(name, args.repeats, check)
        if not args.no_corpus:
            corpus += corpus_rows(name, check)
    summary = summarise(programs, corpus)
    result = {"provenance": {**run_provenance(ROOT), "repeats": args.repeats},
              "summary": summary, "programs": programs, "corpus": corpus}
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(result, indent=1))
    print(f"\n{'task':<10}{'median ms':>10}{'worst ms':>10}{'corpus med':>11}{'corpus worst':>13}"
          f"{'caught':>8}{'undecided':>10}  largest/smallest size")
    for name, s in summary.items():
        print(f"{name:<10}{s['median_ms']:>10}{s['worst_ms']:>10}{s['corpus_median_ms'] or '-':>11}"
              f"{s['corpus_worst_ms'] or '-':>13}{s['corpus_caught']:>8}{s['undecided']:>10}  "
              f"{s['largest_over_smallest_scaled']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
