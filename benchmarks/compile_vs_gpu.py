"""Does the CPU's compile verdict see what the GPU's launch compiles? For a sample of
programs (the committed board's submitted kernels and programs its episodes visited),
set the ahead-of-time compile on the CPU (`argus_env.lower.aot`, specialised as the
launch at the program's sizes, and unspecialised) against the kernels Triton compiles
when the program is launched on a GPU at the same sizes (read from Triton's cache
metadata: shared memory, warps; and whether the launch was refused).

    # 1. CPU: pick the programs and compile them ahead of time for sm_90
    python benchmarks/compile_vs_gpu.py cpu --plan runs/record_h200/plan.jsonl \
        --out runs/compile_check [--per-task 30]
    # 2. GPU (torch and Triton only): launch each once, read the compiled kernels' figures
    python benchmarks/compile_vs_gpu.py gpu --out runs/compile_check
    # 3. CPU or GPU: the comparison (also printed by `gpu`)
    python benchmarks/compile_vs_gpu.py compare --out runs/compile_check [--to FILE]

The GPU's Triton may be another version than the CPU's: the comparison records both.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import random
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))


def _versions() -> dict:
    from importlib.metadata import version
    out = {}
    for name in ("triton", "torch"):
        try:
            out[name] = version(name)
        except Exception:  # noqa: BLE001
            out[name] = ""
    return out


# ---------------------------------------------------------------- cpu
def cmd_cpu(args) -> int:
    from record_programs import read_plan
    from argus_env.dsl.program import Program
    from argus_env.lower.aot import compile_for
    from argus_env.target import load_target
    from argus_env.task import get_task
    plan = read_plan(args.plan)
    rng = random.Random(args.seed)
    chosen, seen = [], set()
    by_task: dict = {}
    for it in plan["items"]:
        by_task.setdefault(it.task, []).append(it)
    for task, items in sorted(by_task.items()):
        board = [i for i in items if i.board]
        rest = [i for i in items if not i.board and not i.heldout]
        rng.shuffle(board)
        rng.shuffle(rest)
        for it in (board + rest)[: args.per_task]:
            if it.key not in seen:
                seen.add(it.key)
                chosen.append(it)
    target = load_target("h200")
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / "programs.jsonl"
    done = {json.loads(x)["key"] for x in path.read_text().splitlines()} if path.exists() else set()
    t0 = time.time()
    with path.open("a") as f:
        for n, it in enumerate(chosen):
            if it.key in done:
                continue
            task = get_task(it.task)
            program = Program.from_text(it.program)
            launch = {k: int(v) for k, v in task.program_sizes(program, it.sizes).items()}
            spec = compile_for(program, target, sizes=launch)
            plain = compile_for(program, target)
            f.write(json.dumps({"key": it.key, "task": it.task, "shape": it.shape,
                                "sizes": it.sizes, "launch_sizes": launch,
                                "program": it.program, "board": it.board,
                                "cpu": spec.to_dict(), "cpu_unspecialised": plain.to_dict(),
                                "cpu_versions": _versions()}) + "\n")
            f.flush()
            print(f"[{n + 1}/{len(chosen)}] {it.task} {it.shape} {it.program_hash}: "
                  f"specialised {spec.shared_bytes} B{'' if spec.ok else ' FAIL'}, "
                  f"unspecialised {plain.shared_bytes} B ({time.time() - t0:.0f} s)", flush=True)
    return 0


# ---------------------------------------------------------------- gpu
def _launch_one(rec: dict) -> dict:
    """Launch one program at its sizes in this (pool) process with a private Triton
    cache, then read the figures of the kernels the launch compiled."""
    folder = tempfile.mkdtemp(prefix="argus-cvg-")
    os.environ["TRITON_CACHE_DIR"] = folder
    os.environ["TRITON_INTERPRET"] = "0"
    from record_programs import _warm_one
    _, error, seconds = _warm_one({"key": rec["key"], "task": rec["task"],
                                   "program": rec["program"], "sizes": rec["sizes"]})
    kernels = []
    for meta in glob.glob(os.path.join(folder, "*", "*.json")):
        if os.path.basename(meta).startswith("__grp__"):
            continue
        try:
            m = json.load(open(meta))
        except (OSError, ValueError):
            continue
        if "shared" in m and str(m.get("name", "")).find("_kernel") >= 0:
            kernels.append({"name": m.get("name"), "shared": int(m["shared"]),
                            "num_warps": m.get("num_warps"), "num_stages": m.get("num_stages")})
    return {"key": rec["key"], "error": error, "seconds": round(seconds, 2),
            "kernels": sorted(kernels, key=lambda k: str(k["name"])),
            "shared_bytes": max((k["shared"] for k in kernels), default=0)}


def cmd_gpu(args) -> int:
    import concurrent.futures as cf
    import multiprocessing as mp

    import torch
    recs = [json.loads(x) for x in (args.out / "programs.jsonl").read_text().splitlines()]
    out = args.out / "gpu.jsonl"
    done = {json.loads(x)["key"] for x in out.read_text().splitlines()} if out.exists() else set()
    todo = [r for r in recs if r["key"] not in done]
    gpu = {"gpu": torch.cuda.get_device_name(0), **_versions()}
    print(f"{gpu}: {len(todo)} programs to launch ({len(done)} done)", flush=True)
    t0 = time.time()
    ctx = mp.get_context("spawn")
    with cf.ProcessPoolExecutor(args.workers, mp_context=ctx) as pool, out.open("a") as f:
        futs = [pool.submit(_launch_one, r) for r in todo]
        for fut in cf.as_completed(futs):
            if time.time() - t0 > args.max_seconds:
                break
            try:
                res = fut.result()
            except Exception as e:  # noqa: BLE001 - a crashed pool process
                print(f"  pool: {type(e).__name__}: {e}"[:200], flush=True)
                continue
            f.write(json.dumps({**res, **gpu}) + "\n")
            f.flush()
        for fut in futs:
            fut.cancel()
    print(f"launched in {time.time() - t0:.0f} s", flush=True)
    return cmd_compare(args)


# ---------------------------------------------------------------- compare
def cmd_compare(args) -> int:
    from argus_env.target import load_target
    limit = load_target("h200").smem_per_block
    recs = {json.loads(x)["key"]: json.loads(x)
            for x in (args.out / "programs.jsonl").read_text().splitlines()}
    gpu = [json.loads(x) for x in (args.out / "gpu.jsonl").read_text().splitlines()] \
        if (args.out / "gpu.jsonl").exists() else []
    rows = []
    for g in gpu:
        r = recs.get(g["key"])
        if r is None or not g["kernels"] and not g["error"]:
            continue
        gpu_ok = not g["error"]
        refused_for_smem = "shared memory" in g["error"] or g["shared_bytes"] > limit
        cpu_ok = r["cpu"]["ok"] and r["cpu"]["shared_bytes"] <= limit
        plain_ok = r["cpu_unspecialised"]["ok"] and r["cpu_unspecialised"]["shared_bytes"] <= limit
        rows.append({"key": g["key"], "task": r["task"], "shape": r["shape"], "board": r["board"],
                     "gpu_ok": gpu_ok, "gpu_error": g["error"][:160],
                     "gpu_refused_for_shared_memory": refused_for_smem,
                     "gpu_shared": g["shared_bytes"], "cpu_shared": r["cpu"]["shared_bytes"],
                     "cpu_unspecialised_shared": r["cpu_unspecialised"]["shared_bytes"],
                     "cpu_ok": cpu_ok, "cpu_unspecialised_ok": plain_ok})
    summary = {}
    for task in sorted({r["task"] for r in rows} | {"all"}):
        mine = [r for r in rows if task in ("all", r["task"])]
        if not mine:
            continue
        with_k = [r for r in mine if r["gpu_shared"]]
        summary[task] = {
            "programs": len(mine),
            "gpu_refused": sum(not r["gpu_ok"] for r in mine),
            "verdict_agrees_specialised": sum((r["cpu_ok"] == (r["gpu_ok"] or not
                                               r["gpu_refused_for_shared_memory"]))
                                              for r in mine),
            "verdict_agrees_unspecialised": sum((r["cpu_unspecialised_ok"] == (r["gpu_ok"] or not
                                                 r["gpu_refused_for_shared_memory"]))
                                                for r in mine),
            "shared_equal_specialised": sum(r["cpu_shared"] == r["gpu_shared"] for r in with_k),
            "shared_equal_unspecialised": sum(r["cpu_unspecialised_shared"] == r["gpu_shared"]
                                              for r in with_k),
            "with_kernel_figures": len(with_k)}
    print(f"{'task':<11}{'programs':>9}{'gpu refused':>12}{'verdict spec':>13}"
          f"{'verdict plain':>14}{'smem= spec':>11}{'smem= plain':>12}")
    for task, s in summary.items():
        print(f"{task:<11}{s['programs']:>9}{s['gpu_refused']:>12}"
              f"{s['verdict_agrees_specialised']:>13}{s['verdict_agrees_unspecialised']:>14}"
              f"{s['shared_equal_specialised']:>8}/{s['with_kernel_figures']:<3}"
              f"{s['shared_equal_unspecialised']:>8}/{s['with_kernel_figures']:<3}")
    result = {"what": "CPU ahead-of-time compile (specialised as the launch, and unspecialised) "
                      "against the kernels a GPU launch compiled at the same sizes",
              "gpu": gpu[0].get("gpu") if gpu else None,
              "gpu_versions": {k: gpu[0].get(k) for k in ("triton", "torch")} if gpu else None,
              "cpu_versions": next(iter(recs.values()))["cpu_versions"] if recs else None,
              "smem_limit": limit, "summary": summary, "rows": rows}
    if getattr(args, "to", None):
        args.to.write_text(json.dumps(result, indent=1) + "\n")
        print(f"wrote {args.to}")
    return 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("cpu")
    c.add_argument("--plan", type=Path, default=ROOT / "runs" / "record_h200" / "plan.jsonl")
    c.add_argument("--out", type=Path, required=True)
    c.add_argument("--per-task", type=int, default=30)
    c.add_argument("--seed", type=int, default=0)
    c.set_defaults(fn=cmd_cpu)
    g = sub.add_parser("gpu")
    g.add_argument("--out", type=Path, required=True)
    g.add_argument("--workers", type=int, default=12)
    g.add_argument("--max-seconds", type=float, default=400)
    g.add_argument("--to", type=Path, default=None)
    g.set_defaults(fn=cmd_gpu)
    m = sub.add_parser("compare")
    m.add_argument("--out", type=Path, required=True)
    m.add_argument("--to", type=Path, default=None)
    m.set_defaults(fn=cmd_compare)
    args = ap.parse_args(argv)
    from record_programs import namespace
    namespace()   # a checkout that is not installed (the GPU machine) finds the tasks
    return args.fn(args)


if __name__ == "__main__":
    sys.exit(main())
