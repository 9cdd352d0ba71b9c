"""The fused-MoE Triton anchor (`tasks/moe/fused_anchor.py`): its routing alignment's
postconditions, its output against the float32 reference and the torch pipeline under the
Triton interpreter at tiny shapes, its ahead-of-time compile for sm_90 at the suite's
shapes, and (`pytest -m gpu`) tuning, correctness and CUDA-graph capture on a GPU."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from argus_env.measure import oracle
from argus_env.task import get_task
from argus_env.tasks.moe import fused_anchor as fa
from argus_env.tasks.moe import routing

TASK = get_task("moe")
ROOT = Path(__file__).resolve().parents[2]
SMALL = fa.KernelConfig(block_n=32, block_k=32, group_m=2, num_warps=4, num_stages=2)


def _ids_with_counts(counts: list[int], topk: int, seed: int = 0) -> torch.Tensor:
    """Top-k ids [T, topk] where expert e receives counts[e] pairs (no token twice to one
    expert): pairs dealt round-robin over the slots of a shuffled token order."""
    gen = torch.Generator().manual_seed(seed)
    pairs = sum(counts)
    assert pairs % topk == 0
    tokens = pairs // topk
    flat = torch.cat([torch.full((c,), e, dtype=torch.int32) for e, c in enumerate(counts)])
    # expert-major order dealt across slots: slot j of token t is flat[j * tokens + t], so a
    # token's slots come from distinct runs when every count is at most `tokens`
    assert max(counts) <= tokens
    ids = flat.view(topk, tokens).t().contiguous()
    return ids[torch.randperm(tokens, generator=gen)]


# expert 2 receives no pair; expert 0 receives 17 (BLOCK_M 16: one block and one row)
COUNTS = [17, 5, 0, 16, 2]


ALIGNS = {"triton-small": lambda *a: fa.align(*a, small=True),
          "triton-parallel": lambda *a: fa.align(*a, small=False), "torch": fa.align_torch}


@pytest.mark.parametrize("impl", list(ALIGNS.values()), ids=list(ALIGNS))
@pytest.mark.parametrize("block", [16, 32])
def test_align_postconditions(impl, block):
    ids = _ids_with_counts(COUNTS, 2)
    experts = len(COUNTS)
    sorted_ids, expert_ids, npost = impl(ids, experts, block)
    routing.check_postconditions(ids, sorted_ids, expert_ids, experts, block)
    pad = ids.numel()
    assert sorted_ids.numel() == fa.padded_rows(ids.shape[0], experts, 2, block)
    padded = [-(-c // block) * block for c in COUNTS]
    assert int(npost) == sum(padded)
    # the blocks of each expert's run, in expert order, then -1 (no block for expert 2)
    want = [e for e, p in enumerate(padded) for _ in range(p // block)]
    want += [-1] * (expert_ids.numel() - len(want))
    assert expert_ids.tolist() == want
    # padding only at the tail of each run; nothing but padding past the last run
    start = 0
    for e, c in enumerate(COUNTS):
        run = sorted_ids[start:start + padded[e]]
        assert bool((run[:c] < pad).all()) and bool((run[c:] == pad).all()), (e, run)
        assert sorted((ids.reshape(-1)[run[:c].long()]).tolist()) == [e] * c
        start += padded[e]
    assert bool((sorted_ids[start:] == pad).all())


def test_align_on_random_routings_matches_torch():
    for seed, (t, e, k, skew) in enumerate([(50, 8, 2, 0.0), (40, 8, 2, 1.5), (33, 16, 4, 0.0),
                                            (7, 64, 8, 1.5)]):
        gen = torch.Generator().manual_seed(seed)
        _, ids = routing.topk(routing.router_logits(t, e, skew, gen), k)
        for block, small in ((16, True), (64, False)):
            s1, x1, n1 = fa.align(ids, e, block, small=small)
            s2, x2, n2 = fa.align_torch(ids, e, block)
            routing.check_postconditions(ids, s1, x1, e, block)
            assert torch.equal(x1, x2) and torch.equal(n1, n2)
            # the same pairs in each block (their order inside a run may differ)
            for b in range(x1.numel()):
                rows = slice(b * block, (b + 1) * block)
                assert sorted(s1[rows].tolist()) == sorted(s2[rows].tolist())


def _inputs(sizes, seed=5, counts=None):
    gen = torch.Generator().manual_seed(seed)
    inputs = TASK.make_inputs(None, TASK.program_sizes(TASK.program("expert"), sizes), "cpu",
                              gen)
    if counts is not None:
        inputs["topk_ids"] = _ids_with_counts(counts, sizes["TOPK"], seed)
        w = torch.rand(sizes["T"], sizes["TOPK"], generator=gen)
        inputs["topk_weights"] = w / w.sum(-1, keepdim=True)
    return inputs


@pytest.mark.parametrize("case", [
    # an empty expert, one whose count is not a block multiple; D and F not multiples of
    # BLOCK_K or BLOCK_N (the masked K loop, the masked stores)
    ({"T": 20, "D": 72, "F": 40, "E": 5, "TOPK": 2, "SKEW": 0}, COUNTS, 16),
    ({"T": 20, "D": 64, "F": 64, "E": 5, "TOPK": 2, "SKEW": 0}, COUNTS, 32),
    # the task's skewed CPU shape, routed as the task routes
    (TASK.cpu_shapes[1], None, 16),
], ids=["ragged", "even-bm32", "task-skewed"])
def test_fused_anchor_matches_reference_and_pipeline(case):
    sizes, counts, block_m = case
    inputs = _inputs(sizes, counts=counts)
    if counts is not None:
        assert torch.bincount(inputs["topk_ids"].reshape(-1).long(),
                              minlength=sizes["E"]).tolist() == counts
    config = fa.FusedConfig(block_m, SMALL, SMALL)
    out = fa.anchor(inputs, sizes, config)()
    assert out.dtype == torch.bfloat16 and out.shape == (sizes["T"], sizes["D"])
    ref = TASK.reference(inputs, sizes)
    verdict = oracle.compare({"out": out}, ref, TASK, sizes)
    assert verdict.ok, verdict.message
    pipe = TASK.anchor(inputs, sizes)()
    tol = TASK.tolerance
    assert torch.allclose(out.float(), pipe.float(), rtol=tol.rtol, atol=tol.atol)
    # deterministic: the same bits on a second run (the combine is a sum, not atomics)
    assert torch.equal(fa.anchor(inputs, sizes, config)(), out)


def test_cpu_uses_the_default_config():
    sizes = {"T": 6, "D": 32, "F": 32, "E": 4, "TOPK": 2, "SKEW": 0}
    inputs = _inputs(sizes)
    assert fa.tune(inputs, sizes) == fa.default_config(sizes)
    # the default for few rows per expert: BLOCK_M 16 (here 3 rows per expert)
    assert fa.default_config(sizes).block_m == 16
    cfg = fa.default_config({"T": 8192, "D": 4096, "F": 14336, "E": 8, "TOPK": 2})
    assert cfg.block_m == 128
    assert fa.FusedConfig.from_dict(json.loads(json.dumps(cfg.to_dict()))) == cfg


def test_tuning_candidates_fit_hopper():
    for bm in (16, 32, 64, 128):
        for operands in (1, 2):
            grid = fa.candidate_kernel_configs(bm, operands)
            assert grid and all(fa._fits(bm, c, operands) for c in grid)
    assert fa.candidate_block_m({"T": 16, "TOPK": 2, "E": 8}, [4] * 8) == [16]
    assert fa.candidate_block_m({"T": 8192, "TOPK": 2, "E": 8}, [2048] * 8) == [64, 128]


def _compile(shapes: list[dict], timeout=240) -> list[dict]:
    code = ("import json, sys\n"
            "from argus_env.tasks.moe import fused_anchor as fa\n"
            "for s in json.loads(sys.argv[1]):\n"
            "    c = fa.default_config(s)\n"
            "    print(json.dumps({'sizes': s, 'config': c.to_dict(),"
            " 'kernels': fa.compile_for(c, s)}), flush=True)\n")
    env = dict(os.environ, TRITON_INTERPRET="0")
    r = subprocess.run([sys.executable, "-c", code, json.dumps(shapes)], cwd=ROOT, env=env,
                       capture_output=True, text=True, timeout=timeout)
    assert r.returncode == 0, r.stderr[-3000:]
    return [json.loads(line) for line in r.stdout.splitlines() if line.startswith("{")]


def test_compiles_for_sm90_at_mixtral_shapes():
    """The real compiler for sm_90 at Mixtral-8x7B prefill and decode: every kernel compiles,
    the prefill GEMMs use wgmma, nothing spills (a few seconds)."""
    rows = _compile([{"T": 8192, "D": 4096, "F": 14336, "E": 8, "TOPK": 2},
                     {"T": 16, "D": 4096, "F": 14336, "E": 8, "TOPK": 2}])
    for row in rows:
        for name, k in row["kernels"].items():
            assert k["ok"], (name, k.get("error"))
        for name in ("up", "down"):
            assert row["kernels"][name]["stack_bytes"] == 0, (row["sizes"], name, row)
    prefill = rows[0]["kernels"]
    assert prefill["up"]["wgmma"] > 0 and prefill["down"]["wgmma"] > 0, prefill
    assert prefill["up"]["shared_bytes"] > 100_000, prefill  # pipelined: several stages


@pytest.mark.slow
def test_compiles_for_sm90_at_every_suite_shape():
    rows = _compile([dict(c.sizes) for c in TASK.shape_cases("all")], timeout=600)
    assert len(rows) == len(TASK.shape_cases("all"))
    for row in rows:
        for name, k in row["kernels"].items():
            assert k["ok"], (row["sizes"], name, k.get("error"))
            # the GEMMs do not spill (the alignment's 512-bin histogram at E=256 keeps a
            # few bytes of stack)
            assert k["stack_bytes"] == 0 or name.startswith("align"), (row["sizes"], name, k)


GPU_SCRIPT = r"""
import json, torch
from argus_env.measure import oracle
from argus_env.task import get_task
from argus_env.tasks.moe import fused_anchor as fa
task = get_task("moe")
out = {}
for sizes in ({"T": 256, "D": 2048, "F": 768, "E": 128, "TOPK": 8, "SKEW": 1},
              {"T": 1024, "D": 1024, "F": 1536, "E": 8, "TOPK": 2, "SKEW": 0}):
    gen = torch.Generator(device="cuda").manual_seed(3)
    inputs = task.make_inputs(None, task.program_sizes(task.program("expert"), sizes), "cuda", gen)
    cfg = fa.tune(inputs, sizes, rep_ms=5)
    fn = fa.anchor(inputs, sizes, cfg)
    ref = task.reference(inputs, sizes)
    ok = oracle.compare({"out": fn()}, ref, task, sizes).ok
    g = torch.cuda.CUDAGraph()
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        fn()
    torch.cuda.current_stream().wait_stream(s)
    with torch.cuda.graph(g):
        res = fn()
    g.replay()
    torch.cuda.synchronize()
    graph_ok = oracle.compare({"out": res}, ref, task, sizes).ok
    out[fa._shape_key(sizes)] = {"ok": ok, "graph_ok": graph_ok, "config": cfg.to_dict()}
print(json.dumps(out))
"""


@pytest.mark.gpu
def test_tuned_anchor_on_the_gpu_is_correct_and_capturable():
    if not torch.cuda.is_available():
        pytest.fail("the gpu tests need a CUDA GPU: run them on a GPU machine")
    env = dict(os.environ, TRITON_INTERPRET="0")
    r = subprocess.run([sys.executable, "-c", GPU_SCRIPT], cwd=ROOT, env=env,
                       capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stderr[-3000:]
    res = json.loads(r.stdout.strip().splitlines()[-1])
    assert all(v["ok"] and v["graph_ok"] for v in res.values()), res
