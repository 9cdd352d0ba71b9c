"""How long the cost model's feature extraction takes per program, on this CPU.

Random legal walks in each env (model measurement, no numerics), and for every program met
a fresh `Analysis` whose `features` are timed alone (the executed structure: live code,
loop trips per program, dots). With `--walked`, loop trips are counted by walking every
trip of the loops around the counted one (`ir.live._Work.same_each_trip` off), as before
one trip stood for all where every trip counts alike.

    python benchmarks/feature_time.py --out benchmarks/results/feature_time.json [--walked]
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


def time_env(env_id: str, steps: int, seed: int) -> dict:
    import gymnasium as gym
    import numpy as np

    import argus_env  # noqa: F401
    from argus_env.envs.analysis import Analysis
    env = gym.make(env_id, measure="model", correctness="none", max_episode_steps=100_000)
    core = env.unwrapped
    obs, _ = env.reset(seed=seed, options={"shape": core.task.shape_cases("train")[0].name})
    rng = np.random.default_rng(seed)
    ms = []
    for _ in range(steps):
        legal = np.flatnonzero(obs["action_mask"][:-2])   # neither undo nor submit
        obs, *_ = env.step(int(rng.choice(legal)))
        an = Analysis(core.state.program, core.sizes, core.task, core.target)
        t0 = time.perf_counter()
        an.features
        ms.append(1000 * (time.perf_counter() - t0))
    env.close()
    ms.sort()
    return {"programs": len(ms), "median_ms": statistics.median(ms),
            "p90_ms": ms[min(len(ms) - 1, int(0.9 * len(ms)))], "max_ms": ms[-1]}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--envs", nargs="+",
                    default=["Argus-GEMM-v0", "Argus-Attention-v0", "Argus-MoE-v0",
                             "Argus-RMSNorm-v0"])
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--walked", action="store_true",
                    help="walk every trip (the count before one trip stood for all)")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args(argv)
    if args.walked:
        from argus_env.ir import live
        live._Work.same_each_trip = lambda self, s: False
    from argus_env.envs.record import run_provenance
    out = {"what": __doc__.splitlines()[0], "walked": args.walked, "steps": args.steps,
           "seed": args.seed, "provenance": run_provenance(ROOT), "envs": {}}
    for env_id in args.envs:
        out["envs"][env_id] = r = time_env(env_id, args.steps, args.seed)
        print(f"{env_id:20s} median {r['median_ms']:7.1f} ms  p90 {r['p90_ms']:7.1f} ms  "
              f"max {r['max_ms']:7.1f} ms", flush=True)
    if args.out:
        args.out.write_text(json.dumps(out, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
