"""PPO against random and greedy search at equal env steps on held-out shapes, from the
results files of `benchmarks/learning_curve.py`.

For every env: each agent's best fraction of the library found within 5, 10, 20 and 30
env steps on the held-out shapes (geomean over the shapes), mean over seeds with the
seeds' min-max; PPO's curve is its final policy's held-out episode (trained on the train
shapes only). "Outside the spread" says whether PPO's worst seed is above random's best
seed at that budget; "ppo untrained" is the policy before training played the same way
(what the play alone finds). Files are named by their agents: a file may hold only PPO (a policy
played again with `--reuse`), whose search baselines then come from a file of the same env
that holds them.

    python benchmarks/learning_curve_table.py benchmarks/results/learning_curves_2026-12-07/*.json
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

BUDGETS = (5, 10, 20, 30)


def curves(result: dict, agent: str) -> list[list[float]]:
    """Per seed, the best-so-far curve (index: env steps on the held-out shape)."""
    seeds = result["agents"][agent]["per_seed"].values()
    key = "final_curve" if agent == "ppo" else "curve"
    return [s[key] for s in seeds]


def untrained(result: dict) -> list[list[float]] | None:
    """Per seed, the curve of PPO's policy before training (its first saved point), played
    as the trained one: what the play alone finds. None where the file lacks it."""
    out = []
    for s in result["agents"]["ppo"]["per_seed"].values():
        first = s["points"][0] if s.get("points") else None
        if not first or first.get("env_steps") or "per_shape" not in first:
            return None
        per_shape = [e["curve"] for e in first["per_shape"].values()]
        out.append([float(np.exp(np.mean(np.log(np.maximum(step, 1e-9)))))
                    for step in zip(*per_shape)])
    return out


def at(cs: list[list[float]], budget: int) -> list[float]:
    """Each seed's best so far after `budget` steps (its last value for a shorter curve)."""
    return [c[min(budget, len(c) - 1)] for c in cs]


def cell(values: list[float]) -> str:
    return f"{np.mean(values):.3f} ({min(values):.3f}-{max(values):.3f})"


def table(results: list[dict]) -> str:
    by_env: dict[str, dict[str, tuple]] = {}
    for r in results:
        env = r["config"]["env_id"]
        for agent in r["agents"]:
            play = ""
            if agent == "ppo":
                cfg = r["config"]
                play = ", ".join(n for n, on in (("use budget", cfg.get("use_budget")),
                                                 ("no repeats", cfg.get("no_repeats"))) if on)
                play = play or "argmax, may submit early"
                steps = r["agents"]["ppo"]["per_seed"]
                trained = next(iter(steps.values()))["points"][-1]["env_steps"]
                label = f"ppo ({play}; {trained} training steps)"
            else:
                label = agent
            by_env.setdefault(env, {})[label] = (agent, curves(r, agent))
            before = untrained(r) if agent == "ppo" else None
            if before is not None:
                by_env[env][f"ppo untrained ({play})"] = ("untrained", before)
    lines = []
    for env, agents in by_env.items():
        lines += [f"### {env}", "",
                  "| agent | seeds | " + " | ".join(f"{b} steps" for b in BUDGETS) + " |",
                  "| --- | --- | " + " | ".join("---" for _ in BUDGETS) + " |"]
        random = next((c for a, c in agents.values() if a == "random"), None)
        for label, (agent, cs) in sorted(agents.items()):
            row = [cell(at(cs, b)) for b in BUDGETS]
            lines.append(f"| {label} | {len(cs)} | " + " | ".join(row) + " |")
            if agent == "ppo" and random is not None:
                out = ["yes" if min(at(cs, b)) > max(at(random, b)) else "no" for b in BUDGETS]
                lines.append(f"| {label}: worst seed above random's best | | "
                             + " | ".join(out) + " |")
        lines.append("")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("files", nargs="+", type=Path, help="learning_curve_*.json")
    args = ap.parse_args(argv)
    results = []
    for f in args.files:
        try:
            r = json.loads(f.read_text())
        except (OSError, ValueError) as e:
            raise SystemExit(f"{f}: not a results file ({e})")
        if "agents" not in r or "config" not in r:
            raise SystemExit(f"{f}: not a learning_curve.py results file")
        results.append(r)
    print(table(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
