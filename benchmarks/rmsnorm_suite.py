"""RMSNorm on one GPU: the DSL programs against the faster of eager PyTorch and
`torch.compile` of the same function, measured in the same run.

For every shape of the RMSNorm suite: the anchor function (`tasks.rmsnorm.task.
fused_add_rmsnorm`: bf16 residual add, then `torch.nn.functional.rms_norm`) checked
against the float32 reference both eagerly and compiled (`torch.compile`, dynamic=False),
and the two timed against each other (rotated inputs, CUDA-graph medians, alternating
rounds); the faster is the shape's anchor. Then each configuration of
`tasks.rmsnorm.space.table_configurations(sizes)` (the baseline, the expert and some
neighbours) goes through the full protocol of `argus_env.measure.gpu` against that anchor
(correctness at the real shape, rotated inputs, CUDA-graph timing alternating with the
anchor), appended to a resumable CSV table. Writes JSON to --out (default
$OUT/rmsnorm_suite.json, else benchmarks/results/rmsnorm_suite.json), the anchors in the
task's format to --anchors, and prints a table last.

    PYTHONPATH=. python benchmarks/rmsnorm_suite.py --table tasks/rmsnorm/table_h200.csv
    PYTHONPATH=. python benchmarks/rmsnorm_suite.py --interpret --smoke    # CPU: it runs
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from record_programs import namespace  # noqa: E402

namespace()  # argus_env.tasks from a checkout that is not installed (a GPU machine)


def _tasks_package() -> None:
    """From a checkout that is not installed, map `argus_env.tasks` to `tasks/` as setup.py
    does (an installed project has it already)."""
    import importlib.util
    try:
        import argus_env.tasks  # noqa: F401
    except ModuleNotFoundError:
        spec = importlib.util.spec_from_file_location(
            "argus_env.tasks", ROOT / "tasks" / "__init__.py",
            submodule_search_locations=[str(ROOT / "tasks")])
        module = importlib.util.module_from_spec(spec)
        sys.modules["argus_env.tasks"] = module
        spec.loader.exec_module(module)

FIELDS = ["shape", "T", "H", "config", "summary", "program_hash", "ok", "error", "ms", "tflops",
          "gbps", "anchor_ms", "anchor_tflops", "anchor_mode", "ratio", "max_rel_err",
          "timestamp"]
SMOKE = [("smoke-ragged", {"T": 5, "H": 200}), ("smoke-wide", {"T": 3, "H": 1100})]
PROTOCOL = ("per shape: eager and torch.compile(dynamic=False) of fused_add_rmsnorm checked "
            "against the float32 reference and timed against each other (rotated inputs over "
            "2x L2, triton.testing.do_bench_cudagraph medians, order alternating per round); "
            "the faster is the anchor; each DSL program lowered to Triton (argus_env.lower) "
            "through argus_env.measure.gpu.measure_program against that anchor: correctness "
            "at the real shape, rotated inputs, CUDA-graph medians alternating with the anchor")


class Anchored:
    """The task with its anchor fixed to one mode (eager or compiled) for a shape."""

    def __init__(self, task, mode: str):
        self._task, self._mode = task, mode

    def __getattr__(self, name):
        return getattr(self._task, name)

    def anchor(self, inputs: dict, sizes: dict):
        from argus_env.tasks.rmsnorm.task import compiled, fused_add_rmsnorm
        fn = compiled() if self._mode == "compile" else fused_add_rmsnorm
        x, r, w = inputs["x"], inputs["residual"], inputs["weight"]
        return lambda: fn(x, r, w)


def anchors(task, sizes: dict, device: str, rounds: int, rep_ms: int) -> dict:
    """Eager and compiled: their errors against the reference, and their times."""
    import torch

    from argus_env.measure import oracle
    from argus_env.measure.gpu import L2_BYTES, cycling, rotated_inputs, time_pair
    from argus_env.tasks.rmsnorm.task import compiled, fused_add_rmsnorm
    gen = torch.Generator(device=device).manual_seed(11)
    inputs = task.make_inputs(None, sizes, device, gen)
    ref = task.reference(inputs, sizes)
    out = {}
    for mode, fn in (("eager", fused_add_rmsnorm), ("compile", compiled())):
        t0 = time.perf_counter()
        o, r = fn(inputs["x"], inputs["residual"], inputs["weight"])
        if device != "cpu":
            torch.cuda.synchronize()
        v = oracle.compare({"out": o, "residual_out": r}, ref, task, sizes)
        out[mode] = {"ok": v.ok, "max_rel_err": v.max_rel_err, "message": v.message,
                     "first_call_s": time.perf_counter() - t0}
    del inputs, ref
    if device == "cpu":
        out["mode"] = "eager"
        return out
    l2 = getattr(torch.cuda.get_device_properties(0), "L2_cache_size", L2_BYTES)
    sets = rotated_inputs(task, None, sizes, seed=12, l2_bytes=l2)
    comp = compiled()

    def call(fn):
        return cycling(lambda s: fn(s["x"], s["residual"], s["weight"]), sets)
    t = time_pair(call(fused_add_rmsnorm), call(comp), rounds, rep_ms)
    out.update(eager_ms=t["ms"], compile_ms=t["anchor_ms"], eager_rounds=t["ms_rounds"],
               compile_rounds=t["anchor_ms_rounds"], timing=t["timing"])
    ok = {m for m in ("eager", "compile") if out[m]["ok"]}
    faster = "compile" if t["anchor_ms"] < t["ms"] else "eager"
    out["mode"] = faster if faster in ok or not ok else next(iter(ok))
    return out


def copy_tbps(device: str) -> float | None:
    """Device-to-device copy bandwidth (bytes read plus written), the memory ceiling."""
    if device == "cpu":
        return None
    import torch
    from triton.testing import do_bench
    src = torch.empty(2**30, dtype=torch.uint8, device=device)
    dst = torch.empty_like(src)
    ms = do_bench(lambda: dst.copy_(src), rep=100, return_mode="median")
    del src, dst
    return 2 * 2**30 / ms / 1e9


def measure(program, task, sizes: dict, interpret: bool, rounds: int, rep_ms: int) -> dict:
    """The GPU protocol, or under the interpreter: correctness only."""
    from argus_env import lower
    launch = lower.load(program, interpret=interpret)
    if not interpret:
        from argus_env.measure.gpu import measure_program
        return measure_program(program, task, sizes, launch, rounds, rep_ms, seed=7)
    from argus_env.measure import oracle
    v = oracle.check(program, task, sizes, launch, device="cpu", seed=7)
    return {"ok": v.ok, "max_rel_err": v.max_rel_err, "status": "ok" if v.ok else "mismatch",
            "message": v.message, "interpreter": True}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, help="JSON results (default $OUT/rmsnorm_suite.json)")
    ap.add_argument("--table", type=Path, help="resumable CSV table of every configuration")
    ap.add_argument("--anchors", type=Path, help="write the anchors here (the task's format)")
    ap.add_argument("--interpret", action="store_true", help="Triton interpreter on CPU")
    ap.add_argument("--smoke", action="store_true", help="two tiny shapes")
    ap.add_argument("--shape", help="only shapes whose name contains this")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--rep-ms", type=int, default=20)
    ap.add_argument("--time-limit", type=float, default=480)
    args = ap.parse_args(argv)
    if args.interpret:  # before anything imports Triton
        os.environ["TRITON_INTERPRET"] = "1"
    out_path = args.out or (Path(os.environ["OUT"]) / "rmsnorm_suite.json" if os.environ.get("OUT")
                            else Path("benchmarks/results/rmsnorm_suite.json"))
    _tasks_package()
    from argus_env.measure import provenance
    from argus_env.task import get_task
    from argus_env.tasks.rmsnorm.space import BASELINE, EXPERT, table_configurations
    task = get_task("rmsnorm")
    device = "cpu" if args.interpret else "cuda"
    picked = SMOKE if args.smoke else [(c.name, c.sizes) for c in task.shape_cases("all")]
    picked = [(n, s) for n, s in picked if not args.shape or args.shape in n]
    done = set()
    if args.table and args.table.exists():
        done = {(r["shape"], r["summary"]) for r in csv.DictReader(args.table.open())}
    results = {"provenance": provenance.collect(), "interpret": args.interpret,
               "protocol": PROTOCOL, "rounds": args.rounds, "rep_ms": args.rep_ms,
               "anchor": "faster of eager and torch.compile of fused_add_rmsnorm", "shapes": {}}
    results["copy_tbps"] = copy_tbps(device)
    table = None
    if args.table:
        new = not args.table.exists()
        args.table.parent.mkdir(parents=True, exist_ok=True)
        table = args.table.open("a", newline="")
        writer = csv.DictWriter(table, FIELDS)
        if new:
            writer.writeheader()
    start = time.time()
    for name, sizes in picked:
        if time.time() - start > args.time_limit:
            print(f"time limit reached before {name}; rerun to continue", flush=True)
            break
        if done and all((name, c.summary()) in done for c in table_configurations(sizes)):
            print(f"{name}: every configuration is in the table already", flush=True)
            continue
        row = {"sizes": sizes, "anchors": anchors(task, sizes, device, args.rounds, args.rep_ms),
               "programs": {}}
        mode = row["anchors"]["mode"]
        anchored = Anchored(task, mode)
        print(json.dumps({"shape": name, "eager_ms": row["anchors"].get("eager_ms"),
                          "compile_ms": row["anchors"].get("compile_ms"), "mode": mode}),
              flush=True)
        for cfg in table_configurations(sizes):
            program = task.bind(task.space.program(cfg), sizes)
            try:
                res = measure(program, anchored, sizes, args.interpret, args.rounds, args.rep_ms)
            except Exception as e:  # a failing configuration is a result
                res = {"ok": False, "status": "error", "message": f"{type(e).__name__}: {e}"[:300]}
            rec = {k: res.get(k) for k in ("ok", "correct", "status", "message", "ms", "tflops",
                                           "anchor_ms", "anchor_tflops", "ratio", "max_rel_err",
                                           "ms_rounds", "anchor_ms_rounds", "timing",
                                           "input_sets", "interpreter")}
            if res.get("ms"):
                rec["gbps"] = task.min_bytes(sizes) / res["ms"] / 1e6
                rec["anchor_gbps"] = task.min_bytes(sizes) / res["anchor_ms"] / 1e6
            row["programs"][cfg.summary()] = rec
            if table is not None and not args.interpret and (name, cfg.summary()) not in done:
                writer.writerow({"shape": name, **sizes, "config": repr(cfg), "summary": cfg.summary(),
                                 "program_hash": program.hash, "ok": bool(res.get("ok")),
                                 "error": "" if res.get("ok") else
                                 f"{res.get('status')}: {res.get('message', '')}"[:300],
                                 "ms": res.get("ms"), "tflops": res.get("tflops"),
                                 "gbps": rec.get("gbps"), "anchor_ms": res.get("anchor_ms"),
                                 "anchor_tflops": res.get("anchor_tflops"), "anchor_mode": mode,
                                 "ratio": res.get("ratio"), "max_rel_err": res.get("max_rel_err"),
                                 "timestamp": round(time.time(), 1)})
                table.flush()
            print(json.dumps({"shape": name, "config": cfg.summary(), "ok": res.get("ok"),
                              "ms": res.get("ms"), "ratio": res.get("ratio"),
                              "message": (res.get("message") or "")[:120]}), flush=True)
        results["shapes"][name] = row
        out_path.parent.mkdir(parents=True, exist_ok=True)
        out_path.write_text(json.dumps(results, indent=1, default=str))
        if device == "cuda":
            import torch
            torch.cuda.empty_cache()
    if table is not None:
        table.close()
    out_path.parent.mkdir(parents=True, exist_ok=True)
    out_path.write_text(json.dumps(results, indent=1, default=str))
    if args.anchors and not args.interpret:
        write_anchors(args.anchors, task, results, out_path)
    print(f"\nwrote {out_path}" + ("  (interpreter: no timings)" if args.interpret else ""))
    print(f"{'shape':<26}{'eager us':>9}{'compile us':>11}{'anchor':>8}{'base us':>9}"
          f"{'exp us':>8}{'best us':>8}{'exp GB/s':>9}{'base/anc':>9}{'exp/anc':>8}{'best/anc':>9}")
    geo = []
    for name, row in results["shapes"].items():
        a, progs = row["anchors"], row["programs"]
        b = progs.get(BASELINE.summary(), {})
        e = progs.get(EXPERT.summary(), {})
        ok = [p for p in progs.values() if p.get("ok") and p.get("ratio")]
        best = max(ok, key=lambda p: p["ratio"]) if ok else {}
        if e.get("ratio"):
            geo.append(math.log(e["ratio"]))

        def f(x, w, scale=1.0, p=1):
            return f"{x * scale:>{w}.{p}f}" if isinstance(x, (int, float)) else f"{'-':>{w}}"
        print(f"{name:<26}{f(a.get('eager_ms'), 9, 1e3)}{f(a.get('compile_ms'), 11, 1e3)}"
              f"{a['mode']:>8}{f(b.get('ms'), 9, 1e3)}{f(e.get('ms'), 8, 1e3)}"
              f"{f(best.get('ms'), 8, 1e3)}{f(e.get('gbps'), 9, 1, 0)}{f(b.get('ratio'), 9, 1, 3)}"
              f"{f(e.get('ratio'), 8, 1, 3)}{f(best.get('ratio'), 9, 1, 3)}")
    if results.get("copy_tbps"):
        print(f"device-to-device copy: {results['copy_tbps']:.2f} TB/s (read + write)")
    if geo:
        print(f"geomean expert/anchor over {len(geo)} shapes: {math.exp(sum(geo) / len(geo)):.3f}")
    return 0


def write_anchors(path: Path, task, results: dict, source: Path) -> None:
    """The anchor's TFLOP/s (the task's FLOP convention), ms, GB/s and mode per shape."""
    prov = results["provenance"]
    data = {"source": f"{source.name} (the faster of eager PyTorch and torch.compile of "
                      "fused_add_rmsnorm, bf16, CUDA-graph median)",
            "gpu": prov.get("gpu"), "torch": prov.get("torch"), "key": "TxH",
            "tflops": {}, "ms": {}, "gbps": {}, "mode": {}}
    for row in results["shapes"].values():
        a, sizes = row["anchors"], row["sizes"]
        ms = a.get("compile_ms") if a["mode"] == "compile" else a.get("eager_ms")
        if not ms:
            continue
        key = "x".join(str(sizes[d]) for d in task.anchor_dims)
        data["tflops"][key] = round(task.flops(sizes) / ms / 1e9, 4)
        data["ms"][key] = round(ms, 5)
        data["gbps"][key] = round(task.min_bytes(sizes) / ms / 1e6, 1)
        data["mode"][key] = a["mode"]
    path.write_text(json.dumps(data, indent=1) + "\n")


if __name__ == "__main__":
    sys.exit(main())
