"""Memory of the correctness worker and of its parent over thousands of distinct programs.

What it measures: the parent does per program what an environment step does with a new
program (parse the text, generate its Triton source, send the text to the worker); the
worker (`argus_env.measure.worker.Worker`, Triton interpreter) parses it again, lowers
it, executes the generated module and runs the kernel once against torch at M=N=K=16
(one program instance; no large kernels). Programs are the GEMM baseline with a distinct
docstring, an unused local `pad = i` and one of three BK values, so each is a new module.
Every `--every` programs it samples the resident set size (VmRSS) of the worker and of
the parent, and the parent's cache counts. The worker recycles itself every
`--recycle-after` programs; `pid` and `worker_programs` say which worker a sample is.

    python benchmarks/worker_memory.py --out benchmarks/results/worker_memory.json

`--in-process` loads and runs the same programs in this process instead (no worker), and
`--unbounded` lifts the module and text bounds there: the growth the bounds remove.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
SIZES = {"M": 16, "N": 16, "K": 16}


def program_text(base: str, i: int) -> str:
    """The `i`-th distinct program: a docstring, an unused local and a BK of its own."""
    text = base.replace("):\n    A.grid(", f'):\n    """Variant {i}."""\n    A.grid(', 1)
    text = text.replace("    acc = A.zeros", f"    pad = {i}\n    acc = A.zeros", 1)
    return text.replace("BK: A.const = 32", f"BK: A.const = {(16, 32, 64)[i % 3]}")


def rss_mb(pid: int | str = "self") -> float | None:
    try:
        for line in open(f"/proc/{pid}/status"):
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None


def run_worker(args, base: str) -> list[dict]:
    from argus_env import lower
    from argus_env.dsl.program import Program
    from argus_env.measure.worker import Worker
    w = Worker(interpret=True, timeout=120, recycle_after=args.recycle_after)
    samples, failures, since = [], 0, 0
    t0 = time.perf_counter()
    try:
        for i in range(args.programs):
            text = program_text(base, i)
            lower.source(Program.from_text(text))  # what the env keeps for `info`
            w.ensure_started()
            if i % args.every == 0 or i == args.programs - 1:
                samples.append({"programs": i, "seconds": round(time.perf_counter() - t0, 1),
                                "pid": w._proc.pid, "worker_programs": i - since,
                                "worker_rss_mb": rss_mb(w._proc.pid),
                                "parent_rss_mb": rss_mb(), "parent_cache": lower.cached()})
                print(json.dumps(samples[-1]), flush=True)
            recycles = w.recycles
            answer = w.run(text, "gemm", SIZES, seed=i)
            failures += not answer.get("ok")
            if w.recycles != recycles:
                since = i + 1
    finally:
        w.stop()
    return samples, failures, w.recycles, w.restarts


def run_in_process(args, base: str) -> list[dict]:
    from argus_env import lower
    from argus_env.dsl.program import Program
    from argus_env.lower import build
    from argus_env.measure import oracle
    from argus_env.task import get_task
    if args.unbounded:
        build._loaded.size = build._sources.size = 10**9
    task, samples, failures = get_task("gemm"), [], 0
    t0 = time.perf_counter()
    for i in range(args.programs):
        prog = Program.from_text(program_text(base, i))
        if i % args.every == 0 or i == args.programs - 1:
            samples.append({"programs": i, "seconds": round(time.perf_counter() - t0, 1),
                            "rss_mb": rss_mb(), "cache": lower.cached()})
            print(json.dumps(samples[-1]), flush=True)
        verdict = oracle.check(prog, task, SIZES, lower.load(prog, interpret=True), seed=i)
        failures += not verdict.ok
    return samples, failures


def slope_mb_per_1000(points: list[tuple[int, float]]) -> float | None:
    """Least-squares growth of (programs, MB) points, in MB per 1,000 programs."""
    if len(points) < 2:
        return None
    n = len(points)
    mx = sum(x for x, _ in points) / n
    my = sum(y for _, y in points) / n
    sxx = sum((x - mx) ** 2 for x, _ in points)
    return round(1000 * sum((x - mx) * (y - my) for x, y in points) / sxx, 3) if sxx else None


def summary(samples: list[dict], warm: int, key: str, by_worker: bool) -> dict:
    """Range and growth of `key` once caches are full (`warm` programs into a process)."""
    age = "worker_programs" if by_worker else "programs"
    pts = [(s["programs"], s[key]) for s in samples if s[age] >= warm and s[key] is not None]
    if not pts:
        return {}
    out = {"min_mb": round(min(y for _, y in pts), 1), "max_mb": round(max(y for _, y in pts), 1)}
    if by_worker:  # growth within each worker's life, averaged over the workers
        lives: dict[int, list] = {}
        for s in samples:
            if s[age] >= warm and s[key] is not None:
                lives.setdefault(s["pid"], []).append((s["programs"], s[key]))
        slopes = [v for v in (slope_mb_per_1000(p) for p in lives.values()) if v is not None]
        out["growth_mb_per_1000_within_a_worker"] = (round(sum(slopes) / len(slopes), 3)
                                                      if slopes else None)
    else:
        out["growth_mb_per_1000"] = slope_mb_per_1000(pts)
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--programs", type=int, default=5000)
    ap.add_argument("--every", type=int, default=100, help="programs between samples")
    ap.add_argument("--recycle-after", type=int, default=None,
                    help="programs per worker (default: the Worker's)")
    ap.add_argument("--warm", type=int, default=600,
                    help="programs into a process before its caches are full (128 modules, "
                         "512 texts; the parent's: twice that)")
    ap.add_argument("--in-process", action="store_true")
    ap.add_argument("--unbounded", action="store_true", help="with --in-process: no bounds")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args(argv)
    if args.in_process:
        os.environ["TRITON_INTERPRET"] = "1"  # before triton is imported
    from argus_env.lower.build import MAX_SOURCES
    from argus_env.envs.record import run_provenance
    from argus_env.measure.worker import RECYCLE_AFTER
    from argus_env.task import get_task
    args.recycle_after = RECYCLE_AFTER if args.recycle_after is None else args.recycle_after
    base = get_task("gemm").program("baseline").text
    t0 = time.perf_counter()
    result = {"provenance": run_provenance(ROOT),
              "measures": " ".join(__doc__.split("\n\n")[1].split()),
              "programs": args.programs, "sizes": SIZES}
    if args.in_process:
        samples, failures = run_in_process(args, base)
        result.update(mode="in-process", unbounded=args.unbounded, failures=failures,
                      rss=summary(samples, args.warm, "rss_mb", False), samples=samples)
    else:
        samples, failures, recycles, restarts = run_worker(args, base)
        result.update(mode="worker", recycle_after=args.recycle_after, failures=failures,
                      recycles=recycles, restarts=restarts,
                      worker_rss=summary(samples, args.warm, "worker_rss_mb", True),
                      parent_rss=summary(samples, 2 * MAX_SOURCES, "parent_rss_mb", False),
                      samples=samples)
    result["seconds"] = round(time.perf_counter() - t0, 1)
    print(json.dumps({k: v for k, v in result.items() if k != "samples"}, indent=1))
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(result, indent=1) + "\n")
    return 0 if failures == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
