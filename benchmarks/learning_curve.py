"""Learning curves: PPO trained on the train shapes, greedy and random search, all judged
on the held-out (test-split) shapes of one env (`--env`, GEMM by default).

    python benchmarks/learning_curve.py                        # ~20 min on 2 CPU cores
    python benchmarks/learning_curve.py --seeds 0 --iterations 2 --eval-every 1 \\
        --budget 8 --tag smoke                                 # a minute: does it run?

y, for every agent: the best fraction of the library anchor (on GEMM cuBLAS on the H200) found
so far on a held-out shape, as the geometric mean over the held-out shapes; curves are
the mean over seeds, shaded between the seeds' min and max. Measurement: `measure=
"table"` (H200 measurements shipped as data, the calibrated cost model for programs the
table lacks), so every figure is exactly reproducible on any CPU.

What x means differs between the agents, and the figure has one panel for each:

- random, greedy (`agents/search`): env steps taken on the held-out shape itself, one
  episode of `--budget` steps per shape and seed (their resets, undos and the final
  submit count as steps). Left panel, x from 0 to the budget.
- ppo (`agents/rl/ppo.py`): env steps PPO sampled for training on the train-split shapes
  (RLlib's lifetime counter), none on the held-out shapes. Training saves the policy
  before the first iteration and every `--eval-every` iterations; each saved policy then
  plays one episode of `--budget` steps on each held-out shape with the PPO agent's
  `run` (greedy: the argmax over the legal actions; submits at the budget's last step),
  and its y is the best found in that episode. These evaluation steps are not counted
  in x. Right panel, with the search agents' y at the full budget as horizontal bands.
  The left panel adds the final policy's held-out episode step by step (dashed); the
  third panel is PPO's mean training episode return (the reward is the log gain in
  throughput, minus penalties for violations), which shows learning on the train shapes.

Every held-out episode runs in the env the bench uses (`correctness="interpreter"`: each
new program's Triton runs against PyTorch under the interpreter). The search agents and
the evaluation episodes share one evaluator per env (a cache of answers that depend only
on program and shape), which changes no figure. Training uses the PPO settings of
`configs/agents/ppo.yaml` with the overrides recorded in the JSON: 2 env runners, 128
steps a batch in minibatches of 32 over 6 epochs, learning rate 1e-3, episodes of 16
steps, and no numerical check (`correctness="none"`, about
3x faster on 2 cores: the invariant checker still judges every program, and the table
carries the GPU's own verdict on the programs it holds). Output:
`benchmarks/results/learning_curve_<tag>.json` (configuration, per-seed curves and
per-shape figures, PPO's training metrics, provenance) and `learning_curve_<tag>.png`.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
ENV_ID = "Argus-GEMM-v0"   # the default env
SEARCH = ("random", "greedy")


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--env", default=ENV_ID, help="registered env id (default: %(default)s)")
    p.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    p.add_argument("--budget", type=int, default=30,
                   help="env steps per held-out episode (every agent)")
    p.add_argument("--measure", default="table", choices=["table", "model"])
    p.add_argument("--correctness", default="interpreter", choices=["interpreter", "none"],
                   help="numerical check of new programs on the held-out shapes")
    p.add_argument("--train-correctness", default="none", choices=["interpreter", "none"],
                   help="numerical check of new programs in PPO's training envs")
    p.add_argument("--test-shapes", nargs="+", default=None,
                   help="held-out shapes (default: the whole test split)")
    p.add_argument("--train-shapes", nargs="+", default=None,
                   help="PPO's training shapes (default: the whole train split)")
    p.add_argument("--iterations", type=int, default=20, help="PPO iterations per seed")
    p.add_argument("--eval-every", type=int, default=4, help="evaluate every N iterations")
    p.add_argument("--batch", type=int, default=128, help="PPO env steps per iteration")
    p.add_argument("--minibatch", type=int, default=32)
    p.add_argument("--epochs", type=int, default=6)
    p.add_argument("--lr", type=float, default=1e-3,
                   help="higher than the YAML's 3e-4: few iterations fit in the time")
    p.add_argument("--env-runners", type=int, default=2)
    p.add_argument("--agents", nargs="+", default=["ppo", *SEARCH],
                   choices=["ppo", *SEARCH])
    p.add_argument("--work-dir", default=None, help="checkpoints (default: a temp folder)")
    p.add_argument("--reuse", action="store_true",
                   help="play the policies an earlier run left in --work-dir (seed<k>/<run>/final) "
                        "instead of training: its checkpoints, metrics and training seconds")
    p.add_argument("--no-repeats", action="store_true",
                   help="PPO's held-out play: from a program met again, the best action not "
                        "yet taken from it (`ppo.Args.no_repeats`) instead of the argmax")
    p.add_argument("--use-budget", action="store_true",
                   help="PPO's held-out play: never submit before the budget's last step "
                        "(`ppo.Args.use_budget`), so it takes the steps random and greedy take")
    p.add_argument("--out-dir", default=str(ROOT / "benchmarks" / "results"))
    p.add_argument("--tag", default=None,
                   help="output name (default: the task's name and _table, gemm_table for GEMM)")
    p.add_argument("--replot", default=None, metavar="JSON",
                   help="only redraw the figure of a results file, next to it")
    return p.parse_args(argv)


# -------------------------------------------------------------------- episodes
class Envs:
    """Held-out envs as the bench makes them, sharing one evaluator per backend."""

    def __init__(self, args):
        self.args, self.evaluators = args, {}

    def make(self):
        import gymnasium as gym

        import argus_env  # noqa: F401
        from argus_env.bench.runner import share
        env = gym.make(self.args.env, measure=self.args.measure, correctness=self.args.correctness,
                       split="test", max_episode_steps=self.args.budget)
        share(env, self.evaluators)
        return env

    def baseline(self, shape: str) -> float:
        """The starting program's fraction of the library (y at step 0)."""
        env = self.make()
        _, info = env.reset(seed=0, options={"shape": shape})
        env.close()
        return float(info["best_frac_anchor"])


def best_so_far(record, start: float, budget: int) -> list[float]:
    """y at env steps 0..budget from the record's trace (held after the episode ends)."""
    curve, best, trace = [start], start, dict(record.trace)
    for step in range(1, budget + 1):
        best = max(best, trace.get(step, best))
        curve.append(best)
    return curve


def episode(env, module, margs, start: float, budget: int) -> dict:
    t0 = time.perf_counter()
    rec = module.run(env, margs)
    env.close()
    return {"best": rec.best_frac_anchor, "submitted": rec.final_frac_anchor,
            "steps": rec.env_steps, "curve": best_so_far(rec, start, budget),
            "actions": rec.action_labels, "seconds": round(time.perf_counter() - t0, 2)}


def geomean(xs) -> float:
    xs = np.maximum(np.asarray(xs, dtype=float), 1e-9)
    return float(np.exp(np.mean(np.log(xs))))


def run_search(agent: str, seeds, shapes, starts, envs: Envs) -> dict:
    from argus_env.agents import load_agent
    module, budget = load_agent(agent), envs.args.budget
    per_seed = {}
    for seed in seeds:
        per_shape = {s: episode(envs.make(), module,
                                module.Args(budget=budget, seed=seed, shape=s), starts[s], budget)
                     for s in shapes}
        curve = [geomean(c) for c in zip(*(per_shape[s]["curve"] for s in shapes))]
        per_seed[str(seed)] = {"curve": curve, "per_shape": per_shape}
        each = ", ".join(f"{s} {per_shape[s]['best']:.3f}" for s in shapes)
        print(f"{agent} seed {seed}: best {curve[-1]:.3f} ({each})", flush=True)
    return per_seed


# -------------------------------------------------------------------- PPO
def ppo_args(args, seed: int, work: Path):
    from argus_env.agents.rl import ppo
    return ppo.load_args(
        ppo.DEFAULT_CONFIG, seed=seed, env_id=args.env, measure=args.measure,
        correctness=args.train_correctness, train_shapes=args.train_shapes,
        max_episode_steps=16,
        iterations=args.iterations, checkpoint_every=args.eval_every,
        train_batch_size=args.batch, minibatch_size=args.minibatch, num_epochs=args.epochs,
        lr=args.lr, num_env_runners=args.env_runners, num_cpus_per_env_runner=1,
        checkpoint_dir=str(work / f"seed{seed}"), track=False, budget=args.budget)


def trained(work: Path, seed: int) -> Path:
    """The final checkpoint an earlier run of this script left for `seed` under `work`."""
    found = sorted((work / f"seed{seed}").glob("*/final"))
    if not found:
        raise SystemExit(f"--reuse: no trained policy under {work / f'seed{seed}'} "
                         f"(expected <run>/final, as training leaves it)")
    return found[-1]


def run_ppo(args, seeds, shapes, starts, envs: Envs, work: Path) -> dict:
    from argus_env.agents.rl import ppo
    per_seed = {}
    for seed in seeds:
        pargs = ppo_args(args, seed, work)
        t0 = time.perf_counter()
        final = trained(work, seed) if args.reuse else Path(ppo.train(pargs))
        train_s = time.perf_counter() - t0 if not args.reuse else None
        metrics = [json.loads(x) for x in (final.parent / "metrics.jsonl").read_text().splitlines()]
        steps = {0: 0, **{m["iteration"]: int(m["env_steps_sampled_lifetime"]) for m in metrics}}
        points, t1 = [], time.perf_counter()
        for ckpt in sorted(final.parent.glob("iter_*")):
            it = int(ckpt.name.split("_")[1])
            margs = lambda s: ppo.Args(checkpoint=str(ckpt), budget=args.budget, seed=seed,  # noqa: E731
                                       shape=s, no_repeats=args.no_repeats,
                                       use_budget=args.use_budget)
            per_shape = {s: episode(envs.make(), ppo, margs(s), starts[s], args.budget)
                         for s in shapes}
            y = geomean([per_shape[s]["best"] for s in shapes])
            points.append({"iteration": it, "env_steps": steps[it], "y": y,
                           "per_shape": per_shape})
            print(f"ppo seed {seed} iteration {it} ({steps[it]} train steps): held-out best "
                  f"{y:.3f}", flush=True)
        per_seed[str(seed)] = {"points": points, "train_metrics": metrics,
                               "train_seconds": round(train_s, 1) if train_s is not None
                               else "trained by an earlier run (--reuse)",
                               "eval_seconds": round(time.perf_counter() - t1, 1),
                               "final_curve": [geomean(c) for c in zip(
                                   *(points[-1]["per_shape"][s]["curve"] for s in shapes))]}
    return per_seed


# -------------------------------------------------------------------- summary and plot
def band(curves) -> dict:
    a = np.asarray(curves, dtype=float)
    return {"mean": a.mean(0).tolist(), "min": a.min(0).tolist(), "max": a.max(0).tolist()}


def summarize(result: dict) -> dict:
    out = {}
    for agent in SEARCH:
        if agent in result["agents"]:
            seeds = result["agents"][agent]["per_seed"].values()
            result["agents"][agent].update(band([s["curve"] for s in seeds]))
            finals = [s["curve"][-1] for s in seeds]
            out[agent] = {"x": f"{result['config']['budget']} env steps on each held-out shape",
                          "mean": float(np.mean(finals)), "std": float(np.std(finals)),
                          "min": min(finals), "max": max(finals)}
    if "ppo" in result["agents"]:
        ppo = result["agents"]["ppo"]
        seeds = list(ppo["per_seed"].values())
        ppo["x"] = np.mean([[p["env_steps"] for p in s["points"]] for s in seeds], 0).tolist()
        ppo.update(band([[p["y"] for p in s["points"]] for s in seeds]))
        ppo["final_curve"] = band([s["final_curve"] for s in seeds])
        finals = [s["points"][-1]["y"] for s in seeds]
        first = [s["points"][0]["y"] for s in seeds]
        out["ppo"] = {"x": f"{ppo['x'][-1]:.0f} training env steps on the train shapes, then "
                           f"{result['config']['budget']} on each held-out shape",
                      "mean": float(np.mean(finals)), "std": float(np.std(finals)),
                      "min": min(finals), "max": max(finals),
                      "untrained_mean": float(np.mean(first))}
    return out


def plot(result: dict, path: Path) -> None:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    cfg, agents = result["config"], result["agents"]
    colors = {"random": "#7f7f7f", "greedy": "#1f77b4", "ppo": "#d62728"}
    fig = Figure(figsize=(15, 4.2), dpi=110)
    FigureCanvasAgg(fig)
    left, right, train = fig.subplots(1, 3, gridspec_kw={"width_ratios": [1, 1, 0.8]})
    steps = np.arange(cfg["budget"] + 1)
    for agent in SEARCH:
        if agent in agents:
            a = agents[agent]
            left.plot(steps, a["mean"], color=colors[agent], label=agent)
            left.fill_between(steps, a["min"], a["max"], color=colors[agent], alpha=0.2)
            right.axhline(a["mean"][-1], color=colors[agent], lw=1,
                          label=f"{agent} ({cfg['budget']} steps on the shape)")
            right.axhspan(a["min"][-1], a["max"][-1], color=colors[agent], alpha=0.12)
    if "ppo" in agents:
        p = agents["ppo"]
        f = p["final_curve"]
        left.plot(steps, f["mean"], color=colors["ppo"], ls="--",
                  label=f"ppo after {p['x'][-1]:.0f} training steps (greedy play)")
        left.fill_between(steps, f["min"], f["max"], color=colors["ppo"], alpha=0.12)
        right.plot(p["x"], p["mean"], color=colors["ppo"], marker="o", ms=3,
                   label="ppo (greedy play, budget steps per shape)")
        right.fill_between(p["x"], p["min"], p["max"], color=colors["ppo"], alpha=0.2)
        runs = [s["train_metrics"] for s in p["per_seed"].values()]
        k = min(len(r) for r in runs)
        xs = np.mean([[m["env_steps_sampled_lifetime"] for m in r[:k]] for r in runs], 0)
        ret = band([[m["episode_return_mean"] for m in r[:k]] for r in runs])
        train.plot(xs, ret["mean"], color=colors["ppo"], label="ppo")
        train.fill_between(xs, ret["min"], ret["max"], color=colors["ppo"], alpha=0.2)
        train.set(xlabel="PPO training env steps (train shapes)",
                  ylabel="mean episode return (16-step episodes)",
                  title="PPO's training return")
    n = len(cfg["seeds"])
    left.set(xlabel="env steps on the held-out shape",
             ylabel="best fraction of the library so far\n(geomean over held-out shapes)",
             title=f"Search on the held-out shapes ({n} seeds, min-max)")
    right.set(xlabel="PPO training env steps (train shapes)",
              ylabel="best fraction of the library in a held-out episode",
              title=f"PPO on held-out shapes during training ({n} seeds)")
    for ax in (left, right, train):
        ax.grid(alpha=0.3)
    for ax in (left, right):
        ax.legend(fontsize=7, loc="lower right")
    fig.suptitle(f"{cfg.get('env', ENV_ID)}, measure={cfg['measure']} (H200), held-out shapes: "
                 f"{', '.join(result['shapes']['test'])}", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, metadata={"Software": None})


def provenance(argv) -> dict:
    from importlib import metadata

    from argus_env.envs.record import versions
    def git(*a):
        return subprocess.run(["git", *a], cwd=ROOT, capture_output=True, text=True).stdout.strip()
    vers = versions()
    for dist in ("ray", "matplotlib"):
        vers[dist] = metadata.version(dist)
    return {"commit": git("rev-parse", "HEAD"),
            "dirty_files": git("status", "--porcelain", "--untracked-files=no").splitlines(),
            "date_started": datetime.datetime.now(datetime.timezone.utc).isoformat(
                timespec="seconds"),
            "command": "python benchmarks/learning_curve.py " + " ".join(argv),
            "versions": vers,
            "machine": {"platform": platform.platform(), "processor": platform.processor(),
                        "cpu_count": os.cpu_count(), "loadavg_at_start": list(os.getloadavg())}}


def env_task(env_id: str):
    """The task behind a registered env id (from the registry: no env is made)."""
    from argus_env.registry import env_ids
    from argus_env.task import get_task
    ids = env_ids()
    if env_id not in ids:
        raise SystemExit(f"--env {env_id!r} is not a registered env id: {', '.join(sorted(ids))}")
    return get_task(ids[env_id])


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = parse_args(argv)
    if args.replot:
        plot(json.loads(Path(args.replot).read_text()), Path(args.replot).with_suffix(".png"))
        return 0
    task = env_task(args.env)
    args.tag = args.tag or f"{task.name}_table"
    shapes = args.test_shapes or [c.name for c in task.shape_cases("test")]
    train = args.train_shapes or [c.name for c in task.shape_cases("train")]
    prov = provenance(argv)   # the checkout as the run starts
    envs = Envs(args)
    starts = {s: envs.baseline(s) for s in shapes}
    t0 = time.perf_counter()
    result = {"what": __doc__.split("\n\n")[2], "y": "geomean over the held-out shapes of the "
              f"best fraction of the library anchor ({task.name}, H200 tables) found so far",
              "x": {"random": "env steps on the held-out shape (0..budget)",
                    "greedy": "env steps on the held-out shape (0..budget)",
                    "ppo": "PPO training env steps on the train shapes (RLlib's lifetime "
                           "counter); y from one greedy episode of `budget` steps per held-out "
                           "shape with the policy saved at that point, steps not counted in x"},
              "config": {**vars(args), "env_id": args.env},
              "shapes": {"train": train, "test": shapes, "baseline_frac": starts},
              "agents": {}}
    seconds = {}
    for agent in args.agents:
        t = time.perf_counter()
        if agent == "ppo":
            import tempfile
            os.environ.setdefault("RAY_AUTH_MODE", "disabled")   # a local instance
            work = Path(args.work_dir or tempfile.mkdtemp(prefix="argus-lc-"))
            from argus_env.agents.rl import ppo
            result["config"]["ppo_args"] = {k: v for k, v in vars(ppo_args(args, 0, work)).items()
                                            if k not in ("seed", "checkpoint_dir")}
            if not args.reuse:   # playing a saved policy needs no Ray
                from argus_env.measure.pool import ensure_ray
                ensure_ray(num_cpus=max(args.env_runners, 2), temp_dir=str(work / "ray"),
                           log_to_driver=False)
            result["agents"]["ppo"] = {"per_seed": run_ppo(args, args.seeds, shapes, starts,
                                                           envs, work)}
        else:
            result["agents"][agent] = {"per_seed": run_search(agent, args.seeds, shapes,
                                                              starts, envs)}
        seconds[agent] = round(time.perf_counter() - t, 1)
    result["summary"] = summarize(result)
    result["seconds"] = {**seconds, "total": round(time.perf_counter() - t0, 1)}
    result["provenance"] = {**prov, "date_finished": datetime.datetime.now(
        datetime.timezone.utc).isoformat(timespec="seconds"), "loadavg_at_end": list(os.getloadavg())}
    out = Path(args.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"learning_curve_{args.tag}.json"
    path.write_text(json.dumps(result, indent=1))
    plot(result, path.with_suffix(".png"))
    for agent, s in result["summary"].items():
        print(f"{agent:7s} {s['mean']:.3f} (min {s['min']:.3f}, max {s['max']:.3f}, "
              f"std {s['std']:.3f}): {s['x']}")
    print(f"{result['seconds']['total']:.0f} s; wrote {path} and {path.with_suffix('.png')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
