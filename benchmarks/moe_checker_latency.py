"""Latency of the symbolic invariant checker on the MoE task: its programs and its corpus.

Three groups, each check a fresh checker (no cache), timed with `time.perf_counter`:

- programs: baseline, expert and the table's configurations (`space.table_configurations`)
  at every suite shape and the CPU check shapes, with the target's 132 SMs;
- corpus: every seeded bug of `tests/check/corpus_moe.py` at its shape (and SM count),
  and every program its `clean` and `CLEAN` lists say is correct;
- the median and the worst over `--repeats` runs of each check, then per group.

    python benchmarks/moe_checker_latency.py --repeats 3 \
        --out benchmarks/results/moe_checker_latency.json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "check"))


def _time(check, repeats: int) -> tuple[list[float], list[float], object]:
    """Wall and CPU milliseconds of each run (the CPU time of this process is what a
    machine shared with other work inflates least), and the last report."""
    wall, cpu, report = [], [], None
    for _ in range(repeats):
        t0, c0 = time.perf_counter(), time.process_time()
        report = check()
        wall.append((time.perf_counter() - t0) * 1000)
        cpu.append((time.process_time() - c0) * 1000)
    return wall, cpu, report


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--groups", default="programs,corpus")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args(argv)

    import z3

    from argus_env.check import check_program
    from argus_env.task import get_task
    from corpus_moe import CLEAN, CORPUS, Mutation

    task = get_task("moe")
    space = task.space
    from argus_env.tasks.moe.space import table_configurations
    shapes = [(c.name, dict(c.sizes)) for c in task.shapes] + \
        [(f"cpu{i}", dict(s)) for i, s in enumerate(task.cpu_shapes)]
    # warm imports and caches (z3, torch for the realiser) on one bug and one program
    check_program(CORPUS[0].program(), CORPUS[0].sizes, task)
    check_program(task.bind(task.program("expert"), shapes[0][1]), shapes[0][1], task)

    rows = []

    def run(group, name, shape, program, sizes, num_sms, expect=None):
        times, cpu, report = _time(lambda: check_program(program, sizes, task, num_sms=num_sms),
                                   args.repeats)
        row = {"group": group, "program": name, "shape": shape, "num_sms": num_sms,
               "median_ms": statistics.median(times), "max_ms": max(times),
               "cpu_median_ms": statistics.median(cpu), "cpu_max_ms": max(cpu),
               "queries": report.queries, "status": report.status,
               "kinds": sorted(report.kinds())}
        if expect is not None:
            row["caught"] = set(expect) <= report.kinds()
        rows.append(row)
        print(json.dumps(row), flush=True)

    groups = args.groups.split(",")
    if "programs" in groups:
        configs = [("baseline", None), ("expert", None)] + \
            [(c.summary(), c) for c in table_configurations()[2:]]
        for name, cfg in configs:
            for shape, sizes in shapes:
                prog = task.program(name) if cfg is None else space.program(cfg)
                run("programs", name, shape, task.bind(prog, sizes), sizes, 132)
    if "corpus" in groups:
        for m in CORPUS:
            run("corpus", m.name, "corpus", m.program(), m.sizes, m.num_sms or 132, m.expect)
            for sizes, sms in m.clean:
                mm = Mutation(m.name, m.base, m.edits, frozenset(), dict(sizes))
                run("corpus-clean", m.name, json.dumps(sizes), mm.program(), sizes, sms or 132)
        for name, base, edits in CLEAN:
            for i, sizes in enumerate(task.cpu_shapes):
                mm = Mutation(name, base, tuple(edits), frozenset(), dict(sizes))
                run("corpus-clean", name, f"cpu{i}", mm.program(), sizes, 132)
    summary = {}
    for group in dict.fromkeys(r["group"] for r in rows):
        mine = [r for r in rows if r["group"] == group]
        summary[group] = {"checks": len(mine),
                          "median_ms": statistics.median(r["median_ms"] for r in mine),
                          "worst_ms": max(r["max_ms"] for r in mine),
                          "cpu_median_ms": statistics.median(r["cpu_median_ms"] for r in mine),
                          "cpu_worst_ms": max(r["cpu_max_ms"] for r in mine),
                          "over_1s": sum(r["max_ms"] > 1000 for r in mine),
                          "not_proven": sum(r["status"] != "proven" for r in mine)}
    load = os.getloadavg() if hasattr(os, "getloadavg") else None
    result = {"provenance": {"date": time.strftime("%Y-%m-%d"), "python": platform.python_version(),
                             "z3": z3.get_version_string(), "machine": platform.machine(),
                             "cpus": os.cpu_count(), "load_average_after": load,
                             "repeats": args.repeats},
              "rows": rows, "summary": summary}
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(result, indent=1))
    print(f"\n{'group':<14}{'checks':>8}{'median ms':>11}{'worst ms':>10}{'cpu med':>9}"
          f"{'cpu worst':>10}{'>1 s':>6}{'not proven':>12}")
    for group, s in summary.items():
        print(f"{group:<14}{s['checks']:>8}{s['median_ms']:>11.1f}{s['worst_ms']:>10.1f}"
              f"{s['cpu_median_ms']:>9.1f}{s['cpu_worst_ms']:>10.1f}{s['over_1s']:>6}"
              f"{s['not_proven']:>12}")
    print(f"load average {load} on {os.cpu_count()} CPUs")
    return 0


if __name__ == "__main__":
    sys.exit(main())
