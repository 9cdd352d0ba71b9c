"""Where the sm_90 compile verdict's time goes: Triton's stages timed one by one, on the CPU.

For a sample of programs per task (the baseline, the expert, programs of seeded random
walks of legal transformations from the baseline at the task's first training shape, and
the programs a GPU refused to compile in a recorded run, `--failures`), each program is
compiled for the target as the environment's compile worker compiles it
(`lower.aot._compile_here`, specialised as its launch at the program's sizes), in a fresh
process per task (warmed by `aot.warm_up`, as the worker is) with an empty Triton cache
and empty kernel memos for every compile. One kernel at a time (`aot.COMPILE_THREADS` = 1)
so that each stage's time is its own; the environment compiles a program's kernels in
threads.

Timed per compile, summed over a program's kernels:

- `load`: generating the program's Triton module and importing it (`build.load_module`);
- `front`: the front end (`ASTSource.make_ir`, the kernel's TTIR as made for its memo key);
- `ttir`, `ttgir`, `llir`, `ptx`, `cubin`: Triton's NVIDIA stages (`cubin` is ptxas, a
  process of its own); `llir` is split into its MLIR passes (`llir_mlir`, which allocate
  shared memory), the translation to LLVM (`llir_translate`) and LLVM's -O3
  (`llir_opt`);
- `other`: the rest (keys, Triton's cache writes and reads, the figures read back).

And where each fact the verdict uses appears: the stage that raised for a program the
compiler refuses, the stage after which the kernel's shared memory (`metadata["shared"]`)
and warp count are known, and that registers and stack come from the cubin (ptxas).

`--variants default alloc ptx no_line_info`: compile each program under each variant in
turn and report whether the verdict and the figures each variant has agree with the
default's (the whole pipeline): `alloc` and `ptx` run the compiler only to those stages
(`lower.aot.STAGES`, `_compile_here(until=...)`), `no_line_info` sets Triton's
`TRITON_DISABLE_LINE_INFO`. `accepted_then_refused` counts programs a partial compile
accepted that the whole pipeline refuses. `--pass-timing`: MLIR's own per-pass times.

    python benchmarks/compile_stages.py --walks 8 --reps 2 --variants default alloc ptx \
        no_line_info --pass-timing --out benchmarks/results/compile_stages_$(date +%F).json
    python benchmarks/compile_stages.py --walks 60 --steps 10 --seed 7 --reps 1 \
        --variants default alloc --out benchmarks/results/compile_stages_audit_$(date +%F).json

Prints a table per task and writes JSON with provenance.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

STAGES = ("load", "front", "ttir", "ttgir", "llir", "ptx", "cubin", "other")
LLIR_PARTS = ("llir_mlir", "llir_translate", "llir_opt", "llir_rest")
VARIANTS = ("default", "no_line_info", "alloc", "ptx")
#: the figures a variant's compile gives, compared with the default's (the whole pipeline)
COMPARED = {"no_line_info": ("ok", "verdict_ok", "shared_bytes", "num_warps", "registers",
                             "stack_bytes", "wgmma", "tma_loads"),
            "alloc": ("ok", "verdict_ok", "shared_bytes", "num_warps"),
            "ptx": ("ok", "verdict_ok", "shared_bytes", "num_warps", "wgmma", "tma_loads")}

# ---------------------------------------------------------------- the child process
CHILD = r'''
import contextlib, json, sys, time
from argus_env.dsl.program import Program
from argus_env.lower import aot, build
from argus_env.measure.legality import fit_reason
from argus_env.target import load_target
import triton.backends.nvidia.compiler as nv
from triton import knobs

job = json.loads(sys.stdin.read())
target = load_target(job["target"])
aot.COMPILE_THREADS = 1
import torch  # noqa: F401  (the generated modules import it; the worker has it loaded)
warm = aot.warm_up(target.arch)
rec = None          # the compile being timed: {"t": {stage: s}, "facts": [...], "failed": stage}


def add(stage, dt):
    if rec is not None:
        rec["t"][stage] = rec["t"].get(stage, 0.0) + dt


class _LLVM:
    """`triton._C.libtriton.llvm` as the NVIDIA backend sees it, timing the translation
    and -O3 of `make_llir` (what runs before `to_module` is the stage's MLIR passes)."""
    def __init__(self, real):
        self._real = real
    def __getattr__(self, name):
        return getattr(self._real, name)
    def to_module(self, *a, **k):
        t = time.perf_counter()
        add("llir_mlir", t - rec["llir_start"])
        try:
            return self._real.to_module(*a, **k)
        finally:
            add("llir_translate", time.perf_counter() - t)
    def optimize_module(self, *a, **k):
        return timing("llir_opt", self._real.optimize_module)(*a, **k)


nv.llvm = _LLVM(nv.llvm)
_add_stages = nv.CUDABackend.add_stages


def add_stages(self, stages, options, language):
    _add_stages(self, stages, options, language)
    for name, fn in list(stages.items()):
        def timed(src, metadata, fn=fn, name=name):
            t = time.perf_counter()
            if name == "llir":
                rec["llir_start"] = t
            try:
                out = fn(src, metadata)
            except BaseException:
                rec["failed"] = rec.get("failed") or name
                raise
            finally:
                add(name, time.perf_counter() - t)
            rec["facts"].append({"after": name, "shared": metadata.get("shared"),
                                 "num_warps": metadata.get("num_warps")})
            return out
        stages[name] = timed


nv.CUDABackend.add_stages = add_stages
def timing(stage, fn):
    """`fn`, its time added to `stage` of the compile being timed."""
    def timed(*a, **k):
        t = time.perf_counter()
        try:
            return fn(*a, **k)
        finally:
            add(stage, time.perf_counter() - t)
    return timed


aot._front_end = timing("front", aot._front_end)
build.load_module = timing("load", build.load_module)


def variant(name):
    knobs.compilation.disable_line_info = name == "no_line_info"
    return name if name in ("alloc", "ptx") else "cubin"


out = []
for rep in range(job["reps"]):
    for item in job["programs"]:
        program = Program.from_text(item["text"])
        for v in job["variants"]:
            until = variant(v)
            aot._KERNELS.clear(); aot._SOURCES.clear()
            for _, m in list(build._loaded.items.items()):  # a new program's module is new
                build._unload(m)
            build._loaded.items.clear()
            rec = {"t": {}, "facts": [], "failed": None}
            t0 = time.perf_counter()
            r = aot._compile_here(program, target, scratch=True, sizes=item["sizes"],
                                  until=until)
            total = time.perf_counter() - t0
            t = rec["t"]
            t["llir_rest"] = t.get("llir", 0.0) - sum(t.get(k, 0.0) for k in
                                                       ("llir_mlir", "llir_translate", "llir_opt"))
            t["other"] = total - sum(t.get(s, 0.0) for s in
                                     ("load", "front", "ttir", "ttgir", "llir", "ptx", "cubin"))
            fit = fit_reason(r.to_dict(), target) if r.ok else None
            shared_at = next((f["after"] for f in rec["facts"] if f["shared"] is not None), None)
            out.append({"rep": rep, "label": item["label"], "variant": v, "ok": r.ok,
                        "verdict_ok": r.ok and fit is None, "fit_reason": fit,
                        "error": r.error[:300], "failed_stage": rec["failed"],
                        "kernels": r.kernels, "total_s": total, "stages_s": t,
                        "shared_known_after": shared_at, "shared_bytes": r.shared_bytes,
                        "num_warps": r.num_warps, "registers": r.registers,
                        "stack_bytes": r.stack_bytes, "wgmma": r.wgmma,
                        "tma_loads": r.tma_loads})
            rec = None
variant("default")
print(json.dumps({"warm_up_s": warm, "runs": out}))
'''


# ---------------------------------------------------------------- the sample
def walk_programs(task, sizes: dict, target, walks: int, steps: int, seed: int) -> list:
    """(label, program) of seeded random walks of legal transformations from the
    baseline, each distinct program once (the baseline and expert apart)."""
    import random

    from argus_env.dsl.program import Program
    rng = random.Random(seed)
    space, ctx = task.space, {"sizes": sizes, "target": target}
    out, seen = [], set()
    for w in range(walks):
        config = space.baseline()
        for s in range(steps):
            legal = [a for a in space.legal(config, ctx) if a[0] not in ("undo", "submit")]
            if not legal:
                break
            name, value = rng.choice(legal)
            config = space.apply(config, name, value, ctx)
        program = task.bind(Program.from_text(space.render(config)), sizes)
        if program.hash not in seen:
            seen.add(program.hash)
            out.append((f"walk{w}", program))
    return out


def sample(task_name: str, target, walks: int, steps: int, seed: int, failures: list) -> list:
    from argus_env.dsl.program import Program
    from argus_env.task import get_task
    task = get_task(task_name)
    sizes = dict(task.shape_cases("train")[0].sizes)
    space = task.space
    module = sys.modules[type(space).__module__]
    items = [("baseline", task.bind(Program.from_text(space.render(space.baseline())), sizes))]
    expert = getattr(module, "EXPERT", None)
    if expert is not None:
        items.append(("expert", task.bind(Program.from_text(space.render(expert)), sizes)))
    items += walk_programs(task, sizes, target, walks, steps, seed)
    programs = [{"label": label, "text": p.text, "hash": p.hash, "shape_sizes": sizes,
                 "sizes": {k: int(v) for k, v in task.program_sizes(p, sizes).items()}}
                for label, p in items]
    for f in failures:
        if f["task"] == task_name:
            p = Program.from_text(f["program"])
            why = "smem" if "shared memory" in f["error"] else \
                "passmgr" if "PassManager" in f["error"] else "other"
            programs.append({"label": f"gpu-refused-{why}:{p.hash[:8]}", "text": p.text,
                             "hash": p.hash, "shape_sizes": f["sizes"],
                             "sizes": {k: int(v) for k, v in
                                       task.program_sizes(p, f["sizes"]).items()}})
    return programs


def recorded_failures(folders: list[Path]) -> list[dict]:
    """The programs a GPU answered with a compile failure in `record_programs.py` folders
    (with their program text from the plan)."""
    out = []
    for folder in folders:
        path = folder / "plan.jsonl"
        opener = open if path.exists() else gzip.open
        path = path if path.exists() else folder / "plan.jsonl.gz"
        with opener(path, "rt") as f:
            items = {(r["task"], r["shape"], r["program_hash"]): r
                     for r in map(json.loads, list(f)[1:])}
        for line in (folder / "results.jsonl").read_text().splitlines():
            r = json.loads(line)
            if not r.get("ok") and r.get("status") == "compile":
                it = items[(r["task"], r["shape"], r["program_hash"])]
                out.append({**it, "error": r.get("error", "")})
    return out


# ---------------------------------------------------------------- the report
def pass_seconds(stderr: str) -> dict:
    """MLIR's pass timing report (MLIR_ENABLE_TIMING) summed by pass name; pipelines'
    own lines (`Total`, `Rest`, `... Pipeline`) left out."""
    import re
    out: dict = {}
    for m in re.finditer(r"^\s+([0-9.]+) \(\s*[0-9.]+%\)\s+(\S[^\n]*)$", stderr, re.M):
        name = m.group(2).strip()
        if name in ("Total", "Rest") or name.endswith("Pipeline"):
            continue
        out[name] = out.get(name, 0.0) + float(m.group(1))
    return out


def summarise(runs: list[dict], variant: str = "default") -> dict:
    """Per label: the median over reps of each stage's ms."""
    by = {}
    for r in runs:
        if r["variant"] == variant:
            by.setdefault(r["label"], []).append(r)
    rows = {}
    for label, rs in by.items():
        row = {"ok": rs[0]["ok"], "verdict_ok": rs[0]["verdict_ok"],
               "fit_reason": rs[0]["fit_reason"], "kernels": rs[0]["kernels"],
               "failed_stage": rs[0]["failed_stage"],
               "shared_known_after": rs[0]["shared_known_after"],
               "total_ms": 1000 * statistics.median(r["total_s"] for r in rs)}
        for s in STAGES + LLIR_PARTS:
            row[s + "_ms"] = 1000 * statistics.median(r["stages_s"].get(s, 0.0) for r in rs)
        rows[label] = row
    return rows


def agree(runs: list[dict]) -> dict:
    """Whether every variant gave each program the default's verdict and the figures it
    has (`COMPARED`); `accepted_then_refused`: programs a variant accepted that the whole
    pipeline refuses (a partial compile's verdict would be wrong there)."""
    base = {(r["rep"], r["label"]): r for r in runs if r["variant"] == "default"}
    diffs, n = [], 0
    for r in runs:
        if r["variant"] == "default":
            continue
        b = base[(r["rep"], r["label"])]
        n += 1
        d = {k: (b[k], r[k]) for k in COMPARED[r["variant"]] if b[k] != r[k]}
        if d:
            diffs.append({"label": r["label"], "variant": r["variant"], "differs": d})
    return {"compared": n, "differing": len(diffs),
            "accepted_then_refused": sum(1 for x in diffs
                                         if x["differs"].get("verdict_ok") == (False, True)),
            "examples": diffs[:10]}


def refusals(runs: list[dict]) -> dict:
    """The whole pipeline's verdicts on the sample (first rep): accepted, refused by the
    compiler at each stage, compiled but over the target's limits."""
    out: dict = {"programs": 0, "accepted": 0, "refused_at": {}, "over_limits": 0}
    for r in runs:
        if r["variant"] != "default" or r["rep"] != 0:
            continue
        out["programs"] += 1
        if r["verdict_ok"]:
            out["accepted"] += 1
        elif not r["ok"]:
            out["refused_at"][r["failed_stage"]] = out["refused_at"].get(r["failed_stage"], 0) + 1
        else:
            out["over_limits"] += 1
    return out


def print_table(task: str, rows: dict) -> None:
    cols = ("load", "front", "ttir", "ttgir", "llir_mlir", "llir_translate", "llir_opt",
            "llir_rest", "llir", "ptx", "cubin", "other")
    print(f"\n{task}: ms per program (median over reps; kernels one at a time)")
    print(f"{'program':34} {'k':>2} {'total':>6} " + " ".join(f"{c[:9]:>9}" for c in cols)
          + "  verdict")
    for label, r in rows.items():
        verdict = "ok" if r["verdict_ok"] else f"refused at {r['failed_stage']}" if not r["ok"] \
            else f"compiled, refused by fit after llir: {r['fit_reason'][:40]}"
        print(f"{label[:34]:34} {r['kernels']:>2} {r['total_ms']:6.0f} " +
              " ".join(f"{r[c + '_ms']:9.0f}" for c in cols) + "  " + verdict)
    ok = [r for r in rows.values() if r["verdict_ok"]]
    if ok:
        med = {c: statistics.median(r[c + "_ms"] for r in ok) for c in cols + ("total",)}
        share = {c: med[c] / med["total"] for c in cols}
        print(f"{'median (accepted)':34} {'':>2} {med['total']:6.0f} " +
              " ".join(f"{med[c]:9.0f}" for c in cols))
        print(f"{'share of total':34} {'':>2} {'':>6} " +
              " ".join(f"{100 * share[c]:8.0f}%" for c in cols))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tasks", nargs="*", default=["gemm", "attention", "moe", "rmsnorm"])
    ap.add_argument("--target", default="h200")
    ap.add_argument("--walks", type=int, default=6, help="random-walk programs per task")
    ap.add_argument("--steps", type=int, default=6, help="legal transformations per walk")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--variants", nargs="*", default=["default"], choices=VARIANTS)
    ap.add_argument("--failures", nargs="*", type=Path,
                    default=[ROOT / "benchmarks/results/neighbours_h100"],
                    help="record_programs folders whose GPU compile failures join the sample")
    ap.add_argument("--pass-timing", action="store_true",
                    help="also run the sample once with MLIR_ENABLE_TIMING=1 and report the "
                         "MLIR passes' seconds summed over the task's compiles")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args(argv)

    from argus_env.envs.record import run_provenance
    from argus_env.target import load_target
    target = load_target(args.target)
    failures = recorded_failures(args.failures)
    doc = {"what": "Triton stage times of the sm_90 compile verdict, per program, fresh "
                   "Triton cache and empty memos per compile, kernels one at a time",
           "provenance": {**run_provenance(ROOT), "load_average_before": list(os.getloadavg())},
           "target": args.target, "arch": target.arch, "variants": args.variants,
           "reps": args.reps, "walks": args.walks, "steps": args.steps, "seed": args.seed,
           "tasks": {}}
    for task in args.tasks:
        programs = sample(task, target, args.walks, args.steps, args.seed, failures)
        env = dict(os.environ, TRITON_INTERPRET="0",
                   TRITON_CACHE_DIR=tempfile.mkdtemp(prefix="argus-stages-"),
                   ARGUS_CACHE_DIR=tempfile.mkdtemp(prefix="argus-stages-"))
        env.pop("TRITON_DISABLE_LINE_INFO", None)
        job = {"target": args.target, "reps": args.reps, "variants": args.variants,
               "programs": programs}
        proc = subprocess.run([sys.executable, "-c", CHILD], input=json.dumps(job), cwd=ROOT,
                              env=env, capture_output=True, text=True, timeout=3600)
        if proc.returncode:
            print(proc.stderr[-3000:], file=sys.stderr)
            return 1
        got = json.loads(proc.stdout.strip().splitlines()[-1])
        rows = summarise(got["runs"])
        print_table(task, rows)
        entry = {"programs": [{k: p[k] for k in ("label", "hash", "sizes")} for p in programs],
                 "warm_up_s": got["warm_up_s"], "verdicts": refusals(got["runs"]),
                 "summary": rows, "runs": got["runs"]}
        print(f"verdicts (whole pipeline): {entry['verdicts']}")
        if len(args.variants) > 1:
            entry["variants"] = {v: summarise(got["runs"], v) for v in args.variants}
            entry["variants_agree"] = agree(got["runs"])
            for v in args.variants[1:]:
                ok = [(entry["variants"]["default"][l], entry["variants"][v][l])
                      for l in rows if rows[l]["verdict_ok"]]
                if ok:
                    print(f"{v}: total median {statistics.median(b['total_ms'] for _, b in ok):.0f}"
                          f" ms (default {statistics.median(a['total_ms'] for a, _ in ok):.0f})"
                          f" over the accepted programs")
            print(f"variants against the default: {entry['variants_agree']}")
        if args.pass_timing:
            proc = subprocess.run([sys.executable, "-c", CHILD],
                                  input=json.dumps({**job, "reps": 1, "variants": ["default"]}),
                                  cwd=ROOT, env=dict(env, MLIR_ENABLE_TIMING="1"),
                                  capture_output=True, text=True, timeout=3600)
            entry["mlir_pass_seconds"] = pass_seconds(proc.stderr)
            top = sorted(entry["mlir_pass_seconds"].items(), key=lambda kv: -kv[1])[:8]
            total = sum(entry["mlir_pass_seconds"].values())
            print("MLIR passes, seconds summed over the sample's compiles (share of all MLIR "
                  "pass time): " + ", ".join(f"{n} {v:.2f} ({100 * v / total:.0f}%)"
                                             for n, v in top))
        doc["tasks"][task] = entry
    doc["provenance"]["load_average_after"] = list(os.getloadavg())
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(doc, indent=1) + "\n")
        print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
