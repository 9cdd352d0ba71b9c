"""GPU fault containment: kernels that fault, hang or are killed never take the caller down.

Runs, through `argus_env.measure.worker.Worker(interpret=False)` (the live `gpu`
backend's worker process) and with the invariant checker bypassed, GEMM kernels that

- read and write far out of bounds (masks removed, rows shifted by 1.5M): an illegal
  address, which poisons the worker's CUDA context; the worker answers `fault` and is
  replaced;
- drop their masks at a ragged shape: small out-of-bounds accesses that stay inside the
  allocator's segment, usually seen by the oracle as a mismatch; should the stray reads
  happen to add nothing, the run is marked `silent` (no runtime check sees such accesses:
  the invariant checker's bounds proof is what rejects this program in an environment),
  and containment is judged by the normal measurement after it;
- never finish (a 2^31-iteration loop): the worker is killed at the timeout, which ends
  the kernel with its CUDA context;
- are killed mid-run (SIGKILL, as a driver crash would): a `fault`;
- compute the wrong result: a `mismatch`;

and after each, measures the baseline normally through `GPUBackend`, which must work.
Prints a table; writes JSON to `$OUT/gpu_fault_containment.json` (or `--out`) when set.
Needs torch, triton, numpy, pyyaml (rich for the table, if present); not z3 or gymnasium.

    python benchmarks/gpu_fault_containment.py                 # on a GPU machine
    python benchmarks/gpu_fault_containment.py --interpret     # CPU smoke test of the script
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import signal
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

LOAD_A = "A.load(a[rows, ks], mask=(rows < M, ks < K), other=0.0)"
LOAD_B = "A.load(b[ks, cols], mask=(ks < K, cols < N), other=0.0)"
STORE = "A.store(c[rows, cols], A.cast(acc, A.bf16), mask=(rows < M, cols < N))"
ROWS = "rows = pid_m * BM + A.arange(BM)"
LOOP = "for k in A.range(0, K, BK):"


def edit(text: str, *pairs: tuple[str, str]) -> str:
    for old, new in pairs:
        assert old in text, f"the GEMM baseline no longer contains {old!r}"
        text = text.replace(old, new)
    return text


def programs(base: str) -> dict[str, str]:
    unmasked = ((LOAD_A, "A.load(a[rows, ks])"), (LOAD_B, "A.load(b[ks, cols])"),
                (STORE, "A.store(c[rows, cols], A.cast(acc, A.bf16))"))
    return {
        "baseline": base,
        "oob-far": edit(base, (ROWS, ROWS + " + 1500000"), *unmasked),
        "mask-removed": edit(base, *unmasked),
        "never-finishes": edit(base, (LOOP, "for k in A.range(0, 2147483647, 1):")),
        "wrong-result": edit(base, ("acc = A.dot(a_tile, b_tile, acc)", "acc = A.dot(a_tile, b_tile)")),
    }


def run_case(worker, name: str, text: str, sizes: dict, op: str, timeout: float,
             kill_after: float | None = None) -> dict:
    """One request to the worker; with `kill_after`, SIGKILL it that many seconds in."""
    restarts = worker.restarts
    t0 = time.perf_counter()
    if kill_after is None:
        ans = worker.run(text, "gemm", sizes, op=op, timeout=timeout)
    else:
        worker.ensure_started()
        result: dict = {}
        t = threading.Thread(target=lambda: result.update(
            worker.run(text, "gemm", sizes, op=op, timeout=timeout)))
        t.start()
        time.sleep(kill_after)
        proc = worker._proc
        if proc is not None and proc.pid:
            os.kill(proc.pid, signal.SIGKILL)
        t.join(timeout + 30)
        ans = result or {"status": "lost", "ok": False, "message": "no answer"}
    return {"case": name, "sizes": dict(sizes), "status": ans.get("status"), "ok": bool(ans.get("ok")),
            "message": str(ans.get("message", ""))[:300], "seconds": time.perf_counter() - t0,
            "worker_restarts": worker.restarts - restarts}


def normal(backend, worker, task, base_program, sizes: dict, interpret: bool, label: str) -> dict:
    """The baseline, measured normally after a fault: through GPUBackend on a GPU, through
    the worker's correctness check under the interpreter."""
    t0 = time.perf_counter()
    if interpret:
        ans = worker.run(base_program.text, "gemm", sizes, op="check")
        status, ok, msg = ans.get("status"), bool(ans.get("ok")), ans.get("message", "")
        extra = {}
    else:
        m = backend.measure(base_program, sizes, task)
        status, ok, msg = m.details.get("status") or ("ok" if m.ok else "error"), m.ok, m.error
        extra = {"tflops": m.tflops, "anchor_tflops": m.anchor_tflops}
    return {"case": label, "sizes": dict(sizes), "status": status, "ok": ok,
            "message": str(msg)[:300], "seconds": time.perf_counter() - t0,
            "worker_restarts": 0, **extra}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", type=int, default=1024, help="M = N = K of the normal cases")
    ap.add_argument("--timeout", type=float, default=30.0, help="seconds before a hang is killed")
    ap.add_argument("--interpret", action="store_true",
                    help="CPU smoke test: the Triton interpreter and correctness checks only")
    ap.add_argument("--out", type=Path, default=Path(os.environ["OUT"]) if os.environ.get("OUT") else None)
    args = ap.parse_args(argv)
    os.environ["TRITON_INTERPRET"] = "1" if args.interpret else "0"
    from argus_env.dsl.program import Program
    from argus_env.measure.gpu_backend import GPUBackend
    from argus_env.measure.worker import Worker
    from argus_env.task import get_task

    task = get_task("gemm")
    texts = programs(task.program("baseline").text)
    for name, text in texts.items():
        Program.from_text(text)  # every case is a well-typed program: only its behaviour is bad
    n = 64 if args.interpret else args.size
    sizes = {"M": n, "N": n, "K": n}
    ragged = {"M": n - 24, "N": n - 24, "K": n - 24}
    op = "check" if args.interpret else "measure"
    worker = Worker(interpret=args.interpret, timeout=args.timeout)
    backend = None if args.interpret else GPUBackend(worker=worker, rounds=2, rep_ms=20)
    base = Program.from_text(texts["baseline"])
    plan = [  # (case, text, sizes, statuses that mean "contained", kill after seconds)
        ("oob-far", texts["oob-far"], sizes, {"fault", "mismatch"}, None),
        ("mask-removed", texts["mask-removed"], ragged, {"fault", "mismatch", "ok"}, None),
        ("never-finishes", texts["never-finishes"], sizes, {"timeout"}, None),
        ("killed-mid-run", texts["never-finishes"], sizes, {"fault"}, 3.0 if args.interpret else 8.0),
        ("wrong-result", texts["wrong-result"], sizes, {"mismatch"}, None),
    ]
    rows = [normal(backend, worker, task, base, sizes, args.interpret, "normal (first)")]
    rows[-1]["expected"], rows[-1]["contained"] = "ok", rows[-1]["ok"]
    for name, text, sz, expected, kill in plan:
        row = run_case(worker, name, text, sz, op, args.timeout, kill)
        row["expected"] = "/".join(sorted(expected))
        row["contained"] = row["status"] in expected
        row["silent"] = row["ok"]  # a misbehaving kernel that passed unnoticed
        rows.append(row)
        after = normal(backend, worker, task, base, sizes, args.interpret, f"normal after {name}")
        after["expected"], after["contained"] = "ok", after["ok"]
        rows.append(after)
    worker.stop()
    contained = all(r["contained"] for r in rows)
    _print(rows, contained)
    if args.out:
        result = {"contained": contained, "cases": rows, "timeout_s": args.timeout,
                  "mode": "interpreter" if args.interpret else "gpu", "provenance": _provenance(args)}
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "gpu_fault_containment.json").write_text(json.dumps(result, indent=1))
    return 0 if contained else 1


def _provenance(args) -> dict:
    prov = {"date": time.strftime("%Y-%m-%d %H:%M:%S %z"), "host": platform.node(),
            "command": " ".join([Path(sys.executable).name] + sys.argv)}
    if not args.interpret:
        try:
            from argus_env.measure.provenance import collect
            prov.update(collect())
        except Exception as e:  # noqa: BLE001 - provenance is best effort here
            prov["error"] = f"{type(e).__name__}: {e}"
    return prov


def _print(rows: list[dict], contained: bool) -> None:
    header = ("case", "expected", "status", "contained", "s", "restarts", "message")
    cells = [(r["case"], r["expected"], str(r["status"]) + (" (silent)" if r.get("silent") else ""),
              "yes" if r["contained"] else "NO",
              f"{r['seconds']:.1f}", str(r["worker_restarts"]), r["message"][:70]) for r in rows]
    try:
        from rich.console import Console
        from rich.table import Table
        table = Table(title=f"GPU fault containment: {'all contained' if contained else 'NOT CONTAINED'}")
        for h in header:
            table.add_column(h)
        for c in cells:
            table.add_row(*c)
        Console(width=160).print(table)
    except ImportError:
        widths = [max(len(h), *(len(c[i]) for c in cells)) for i, h in enumerate(header)]
        for line in [header, *cells]:
            print("  ".join(x.ljust(w) for x, w in zip(line, widths)))
        print("all contained" if contained else "NOT CONTAINED")


if __name__ == "__main__":
    sys.exit(main())
