"""Compile every masked-legal catalog configuration of a task for a target, on the CPU.

    python benchmarks/compile_sweep.py --task rmsnorm --target h200 --jobs 16
    python benchmarks/compile_sweep.py --task all --jobs 16            # every task
    python benchmarks/compile_sweep.py --task gemm --limit 200         # the first 200 only
    python benchmarks/compile_sweep.py --task all --baselines          # each baseline
    python benchmarks/compile_sweep.py --task gemm --configs small-shapes  # a named set

The programs: for each task, the space's configurations (`TaskSpace.configurations`)
legal at each suite shape (`legal_configurations`), bound to the shape's problem
constants (`Task.bind`), one per compile key (`measure.legality.compile_key`). Shapes
whose bound constants agree share their programs. Each program is compiled ahead of time
for the target's compute capability by `--jobs` non-interpreting worker processes (op
"compile"); one row per program goes to `tasks/<task>/compile_sm<arch>.csv` (or under
`--out`), with the compiler's figures and provenance (Triton version, commit, date,
machine). `--baselines`: only the space's baseline configuration at each group of
shapes, the program every episode starts from (a reset at a new shape then finds its
verdict in the table instead of compiling). `--configs NAME`: a named set of the task's
configurations (GEMM `small-shapes`: `tasks/gemm/space.py`'s `SMALL_SHAPES`, swap-AB and
stream-K) at every suite shape where the mask allows them. A run resumes: programs already in the table are not compiled again; a run over every
program that leaves none missing marks the table complete (its first line).

The summary (stdout, and `--summary FILE` as JSON) counts the programs, failures and
kernels over the target's limits, the per-compile time, and the shared-memory estimate
of `argus_env.resources` against the compiler's where the task's space has one.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import platform
import queue
import random
import statistics
import sys
import threading
import time
from datetime import datetime, timezone
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from argus_env.dsl.program import Program  # noqa: E402
from argus_env.measure.legality import (COLUMNS, COMPLETE_MARK, binding,  # noqa: E402
                                        compile_key, fit_reason, read_table, table_complete,
                                        table_path, triton_version)
from argus_env.target import load_target  # noqa: E402
from argus_env.task import KNOWN_TASKS, get_task  # noqa: E402


def shape_groups(task) -> dict[str, list[dict]]:
    """The suite's shapes grouped by the constants binding sets (the baseline program's)
    and how their sizes specialise a launch: shapes of one group compile the same
    programs."""
    base = task.space.program(task.space.baseline())
    groups: dict[str, list[dict]] = {}
    for case in task.shapes:
        groups.setdefault(binding(task.bind(base, case.sizes), base, case.sizes),
                          []).append(dict(case.sizes))
    return groups


def named_configurations(task, name: str) -> list:
    """A named set of the task's configurations: the attribute `NAME` (upper case, `-` as
    `_`; a dict's values or a list) of the module of the task's space."""
    attr = name.upper().replace("-", "_")
    found = getattr(sys.modules[type(task.space).__module__], attr, None)
    if found is None:
        raise SystemExit(f"{task.name}: no configuration set {name!r} ({attr} in "
                         f"{type(task.space).__module__})")
    return list(found.values()) if isinstance(found, dict) else list(found)


def units(task, target, limit: int | None = None, sample: int | None = None,
          seed: int = 0, baselines: bool = False, configs: list | None = None
          ) -> list[tuple[str, str, str, Program, dict]]:
    """(compile key, configuration text, binding, bound program, launch sizes) for every masked-legal
    configuration of the task at its suite shapes, one per key, in catalog order (or a
    seeded sample of `sample` configurations; or, with `baselines`, the baseline
    configuration at each group of shapes; or only `configs`)."""
    space = task.space
    groups = shape_groups(task)
    if baselines:
        c = space.baseline()
        return _keyed(task, target, [(c, shapes[0]) for shapes in groups.values()])
    configs = list(space.configurations()) if configs is None else configs
    legal_by_group = []
    for key, shapes in groups.items():
        legal: dict = {}
        for sizes in shapes:
            for c in space.legal_configurations(configs, {"sizes": sizes, "target": target}):
                legal.setdefault(c, sizes)
        legal_by_group.append(legal)
    pairs = [(c, sizes) for legal in legal_by_group for c, sizes in legal.items()]
    if sample is not None and sample < len(pairs):
        pairs = random.Random(seed).sample(pairs, sample)
    if limit is not None:
        pairs = pairs[:limit]
    return _keyed(task, target, pairs)


def _keyed(task, target, pairs) -> list[tuple[str, str, str, Program, dict]]:
    """The units of (configuration, sizes) pairs, one per compile key."""
    space = task.space
    out, seen = [], set()
    for c, sizes in pairs:
        base = space.program(c)
        program = task.bind(base, sizes)
        launch = dict(task.program_sizes(program, sizes))
        key = compile_key(program, target, launch)
        if key not in seen:
            seen.add(key)
            out.append((key, repr(c), binding(program, base, sizes), program, launch))
    return out


def machine() -> str:
    cpu = platform.processor() or ""
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{platform.node()} ({cpu}, {os.cpu_count()} cores)"


def commit() -> str:
    import subprocess
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                              text=True, cwd=Path(__file__).resolve().parents[1]).stdout.strip()
    except OSError:
        return ""


def estimate_shared(task, config_text: str, program: Program, c) -> int | None:
    """The shared memory `argus_env.resources` estimates for configuration `c`."""
    from argus_env.resources import shared_memory_bytes
    mod = sys.modules[type(task.space).__module__]
    if task.name == "attention":
        from argus_env.tasks.attention.model import DEFAULT_STAGES, footprint
        d = program.kernel.consts.get("HEAD_DIM", 128)
        return shared_memory_bytes(footprint(c.block_m, c.block_n, d, c.num_warps,
                                             c.stages or DEFAULT_STAGES, c.tma))
    if hasattr(mod, "footprint"):
        return shared_memory_bytes(mod.footprint(c))
    return None


def sweep(task, target, jobs: int, out: Path, limit=None, sample=None, seed=0,
          timeout: float = 300.0, baselines: bool = False, configs: list | None = None) -> dict:
    from argus_env.measure.worker import Worker
    t_enum = time.perf_counter()
    todo = units(task, target, limit, sample, seed, baselines, configs)
    enum_s = time.perf_counter() - t_enum
    done = read_table(out)
    pending = [u for u in todo if u[0] not in done]
    print(f"{task.name}: {len(todo)} programs ({enum_s:.0f} s to enumerate), "
          f"{len(todo) - len(pending)} already in {out}, {len(pending)} to compile "
          f"with {jobs} processes", flush=True)
    out.parent.mkdir(parents=True, exist_ok=True)
    new_file = not out.exists()
    lock = threading.Lock()
    prov = {"triton": triton_version(), "argus_commit": commit(), "machine": machine()}
    work: queue.Queue = queue.Queue()
    for u in pending:
        work.put(u)
    seconds: list[float] = []
    t0 = time.perf_counter()
    with open(out, "a", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=COLUMNS)
        if new_file:
            writer.writeheader()

        def lane() -> None:
            w = Worker(interpret=False, timeout=timeout)
            try:
                while True:
                    try:
                        key, ctext, bind, program, launch = work.get_nowait()
                    except queue.Empty:
                        return
                    a = w.run(program, task.name, {}, op="compile", timeout=timeout,
                              options={"target": target.name, "sizes": launch})
                    if a.get("transient"):
                        continue  # not a verdict: left for the next run
                    if a.get("status") == "timeout":
                        a = {"ok": False, "error": f"did not compile within {timeout:g} s"}
                    row = {k: a.get(k, "") for k in COLUMNS}
                    row.update(key=key, config=ctext, binding=bind, ok=bool(a.get("ok")),
                               error=(a.get("error") or a.get("message") or "")[:500]
                               if not a.get("ok") else "",
                               date=datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
                               **prov)
                    with lock:
                        writer.writerow(row)
                        f.flush()
                        if a.get("seconds"):
                            seconds.append(float(a["seconds"]))
                        n = len(seconds)
                        if n % 50 == 0:
                            print(f"  {n}/{len(pending)} compiled, "
                                  f"{time.perf_counter() - t0:.0f} s", flush=True)
            finally:
                w.stop()
        threads = [threading.Thread(target=lane) for _ in range(max(1, jobs))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    wall = time.perf_counter() - t0
    summary = summarise(task, target, out, todo, seconds, wall, jobs, enum_s)
    whole = limit is None and sample is None and not baselines and configs is None
    if whole and summary["all_in_table"] and not table_complete(out):
        text = out.read_text()
        out.write_text(f"{COMPLETE_MARK} every masked-legal configuration at every suite "
                       f"shape ({len(todo)} programs), {summary['date']}\n" + text)
    summary["marked_complete"] = table_complete(out)
    return summary


def summarise(task, target, out: Path, todo, seconds, wall, jobs, enum_s) -> dict:
    rows = read_table(out)
    keys = {u[0]: u for u in todo}
    failed = [r for k, r in rows.items() if k in keys and r["ok"] != "True"]
    over = [r for k, r in rows.items() if k in keys and r["ok"] == "True"
            and fit_reason(r, target)]
    mismatch, compared = [], 0
    for key, ctext, bind, program, _ in todo:
        r = rows.get(key)
        if r is None or r["ok"] != "True":
            continue
        try:
            config = _config_of(task, ctext)
            est = estimate_shared(task, ctext, program, config)
        except Exception:  # noqa: BLE001 - a space without an estimate
            est = None
        if est is None:
            continue
        compared += 1
        got = int(r["shared_bytes"])
        if est != got:
            mismatch.append({"config": ctext, "binding": bind, "estimate": est, "compiler": got})
    covered = sum(1 for u in todo if u[0] in rows)
    summary = {
        "task": task.name, "target": target.name, "arch": target.arch, "table": str(out),
        "programs": len(todo), "in_table": covered, "all_in_table": covered == len(todo),
        "compile_failures": len(failed), "over_limits": len(over),
        "failure_examples": [(r["config"], r["error"][:200]) for r in failed[:5]],
        "over_limit_examples": [(r["config"], fit_reason(r, target)) for r in over[:5]],
        "compiled_now": len(seconds), "jobs": jobs, "wall_s": round(wall, 1),
        "enumerate_s": round(enum_s, 1),
        "compile_s_median": round(statistics.median(seconds), 3) if seconds else None,
        "compile_s_mean": round(statistics.mean(seconds), 3) if seconds else None,
        "estimate_compared": compared, "estimate_mismatches": len(mismatch),
        "estimate_over": sum(1 for m in mismatch if m["estimate"] > m["compiler"]),
        "estimate_under": sum(1 for m in mismatch if m["estimate"] < m["compiler"]),
        "mismatch_examples": mismatch[:8],
        "triton": triton_version(), "machine": machine(), "commit": commit(),
        "date": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
    }
    return summary


def _config_of(task, text: str):
    """The configuration whose repr is `text` (fields it predates at their defaults)."""
    from argus_env.measure.recorded import config_from_text
    config = config_from_text(task.space, text)
    if config is None:
        raise KeyError(text)
    return config


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--task", default="all", help="a task name, comma-separated names, or all")
    ap.add_argument("--target", default="h200", help="hardware profile (its arch is compiled for)")
    ap.add_argument("--jobs", type=int, default=max(1, (os.cpu_count() or 2) - 1))
    ap.add_argument("--out", type=Path, default=None,
                    help="folder for <task>/compile_sm<arch>.csv (default: the task's folder)")
    ap.add_argument("--limit", type=int, default=None, help="the first N programs only")
    ap.add_argument("--sample", type=int, default=None, help="a seeded sample of N programs")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--baselines", action="store_true",
                    help="only the baseline configuration at each group of shapes")
    ap.add_argument("--configs", default=None,
                    help="a named set of configurations of the task's space (gemm: small-shapes)")
    ap.add_argument("--timeout", type=float, default=300.0, help="seconds per compile")
    ap.add_argument("--summary", type=Path, default=None, help="write the summary JSON here")
    args = ap.parse_args(argv)
    target = load_target(args.target)
    names = list(KNOWN_TASKS) if args.task == "all" else args.task.split(",")
    summaries = []
    for name in names:
        task = get_task(name)
        if task.space is None:
            continue
        out = (args.out / name / table_path(task, target).name) if args.out \
            else table_path(task, target)
        configs = named_configurations(task, args.configs) if args.configs else None
        s = sweep(task, target, args.jobs, out, args.limit, args.sample, args.seed,
                  args.timeout, args.baselines, configs)
        print(json.dumps(s, indent=1), flush=True)
        summaries.append(s)
    if args.summary:
        args.summary.parent.mkdir(parents=True, exist_ok=True)
        args.summary.write_text(json.dumps(summaries, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
