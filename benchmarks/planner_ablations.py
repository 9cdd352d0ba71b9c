"""The scripted knowledge-guided planner (`kb`) and its ablations on GEMM's held-out shapes,
in table mode, against greedy and random search: best fraction of cuBLAS, regret against
the best program known, and how often each reaches 0.9 / 0.95 of the best known.

    python benchmarks/planner_ablations.py --long-budget 100    # ~25 min on 2 CPU cores
    python benchmarks/planner_ablations.py --budgets 10 --seeds 0 --shapes decode-64 \\
        --warmup-shapes decode-16 --tag smoke                    # a minute: does it run?

Arms (`ARMS`): the planner with knowledge, the checker's report and memory (`kb`); the
same code with `knowledge=False` (the entries' plans in a seeded random order, no
conditions, no expected gain), `report=False` (a refuted program is undone, never
repaired) and `memory=False`; greedy hill-climbing and random search as references. On
request (`--arms llm llm-no-report`), the LLM planner with the local SmolLM2-135M.

Memory protocol: an arm that uses memory first plays one episode on each warm-up shape of
GEMM's train split (`--warmup-shapes`, budget 30, the evaluation seed) with a fresh
in-process memory; every held-out episode then starts from a copy of that memory, so
held-out episodes never see each other and each seed's figure includes its own warm-up.
No held-out shape is ever in memory before its episode.

Measurement as in `benchmarks/search_budget_curves.py` (whose summary this reuses):
`measure="table"`, `correctness="none"` (the checker still judges every program), one env
per shape shared by its episodes; most programs met are priced by the cost model, and
each episode says whether its best program was an estimate. Output:
`benchmarks/results/planner_ablations_<tag>.json` with provenance.
"""

from __future__ import annotations

import argparse
import copy
import json
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))
import search_budget_curves as sbc  # noqa: E402  (the budget-curve summary and wrapper)

ENV_ID = "Argus-GEMM-v0"
#: arm -> (registered agent, Args fields besides budget, seed and shape)
ARMS = {
    "kb": ("kb", {}),
    "kb-no-knowledge": ("kb", {"knowledge": False}),
    "kb-no-report": ("kb", {"report": False}),
    "kb-no-memory": ("kb", {"memory": False}),
    "greedy": ("greedy", {}),
    "random": ("random", {}),
    # mode (b): the LLM planner with the local SmolLM2-135M, as the committed board plays it
    # (scoring the legal actions, sampling at temperature 0.5 with the episode's seed), no
    # memory (a warm-up would cost minutes of model time per seed)
    "llm": ("llm", {"memory": False, "memory_path": "none", "contrast": 0.0, "temperature": 0.5,
                    "threads": 2}),
    "llm-no-report": ("llm", {"memory": False, "memory_path": "none", "contrast": 0.0,
                              "temperature": 0.5, "threads": 2, "report": False}),
}
DEFAULT_ARMS = ["kb", "kb-no-knowledge", "kb-no-report", "kb-no-memory", "greedy", "random"]
WARMUP = ["decode-16", "ragged-1000", "square-4096", "small-m-512"]


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--arms", nargs="+", default=DEFAULT_ARMS, choices=list(ARMS))
    p.add_argument("--budgets", nargs="+", type=int, default=[10, 30])
    p.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    p.add_argument("--shapes", nargs="+", default=None,
                   help="held-out shapes (default: GEMM's whole test split)")
    p.add_argument("--long-budget", type=int, default=None,
                   help="one more budget, played only by --long-arms (time)")
    p.add_argument("--long-arms", nargs="+", default=["kb", "greedy"], choices=list(ARMS))
    p.add_argument("--warmup-shapes", nargs="+", default=WARMUP,
                   help="train shapes whose episodes fill the memory before evaluation")
    p.add_argument("--warmup-budget", type=int, default=30)
    p.add_argument("--save-memories", default=None, metavar="DIR",
                   help="write each memory arm's warm-up memory of the first seed to "
                        "DIR/planner_memory_gemm_<arm>.json, then stop (what configs/bench/planner.yaml reads)")
    p.add_argument("--correctness", default="none", choices=["none", "interpreter"])
    p.add_argument("--tag", default="gemm_table")
    p.add_argument("--note", action="append", default=[],
                   help="a line for the results' notes (what was reduced, and why)")
    return p.parse_args(argv)


def uses_memory(arm: str) -> bool:
    agent, extra = ARMS[arm]
    return agent == "kb" and extra.get("memory", True)


def make_env(split: str, budget: int, correctness: str):
    import gymnasium as gym
    return sbc.sources(gym.Wrapper)(gym.make(ENV_ID, measure="table", correctness=correctness,
                                             split=split, max_episode_steps=budget))


def warm_memories(args, arms: list[str]) -> tuple[dict, list[dict]]:
    """(arm, seed) -> the memory after the warm-up episodes, and those episodes' figures."""
    from argus_env.agents.llm import scripted
    from argus_env.agents.llm.memory import Memory
    memories, log = {}, []
    todo = [a for a in arms if uses_memory(a)]
    if not todo or not args.warmup_shapes:
        return memories, log
    env = make_env("train", args.warmup_budget, args.correctness)
    env.begin()
    for arm in todo:
        for seed in args.seeds:
            memory = Memory(None)
            for shape in args.warmup_shapes:
                t0 = time.perf_counter()
                rec = scripted.play(env, scripted.Args(budget=args.warmup_budget, seed=seed,
                                                       shape=shape, **ARMS[arm][1]), memory)
                log.append({"arm": arm, "seed": seed, "shape": shape, "best_frac": round(rec.best_frac_anchor, 4),
                            "seconds": round(time.perf_counter() - t0, 2)})
                print(f"warm-up {arm:16} seed {seed} {shape:12} best {rec.best_frac_anchor:.3f}", flush=True)
            memories[(arm, seed)] = memory
    env.close()
    return memories, log


def episode(env, arm: str, shape: str, budget: int, seed: int, memory) -> dict:
    from argus_env.agents import load_agent
    from argus_env.agents.llm import scripted
    name, extra = ARMS[arm]
    t0 = time.perf_counter()
    env.begin()
    if name == "kb":
        rec = scripted.play(env, scripted.Args(budget=budget, seed=seed, shape=shape, **extra),
                            copy.deepcopy(memory) if memory is not None else None)
    else:
        module = load_agent(name)
        rec = module.run(env, module.Args(budget=budget, seed=seed, shape=shape, **extra))
    best = [0.0] * budget
    for step, frac in rec.trace:       # best so far after each env step; held after the last
        best[step - 1:] = [frac] * (budget - step + 1)
    moves = [t for t in rec.transcript if "move" in t]
    return {"agent": arm, "shape": shape, "budget": budget, "seed": seed,
            "env_steps": rec.env_steps, "submitted": rec.submitted,
            "best_frac": rec.best_frac_anchor, "final_frac": rec.final_frac_anchor,
            "best_estimated": env.best_estimated if env.best >= rec.best_frac_anchor else None,
            "final_estimated": env.last_estimated,
            "best_so_far": [round(x, 5) for x in best],
            # what the planner did: violations met, repairs applied, plans played and kept
            "violations_met": dict(rec.violations_met),
            "repairs": sum(str(t.get("why", "")).startswith("repair") for t in rec.transcript),
            "plans": [t["move"] for t in moves if t.get("applied")],
            "plans_kept": [t["move"] for t in moves if t.get("kept")],
            "final_program_summary": rec.final_program.split('"""')[1] if '"""' in rec.final_program else "",
            "seconds": round(time.perf_counter() - t0, 2)}


def per_shape(episodes: list[dict], known: dict, budget: int) -> dict:
    """arm -> shape -> regret (mean, min, max over seeds) at `budget`."""
    out: dict = {}
    for e in episodes:
        if e["budget"] == budget:
            out.setdefault(e["agent"], {}).setdefault(e["shape"], []).append(e["best_frac"] / known[e["shape"]])
    return {a: {s: {"mean": round(float(np.mean(v)), 4), "min": round(min(v), 4), "max": round(max(v), 4)}
                for s, v in shapes.items()} for a, shapes in out.items()}


def behaviour(episodes: list[dict]) -> dict:
    """Per arm, over its episodes: violations met, repairs, and the plans most often kept."""
    out: dict = {}
    for arm in dict.fromkeys(e["agent"] for e in episodes):
        mine = [e for e in episodes if e["agent"] == arm]
        kept: dict = {}
        for e in mine:
            for p in e["plans_kept"]:
                kept[p] = kept.get(p, 0) + 1
        out[arm] = {"episodes": len(mine),
                    "violations_met": sum(sum(e["violations_met"].values()) for e in mine),
                    "repairs": sum(e["repairs"] for e in mine),
                    "plans_kept": dict(sorted(kept.items(), key=lambda kv: -kv[1])[:8])}
    return out


def main(argv=None) -> int:
    import argus_env  # noqa: F401  (registers the envs)
    from argus_env.envs import ENV_IDS
    from argus_env.envs.record import run_provenance
    from argus_env.task import get_task
    args = parse_args(argv)
    shapes = args.shapes or [c.name for c in get_task(ENV_IDS[ENV_ID]).shape_cases("test")]
    out_path = ROOT / "benchmarks" / "results" / f"planner_ablations_{args.tag}.json"
    t0 = time.perf_counter()
    memories, warmup = warm_memories(args, args.arms)
    if args.save_memories:
        for (arm, seed), memory in memories.items():
            if seed == args.seeds[0]:
                memory.path = Path(args.save_memories) / f"planner_memory_gemm_{arm}.json"
                memory.save()
                print(f"wrote {memory.path}")
        return 0
    episodes, known = [], {}
    for shape in shapes:
        env = make_env("test", max(args.budgets + [args.long_budget or 0]), args.correctness)
        _, info = env.reset(options={"shape": shape})
        known[shape] = info["best_known_frac_anchor"]
        for arm in args.arms:
            long = [args.long_budget] if args.long_budget and arm in args.long_arms else []
            for budget in args.budgets + long:
                for seed in args.seeds:
                    e = episode(env, arm, shape, budget, seed, memories.get((arm, seed)))
                    episodes.append(e)
                    print(f"{shape:12} {arm:16} budget {budget:3} seed {seed}: best {e['best_frac']:.3f} "
                          f"(regret {e['best_frac'] / known[shape]:.3f}) {e['seconds']:.1f}s", flush=True)
        env.close()
    result = {
        "what": "scripted knowledge-guided planner and its ablations vs greedy and random: best "
                "fraction of cuBLAS found, GEMM held-out shapes, table mode (H200 table, cost "
                "model for programs it lacks); not live GPU figures",
        "config": {"env_id": ENV_ID, "measure": "table", "correctness": args.correctness,
                   "shapes": shapes, "budgets": args.budgets, "seeds": args.seeds,
                   "long_budget": args.long_budget,
                   "long_arms": args.long_arms if args.long_budget else [],
                   "warmup_shapes": args.warmup_shapes, "warmup_budget": args.warmup_budget,
                   "arms": {a: {"agent": ARMS[a][0], **ARMS[a][1]} for a in args.arms}},
        "notes": args.note,
        "best_known": {s: sbc.get_best_known(s) for s in shapes},
        "summary": sbc.summarise(episodes, known),
        "per_shape_regret": {str(b): per_shape(episodes, known, b)
                             for b in args.budgets + ([args.long_budget] if args.long_budget else [])},
        "behaviour": behaviour(episodes),
        "warmup": warmup, "episodes": episodes,
        "seconds": round(time.perf_counter() - t0, 1), "provenance": run_provenance(ROOT)}
    out_path.write_text(json.dumps(result, indent=1))
    sbc.print_table(result["summary"])
    for arm, row in result["behaviour"].items():
        print(f"{arm:16} violations {row['violations_met']:4}  repairs {row['repairs']:3}  kept {row['plans_kept']}")
    print(f"{out_path} ({result['seconds']:.0f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
