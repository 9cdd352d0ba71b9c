"""MoE on one GPU: the baseline and expert DSL programs against two anchors, one run.

The anchors: a PyTorch pipeline of library pieces (sort/gather, `torch._grouped_mm`,
SwiGLU, `index_add_`) and a fused-MoE Triton kernel of the serving engines' kind
(`tasks/moe/fused_anchor.py`: routing alignment on the GPU, gate|up grouped GEMM with
SwiGLU in the epilogue, down grouped GEMM with the routing weight, top-k sum), tuned per
shape.

For every shape of the MoE suite: the routing step (top-k of seeded router logits, sort,
block alignment) timed alone; then each DSL program through the full protocol of
`argus_env.measure.gpu` (correctness at the real shape against the float32 reference,
rotated inputs, CUDA-graph timing alternating with the library anchor — the torch
pipeline from the same top-k ids and weights, which does its own sort and gather), then
each program again against the fused anchor (`fused_anchor_ms`, `fused_ratio`: fused anchor
ms / program ms, like `ratio` for the pipeline), and both anchors' own errors against the
reference. The fused anchor's tile configuration is tuned per shape before timing (each
candidate timed on the shape's routing; cached in --fused-configs, so a second run skips
it) unless --fused-config default. --anchors-only times the two anchors against each other
and skips the DSL programs. Writes JSON to --out (default $OUT/moe_suite.json, else
benchmarks/results/moe_suite.json) and prints a table last. Needs torch, triton, numpy and
pyyaml only (no gymnasium, z3 or ray).

    PYTHONPATH=. python benchmarks/moe_suite.py                        # H200
    PYTHONPATH=. python benchmarks/moe_suite.py --anchors-only         # H200, anchors only
    PYTHONPATH=. python benchmarks/moe_suite.py --interpret --smoke    # CPU: the script runs
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from record_programs import namespace  # noqa: E402

namespace()  # argus_env.tasks from a checkout that is not installed (a GPU machine)

#: tiny shapes for --smoke (balanced and skewed routing; experts without tokens)
SMOKE = [("smoke-balanced", {"T": 24, "D": 96, "F": 80, "E": 4, "TOPK": 2, "SKEW": 0}),
         ("smoke-skewed", {"T": 40, "D": 72, "F": 136, "E": 8, "TOPK": 2, "SKEW": 1})]


def cases(task, smoke: bool, only: str | None):
    picked = SMOKE if smoke else [(c.name, c.sizes) for c in task.shape_cases("all")]
    return [(n, s) for n, s in picked if not only or only in n]


def measure(program, task, sizes: dict, interpret: bool, rounds: int, rep_ms: int) -> dict:
    """The GPU protocol, or under the interpreter: correctness, and wall-clock times that
    say nothing about performance (only that the script runs)."""
    from argus_env import lower
    launch = lower.load(program, interpret=interpret)
    if not interpret:
        from argus_env.measure.gpu import measure_program
        return measure_program(program, task, sizes, launch, rounds, rep_ms, seed=7)
    import torch

    from argus_env.measure import oracle
    verdict = oracle.check(program, task, sizes, launch, device="cpu", seed=7)
    out = {"ok": verdict.ok, "correct": verdict.ok, "max_rel_err": verdict.max_rel_err,
           "status": "ok" if verdict.ok else "mismatch", "message": verdict.message}
    if verdict.ok:
        full = task.program_sizes(program, sizes)
        inputs = task.make_inputs(program, full, "cpu", torch.Generator().manual_seed(8))
        anchor = task.anchor(inputs, sizes)
        t0 = time.perf_counter()
        launch(**inputs)
        t1 = time.perf_counter()
        anchor()
        t2 = time.perf_counter()
        flops = task.flops(sizes)
        out.update(ms=(t1 - t0) * 1e3, anchor_ms=(t2 - t1) * 1e3,
                   tflops=flops / (t1 - t0) / 1e12, anchor_tflops=flops / (t2 - t1) / 1e12,
                   ratio=(t2 - t1) / (t1 - t0), interpreter=True)
    return out


def catalog_variants(task, sizes: dict) -> dict:
    """Catalog-reachable configurations worth timing at this shape, by name (`--catalog`):
    the fused persistent program at the block sizes prefill (many rows per expert) and
    decode (few) want, with the grouped tile order and the wider down projection. Each is
    reachable from the baseline through the env's actions (the space checks it)."""
    from dataclasses import replace
    ex = _expert(task)
    if _prefill(sizes):
        out = {"bm128": replace(ex, block_m=128),
               "bm128-g8": replace(ex, block_m=128, group_m=8),
               "bm128-g8-dn256": replace(ex, block_m=128, group_m=8, down_n=256),
               "bm128-g16-dn256": replace(ex, block_m=128, group_m=16, down_n=256),
               "bm128-g8-dn256-grid": replace(ex, block_m=128, group_m=8, down_n=256,
                                              persistent=False),
               # the weighted top-k sum as its own launch over (token, slot) rows, as the
               # fused anchor does, instead of TOPK atomic adds into each output element
               "bm128-g8-dn256-grid-sum": replace(ex, block_m=128, group_m=8, down_n=256,
                                                  persistent=False, fuse_weight=False)}
    else:
        out = {"bm16-k128": replace(ex, block_m=16, block_k=128, num_warps=4),
               "bm16-k128-dn256": replace(ex, block_m=16, block_k=128, num_warps=4, down_n=256),
               "bm32-s4": replace(ex, block_m=32, num_warps=4, stages=4),
               "bm64-dn256": replace(ex, down_n=256),
               "bm64-g8": replace(ex, group_m=8)}
    return _legal(task, sizes, out)


def _expert(task):
    """The MoE space's expert configuration (its module, beside the task's)."""
    import importlib
    return importlib.import_module(type(task.space).__module__).EXPERT


def _prefill(sizes: dict) -> bool:
    """Many rows per expert (T * TOPK / E >= 128): the shapes large row blocks suit."""
    return sizes["T"] * sizes["TOPK"] / sizes["E"] >= 128


def _legal(task, sizes: dict, named: dict) -> dict:
    """The configurations of `named` the target takes at `sizes`."""
    ctx = {"sizes": sizes}
    return {n: c for n, c in named.items() if task.space.hardware_reason(c, ctx) is None}


def sweep_variants(task, sizes: dict) -> dict:
    """Tile and pipeline choices around the best catalog program of the 2026-12-07 H100
    run (`--sweep`): at prefill, the grouped, non-persistent program with the top-k sum as
    its own launch, over stages, warps, the grouped order and BK; at decode, the small-BM
    programs over stages, with and without the weight in the epilogue. All reachable by
    the catalog's actions; those the target refuses are left out."""
    from dataclasses import replace
    ex = _expert(task)
    out = {}
    if _prefill(sizes):
        base = replace(ex, block_m=128, group_m=8, down_n=256, persistent=False,
                       fuse_weight=False)
        for stages in (3, 4, 5):
            for warps in (8, 4):
                for group in (8, 16):
                    for bk in (64, 32):
                        out[f"sum-s{stages}-w{warps}-g{group}-k{bk}"] = replace(
                            base, stages=stages, num_warps=warps, group_m=group, block_k=bk)
    else:
        for name, base in (("bm16-k128", replace(ex, block_m=16, block_k=128, num_warps=4)),
                           ("bm64-dn256", replace(ex, down_n=256))):
            for stages in (3, 4, 5):
                for weight in (True, False):
                    out[f"{name}-s{stages}{'' if weight else '-sum'}"] = replace(
                        base, stages=stages, fuse_weight=weight)
    return _legal(task, sizes, out)


def fused_module(task):
    """`tasks/moe/fused_anchor.py`, imported beside the task's own modules."""
    import importlib
    return importlib.import_module(type(task).__module__.rsplit(".", 1)[0] + ".fused_anchor")


def fused_config(task, inputs: dict, sizes: dict, how: str, config_file: Path | None,
                 tune_rep_ms: int):
    """The fused anchor's tile configuration for this shape: tuned (or read from
    `config_file`, where an earlier run tuned it) or the default."""
    fa = fused_module(task)
    if how == "default" or inputs["x"].device.type != "cuda":
        return fa.default_config(sizes)
    try:
        return fa.tune(inputs, sizes, rep_ms=tune_rep_ms, config_file=config_file)
    except Exception as e:  # the anchor is still timed, untuned, and the failure said
        print(f"fused anchor tuning failed ({type(e).__name__}: {str(e)[:200]}); "
              "timing the default configuration", flush=True)
        return fa.default_config(sizes)


def routing_and_pipeline(task, sizes: dict, device: str, fused=None) -> dict:
    """The routing step's time, and the torch pipeline's and the fused anchor's errors
    against the reference (`fused`: a function of the inputs giving the fused anchor's
    configuration, tuned on these inputs)."""
    import torch

    from argus_env.measure import oracle
    gen = torch.Generator(device=device).manual_seed(11)
    inputs = task.make_inputs(None, task.program_sizes(task.program("expert"), sizes), device, gen)
    ref = task.reference(inputs, sizes)
    got = {"out": task.anchor(inputs, sizes)()}
    verdict = oracle.compare(got, ref, task, sizes)
    out = {"pipeline_ok": verdict.ok, "pipeline_max_rel_err": verdict.max_rel_err}
    if fused is not None:
        t0 = time.perf_counter()
        config = fused(inputs)
        out["fused_config"] = config.to_dict()
        out["fused_tune_s"] = time.perf_counter() - t0
        got = {"out": fused_module(task).anchor(inputs, sizes, config)()}
        verdict = oracle.compare(got, ref, task, sizes)
        out.update(fused_ok=verdict.ok, fused_max_rel_err=verdict.max_rel_err)
    reps = 3 if device == "cpu" else 20
    sync = (lambda: torch.cuda.synchronize()) if device != "cpu" else (lambda: None)
    task.route(sizes, 64, device, gen)
    sync()
    t0 = time.perf_counter()
    for _ in range(reps):
        task.route(sizes, 64, device, gen)
    sync()
    out["routing_ms"] = (time.perf_counter() - t0) / reps * 1e3
    del inputs, ref, got
    if device != "cpu":
        torch.cuda.empty_cache()
    return out


def time_against_fused(task, sizes: dict, config, launch=None, program=None, rounds: int = 2,
                       rep_ms: int = 25, seed: int = 7) -> dict:
    """CUDA-graph timing, alternating as `measure_program` does over rotated inputs: the
    program (`launch`) against the fused anchor, or (no program) the fused anchor against
    the torch pipeline."""
    import torch

    from argus_env.measure import gpu
    fa = fused_module(task)
    l2 = getattr(torch.cuda.get_device_properties(0), "L2_cache_size", gpu.L2_BYTES)
    full = task.program_sizes(program or task.program("expert"), sizes)
    sets = gpu.rotated_inputs(task, program, full, seed=seed + 1, l2_bytes=l2)
    fused = [fa.anchor(x, sizes, config) for x in sets]
    anchor = gpu.cycling(lambda f: f(), fused)
    if program is None:
        pipes = [task.anchor(x, sizes) for x in sets]
        times = gpu.time_pair(anchor, gpu.cycling(lambda f: f(), pipes), rounds, rep_ms)
        out = {"fused_anchor_ms": times["ms"], "anchor_ms": times["anchor_ms"],
               "pipeline_over_fused": times["ratio"], "timing": times.get("timing")}
    else:
        outputs = {n: gpu._output(program, n, full) for n in program.info.outputs}
        cand = gpu.cycling(lambda x: launch(**x, **outputs), sets)
        times = gpu.time_pair(cand, anchor, rounds, rep_ms)
        out = {"ms_vs_fused": times["ms"], "fused_anchor_ms": times["anchor_ms"],
               "fused_ratio": times["ratio"], "fused_timing": times.get("timing")}
    del sets, fused
    torch.cuda.empty_cache()
    return out


def interpreted_anchors(task, sizes: dict, config) -> dict:
    """Under the interpreter: wall-clock times of the two anchors (that the script runs)."""
    import torch
    fa = fused_module(task)
    full = task.program_sizes(task.program("expert"), sizes)
    inputs = task.make_inputs(None, full, "cpu", torch.Generator().manual_seed(8))
    fused, pipe = fa.anchor(inputs, sizes, config), task.anchor(inputs, sizes)
    t0 = time.perf_counter()
    fused()
    t1 = time.perf_counter()
    pipe()
    t2 = time.perf_counter()
    return {"fused_anchor_ms": (t1 - t0) * 1e3, "anchor_ms": (t2 - t1) * 1e3,
            "pipeline_over_fused": (t2 - t1) / (t1 - t0), "interpreter": True}


def interpreted_vs_fused(program, task, sizes: dict, config) -> dict:
    """Under the interpreter: the program's and the fused anchor's wall-clock times."""
    import torch

    from argus_env import lower
    full = task.program_sizes(program, sizes)
    inputs = task.make_inputs(program, full, "cpu", torch.Generator().manual_seed(8))
    launch = lower.load(program, interpret=True)
    fused = fused_module(task).anchor(inputs, sizes, config)
    t0 = time.perf_counter()
    launch(**inputs)
    t1 = time.perf_counter()
    fused()
    t2 = time.perf_counter()
    return {"ms_vs_fused": (t1 - t0) * 1e3, "fused_anchor_ms": (t2 - t1) * 1e3,
            "fused_ratio": (t2 - t1) / (t1 - t0)}


def print_table(results: dict) -> None:
    def f(x, w, p=3):
        return f"{x:>{w}.{p}f}" if isinstance(x, (int, float)) else f"{'-':>{w}}"
    if results.get("anchors_only"):
        print(f"{'shape':<34}{'routing ms':>11}{'torch ms':>10}{'fused ms':>10}"
              f"{'torch/fused':>12}{'fused TF/s':>11}")
        for name, row in results["shapes"].items():
            a = row.get("anchors", {})
            tf = (row["flops"] / a["fused_anchor_ms"] / 1e9
                  if isinstance(a.get("fused_anchor_ms"), float) else None)
            print(f"{name:<34}{f(row['routing_ms'], 11)}{f(a.get('anchor_ms'), 10)}"
                  f"{f(a.get('fused_anchor_ms'), 10)}{f(a.get('pipeline_over_fused'), 12)}"
                  f"{f(tf, 11, 0)}")
        return
    print(f"{'shape':<34}{'routing ms':>11}{'torch ms':>10}{'fused ms':>10}{'base ms':>9}"
          f"{'exp ms':>9}{'base/torch':>11}{'exp/torch':>10}{'exp/fused':>10}{'exp TF/s':>9}"
          f"{'best cat/fused':>15}  best catalog")
    for name, row in results["shapes"].items():
        b, e = row["programs"]["baseline"], row["programs"]["expert"]
        cats = [(n[8:], r) for n, r in row["programs"].items()
                if n.startswith("catalog:") and isinstance(r.get("fused_ratio"), float)]
        cat = max(cats, key=lambda x: x[1]["fused_ratio"], default=None)
        anchor = e.get("anchor_ms") or b.get("anchor_ms") or float("nan")
        fused = e.get("fused_anchor_ms") or b.get("fused_anchor_ms")
        print(f"{name:<34}{f(row['routing_ms'], 11)}{f(anchor, 10)}{f(fused, 10)}"
              f"{f(b.get('ms'), 9)}{f(e.get('ms'), 9)}{f(b.get('ratio'), 11)}"
              f"{f(e.get('ratio'), 10)}{f(e.get('fused_ratio'), 10)}{f(e.get('tflops'), 9, 0)}"
              f"{f(cat[1].get('fused_ratio') if cat else None, 15)}  {cat[0] if cat else '-'}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, help="JSON results (default $OUT/moe_suite.json)")
    ap.add_argument("--interpret", action="store_true", help="Triton interpreter on CPU")
    ap.add_argument("--smoke", action="store_true", help="two tiny shapes")
    ap.add_argument("--shape", help="only shapes whose name contains this")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--rep-ms", type=int, default=25)
    ap.add_argument("--time-limit", type=float, default=420)
    ap.add_argument("--anchors-only", action="store_true",
                    help="time the fused anchor against the torch pipeline only (no DSL programs)")
    ap.add_argument("--fused-config", choices=("tune", "default"), default="tune",
                    help="the fused anchor's tile configuration: tuned per shape on the GPU "
                         "(default) or the untuned default")
    ap.add_argument("--fused-configs", type=Path,
                    help="JSON cache of tuned configurations, read and extended (default "
                         "$OUT/fused_moe_configs.json, else benchmarks/results/...)")
    ap.add_argument("--catalog", action="store_true",
                    help="also time catalog-reachable configurations per shape "
                         "(catalog_variants) against both anchors")
    ap.add_argument("--sweep", action="store_true",
                    help="also time stages, warps, grouped order and BK around the best "
                         "catalog programs (sweep_variants)")
    ap.add_argument("--tune-rep-ms", type=int, default=10,
                    help="do_bench rep per tuning candidate")
    args = ap.parse_args(argv)
    if args.interpret:  # before anything imports Triton
        os.environ["TRITON_INTERPRET"] = "1"
    out_dir = Path(os.environ["OUT"]) if os.environ.get("OUT") else Path("benchmarks/results")
    out_path = args.out or out_dir / "moe_suite.json"
    config_file = args.fused_configs or out_dir / "fused_moe_configs.json"
    from argus_env.measure import provenance
    from argus_env.task import get_task
    task = get_task("moe")
    device = "cpu" if args.interpret else "cuda"
    results = {"provenance": provenance.collect(), "interpret": args.interpret,
               "anchor": "torch pipeline: argsort, index_select, torch._grouped_mm (gate|up), "
                         "SwiGLU, torch._grouped_mm (down), weights, index_add_",
               "fused_anchor": "Triton fused MoE (tasks/moe/fused_anchor.py): align (2 launches), "
                               "gate|up grouped GEMM + SwiGLU, down grouped GEMM x routing "
                               f"weight, top-k sum; config: {args.fused_config}",
               "anchors_only": args.anchors_only, "shapes": {}}
    start = time.time()
    for name, sizes in cases(task, args.smoke, args.shape):
        if time.time() - start > args.time_limit:
            print(f"time limit reached before {name}", flush=True)
            break
        def fused(inputs, sizes=sizes):
            return fused_config(task, inputs, sizes, args.fused_config, config_file,
                                args.tune_rep_ms)
        row = {"sizes": sizes, "flops": task.flops(sizes),
               **routing_and_pipeline(task, sizes, device, fused), "programs": {}}
        config = fused_module(task).FusedConfig.from_dict(row["fused_config"])
        if args.anchors_only:
            if device == "cuda":
                row["anchors"] = time_against_fused(task, sizes, config, rounds=args.rounds,
                                                    rep_ms=args.rep_ms)
            else:
                row["anchors"] = interpreted_anchors(task, sizes, config)
            print(json.dumps({"shape": name, "fused_ok": row["fused_ok"], **row["anchors"]}),
                  flush=True)
        programs = {} if args.anchors_only else {w: task.program(w) for w in ("baseline", "expert")}
        if args.catalog and not args.anchors_only:
            programs.update({f"catalog:{n}": task.space.program(c)
                             for n, c in catalog_variants(task, sizes).items()})
        if args.sweep and not args.anchors_only:
            programs.update({f"catalog:{n}": task.space.program(c)
                             for n, c in sweep_variants(task, sizes).items()})
        for which, base in programs.items():
            program = task.bind(base, sizes)
            try:
                res = measure(program, task, sizes, args.interpret, args.rounds, args.rep_ms)
                if res.get("ok") and device == "cuda":
                    from argus_env import lower
                    res.update(time_against_fused(task, sizes, config, lower.load(program, interpret=False),
                                                  program, args.rounds, args.rep_ms))
                elif res.get("ok"):
                    res.update(interpreted_vs_fused(program, task, sizes, config))
            except Exception as e:  # a failing program is a result
                res = {"ok": False, "status": "error", "message": f"{type(e).__name__}: {e}"[:300]}
            if which.startswith("catalog:"):
                res["summary"] = program.kernel.doc
            row["programs"][which] = {k: res.get(k) for k in ("summary",
                "ok", "correct", "status", "message", "ms", "tflops", "anchor_ms",
                "anchor_tflops", "ratio", "max_rel_err", "interpreter", "ms_vs_fused",
                "fused_anchor_ms", "fused_ratio", "timing", "fused_timing")}
            print(json.dumps({"shape": name, "program": which, "ok": res.get("ok"),
                              "tflops": res.get("tflops"), "ratio": res.get("ratio"),
                              "fused_ratio": res.get("fused_ratio"),
                              "message": (res.get("message") or "")[:120]}), flush=True)
        results["shapes"][name] = row
        if device == "cuda":
            import torch
            torch.cuda.empty_cache()
    out_path.parent.mkdir(parents=True, exist_ok=True)
    out_path.write_text(json.dumps(results, indent=1, default=str))
    print(f"\nwrote {out_path}" + ("  (interpreter: times are not performance)"
                                  if args.interpret else ""))
    print_table(results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
