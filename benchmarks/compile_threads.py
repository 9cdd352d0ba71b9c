"""A program's kernels compiled one after another and in threads (`lower.aot.COMPILE_THREADS`),
on the CPU for sm_90: 8 MoE programs (the baseline's six launches and the expert's two, at
four tile widths), each run in a fresh process with an empty Triton cache and empty memos.

    python benchmarks/compile_threads.py [--threads 1 2] [--reps 2] [--out FILE]

Prints one line per run and writes JSON (default benchmarks/results/compile_threads.json).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RUN = """
import dataclasses, json, sys, time
from argus_env.lower import aot
from argus_env.target import load_target
from argus_env.task import get_task
from argus_env.tasks.moe.space import BASELINE, EXPERT
aot.COMPILE_THREADS = int(sys.argv[1])
task, target = get_task("moe"), load_target("h100")
aot.warm_up(target.arch)
sizes = task.shapes[0].sizes
programs = [task.bind(task.space.program(dataclasses.replace(c, block_n=bn)), sizes)
            for bn in (32, 64, 128, 256) for c in (BASELINE, EXPERT)]
t0 = time.perf_counter()
results = [aot._compile_here(p, target, scratch=True, sizes=sizes) for p in programs]
print(json.dumps({"seconds": time.perf_counter() - t0, "ok": all(r.ok for r in results),
                  "kernels": sum(r.kernels for r in results)}))
"""


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, nargs="*", default=[1, 2])
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks/results/compile_threads.json")
    args = ap.parse_args(argv)
    runs = []
    for rep in range(args.reps):
        for threads in args.threads:   # alternating, so the machine's drift hits both
            env = dict(os.environ, TRITON_INTERPRET="0", TRITON_CACHE_DIR=tempfile.mkdtemp())
            proc = subprocess.run([sys.executable, "-c", RUN, str(threads)], cwd=ROOT, env=env,
                                  capture_output=True, text=True, timeout=1200)
            if proc.returncode:
                print(proc.stderr[-2000:], file=sys.stderr)
                return 1
            got = json.loads(proc.stdout.strip().splitlines()[-1])
            runs.append({"rep": rep, "threads": threads, **got})
            print(f"rep {rep} threads {threads}: {got['seconds']:.2f} s, {got['kernels']} "
                  f"kernels, all compiled: {got['ok']}", flush=True)
    out = {"cpus": os.cpu_count(), "machine": platform.machine(), "python": platform.python_version(),
           "load_average_before": list(os.getloadavg()), "runs": runs}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(out, indent=1) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
