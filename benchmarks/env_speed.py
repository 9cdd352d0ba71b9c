"""Environment step speed in model mode on this machine.

- cached: steps whose programs were evaluated before (an episode replayed), so the step
  costs the transformation, the observation and the reward;
- uncached: steps that meet a new program: invariant check (z3), numerical check in the
  worker (Triton interpreter at the reduced shape) and the cost model.

    python benchmarks/env_speed.py --out benchmarks/results/env_speed.json
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

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=60, help="uncached steps to time")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args(argv)
    import gymnasium as gym
    import numpy as np

    import argus_env  # noqa: F401
    env = gym.make("Argus-GEMM-v0", max_episode_steps=10_000)
    obs, _ = env.reset(seed=0, options={"shape": "square-4096"})
    env.step(0)  # start the worker process outside the timing
    rng = np.random.default_rng(0)
    uncached, actions = [], []
    seen = set()
    while len(uncached) < args.steps:
        legal = np.flatnonzero(obs["action_mask"][:-2])
        a = int(rng.choice(legal))
        before = env.unwrapped.evaluator.misses
        t0 = time.perf_counter()
        obs, r, term, trunc, info = env.step(a)
        dt = time.perf_counter() - t0
        actions.append(a)
        if env.unwrapped.evaluator.misses > before and info["program"] not in seen:
            uncached.append(dt)
            seen.add(info["program"])
    # replay the same actions: every program is now cached
    env.reset(seed=0, options={"shape": "square-4096"})
    env.step(0)
    t0 = time.perf_counter()
    for a in actions:
        env.step(a)
    cached_rate = len(actions) / (time.perf_counter() - t0)
    result = {
        "provenance": {"date": time.strftime("%Y-%m-%d"), "machine": platform.machine(),
                       "cpus": os.cpu_count(), "python": platform.python_version()},
        "uncached_steps": len(uncached), "uncached_median_ms": 1000 * statistics.median(uncached),
        "uncached_p90_ms": 1000 * sorted(uncached)[int(0.9 * len(uncached))],
        "cached_steps": len(actions), "cached_steps_per_s": cached_rate}
    print(json.dumps(result, indent=1))
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
