"""The LLM planner with memory and knowledge, without them, and random search on GEMM.

    python benchmarks/llm_planner_compare.py                       # SmolLM2-135M on CPU
    python benchmarks/llm_planner_compare.py --device cuda --tag h200
    python benchmarks/llm_planner_compare.py --model /models/Qwen2.5-7B-Instruct.Q4_K_M.gguf
    python benchmarks/llm_planner_compare.py --base-url http://127.0.0.1:8000/v1 --model qwen \
        --mode free                                                # any OpenAI-compatible server

For each seed and shape every arm plays `--episodes` episodes of `--budget` steps in a
row (measure "model" or "table"):

- `llm+memory+knowledge`: the planner with retrieved knowledge entries and an episodic
  memory that starts empty for each seed and persists across that seed's episodes and
  shapes (in-context learning across episodes);
- `llm`: the same planner with neither (no knowledge, no memory);
- `random`: random search over legal actions (agents/search/random_search.py), a new
  seed each episode.

The figure of merit is the best fraction of the library anchor (cuBLAS on an H200)
reached so far, against env steps summed over the episodes. Output:
`benchmarks/results/llm_planner_compare_<tag>.json` (every episode's best, actions and
time, the curves, the configuration and versions) and `..._<tag>.png`.
Expect little from a 135M model: its ranking of the legal actions is close to its prior;
what the memory adds is mostly copying the best path found so far.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
ARMS = ("llm+memory+knowledge", "llm", "random")


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default="smollm2", help="model name, .gguf file, HF folder, or served model")
    p.add_argument("--base-url", default=None, help="OpenAI-compatible endpoint (http://host:port/v1)")
    p.add_argument("--device", default="cpu", help="torch device of a local model")
    p.add_argument("--mode", default="scoring", choices=["scoring", "free"])
    p.add_argument("--temperature", type=float, default=0.25,
                   help="scoring: sample actions from softmax(score / T); 0 = greedy")
    p.add_argument("--measure", default="model", choices=["model", "table"])
    p.add_argument("--shapes", nargs="+", default=["decode-16", "ragged-1000", "small-m-512"])
    p.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    p.add_argument("--episodes", type=int, default=3)
    p.add_argument("--budget", type=int, default=12)
    p.add_argument("--arms", nargs="+", default=list(ARMS), choices=ARMS)
    p.add_argument("--retrieval", default="auto", choices=["auto", "embedding", "bm25"])
    p.add_argument("--threads", type=int, default=None, help="torch CPU threads of a local model")
    p.add_argument("--contrast", type=float, default=0.5, help="planner contrast (context-aware scoring)")
    p.add_argument("--prompt-tokens", type=int, default=640)
    p.add_argument("--merge", nargs="+", default=None,
                   help="combine result JSONs of runs over disjoint seeds (e.g. run in parallel)")
    p.add_argument("--tag", default="cpu")
    p.add_argument("--out-dir", default=str(ROOT / "benchmarks" / "results"))
    return p.parse_args(argv)


def play(envs: dict, arm: str, seed: int, shape: str, episode: int, args, shared) -> dict:
    """One episode of one arm (random search acts on the discrete env, the planner on the
    text env); returns its row."""
    from argus_env.agents.llm import planner
    from argus_env.agents.search import random_search
    t0 = time.perf_counter()
    if arm == "random":
        rec = random_search.run(envs["discrete"], random_search.Args(budget=args.budget, seed=seed * 1000 + episode,
                                                        shape=shape))
    else:
        full = arm == "llm+memory+knowledge"
        pa = planner.Args(budget=args.budget, seed=seed * 1000 + episode, shape=shape, model=args.model,
                          base_url=args.base_url, mode=args.mode, temperature=args.temperature,
                          device=args.device, knowledge=full, memory=full, retrieval=args.retrieval,
                          threads=args.threads, contrast=args.contrast, prompt_tokens=args.prompt_tokens)
        rec = planner.run(envs["text"], pa, backend=shared["backend"],
                          retriever=shared["retriever"] if full else None,
                          memory=shared["memory"][seed] if full else None)
    best = [0.0]
    for _, frac in rec.trace:
        best.append(max(best[-1], frac))
    fallbacks = sum(t["source"] == "fallback" for t in rec.transcript)
    return {"arm": arm, "seed": seed, "shape": shape, "episode": episode, "steps": rec.steps,
            "best_frac": rec.best_frac_anchor, "baseline_tflops": rec.baseline_tflops,
            "best_tflops": rec.best_tflops, "curve": best[1:], "actions": rec.action_labels,
            "fallbacks": fallbacks, "invalid": rec.invalid_actions,
            "seconds": round(time.perf_counter() - t0, 2)}


def curves(rows: list[dict], args) -> dict:
    """Per arm: best-so-far fraction vs env steps over the episodes, mean and std over
    seeds x shapes (each (seed, shape) run's curve is padded to episodes x budget)."""
    length = args.episodes * args.budget
    out = {}
    for arm in args.arms:
        runs = []
        for seed in args.seeds:
            for shape in args.shapes:
                eps = sorted((r for r in rows if (r["arm"], r["seed"], r["shape"]) == (arm, seed, shape)),
                             key=lambda r: r["episode"])
                curve, best = [], 0.0
                for r in eps:
                    pts = r["curve"] + [r["curve"][-1] if r["curve"] else 0.0] * (args.budget - len(r["curve"]))
                    for v in pts[:args.budget]:
                        best = max(best, v)
                        curve.append(best)
                if curve:
                    runs.append(curve[:length] + [curve[-1]] * (length - len(curve)))
        if runs:
            a = np.array(runs)
            out[arm] = {"mean": a.mean(0).round(4).tolist(), "std": a.std(0).round(4).tolist(),
                        "runs": len(runs)}
    return out


def summary(rows: list[dict], args) -> dict:
    out = {}
    for arm in args.arms:
        per_shape = {}
        for shape in args.shapes:
            finals = [max(r["best_frac"] for r in rows if (r["arm"], r["seed"], r["shape"]) == (arm, s, shape))
                      for s in args.seeds]
            by_ep = [float(np.mean([r["best_frac"] for r in rows if (r["arm"], r["shape"], r["episode"]) ==
                                    (arm, shape, e)])) for e in range(args.episodes)]
            per_shape[shape] = {"best_mean": round(float(np.mean(finals)), 4),
                                "best_std": round(float(np.std(finals)), 4),
                                "episode_best_mean": [round(x, 4) for x in by_ep]}
        allrows = [r for r in rows if r["arm"] == arm]
        out[arm] = {"shapes": per_shape,
                    "geomean_best": round(float(np.exp(np.mean([np.log(max(v["best_mean"], 1e-9))
                                                                for v in per_shape.values()]))), 4),
                    "seconds_per_step": round(sum(r["seconds"] for r in allrows) /
                                              max(1, sum(r["steps"] for r in allrows)), 3),
                    "fallback_steps": sum(r["fallbacks"] for r in allrows)}
    return out


def plot(result: dict, path: Path, args) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(7, 4.2))
    x = np.arange(1, args.episodes * args.budget + 1)
    for arm, c in result["curves"].items():
        m, s = np.array(c["mean"]), np.array(c["std"])
        ax.plot(x, m, label=f"{arm} (final {m[-1]:.2f})")
        ax.fill_between(x, m - s, m + s, alpha=0.15)
    for e in range(1, args.episodes):
        ax.axvline(e * args.budget + 0.5, color="grey", lw=0.5, ls=":")
    ax.set_xlabel(f"env steps ({args.episodes} episodes x {args.budget})")
    ax.set_ylabel("best fraction of library (cuBLAS) so far")
    ax.set_title(f"GEMM ({args.measure}), {len(args.shapes)} shapes x {len(args.seeds)} seeds; "
                 f"{result['config']['backend']}", fontsize=9)
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def merge(args) -> int:
    """One result from several runs over disjoint seeds (same configuration otherwise)."""
    parts = [json.loads(Path(f).read_text()) for f in args.merge]
    cfg = dict(parts[0]["config"])
    cfg["seeds"] = sorted({s for p in parts for s in p["config"]["seeds"]})
    cfg["tag"], cfg["merge"] = args.tag, [Path(f).name for f in args.merge]
    run = argparse.Namespace(**cfg)
    keyed = {}  # a later file's row replaces an earlier one of the same arm, seed, shape, episode
    for p in parts:
        for r in p["rows"]:
            keyed[(r["arm"], r["seed"], r["shape"], r["episode"])] = r
    rows = list(keyed.values())
    result = {**parts[0], "tag": args.tag, "config": cfg, "rows": rows,
              "seconds": round(max(p["seconds"] for p in parts), 1),
              "summary": summary(rows, run), "curves": curves(rows, run)}
    out = Path(args.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    (out / f"llm_planner_compare_{args.tag}.json").write_text(json.dumps(result, indent=1))
    plot(result, out / f"llm_planner_compare_{args.tag}.png", run)
    print(json.dumps(result["summary"], indent=1))
    return 0


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.merge:
        return merge(args)
    import gymnasium as gym

    import argus_env  # noqa: F401
    from argus_env.agents.knowledge.retrieve import Retriever
    from argus_env.agents.llm import planner
    from argus_env.agents.llm.memory import Memory
    from argus_env.envs.record import versions
    llm_arms = [a for a in args.arms if a != "random"]
    backend = planner.get_backend(planner.Args(model=args.model, base_url=args.base_url, device=args.device,
                                               temperature=args.temperature, threads=args.threads)) if llm_arms else None
    retriever = Retriever(method=args.retrieval) if "llm+memory+knowledge" in args.arms else None
    tmp = Path(tempfile.mkdtemp(prefix="llm-memory-"))
    shared = {"backend": backend, "retriever": retriever,
              "memory": {s: Memory(tmp / f"memory-seed{s}.json") for s in args.seeds}}
    envs = {mode: gym.make("Argus-GEMM-v0", mode=mode, measure=args.measure,
                           max_episode_steps=args.budget + 1) for mode in ("text", "discrete")}
    rows, t0 = [], time.perf_counter()
    for seed in args.seeds:
        for arm in args.arms:
            for episode in range(args.episodes):
                for shape in args.shapes:
                    row = play(envs, arm, seed, shape, episode, args, shared)
                    rows.append(row)
                    print(f"seed {seed} {arm:22s} ep {episode} {shape:12s} best {row['best_frac']:.3f} "
                          f"({row['steps']} steps, {row['seconds']:.1f} s, {row['fallbacks']} fallbacks)",
                          flush=True)
    for env in envs.values():
        env.close()
    result = {"benchmark": "llm_planner_compare", "tag": args.tag,
              "config": {**vars(args), "backend": getattr(backend, "name", None),
                         "retrieval_method": getattr(retriever, "method", None),
                         "planner_defaults": {k: v for k, v in vars(planner.Args()).items()
                                              if k in ("contrast", "prompt_tokens", "knowledge_k",
                                                       "memory_k", "fix_steps", "regress_tol")}},
              "machine": {"python": platform.python_version(), "cpu_count": os.cpu_count(),
                          "device": _device_name(args.device)},
              "versions": versions(), "seconds": round(time.perf_counter() - t0, 1),
              "summary": summary(rows, args), "curves": curves(rows, args), "rows": rows,
              "lessons_seed0": [x.text() for x in shared["memory"][args.seeds[0]].lessons.values()]
              if "llm+memory+knowledge" in args.arms else []}
    out = Path(args.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    (out / f"llm_planner_compare_{args.tag}.json").write_text(json.dumps(result, indent=1))
    plot(result, out / f"llm_planner_compare_{args.tag}.png", args)
    print(json.dumps(result["summary"], indent=1))
    return 0


def _device_name(device: str) -> str:
    if device.startswith("cuda"):
        import torch
        return torch.cuda.get_device_name(0)
    return platform.processor() or platform.machine()


if __name__ == "__main__":
    sys.exit(main())
