"""Record the GEMM measurement table: throughput of many configurations at every shape of
the suite, each timed against cuBLAS in the same process.

For each (shape, configuration) pair not yet in the table:
  1. render the configuration's DSL program, lower it to Triton and compile it;
  2. check it at the full shape on fresh random inputs with a NaN-poisoned output;
  3. time it and torch.matmul alternately with the protocol of `argus_env.measure.gpu`
     (CUDA-graph replays, inputs rotated past L2, medians over alternating rounds, results
     faster than the physical limit rejected), so power-cap throttling hits both alike.
Rows are appended to a CSV as they are measured, so the recording is resumable in
chunks: `--time-limit` stops cleanly before a session's time runs out, and a rerun
skips what is recorded. Provenance (GPU, driver, clocks, versions, protocol) goes to a
JSON beside the CSV.

    PYTHONPATH=. python benchmarks/record_gemm_table.py --table tasks/gemm/table_h200.csv
    # the swap-AB and stream-K configurations for small and ragged shapes as well (each
    # at the shapes where the mask allows it)
    PYTHONPATH=. python benchmarks/record_gemm_table.py --small-shapes
"""

from __future__ import annotations

import argparse
import csv
import itertools
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

FIELDS = ["shape", "M", "N", "K", "config", "program_hash", "ok", "error", "ms", "tflops",
          "cublas_ms", "cublas_tflops", "ratio", "max_rel_err", "compile_s", "timestamp"]


def configurations(small_shapes: bool = False):
    """The sampled configuration space: structured, deterministic, legal on an H200; with
    `small_shapes`, followed by the swap-AB and stream-K configurations (`SMALL_SHAPES`)."""
    from argus_env.tasks.gemm.space import (BASELINE, EXPERT, SMALL_SHAPES, SPACE, SPLITK,
                                            GemmConfig)
    tiles = [(64, 64, 32), (64, 128, 64), (128, 64, 64), (128, 128, 64), (128, 256, 64),
             (256, 128, 64), (64, 256, 64), (128, 128, 128)]
    out = [BASELINE, EXPERT, SPLITK]
    for bm, bn, bk in tiles:
        warps = 4 if bm * bn <= 8192 else 8
        out.append(GemmConfig(bm, bn, bk, warps, 3, group_m=8))
        out.append(GemmConfig(bm, bn, bk, warps, 3, group_m=8, tma=True, kmajor_b=True))
        if bm * bn >= 16384:
            out.append(GemmConfig(bm, bn, bk, 8, 3, group_m=8, tma=True, kmajor_b=True,
                                  persistent=True, warp_specialize=True))
            out.append(GemmConfig(bm, bn, bk, 8, 4, group_m=8, tma=True, kmajor_b=True))
    for (bm, bn, bk), split in itertools.product([(32, 64, 64), (64, 64, 64), (64, 128, 64),
                                                  (128, 128, 64)], (2, 4, 8)):
        out.append(GemmConfig(bm, bn, bk, 4, 4, split_k=split, combine="atomic"))
    if small_shapes:
        out += list(SMALL_SHAPES.values())
    return SPACE.legal_configurations(out, {})


def wanted(case, config) -> bool:
    """Split-K pays only when the output has too few tiles to fill the GPU; swap-AB and
    stream-K are measured where the mask allows them (stream-K: a few waves of tiles)."""
    if config.swap_ab or config.stream_k:
        from argus_env.tasks.gemm.space import SPACE
        return SPACE.config_reason(config, {"sizes": case.sizes}) is None
    return config.split_k == 1 or case.sizes["M"] * case.sizes["N"] <= 4096 * 4096 // 4


def _warm(job) -> str:
    """Compile one configuration for one shape's specialization (in a pool worker)."""
    import torch

    from argus_env import lower
    from argus_env.task import get_task
    cfg, sizes = job
    task = get_task("gemm")
    program = task.space.program(cfg)
    try:
        launch = lower.load(program, interpret=False)
        # a small problem with the same divisibility as the real one (and the real K)
        small = {k: v if k == "K" or v <= 256 else 256 + v % 16 for k, v in sizes.items()}
        gen = torch.Generator(device="cuda").manual_seed(0)
        launch(**task.make_inputs(program, small, "cuda", gen))
        torch.cuda.synchronize()
        return ""
    except Exception as e:  # reported again, with its row, by the measuring process
        return f"{type(e).__name__}: {e}"[:200]


def _spec(sizes: dict) -> dict:
    """What Triton specializes integer arguments on: divisibility by 16 (and == 1)."""
    return {k: (v % 16 == 0, v == 1) for k, v in sizes.items()}


def measure(case, config, task, space, rounds, rep_ms) -> dict:
    from argus_env import lower
    from argus_env.measure.features import extract
    from argus_env.measure.gpu import measure_program
    from argus_env.target import load_target
    program = space.program(config)
    sizes = case.sizes
    config_key = extract(program, sizes, task, target=load_target("h200")).key()
    row = {"shape": case.name, **sizes, "config": config_key,
           "program_hash": program.hash, "ok": False, "error": ""}
    t0 = time.time()
    launch = lower.load(program, interpret=False)
    res = measure_program(program, task, sizes, launch, rounds, rep_ms,
                          seed=int(program.hash[:6], 16) % 1000)
    row["compile_s"] = round(time.time() - t0 - res.get("check_s", 0), 2)
    row["max_rel_err"] = res.get("max_rel_err")
    if not res["ok"]:
        row["error"] = f"{res['status']}: {res.get('message', '')}"[:300]
        return row
    row.update(ok=True, ms=res["ms"], tflops=res["tflops"], cublas_ms=res["anchor_ms"],
               cublas_tflops=res["anchor_tflops"], ratio=res["ratio"])
    return row


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--table", type=Path, default=Path("tasks/gemm/table_h200.csv"))
    ap.add_argument("--time-limit", type=float, default=540, help="seconds before stopping")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--rep-ms", type=int, default=20)
    ap.add_argument("--shapes", nargs="*", help="shape names (default: the whole suite)")
    ap.add_argument("--list", action="store_true", help="print the configurations and exit")
    ap.add_argument("--warm-workers", type=int, default=12, help="parallel compile processes")
    ap.add_argument("--small-shapes", action="store_true",
                    help="add the swap-AB and stream-K configurations (tasks/gemm/space.py "
                         "SMALL_SHAPES) at the shapes where the mask allows them")
    args = ap.parse_args(argv)

    from argus_env.task import get_task
    task = get_task("gemm")
    space = task.space
    configs = configurations(args.small_shapes)
    if args.list:
        for c in configs:
            print(c.summary())
        print(f"{len(configs)} configurations x {len(task.shapes)} shapes")
        return 0
    import torch

    from argus_env.measure import provenance
    start = time.time()
    done = set()
    if args.table.exists():
        with args.table.open() as f:
            done = {(r["shape"], r["program_hash"]) for r in csv.DictReader(f)}
    prov = provenance.collect()
    prov.update(protocol=f"full-shape correctness (NaN-poisoned output, fresh randn inputs); "
                f"do_bench_cudagraph median, {args.rounds} alternating rounds of {args.rep_ms} ms "
                "per side against torch.matmul on the same inputs", configurations=len(configs))
    meta = args.table.with_suffix(".json")
    history = json.loads(meta.read_text())["runs"] if meta.exists() else []
    args.table.parent.mkdir(parents=True, exist_ok=True)
    new_file = not args.table.exists()
    cases = [c for c in task.shape_cases("all") if not args.shapes or c.name in args.shapes]
    todo = [(c, cfg) for c in cases for cfg in configs
            if (c.name, space.program(cfg).hash) not in done and wanted(c, cfg)]
    print(f"{len(todo)} measurements to do ({len(done)} recorded)", flush=True)
    if args.warm_workers > 1 and todo:
        # compile in parallel first: Triton caches each specialization on disk, and the
        # specialization depends on the sizes' divisibility, which the warm-up keeps
        import multiprocessing as mp
        jobs = list({(cfg, tuple(sorted(_spec(c.sizes).items()))): (cfg, c.sizes)
                     for c, cfg in todo}.values())
        with mp.get_context("spawn").Pool(args.warm_workers) as pool:
            errors = [e for e in pool.imap_unordered(_warm, jobs) if e]
        print(f"warmed {len(jobs)} compilations in {time.time() - start:.0f} s "
              f"({len(errors)} failed)", flush=True)
    measured = failures = 0
    with args.table.open("a", newline="") as f:
        writer = csv.DictWriter(f, FIELDS)
        if new_file:
            writer.writeheader()
        for case, cfg in todo:
            if time.time() - start > args.time_limit:
                print("time limit reached; rerun to continue", flush=True)
                break
            try:
                row = measure(case, cfg, task, space, args.rounds, args.rep_ms)
            except Exception as e:  # a configuration that fails is a row, not the end
                row = {"shape": case.name, **case.sizes, "config": cfg.summary(),
                       "program_hash": space.program(cfg).hash, "ok": False,
                       "error": f"{type(e).__name__}: {e}"[:300]}
            row["timestamp"] = round(time.time(), 1)
            writer.writerow(row)
            f.flush()
            measured += 1
            print(json.dumps({k: row.get(k) for k in ("shape", "config", "ok", "tflops", "ratio", "error")}),
                  flush=True)
            failures = failures + 1 if not row["ok"] else 0
            if failures >= 5 and measured == failures:
                print("the first measurements all failed: stopping to look", flush=True)
                break
            torch.cuda.empty_cache()
    history.append({**prov, "measured": measured, "seconds": round(time.time() - start)})
    meta.write_text(json.dumps({"table": args.table.name, "runs": history}, indent=1))
    remaining = len(todo) - measured
    print(f"measured {measured}, remaining {remaining}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
