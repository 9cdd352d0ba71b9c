"""Live GPU measurement: the protocol every Argus throughput figure on a GPU follows.

- correctness first, at the real shape: fresh random inputs, NaN-poisoned output,
  elementwise comparison with the task's float32 reference (`oracle.check`);
- inputs rotated over enough copies to exceed twice the L2 cache, so a small problem
  cannot live in L2 between calls;
- candidate and library anchor timed alternately in the same process, each as a
  CUDA-graph replay (`triton.testing.do_bench_cudagraph`, median), over several rounds,
  so power-cap throttling affects both alike; quantiles are kept;
- a result faster than the hardware's physical limit (peak FLOP/s or the DRAM floor) is
  rejected as an error, never recorded as a speed-up.

The functions here run where the GPU is: in the measurement worker process, or in the
recording script.
"""

from __future__ import annotations

import statistics
import time

L2_BYTES = 60 * 2**20            # H200 (read from the device when possible)
PEAK_SLACK = 1.05                 # tolerance over the datasheet peak before rejecting


def rotated_inputs(task, program, sizes: dict, device: str = "cuda", seed: int = 0,
                   l2_bytes: int = L2_BYTES) -> list[dict]:
    """Enough independent input sets that cycling through them exceeds 2x the L2 cache."""
    import torch
    gen = torch.Generator(device=device).manual_seed(seed)
    first = task.make_inputs(program, sizes, device, gen)
    per_set = sum(t.numel() * t.element_size() for t in first.values())
    copies = max(1, min(64, -(-2 * l2_bytes // max(per_set, 1))))
    return [first] + [task.make_inputs(program, sizes, device, gen) for _ in range(copies - 1)]


def cycling(fn_of_inputs, sets: list[dict]):
    """A no-argument callable that uses the next input set on every call (graph capture
    records the calls it sees, so a captured graph cycles through the sets too)."""
    state = {"i": 0}

    def call():
        inputs = sets[state["i"] % len(sets)]
        state["i"] += 1
        return fn_of_inputs(inputs)
    return call


def time_pair(candidate, anchor, rounds: int = 3, rep_ms: int = 40) -> dict:
    """Median milliseconds of candidate and anchor, alternating order each round.

    Both are timed by CUDA-graph replay; should either one not be capturable (a host
    round trip inside it), both are timed instead by CUDA events around plain launches
    (`triton.testing.do_bench`), and `timing` says so: a pair is always timed alike."""
    from triton.testing import do_bench, do_bench_cudagraph
    try:
        return _time_pair(candidate, anchor, rounds, rep_ms, do_bench_cudagraph) \
            | {"timing": "cuda-graph"}
    except RuntimeError as e:
        if "captur" not in str(e).lower():
            raise
        import torch
        torch.cuda.synchronize()
        out = _time_pair(candidate, anchor, rounds, rep_ms, do_bench)
        return out | {"timing": "cuda-events", "graph_error": str(e).splitlines()[0][:300]}


def _time_pair(candidate, anchor, rounds: int, rep_ms: int, bench) -> dict:
    tc, ta = [], []
    for r in range(rounds):
        for fn in ((candidate, anchor) if r % 2 == 0 else (anchor, candidate)):
            (tc if fn is candidate else ta).append(bench(fn, rep=rep_ms, return_mode="median"))
    return {"ms": statistics.median(tc), "anchor_ms": statistics.median(ta),
            "ms_rounds": tc, "anchor_ms_rounds": ta,
            "ratio": statistics.median([a / c for a, c in zip(ta, tc)])}


def physical_limit_ms(task, sizes: dict, peak_tflops: float, dram_tbps: float) -> float:
    """The least time the work can take: FLOPs at peak, compulsory bytes at full bandwidth."""
    flops_ms = task.flops(sizes) / (peak_tflops * 1e9)
    bytes_ms = task.min_bytes(sizes) / (dram_tbps * 1e9)
    return max(flops_ms, bytes_ms)


def measure_program(program, task, sizes: dict, launch, rounds: int = 3, rep_ms: int = 40,
                    seed: int = 0, peak_tflops: float = 989.0, dram_tbps: float = 4.8) -> dict:
    """The full protocol for one program at one shape; returns a JSON-ready dict."""
    import torch

    from . import oracle
    t0 = time.perf_counter()
    verdict = oracle.check(program, task, sizes, launch, device="cuda", seed=seed)
    out = {"ok": False, "correct": verdict.ok, "max_rel_err": verdict.max_rel_err,
           "check_s": time.perf_counter() - t0}
    if not verdict.ok:
        out.update(status="mismatch", message=verdict.message)
        return out
    l2 = getattr(torch.cuda.get_device_properties(0), "L2_cache_size", L2_BYTES)
    sets = rotated_inputs(task, program, sizes, seed=seed + 1, l2_bytes=l2)
    outputs = {n: _output(program, n, sizes) for n in program.info.outputs}
    pairs = [(x, task.anchor(x, sizes)) for x in sets]
    cand = cycling(lambda p: launch(**p[0], **outputs), pairs)
    anchor = cycling(lambda p: p[1](), pairs)
    times = time_pair(cand, anchor, rounds, rep_ms)
    floor = physical_limit_ms(task, sizes, peak_tflops, dram_tbps) / PEAK_SLACK
    flops = task.flops(sizes)
    out.update(times, input_sets=len(sets), tflops=flops / times["ms"] / 1e9,
               anchor_tflops=flops / times["anchor_ms"] / 1e9, floor_ms=floor)
    out.update(judge(times["ms"], floor))
    return out


def judge(ms: float, floor_ms: float) -> dict:
    """Accept a timing, or reject it when it beats the hardware's physical limit (a
    kernel that skipped work, a broken timer, a cached result)."""
    if not ms > 0 or ms < floor_ms:
        return {"ok": False, "status": "impossible",
                "message": f"{ms:.4f} ms is faster than the physical limit {floor_ms:.4f} ms; "
                           "rejected"}
    return {"ok": True, "status": "ok"}


def _output(program, name: str, sizes: dict):
    import torch
    from ..dsl.dtypes import DTYPES
    p = program.kernel.param(name)
    shape = [program.kernel.extents(sizes)[d] for d in p.dims]
    dtype = getattr(torch, DTYPES[p.dtype].torch)
    if p.order == "col_major":
        return torch.empty(shape[::-1], device="cuda", dtype=dtype).t()
    return torch.empty(shape, device="cuda", dtype=dtype)
