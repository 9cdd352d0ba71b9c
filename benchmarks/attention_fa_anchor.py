"""Attention's stronger anchor: FlashAttention-4's CuTe-DSL forward (`flash_attn.cute`,
package `flash-attn-4`, which has a Hopper forward, `flash_fwd_sm90.py`) timed beside
SDPA's cuDNN backend, and the Argus attention expert against both, per suite shape.

For every shape of the attention suite, in one process:
- FA4's output is checked against the task's float32 reference at the real shape, with
  the task's tolerance (`argus_env.measure.oracle.compare`, as every program is);
- FA4 and cuDNN are timed as a pair (`argus_env.measure.gpu.time_pair`: CUDA-graph
  medians, the order alternating each round);
- the expert is measured with the project's protocol (`measure_program`: correctness,
  rotated inputs, timed alternating with cuDNN), so that its ratio to the faster of the
  two libraries is expert/cuDNN times cuDNN/max(cuDNN, FA4) from the same run.

A shape FA4 refuses or fails on is a row with its error; where `flash_attn.cute` cannot be
imported at all, every row says why, and the expert is still timed against cuDNN.

    python benchmarks/attention_fa_anchor.py --out results.json [--shapes NAME ...]
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from record_programs import namespace  # noqa: E402

namespace()  # argus_env.tasks from a checkout that is not installed (a GPU machine)


def fa4_forward():
    """FA4's forward as f(q, k, v, causal) on (B, H, S, D) tensors, or the import error."""
    try:
        from flash_attn.cute import flash_attn_func
    except Exception as e:  # noqa: BLE001 - a missing or broken install is a result
        return None, f"{type(e).__name__}: {e}"[:500]

    def run(q, k, v, causal: bool):
        # FA4 takes (B, S, H, D); a transposed view is made contiguous once, outside timing
        out = flash_attn_func(q, k, v, causal=causal)
        return out[0] if isinstance(out, tuple) else out
    return run, None


def one_shape(task, case, fa4, rounds: int, rep_ms: int) -> dict:
    import torch

    from argus_env import lower
    from argus_env.measure.gpu import measure_program, time_pair
    from argus_env.measure.oracle import compare
    from argus_env.tasks.attention.space import EXPERT
    sizes = dict(case.sizes)
    causal, gqa = bool(sizes["CAUSAL"]), sizes["H"] != sizes["KVH"]
    flops = task.flops(sizes)
    row: dict = {"shape": case.name, "sizes": sizes}
    gen = torch.Generator(device="cuda").manual_seed(11)
    x = task.make_inputs(None, sizes, "cuda", gen)
    q, k, v = x["q"], x["k"], x["v"]

    def cudnn():
        from torch.nn.attention import SDPBackend, sdpa_kernel
        with sdpa_kernel([SDPBackend.CUDNN_ATTENTION]):
            return torch.nn.functional.scaled_dot_product_attention(
                q, k, v, is_causal=causal, enable_gqa=gqa)
    if fa4 is not None:
        qt, kt, vt = (t.transpose(1, 2).contiguous() for t in (q, k, v))
        try:
            t0 = time.perf_counter()
            got = fa4(qt, kt, vt, causal).transpose(1, 2)
            torch.cuda.synchronize()
            row["fa4_first_call_s"] = time.perf_counter() - t0   # the JIT compile
            # judged as every program is: the task's tolerance (`measure.oracle.compare`)
            verdict = compare({"o": got}, task.reference({"q": q, "k": k, "v": v}, sizes),
                              task, sizes)
            row["fa4_max_rel_err"], row["fa4_ok"] = verdict.max_rel_err, verdict.ok
            if not verdict.ok:
                row["fa4_error"] = verdict.message[:300]
            t = time_pair(lambda: fa4(qt, kt, vt, causal), cudnn, rounds, rep_ms)
            row.update(fa4_ms=t["ms"], cudnn_ms=t["anchor_ms"], timing=t["timing"],
                       fa4_tflops=flops / t["ms"] / 1e9, cudnn_tflops=flops / t["anchor_ms"] / 1e9,
                       fa4_over_cudnn=t["anchor_ms"] / t["ms"])
        except Exception as e:  # noqa: BLE001 - a shape FA4 does not take is a result
            row["fa4_error"] = f"{type(e).__name__}: {e}"[:500]
        torch.cuda.synchronize()
    program = task.bind(task.space.program(EXPERT), sizes)
    try:
        res = measure_program(program, task, sizes, lower.load(program, interpret=False),
                              rounds, rep_ms, seed=7)
        row["expert_ok"] = bool(res["ok"])
        if res["ok"]:
            row.update(expert_ms=res["ms"], expert_tflops=res["tflops"],
                       expert_anchor_ms=res["anchor_ms"], expert_over_cudnn=res["ratio"])
            if row.get("fa4_ok"):
                faster = max(1.0, row["fa4_over_cudnn"])   # the faster library, over cuDNN
                row["expert_over_best_library"] = res["ratio"] / faster
        else:
            row["expert_error"] = f"{res['status']}: {res.get('message', '')}"[:300]
    except Exception as e:  # noqa: BLE001
        row["expert_error"] = f"{type(e).__name__}: {e}"[:300]
    return row


def geomean(xs) -> float | None:
    xs = [x for x in xs if x and x > 0]
    return math.exp(sum(map(math.log, xs)) / len(xs)) if xs else None


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--shapes", nargs="*", help="suite shape names (default: all)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--rep-ms", type=int, default=30)
    ap.add_argument("--time-limit", type=float, default=500)
    args = ap.parse_args(argv)
    from argus_env.measure import provenance
    from argus_env.task import get_task
    task = get_task("attention")
    cases = [c for c in task.shape_cases("all") if not args.shapes or c.name in args.shapes]
    fa4, why = fa4_forward()
    out = {"what": "FA4 (flash_attn.cute) and the Argus attention expert against SDPA cuDNN",
           "provenance": provenance.collect(), "fa4_import_error": why, "rows": []}
    try:
        import flash_attn
        out["fa4_version"] = getattr(flash_attn, "__version__", None)
    except Exception:  # noqa: BLE001
        pass
    start = time.time()
    for case in cases:
        if time.time() - start > args.time_limit:
            print("time limit reached", flush=True)
            break
        row = one_shape(task, case, fa4, args.rounds, args.rep_ms)
        out["rows"].append(row)
        args.out.write_text(json.dumps(out, indent=1))
        print(json.dumps({k: (round(v, 4) if isinstance(v, float) else v) for k, v in row.items()
                          if k != "sizes"}), flush=True)
    rows = out["rows"]
    out["geomean"] = {k: geomean(r.get(k) for r in rows)
                      for k in ("fa4_over_cudnn", "expert_over_cudnn", "expert_over_best_library")}
    args.out.write_text(json.dumps(out, indent=1))
    print(f"\n{'shape':<32}{'cuDNN TF':>10}{'FA4 TF':>9}{'FA4/cuDNN':>11}{'exp/cuDNN':>11}{'exp/best':>10}")
    for r in rows:
        def f(k, w, p=3):
            v = r.get(k)
            return f"{v:>{w}.{p}f}" if isinstance(v, float) else f"{'-':>{w}}"
        print(f"{r['shape']:<32}{f('cudnn_tflops', 10, 0)}{f('fa4_tflops', 9, 0)}"
              f"{f('fa4_over_cudnn', 11)}{f('expert_over_cudnn', 11)}{f('expert_over_best_library', 10)}")
    g = out["geomean"]
    print("geomean: " + ", ".join(f"{k} {v:.3f}" for k, v in g.items() if v))
    if why:
        print(f"flash_attn.cute not available: {why}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
