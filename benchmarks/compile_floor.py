"""What a new program's compile verdict costs on this CPU, kernel by kernel: the floor it
puts under an uncached environment step.

For each task, the programs an episode of random legal actions meets (as
`benchmarks/env_speed.py` walks: seed 0, the task's first train shape, undo and submit
left out) are compiled for the target in the order met, to the stage the environment's
verdicts run to (`measure.legality.verdict_stage`), by one process in one thread, the
per-kernel memo kept along the episode as the environment's compile worker keeps it.
One thread: each figure is CPU seconds of Triton's own pipeline (front end, TTIR and
TTGIR passes, shared-memory allocation). Per program: its kernels, how many were
compiled and how many were found in the memo (an earlier program had the same kernel),
and the seconds. The step's two other stages are then timed alone, one program after
another: the invariant check (CPU seconds) and the numerical checks at the step's
reduced shapes in one interpreter worker (seconds).

    python benchmarks/compile_floor.py --tasks moe gemm --steps 20 --out FILE

The three run side by side in a step (three processes on this machine's cores). Every
new program is compiled and checked (both verdicts are per program), while the
numerical checks are remembered by what the interpreter runs (a program that changes
only pipelining or warps reuses them), so the floor under a new program's step is the
compile's and the check's CPU seconds over the cores; the summary names it per task
(the transformation, the observation, the features, the cost model and any numerics
come on top).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

COMPILE = """
import json, sys, time
from argus_env.dsl.program import Program
from argus_env.lower import aot
from argus_env.measure.legality import verdict_stage
from argus_env.target import load_target
aot.COMPILE_THREADS = 1
job = json.load(open(sys.argv[1]))
target = load_target(job["target"])
aot.warm_up(target.arch)
stage = verdict_stage()
for item in job["programs"]:
    t0, c0 = time.perf_counter(), time.process_time()
    r = aot._compile_here(Program.from_text(item["text"]), target, sizes=item["sizes"],
                          until=stage)
    print(json.dumps({"ok": r.ok, "kernels": r.kernels, "remembered": r.remembered,
                      "seconds": time.perf_counter() - t0,
                      "cpu_seconds": time.process_time() - c0, "stage": stage,
                      "error": (r.error or "")[:200]}), flush=True)
"""


def walk(task_name: str, steps: int, seed: int) -> tuple[list[dict], str, str]:
    """The new programs a random legal walk meets: [{"text", "sizes"}], the shape, the
    target's name."""
    import gymnasium as gym
    import numpy as np

    from argus_env.registry import env_id_of
    env = gym.make(env_id_of(task_name), max_episode_steps=100_000)
    core = env.unwrapped
    shape = core.task.shape_cases("train")[0].name
    obs, _ = env.reset(seed=seed, options={"shape": shape})
    rng = np.random.default_rng(seed)
    ev, out, tries = core.evaluator, [], 0
    while len(out) < steps and tries < 20 * steps:
        tries += 1
        legal = np.flatnonzero(obs["action_mask"][:-2])  # neither undo nor submit
        before = ev.misses
        obs, _, _, _, info = env.step(int(rng.choice(legal)))
        if ev.misses > before and not info["error"] and info["report"]["ok"]:
            an = core.state.evaluation.analysis
            out.append({"text": core.state.program.text,
                        "sizes": {k: int(v) for k, v in an.program_sizes.items()}})
    target = getattr(core.target, "name", "h200")
    alone(core, out)
    env.close()
    return out, shape, target


def alone(core, programs: list[dict]) -> None:
    """The other two stages of each program's step, each run alone after the walk (the
    machine otherwise idle): the invariant check in this process (CPU seconds) and the
    numerical checks at the step's reduced shapes in one interpreter worker, one shape
    after another (its seconds)."""
    from argus_env.check import check_program
    from argus_env.dsl.program import Program
    from argus_env.envs.analysis import Analysis
    from argus_env.measure.worker import Worker
    ev, target = core.evaluator, core.evaluator.target
    worker = Worker(interpret=True, timeout=600)
    try:
        for item in programs:
            program = Program.from_text(item["text"])
            an = Analysis(program, core.sizes, core.task, target)
            c0 = time.process_time()
            check_program(program, core.sizes, an.task_view, num_sms=target.sms, target=target)
            item["check_cpu_seconds"] = time.process_time() - c0
            shapes, _ = ev._numerics_plan(an)
            t0 = time.perf_counter()
            for s in shapes:
                worker.run(program, core.task.name, s)
            item["numerics_seconds"] = time.perf_counter() - t0
            item["numerics_shapes"] = len(shapes)
    finally:
        worker.stop()


def main(argv=None) -> int:
    from argus_env.envs.record import run_provenance
    from argus_env.task import KNOWN_TASKS
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tasks", nargs="*", default=None, help="default: every registered task")
    ap.add_argument("--steps", type=int, default=20, help="new programs per task")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", type=Path)
    args = ap.parse_args(argv)
    tasks = args.tasks or list(KNOWN_TASKS)
    cores = os.cpu_count() or 1
    result = {"provenance": {**run_provenance(ROOT), "load_average_before": list(os.getloadavg())},
              "cores": cores, "steps": args.steps, "seed": args.seed, "tasks": {}}
    for name in tasks:
        t0 = time.perf_counter()
        programs, shape, target = walk(name, args.steps, args.seed)
        with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
            json.dump({"target": target, "programs": programs}, f)
        env = dict(os.environ, TRITON_INTERPRET="0", TRITON_CACHE_DIR=tempfile.mkdtemp())
        proc = subprocess.run([sys.executable, "-c", COMPILE, f.name], cwd=ROOT, env=env,
                              capture_output=True, text=True, timeout=3600)
        os.unlink(f.name)
        if proc.returncode:
            print(proc.stderr[-3000:], file=sys.stderr)
            return 1
        rows = [{**json.loads(ln), **{k: v for k, v in p.items() if k != "text"}}
                for ln, p in zip([ln for ln in proc.stdout.splitlines() if ln.startswith("{")],
                                 programs)]
        rows = rows[1:] if len(rows) > 1 else rows   # the first met the memo empty
        cpu = [r["cpu_seconds"] for r in rows]
        work = [r["cpu_seconds"] + r["check_cpu_seconds"] for r in rows]
        compiled = [r["kernels"] - r["remembered"] for r in rows]
        summary = {
            "shape": shape, "target": target, "programs": len(rows),
            "kernels_median": statistics.median(r["kernels"] for r in rows),
            "compiled_kernels_median": statistics.median(compiled),
            "programs_with_every_kernel_compiled": sum(r["remembered"] == 0 for r in rows),
            "compile_cpu_ms_median": 1000 * statistics.median(cpu),
            "compile_cpu_ms_min": 1000 * min(cpu),
            "check_cpu_ms_median": 1000 * statistics.median(r["check_cpu_seconds"] for r in rows),
            "numerics_ms_median": 1000 * statistics.median(r["numerics_seconds"] for r in rows),
            "compile_and_check_cpu_ms_median": 1000 * statistics.median(work),
            "floor_ms_on_these_cores": 1000 * statistics.median(work) / cores,
            "all_compiled": all(r["ok"] for r in rows),
            "walk_and_compile_s": time.perf_counter() - t0, "rows": rows}
        result["tasks"][name] = summary
        print(f"{name:10s} {len(rows)} programs: kernels {summary['kernels_median']}, compiled "
              f"{summary['compiled_kernels_median']} (median), compile CPU "
              f"{summary['compile_cpu_ms_median']:.0f} ms median, min "
              f"{summary['compile_cpu_ms_min']:.0f}; check {summary['check_cpu_ms_median']:.0f}, "
              f"numerics {summary['numerics_ms_median']:.0f}; compile and check "
              f"{summary['compile_and_check_cpu_ms_median']:.0f}, over {cores} cores "
              f"{summary['floor_ms_on_these_cores']:.0f} ms", flush=True)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(result, indent=1) + "\n")
        print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
