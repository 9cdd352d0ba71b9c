"""Attention on one GPU: the DSL programs and a sweep of configurations against PyTorch's
SDPA backends, measured in the same run.

For every shape of the attention suite and every configuration (the task's baseline and
expert, and `tasks.attention.space.table_configurations()`), the full protocol of
`argus_env.measure.gpu` (correctness at the real shape, rotated inputs, CUDA-graph timing
alternating with the library anchor — SDPA preferring cuDNN), appended to a resumable CSV
table. Per shape it also times SDPA's cuDNN and FlashAttention-2 backends against each
other, so ratios to both are reported.

    PYTHONPATH=. python benchmarks/attention_suite.py --table tasks/attention/table_h200.csv

With `--structure`, the configurations are instead the expert with each program-structure
knob turned (lazy rescaling, Q reloaded per key block, warp specialization, persistent
grid, GQA packing where the shape has a group; `structure_configurations`), for a separate
table that the cost model's assumed terms can be fitted on:

    PYTHONPATH=. python benchmarks/attention_suite.py --structure \
        --table tasks/attention/table_structure_h200.csv --time-limit 540
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from record_programs import namespace  # noqa: E402

namespace()  # argus_env.tasks from a checkout that is not installed (a GPU machine)

FIELDS = ["shape", "B", "H", "KVH", "SQ", "SK", "D", "CAUSAL", "config", "summary", "program_hash",
          "ok", "error", "ms", "tflops", "anchor_ms", "anchor_tflops", "ratio", "max_rel_err",
          "timestamp"]


def backends_pair(task, sizes) -> dict:
    """cuDNN vs FlashAttention-2 SDPA on the same inputs (ms, TFLOP/s each)."""
    import torch
    from torch.nn.attention import SDPBackend, sdpa_kernel

    from argus_env.measure.gpu import time_pair
    gen = torch.Generator(device="cuda").manual_seed(5)
    x = task.make_inputs(None, sizes, "cuda", gen)
    causal, gqa = bool(sizes["CAUSAL"]), sizes["H"] != sizes["KVH"]

    def call(backend):
        def run():
            with sdpa_kernel([backend]):
                return torch.nn.functional.scaled_dot_product_attention(
                    x["q"], x["k"], x["v"], is_causal=causal, enable_gqa=gqa)
        return run
    out = {}
    try:
        t = time_pair(call(SDPBackend.CUDNN_ATTENTION), call(SDPBackend.FLASH_ATTENTION), 2, 30)
        flops = task.flops(sizes)
        out = {"cudnn_ms": t["ms"], "flash_ms": t["anchor_ms"],
               "cudnn_tflops": flops / t["ms"] / 1e9, "flash_tflops": flops / t["anchor_ms"] / 1e9}
    except Exception as e:  # a backend that does not support the shape is a result
        out = {"error": f"{type(e).__name__}: {e}"[:200]}
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--table", type=Path, default=Path("tasks/attention/table_h200.csv"))
    ap.add_argument("--out", type=Path, help="JSON summary (per shape: expert, best, backends)")
    ap.add_argument("--time-limit", type=float, default=480)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--rep-ms", type=int, default=25)
    ap.add_argument("--structure", action="store_true",
                    help="time the program-structure knobs (structure_configurations) instead")
    args = ap.parse_args(argv)
    from argus_env import lower
    from argus_env.measure import provenance
    from argus_env.measure.gpu import measure_program
    from argus_env.task import get_task
    from argus_env.tasks.attention.space import EXPERT, structure_configurations, table_configurations
    task = get_task("attention")
    start = time.time()
    done = set()
    if args.table.exists():
        done = {(r["shape"], r["summary"]) for r in csv.DictReader(args.table.open())}
    new = not args.table.exists()
    args.table.parent.mkdir(parents=True, exist_ok=True)
    summary = {"provenance": provenance.collect(), "shapes": {}}
    with args.table.open("a", newline="") as f:
        w = csv.DictWriter(f, FIELDS)
        if new:
            w.writeheader()
        for case in task.shape_cases("all"):
            if time.time() - start > args.time_limit:
                print("time limit reached; rerun to continue", flush=True)
                break
            sizes = case.sizes
            shape_sum = {"backends": backends_pair(task, sizes), "configs": {}}
            configs = structure_configurations(sizes) if args.structure else table_configurations()
            for cfg in configs:
                if (case.name, cfg.summary()) in done:
                    continue
                program = task.bind(task.space.program(cfg), sizes)
                row = {"shape": case.name, **sizes, "config": cfg.summary(), "summary": cfg.summary(),
                       "program_hash": program.hash, "ok": False, "error": ""}
                try:
                    res = measure_program(program, task, sizes, lower.load(program, interpret=False),
                                          args.rounds, args.rep_ms, seed=7)
                    row["max_rel_err"] = res.get("max_rel_err")
                    if res["ok"]:
                        row.update(ok=True, ms=res["ms"], tflops=res["tflops"], anchor_ms=res["anchor_ms"],
                                   anchor_tflops=res["anchor_tflops"], ratio=res["ratio"])
                    else:
                        row["error"] = f"{res['status']}: {res.get('message', '')}"[:300]
                except Exception as e:  # a failing configuration is a row
                    row["error"] = f"{type(e).__name__}: {e}"[:300]
                row["timestamp"] = round(time.time(), 1)
                w.writerow(row)
                f.flush()
                shape_sum["configs"][cfg.summary()] = {k: row.get(k) for k in ("ok", "tflops", "ratio", "error")}
                print(json.dumps({"shape": case.name, "config": cfg.summary(), "ok": row["ok"],
                                  "tflops": row.get("tflops"), "ratio": row.get("ratio"),
                                  "error": row["error"][:120]}), flush=True)
            summary["shapes"][case.name] = shape_sum
    if args.out:
        args.out.write_text(json.dumps(summary, indent=1))
    print(f"\n{'shape':<32}{'expert':>8}{'best':>8}{'cuDNN':>8}{'FA2':>8}{'exp/cuDNN':>10}{'best/cuDNN':>11}")
    rows = [r for r in csv.DictReader(args.table.open()) if r["ok"] == "True"]
    geo = []
    for case in task.shape_cases("all"):
        mine = [r for r in rows if r["shape"] == case.name]
        if not mine:
            continue
        best = max(mine, key=lambda r: float(r["ratio"]))
        exp = next((r for r in mine if r["summary"] == EXPERT.summary()), None)
        b = summary["shapes"].get(case.name, {}).get("backends", {})
        geo.append(math.log(float(best["ratio"])))
        print(f"{case.name:<32}{float(exp['tflops']) if exp else 0:>8.0f}{float(best['tflops']):>8.0f}"
              f"{b.get('cudnn_tflops', 0):>8.0f}{b.get('flash_tflops', 0):>8.0f}"
              f"{float(exp['ratio']) if exp else 0:>10.3f}{float(best['ratio']):>11.3f}")
    if geo:
        print(f"geomean best/anchor: {math.exp(sum(geo) / len(geo)):.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
