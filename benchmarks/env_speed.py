"""Environment step speed on this machine, per registered task, with the defaults (model
measurement, numerics under the Triton interpreter).

- reset: `reset` at each of the task's other shapes, the worker already running (a new
  episode at a new shape: the baseline's check, numerics and measurement); the cold
  start (`gym.make` and the first reset, worker start included) is recorded apart;
- uncached: steps that meet a new program (random legal actions): invariant check (z3),
  numerical check in the worker (Triton interpreter at the reduced shapes), cost model;
- phases: per uncached step, the evaluator's own timings (`Evaluation.timings`): the
  invariant check, the numerics (the wait for the worker's answers after the check), the
  compile for sm_90 (the compiler's own seconds, overlapping the numerics; run to the
  stage `measure.legality.verdict_stage` names, recorded in the provenance) and the cost
  model, with where each compile verdict came from;
- cached: the same actions replayed after a reset, so every program is known and a step
  costs the transformation, the observation and the reward (a program whose check was
  undecided or cut short by the step budget is not remembered: such replayed steps are
  counted apart, not in the rate).

    python benchmarks/env_speed.py --out benchmarks/results/env_speed.json

The compile verdicts' disk cache and the generated kernels go to an empty temporary
folder (ARGUS_CACHE_DIR) unless --cache-dir names one: an earlier run's verdicts would
otherwise answer this run's "new" programs without compiling them.

Targets (issue 19), per task: uncached median <= 150 ms and p90 <= 600 ms, reset <= 1 s,
cached >= 1,500 steps/s; the record says which are met.
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

TARGETS = {"uncached_median_ms": 150.0, "uncached_p90_ms": 600.0, "reset_max_s": 1.0,
           "cached_steps_per_s": 1500.0}


def _p90(xs: list[float]) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(0.9 * len(xs)))]


def bench_task(task: str, env_id: str, steps: int, seed: int) -> dict:
    import gymnasium as gym
    import numpy as np

    t0 = time.perf_counter()
    env = gym.make(env_id, max_episode_steps=100_000)
    core = env.unwrapped
    first = core.task.shape_cases("train")[0].name
    obs, _ = env.reset(seed=seed, options={"shape": first})
    cold = time.perf_counter() - t0
    resets = {}
    for case in core.task.shape_cases("all"):
        if case.name == first:
            continue  # its baseline is known now: that reset would be a cache hit
        t0 = time.perf_counter()
        env.reset(seed=seed, options={"shape": case.name})
        resets[case.name] = time.perf_counter() - t0
    obs, _ = env.reset(seed=seed, options={"shape": first})
    rng = np.random.default_rng(seed)
    uncached, actions, failures = [], [], {}
    phases: dict[str, list[float]] = {}
    sources: dict[str, int] = {}
    ev = core.evaluator
    while len(uncached) < steps and len(actions) < 20 * steps:
        legal = np.flatnonzero(obs["action_mask"][:-2])  # neither undo nor submit
        a = int(rng.choice(legal))
        before = ev.misses
        t0 = time.perf_counter()
        obs, _, _, _, info = env.step(a)
        dt = time.perf_counter() - t0
        actions.append(a)
        if ev.misses > before:
            uncached.append(dt)
            kind = info["failure"] or ("refused" if info["error"] else
                                       "proven" if info["report"]["ok"] else "violation")
            failures[kind] = failures.get(kind, 0) + 1
            ev_ = core.state.evaluation if not info["error"] else None
            if ev_ is not None:
                for name, key in (("check", "check"), ("numerics", "correctness"),
                                  ("compile", "legality"), ("cost_model", "measure")):
                    if key in ev_.timings:
                        phases.setdefault(name, []).append(1000 * ev_.timings[key])
                verdict = (info["measurement"].get("details") or {}).get("legality") or {}
                if verdict.get("source"):
                    sources[verdict["source"]] = sources.get(verdict["source"], 0) + 1
    env.reset(seed=seed, options={"shape": first})
    hit_seconds, again = 0.0, 0
    for a in actions:
        before = ev.misses
        t0 = time.perf_counter()
        env.step(a)
        dt = time.perf_counter() - t0
        if ev.misses > before:
            again += 1  # an undecided or cut-short check is not remembered: checked again
        else:
            hit_seconds += dt
    cached_rate = (len(actions) - again) / hit_seconds
    env.close()
    result = {
        "env_id": env_id, "shape": first, "cold_start_s": cold,
        "reset_s": resets, "reset_median_s": statistics.median(resets.values()),
        "reset_max_s": max(resets.values()),
        "uncached_steps": len(uncached), "uncached_outcomes": failures,
        "uncached_median_ms": 1000 * statistics.median(uncached),
        "uncached_p90_ms": 1000 * _p90(uncached),
        "uncached_max_ms": 1000 * max(uncached),
        "uncached_phase_median_ms": {k: statistics.median(v) for k, v in phases.items()},
        "uncached_phase_steps": {k: len(v) for k, v in phases.items()},
        "uncached_compile_sources": sources,
        "cached_steps": len(actions) - again, "cached_steps_per_s": cached_rate,
        "replayed_steps_checked_again": again}
    result["targets_met"] = {
        "uncached_median_ms": result["uncached_median_ms"] <= TARGETS["uncached_median_ms"],
        "uncached_p90_ms": result["uncached_p90_ms"] <= TARGETS["uncached_p90_ms"],
        "reset_max_s": result["reset_max_s"] <= TARGETS["reset_max_s"],
        "cached_steps_per_s": cached_rate >= TARGETS["cached_steps_per_s"]}
    return result


def provenance() -> dict:
    from argus_env.envs.record import run_provenance
    return {**run_provenance(ROOT), "load_average_before": list(os.getloadavg())}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=40, help="uncached steps to time per task")
    ap.add_argument("--tasks", nargs="*", help="task names (default: every registered task)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", type=Path)
    ap.add_argument("--cache-dir", type=Path,
                    help="ARGUS_CACHE_DIR for the run (default: an empty temporary folder)")
    args = ap.parse_args(argv)
    import tempfile
    cache = args.cache_dir or Path(tempfile.mkdtemp(prefix="argus-env-speed-"))
    os.environ["ARGUS_CACHE_DIR"] = str(cache)
    import argus_env  # noqa: F401
    from argus_env.registry import TASKS

    names = args.tasks or list(TASKS)
    unknown = [n for n in names if n not in TASKS]
    if unknown:
        ap.error(f"unknown task {unknown[0]!r}; registered: {', '.join(TASKS)}")
    from argus_env.measure.legality import verdict_stage
    result = {"provenance": {**provenance(), "cache_dir": "given" if args.cache_dir else
                             "empty temporary folder", "verdict_stage": verdict_stage()},
              "targets": TARGETS, "steps_per_task": args.steps, "tasks": {}}
    for name in names:
        result["tasks"][name] = bench_task(name, TASKS[name].env_id, args.steps, args.seed)
        print(name, json.dumps({k: v for k, v in result["tasks"][name].items()
                                if k != "reset_s"}), flush=True)
    result["provenance"]["load_average_after"] = list(os.getloadavg())
    result["all_targets_met"] = all(all(t["targets_met"].values())
                                    for t in result["tasks"].values())
    print(json.dumps(result, indent=1))
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(result, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
