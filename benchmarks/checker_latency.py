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
import os
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
#: programs the task's action space offers only at some sizes: (task, program) -> the
#: configuration whose structure the space judges there (stream-K spreads at most
#: STREAM_K_WAVES waves of tiles; past that the mask refuses it, and no episode has it
#: checked, as `tests/check/test_symbolic.py` skips it)
OFFERED_AT = {("gemm", "streamk"): ("argus_env.tasks.gemm.space", "STREAMK")}


def refused(task, name: str, which: str, sizes: dict) -> str | None:
    """Why the task's action space refuses program `which` at `sizes`, or None."""
    where = OFFERED_AT.get((name, which))
    if where is None:
        return None
    import importlib
    config = getattr(importlib.import_module(where[0]), where[1])
    return task.space.structure_reason(config, {"sizes": sizes})


def _time(check, prog, sizes, task, **kw) -> tuple[float, object]:
    t0, c0 = time.perf_counter(), time.process_time()
    report = check(prog, sizes, task, **kw)
    CPU.append((time.process_time() - c0) * 1000)
    return (time.perf_counter() - t0) * 1000, report


#: the CPU milliseconds of each timed check, in order (what a machine shared with other
#: work inflates least; the figures above are wall-clock)
CPU: list = []


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
            why = refused(task, name, which, sizes)
            if why is not None:  # recorded, not timed: no episode checks it there
                rows.append({"task": name, "program": which, "shape": label, "sizes": sizes,
                             "refused": why})
                print(json.dumps(rows[-1]), flush=True)
                continue
            prog = task.bind(task.program(which), sizes)
            _time(check, prog, sizes, task)  # warm: imports, first-use caches
            del CPU[:]
            runs = [_time(check, prog, sizes, task) for _ in range(repeats)]
            times, report = [t for t, _ in runs], runs[-1][1]
            rows.append({"task": name, "program": which, "shape": label, "sizes": sizes,
                         "median_ms": round(statistics.median(times), 2),
                         "max_ms": round(max(times), 2),
                         "cpu_median_ms": round(statistics.median(CPU), 2),
                         "queries": report.queries, "status": report.status})
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
                     "cpu_ms": round(CPU[-1], 2), "queries": report.queries, "caught": caught,
                     "undecided": len(report.undecided)})
        print(json.dumps(rows[-1]), flush=True)
    return rows


def summarise(programs: list[dict], corpus: list[dict]) -> dict:
    out = {}
    for name in dict.fromkeys([r["task"] for r in programs + corpus]):
        every = [r for r in programs if r["task"] == name]
        mine = [r for r in every if "refused" not in r]
        cases = [r for r in corpus if r["task"] == name]
        scaled = {}
        for which in dict.fromkeys(r["program"] for r in every):
            s = [r for r in every if r["program"] == which and r["shape"].startswith("scaled-")]
            if len(s) >= 2 and "refused" not in s[0] and "refused" not in s[-1]:
                scaled[which] = round(s[-1]["median_ms"] / s[0]["median_ms"], 2)
        all_ms = [r["median_ms"] for r in mine] + [r["ms"] for r in cases]
        all_cpu = [r["cpu_median_ms"] for r in mine] + [r["cpu_ms"] for r in cases]
        out[name] = {
            "programs_median_ms": round(statistics.median([r["median_ms"] for r in mine]), 1),
            "programs_worst_ms": round(max(r["max_ms"] for r in mine), 1),
            "corpus_median_ms": round(statistics.median([r["ms"] for r in cases]), 1) if cases else None,
            "corpus_worst_ms": round(max(r["ms"] for r in cases), 1) if cases else None,
            "median_ms": round(statistics.median(all_ms), 1), "worst_ms": round(max(
                [r["max_ms"] for r in mine] + [r["ms"] for r in cases]), 1),
            "cpu_median_ms": round(statistics.median(all_cpu), 1),
            "cpu_worst_ms": round(max(all_cpu), 1),
            "largest_over_smallest_scaled": scaled,
            "refused": len(every) - len(mine),
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

    load_before = os.getloadavg()  # other work on the machine slows every wall figure
    programs, corpus = [], []
    for name in args.tasks.split(","):
        programs += program_rows(name, args.repeats, check)
        if not args.no_corpus:
            corpus += corpus_rows(name, check)
    summary = summarise(programs, corpus)
    load = {"before": [round(x, 2) for x in load_before],
            "after": [round(x, 2) for x in os.getloadavg()]}  # 1, 5 and 15 minutes
    result = {"provenance": {**run_provenance(ROOT), "repeats": args.repeats,
                             "load_average": load},
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
