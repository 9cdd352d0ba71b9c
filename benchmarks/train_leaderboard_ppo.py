"""Train the PPO policies the leaderboard plays: one per registered env and seed.

Each policy is trained on its env's train split (`measure="table"`, no numerical check
during training, as in `benchmarks/learning_curve.py`), and its final checkpoint is copied
to `<out>/<env id>/seed<k>/`, where `configs/bench/leaderboard.yaml` finds it through
`checkpoint: benchmarks/results/leaderboard/ppo/{env}/seed{seed}`. A policy already there
is kept (delete its folder to retrain); `--from ENV=DIR` adopts finished runs instead (a
folder holding `seed<k>/<run>/final`, as the learning-curve benchmark leaves them).

    python benchmarks/train_leaderboard_ppo.py                       # every env, seeds 0-2
    python benchmarks/train_leaderboard_ppo.py --env Argus-MoE-v0 --iterations 6
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--env", action="append", help="env id (default: every registered id)")
    ap.add_argument("--seeds", default="0,1,2")
    ap.add_argument("--iterations", type=int, default=10, help="PPO iterations per policy")
    ap.add_argument("--batch", type=int, default=128, help="env steps per iteration")
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--work-dir", type=Path, default=Path("runs/ppo-leaderboard"))
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks/results/leaderboard/ppo")
    ap.add_argument("--from", dest="adopt", action="append", default=[],
                    help="ENV=DIR: copy DIR/seed<k>/*/final instead of training")
    args = ap.parse_args(argv)

    from argus_env.envs import ENV_IDS
    from argus_env.agents.rl import ppo
    adopt = dict(a.split("=", 1) for a in args.adopt)
    seeds = [int(s) for s in args.seeds.split(",")]
    for env_id in args.env or sorted(ENV_IDS):
        for seed in seeds:
            dest = args.out / env_id / f"seed{seed}"
            if (dest / "algorithm_state.pkl").exists():
                print(f"{env_id} seed {seed}: kept {dest}")
                continue
            t0 = time.time()
            if env_id in adopt:
                found = sorted(Path(adopt[env_id]).glob(f"seed{seed}/*/final"))
                if not found:
                    raise SystemExit(f"no seed{seed}/*/final under {adopt[env_id]}")
                src, how = found[-1], {"adopted_from": str(found[-1])}
            else:
                pargs = ppo.load_args(
                    ppo.DEFAULT_CONFIG, seed=seed, env_id=env_id, measure="table",
                    correctness="none", max_episode_steps=16, iterations=args.iterations,
                    train_batch_size=args.batch, minibatch_size=32, num_epochs=6, lr=args.lr,
                    num_env_runners=2, num_cpus_per_env_runner=1,
                    checkpoint_dir=str(args.work_dir / env_id / f"seed{seed}"), track=False)
                src = Path(ppo.train(pargs))
                how = {"trained": {k: getattr(pargs, k) for k in (
                    "iterations", "train_batch_size", "minibatch_size", "num_epochs", "lr",
                    "measure", "correctness", "max_episode_steps", "num_env_runners")}}
            if dest.exists():
                shutil.rmtree(dest)
            shutil.copytree(src, dest)
            (dest / "provenance.json").write_text(json.dumps(
                {"env_id": env_id, "seed": seed, "split": "train", **how,
                 "date": time.strftime("%Y-%m-%d %H:%M:%S %z"),
                 "seconds": round(time.time() - t0, 1)}, indent=1))
            print(f"{env_id} seed {seed}: {dest} ({time.time() - t0:.0f} s)", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
