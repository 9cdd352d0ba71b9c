"""Is the RMSNorm anchor (`torch.compile` of the PyTorch function) the same kernel from one
fresh compile to the next?

Each trial is a fresh process with an empty Inductor cache (as on a fresh machine): it
compiles `fused_add_rmsnorm` for one shape, calls it once (Inductor benchmarks its
reduction kernel's candidate launch configurations at the first call and keeps the
fastest), then times it with CUDA graphs (`triton.testing.do_bench_cudagraph`, median of
5 rounds of 20 ms) beside eager PyTorch, and reports the launch configuration Inductor
kept. Modes: Inductor's defaults, `coordinate_descent_tuning` (a wider search), and
`graph`: the project's anchor (`tasks/rmsnorm/task.py`, `graph_timed_autotuning`: the
candidates timed from CUDA graphs).

    python benchmarks/rmsnorm_anchor_stability.py --trials 5 --out results.json

Needs a CUDA GPU, torch and Triton.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

TRIAL = r'''
import json, os, statistics, sys
import torch, triton
from triton.testing import do_bench_cudagraph
T, H, mode = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
import torch._inductor.config as cfg
if mode == "coordinate":
    cfg.coordinate_descent_tuning = True
def fused_add_rmsnorm(x, residual, weight, eps=1e-6):
    r = x + residual
    return torch.nn.functional.rms_norm(r, (r.shape[-1],), weight, eps), r
g = torch.Generator(device="cuda").manual_seed(0)
x = torch.randn(T, H, device="cuda", dtype=torch.bfloat16, generator=g)
res = torch.randn(T, H, device="cuda", dtype=torch.bfloat16, generator=g)
w = torch.randn(H, device="cuda", dtype=torch.bfloat16, generator=g)
if mode == "graph":  # the project's anchor: candidates timed from CUDA graphs
    sys.path.insert(0, os.getcwd())
    from tasks.rmsnorm.task import compiled, graph_timed_autotuning
    fn = compiled()
    with graph_timed_autotuning():
        fn(x, res, w)
else:
    fn = torch.compile(fused_add_rmsnorm, dynamic=False)
    fn(x, res, w)
torch.cuda.synchronize()
configs = []
try:
    from torch._inductor.codecache import PyCodeCache
    mods = PyCodeCache.modules if isinstance(PyCodeCache.modules, list) else \
        list(getattr(PyCodeCache, "modules", {}).values())
    for m in mods:
        for name in dir(m):
            k = getattr(m, name)
            ls = getattr(k, "launchers", None)
            if ls:
                c = ls[0].config
                configs.append({"kernel": name, "kwargs": dict(c.kwargs),
                                "num_warps": c.num_warps, "num_stages": c.num_stages,
                                "candidates": len(getattr(k, "configs", []) or [])})
except Exception as e:  # noqa: BLE001
    configs.append({"error": repr(e)})
rounds = {"compile": [], "eager": []}
for _ in range(5):
    rounds["compile"].append(do_bench_cudagraph(lambda: fn(x, res, w), rep=20) * 1000)
    rounds["eager"].append(do_bench_cudagraph(lambda: fused_add_rmsnorm(x, res, w), rep=20) * 1000)
print(json.dumps({"compile_us": statistics.median(rounds["compile"]),
                  "eager_us": statistics.median(rounds["eager"]), "rounds": rounds,
                  "configs": configs}))
'''


def trial(tokens: int, hidden: int, mode: str) -> dict:
    with tempfile.TemporaryDirectory(prefix="inductor-") as cache:
        env = dict(os.environ, TORCHINDUCTOR_CACHE_DIR=cache,
                   TRITON_CACHE_DIR=os.path.join(cache, "triton"))
        t0 = time.time()
        proc = subprocess.run([sys.executable, "-c", TRIAL, str(tokens), str(hidden), mode],
                              capture_output=True, text=True, env=env, timeout=600, cwd=ROOT)
        try:
            out = json.loads(proc.stdout.strip().splitlines()[-1])
        except (IndexError, json.JSONDecodeError):
            out = {"error": proc.stderr[-1500:]}
        out["seconds"] = round(time.time() - t0, 1)
        return out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--shapes", default="64x8192",
                   help="TxH pairs (llama70b-decode-64 first)")
    p.add_argument("--modes", default="default,coordinate,graph")
    p.add_argument("--trials", type=int, default=5)
    p.add_argument("--out", type=Path)
    args = p.parse_args()
    import torch
    import triton
    prov = {"date": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "gpu": torch.cuda.get_device_name(),
            "torch": torch.__version__, "triton": triton.__version__,
            "cuda": torch.version.cuda,
            "driver": subprocess.run(["nvidia-smi", "--query-gpu=driver_version",
                                      "--format=csv,noheader"], capture_output=True,
                                     text=True).stdout.strip(),
            "protocol": "fresh process and empty Inductor/Triton caches per trial; one call "
                        "(Inductor's first-call autotuning), then do_bench_cudagraph medians "
                        "of 5 rounds of 20 ms, compiled and eager alternating"}
    rows = []
    for shape in args.shapes.split(","):
        t, h = (int(v) for v in shape.split("x"))
        for mode in args.modes.split(","):
            for i in range(args.trials):
                r = trial(t, h, mode)
                r.update(T=t, H=h, mode=mode, trial=i)
                rows.append(r)
                cfgs = [(c.get("kwargs"), c.get("num_warps")) for c in r.get("configs", [])]
                print(f"T={t} H={h} {mode:10s} trial {i}: compile {r.get('compile_us', 0):.2f} us"
                      f"  eager {r.get('eager_us', 0):.2f} us  {cfgs}  {r.get('error', '')[:200]}",
                      flush=True)
    summary = {}
    for r in rows:
        if "compile_us" in r:
            summary.setdefault(f"{r['T']}x{r['H']} {r['mode']}", []).append(round(r["compile_us"], 2))
    print("\nshape/mode              compile us per trial")
    for k, v in summary.items():
        print(f"{k:22s} {v}  spread {max(v) / min(v):.2f}x")
    if args.out:
        args.out.write_text(json.dumps({"provenance": prov, "rows": rows, "summary": summary},
                                       indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
