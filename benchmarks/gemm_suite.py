"""Correctness and throughput of the GEMM task's DSL programs against cuBLAS, on one GPU.

For every shape of the GEMM suite and every program (baseline, expert):
  1. correctness at the full shape: fresh random bf16 inputs, output poisoned with NaN,
     compared elementwise with a float32 torch reference (argus_env.measure.oracle);
  2. throughput: the program's launcher and torch.matmul on the same inputs, each captured
     in a CUDA graph and timed by `triton.testing.do_bench_cudagraph` (median), alternating
     candidate and cuBLAS for several rounds so that power-cap throttling hits both alike;
     the reported ratio is the median over rounds of t_cublas / t_program.

Usage (on a machine with an NVIDIA GPU; Hopper features need sm_90):
    PYTHONPATH=. python benchmarks/gemm_suite.py --out benchmarks/results/gemm_suite.json
    # the swap-AB and stream-K configurations (tasks/gemm/space.py SMALL_SHAPES, all or by
    # name) beside the programs, each at the shapes where the mask allows it
    PYTHONPATH=. python benchmarks/gemm_suite.py --configs small-shapes \
        --shapes decode-16 decode-64 small-m-512 ragged-1000
Prints a table last; writes every row and the provenance (GPU, driver, clocks, versions).
The configurations are the ones the test suite proves at every suite shape where the mask
allows them (`tests/tasks/test_gemm_space.py`), so no checker runs here.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from record_programs import namespace  # noqa: E402

namespace()  # argus_env.tasks from a checkout that is not installed (a GPU machine)


def bench_pair(candidate, anchor, rounds: int, rep_ms: int):
    from triton.testing import do_bench_cudagraph
    ts_c, ts_a = [], []
    for r in range(rounds):
        order = (candidate, anchor) if r % 2 == 0 else (anchor, candidate)
        for fn in order:
            t = do_bench_cudagraph(fn, rep=rep_ms, return_mode="median")
            (ts_c if fn is candidate else ts_a).append(t)
    ratios = [a / c for a, c in zip(ts_a, ts_c)]
    return statistics.median(ts_c), statistics.median(ts_a), statistics.median(ratios), ratios


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--programs", nargs="*", default=["baseline", "expert"])
    ap.add_argument("--configs", nargs="*", default=[],
                    help="names in tasks/gemm/space.py SMALL_SHAPES, or small-shapes for all")
    ap.add_argument("--shapes", nargs="*", default=None, help="shape names (default: all)")
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--rep-ms", type=int, default=60)
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args(argv)

    import torch
    from argus_env import lower
    from argus_env.measure import oracle, provenance
    from argus_env.task import get_task

    if not torch.cuda.is_available():
        print("no CUDA GPU: this benchmark measures on a GPU", file=sys.stderr)
        return 2
    task = get_task("gemm")
    prov = provenance.collect()
    prov["protocol"] = (f"correctness: fresh randn bf16 inputs, NaN-poisoned output, tolerance "
                        f"{task.tolerance}; timing: do_bench_cudagraph median, {args.rounds} "
                        f"alternating rounds of {args.rep_ms} ms per side, ratio = median over "
                        "rounds of t_cublas / t_program")
    print(json.dumps(prov), flush=True)
    from argus_env.target import load_target
    from argus_env.tasks.gemm.space import SMALL_SHAPES
    programs = {w: task.program(w) for w in args.programs}
    names = list(SMALL_SHAPES) if "small-shapes" in args.configs else args.configs
    unknown = sorted(set(names) - set(SMALL_SHAPES))
    if unknown:
        ap.error(f"--configs: unknown {unknown}; known: small-shapes, {', '.join(SMALL_SHAPES)}")
    configs = {n: SMALL_SHAPES[n] for n in names}
    programs.update({n: task.space.program(c) for n, c in configs.items()})
    launchers = {w: lower.load(p, interpret=False) for w, p in programs.items()}
    h200 = load_target("h200")
    rows = []
    cases = [c for c in task.shape_cases() if not args.shapes or c.name in args.shapes]
    for case in cases:
        for which, prog in programs.items():
            if which in configs and task.space.config_reason(
                    configs[which], {"sizes": case.sizes, "target": h200}):
                continue   # the mask refuses it at this shape (stream-K past its waves)
            row = {"shape": case.name, "sizes": case.sizes, "program": which,
                   "program_hash": prog.hash}
            try:
                t0 = time.time()
                verdict = oracle.check(prog, task, case.sizes, launchers[which], device="cuda",
                                       seed=len(rows))
                row.update(correct=verdict.ok, max_rel_err=verdict.max_rel_err,
                           message=verdict.message)
                gen = torch.Generator(device="cuda").manual_seed(1000 + len(rows))
                inputs = task.make_inputs(prog, case.sizes, "cuda", gen)
                c = torch.empty(case.sizes["M"], case.sizes["N"], device="cuda",
                                dtype=torch.bfloat16)
                launch = launchers[which]
                cand = lambda: launch(c=c, **inputs)  # noqa: E731
                t_c, t_a, ratio, ratios = bench_pair(cand, task.anchor(inputs, case.sizes), args.rounds,
                                                      args.rep_ms)
                fl = task.flops(case.sizes)
                row.update(ms=t_c, cublas_ms=t_a, tflops=fl / t_c / 1e9,
                           cublas_tflops=fl / t_a / 1e9, ratio=ratio, ratios=ratios,
                           seconds=round(time.time() - t0, 1))
            except Exception as e:  # a failing program is a result, not a crash
                row.update(correct=False, error=f"{type(e).__name__}: {e}"[:400])
            rows.append(row)
            print(json.dumps(row), flush=True)
            torch.cuda.empty_cache()
    result = {"provenance": prov, "rows": rows}
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(result, indent=1))
    print(f"\n{'shape':<14}{'program':<26}{'ok':<4}{'TFLOP/s':>9}{'cuBLAS':>9}{'ratio':>7}")
    for r in rows:
        if "tflops" in r:
            print(f"{r['shape']:<14}{r['program']:<26}{'y' if r['correct'] else 'N':<4}"
                  f"{r['tflops']:>9.1f}{r['cublas_tflops']:>9.1f}{r['ratio']:>7.3f}")
        else:
            print(f"{r['shape']:<14}{r['program']:<26}ERR {r.get('error', '')[:60]}")
    return 0 if all(r.get("correct") for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
