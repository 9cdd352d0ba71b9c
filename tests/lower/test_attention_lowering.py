"""Attention programs under the Triton interpreter against SDPA: causal, not, GQA, head
dims 64 and 128, ragged sequence lengths."""

import pytest

from argus_env import lower
from argus_env.measure import oracle
from argus_env.task import get_task

TASK = get_task("attention")


@pytest.mark.parametrize("sizes", TASK.cpu_shapes, ids=lambda s: "-".join(f"{k}{v}" for k, v in s.items()))
@pytest.mark.parametrize("which", list(TASK.programs))
def test_attention_matches_sdpa(which, sizes):
    program = TASK.bind(TASK.program(which), sizes)
    verdict = oracle.check(program, TASK, sizes, lower.load(program, interpret=True), seed=3)
    assert verdict.ok, f"{which} at {sizes}: {verdict.message}"


def test_binding_sets_the_problem_constants():
    sizes = {"B": 1, "H": 8, "KVH": 2, "SQ": 64, "SK": 64, "D": 64, "CAUSAL": 1}
    consts = TASK.bind(TASK.program("baseline"), sizes).kernel.consts
    assert (consts["CAUSAL"], consts["GROUP"], consts["HEAD_DIM"]) == (1, 4, 64), consts
    assert consts["SCALE"] == pytest.approx(0.125)


def test_expert_uses_tma_descriptors_on_4d_tensors():
    src = lower.source(TASK.program("expert"))
    assert "q_desc.load([b, h, pid_m * BM, 0]).reshape(BM, HEAD_DIM)" in src, src
    assert ".reshape(1, 1, BM, HEAD_DIM)" in src and "tl.exp2(" in src
    assert "if CAUSAL == 1:" in src


def test_per_row_tolerance_still_rejects_zeros_and_noise():
    import torch
    sizes = {"B": 1, "H": 2, "KVH": 2, "SQ": 96, "SK": 96, "D": 64, "CAUSAL": 1}
    gen = torch.Generator().manual_seed(0)
    inputs = TASK.make_inputs(None, sizes, "cpu", gen)
    ref = TASK.reference(inputs, sizes)["o"]
    zeros = oracle.compare({"o": torch.zeros_like(ref)}, {"o": ref}, TASK, sizes)
    assert not zeros.ok and zeros.mismatches > 0.9 * ref.numel(), zeros.mismatches
    noisy = ref + 0.1 * ref.pow(2).mean(dim=-1, keepdim=True).sqrt() * torch.randn_like(ref)
    assert not oracle.compare({"o": noisy}, {"o": ref}, TASK, sizes).ok
    rounded = ref.to(torch.bfloat16)
    assert oracle.compare({"o": rounded}, {"o": ref}, TASK, sizes).ok
