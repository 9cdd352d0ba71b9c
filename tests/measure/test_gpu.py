"""The live GPU backend on a real GPU (`pytest -m gpu`; deselected on CPU machines)."""

import pytest

from argus_env.task import get_task

pytestmark = pytest.mark.gpu
TASK = get_task("gemm")


def _cuda() -> bool:
    import torch
    return torch.cuda.is_available()


def test_gpu_backend_measures_expert_near_cublas():
    if not _cuda():
        pytest.fail("the gpu tests need a CUDA GPU: run them on a GPU machine")
    from argus_env.measure.backends import make_backend
    from argus_env.tasks.gemm.space import BASELINE, EXPERT
    backend = make_backend("gpu", timeout=300)
    sizes = {"M": 4096, "N": 4096, "K": 4096}
    expert = backend.measure(TASK.space.program(EXPERT), sizes, TASK)
    base = backend.measure(TASK.space.program(BASELINE), sizes, TASK)
    assert expert.ok and base.ok, (expert.error, base.error)
    assert expert.frac_anchor > 0.85, expert.to_dict()
    assert expert.tflops > 1.5 * base.tflops, (expert.tflops, base.tflops)
    prov = expert.details["provenance"]
    assert prov["gpu"] and prov["driver"] and prov["triton"], prov


def test_gpu_backend_rejects_a_wrong_kernel():
    if not _cuda():
        pytest.fail("the gpu tests need a CUDA GPU: run them on a GPU machine")
    from argus_env.dsl.program import Program
    from argus_env.measure.backends import make_backend
    text = TASK.program("baseline").text.replace("acc = A.dot(a_tile, b_tile, acc)",
                                                 "acc = A.dot(a_tile, b_tile)")
    m = make_backend("gpu", timeout=300).measure(Program.from_text(text),
                                                 {"M": 1024, "N": 1024, "K": 1024}, TASK)
    assert not m.ok and m.details["status"] == "mismatch", m.to_dict()
