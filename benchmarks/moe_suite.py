"""MoE on one GPU: the baseline and expert DSL programs against a PyTorch pipeline of library
pieces (sort/gather, `torch._grouped_mm`, SwiGLU, `index_add_`), measured in the same run.

For every shape of the MoE suite: the routing step (top-k of seeded router logits, sort,
block alignment) timed alone; then each DSL program through the full protocol of
`argus_env.measure.gpu` (correctness at the real shape against the float32 reference,
rotated inputs, CUDA-graph timing alternating with the library anchor — the torch
pipeline from the same top-k ids and weights, which does its own sort and gather), and the
torch pipeline's own error against the reference. Writes JSON to --out (default
$OUT/moe_suite.json, else benchmarks/results/moe_suite.json) and prints a table last.
Needs torch, triton, numpy and pyyaml only (no gymnasium, z3 or ray).

    PYTHONPATH=. python benchmarks/moe_suite.py                        # H200, about 4 min
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


def routing_and_pipeline(task, sizes: dict, device: str) -> dict:
    """The routing step's time, and the torch pipeline's error against the reference."""
    import torch

    from argus_env.measure import oracle
    gen = torch.Generator(device=device).manual_seed(11)
    inputs = task.make_inputs(None, task.program_sizes(task.program("expert"), sizes), device, gen)
    ref = task.reference(inputs, sizes)
    got = {"out": task.anchor(inputs, sizes)()}
    verdict = oracle.compare(got, ref, task, sizes)
    out = {"pipeline_ok": verdict.ok, "pipeline_max_rel_err": verdict.max_rel_err}
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


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, help="JSON results (default $OUT/moe_suite.json)")
    ap.add_argument("--interpret", action="store_true", help="Triton interpreter on CPU")
    ap.add_argument("--smoke", action="store_true", help="two tiny shapes")
    ap.add_argument("--shape", help="only shapes whose name contains this")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--rep-ms", type=int, default=25)
    ap.add_argument("--time-limit", type=float, default=420)
    args = ap.parse_args(argv)
    if args.interpret:  # before anything imports Triton
        os.environ["TRITON_INTERPRET"] = "1"
    out_path = args.out or (Path(os.environ["OUT"]) / "moe_suite.json" if os.environ.get("OUT")
                            else Path("benchmarks/results/moe_suite.json"))
    from argus_env.measure import provenance
    from argus_env.task import get_task
    task = get_task("moe")
    device = "cpu" if args.interpret else "cuda"
    results = {"provenance": provenance.collect(), "interpret": args.interpret,
               "anchor": "torch pipeline: argsort, index_select, torch._grouped_mm (gate|up), "
                         "SwiGLU, torch._grouped_mm (down), weights, index_add_",
               "shapes": {}}
    start = time.time()
    for name, sizes in cases(task, args.smoke, args.shape):
        if time.time() - start > args.time_limit:
            print(f"time limit reached before {name}", flush=True)
            break
        row = {"sizes": sizes, **routing_and_pipeline(task, sizes, device), "programs": {}}
        for which in ("baseline", "expert"):
            program = task.bind(task.program(which), sizes)
            try:
                res = measure(program, task, sizes, args.interpret, args.rounds, args.rep_ms)
            except Exception as e:  # a failing program is a result
                res = {"ok": False, "status": "error", "message": f"{type(e).__name__}: {e}"[:300]}
            row["programs"][which] = {k: res.get(k) for k in (
                "ok", "correct", "status", "message", "ms", "tflops", "anchor_ms",
                "anchor_tflops", "ratio", "max_rel_err", "interpreter")}
            print(json.dumps({"shape": name, "program": which, "ok": res.get("ok"),
                              "tflops": res.get("tflops"), "ratio": res.get("ratio"),
                              "message": (res.get("message") or "")[:120]}), flush=True)
        results["shapes"][name] = row
        if device == "cuda":
            import torch
            torch.cuda.empty_cache()
    out_path.parent.mkdir(parents=True, exist_ok=True)
    out_path.write_text(json.dumps(results, indent=1, default=str))
    print(f"\nwrote {out_path}" + ("  (interpreter: times are not performance)"
                                  if args.interpret else ""))
    print(f"{'shape':<34}{'routing ms':>11}{'torch ms':>10}{'base ms':>9}{'exp ms':>9}"
          f"{'base/torch':>11}{'exp/torch':>10}{'exp TF/s':>9}")
    for name, row in results["shapes"].items():
        b, e = row["programs"]["baseline"], row["programs"]["expert"]
        anchor = e.get("anchor_ms") or b.get("anchor_ms") or float("nan")

        def f(x, w, p=3):
            return f"{x:>{w}.{p}f}" if isinstance(x, (int, float)) else f"{'-':>{w}}"
        print(f"{name:<34}{f(row['routing_ms'], 11)}{f(anchor, 10)}{f(b.get('ms'), 9)}"
              f"{f(e.get('ms'), 9)}{f(b.get('ratio'), 11)}{f(e.get('ratio'), 10)}"
              f"{f(e.get('tflops'), 9, 0)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
