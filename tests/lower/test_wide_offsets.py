"""64-bit offsets for tensors that span 2**31 elements or more (DeepSeek-sized MoE weights).

Pointer tensors get an `I64_<name>` constexpr that widens the outermost stride; TMA-only
tensors address in 64 bits already and need only 32-bit dims. Huge tensors live on the
`meta` device here: shapes and strides without memory.
"""

import pytest
import torch

from argus_env import lower
from argus_env.lower.runtime import LaunchError, check_tensors, wide_offsets
from argus_env.measure import oracle
from argus_env.task import get_task

GEMM = get_task("gemm")
MOE = get_task("moe")
DEEPSEEK = {"T": 64, "D": 7168, "F": 2048, "E": 256, "TOPK": 8}


def meta(*shape, dtype=torch.bfloat16):
    return torch.empty(shape, dtype=dtype, device="meta")


def test_wide_offsets_at_the_boundary():
    at = torch.empty(0, device="meta").as_strided((2,), (2**31 - 1,))  # span exactly 2**31
    below = torch.empty(0, device="meta").as_strided((2,), (2**31 - 2,))
    assert wide_offsets(at, "row_major"), "a span of 2**31 elements needs 64 bits"
    assert not wide_offsets(below, "row_major"), "a span of 2**31 - 1 fits in 32 bits"
    w = meta(DEEPSEEK["E"], DEEPSEEK["D"], DEEPSEEK["F"])
    assert w.numel() >= 2**31 and wide_offsets(w, "row_major"), w.shape
    assert not wide_offsets(meta(4096, 7168), "row_major")
    assert wide_offsets(meta(8, 2**28).t(), "col_major"), "col-major spans count too"


def test_check_tensors_exempts_tma_and_keeps_clear_errors():
    w = meta(DEEPSEEK["E"], DEEPSEEK["D"], DEEPSEEK["F"])
    shape = tuple(w.shape)
    for access in ("tma", "pointer"):  # pointer: only the outermost dim needs 64 bits
        check_tensors("moe", w_gate=(w, shape, torch.bfloat16, "row_major", access))
    # a view whose inner dims alone span 2**31: the widened outermost dim does not help
    twisted = w.permute(1, 0, 2)  # dim 1 now has the largest stride
    with pytest.raises(LaunchError, match="other than dim 0"):
        check_tensors("moe", w_gate=(twisted, tuple(twisted.shape), torch.bfloat16,
                                     "row_major", "pointer"))
    check_tensors("moe", w_gate=(twisted, tuple(twisted.shape), torch.bfloat16,
                                 "row_major", "tma"))
    long = meta(2**31)
    with pytest.raises(LaunchError, match="shorter than 2\\*\\*31"):
        check_tensors("moe", v=(long, (2**31,), torch.bfloat16, "row_major", "tma"))


class _Recorder:
    """Stands in for a `@triton.jit` kernel: `kernel[grid](*args, **kw)` records kw."""

    def __init__(self, calls):
        self.calls = calls

    def __getitem__(self, grid):
        return lambda *args, **kw: self.calls.append(kw)


def _launch_at_deepseek(which, monkeypatch):
    """Run `which`'s launcher on meta tensors of a DeepSeek shape, kernels recorded."""
    prog = MOE.bind(MOE.program(which), DEEPSEEK)
    sizes = MOE.program_sizes(prog, DEEPSEEK)
    launch = lower.load(prog, interpret=True)
    calls = []
    for name in launch.__globals__:
        if name.startswith(f"{prog.name}_kernel"):
            monkeypatch.setitem(launch.__globals__, name, _Recorder(calls))
    monkeypatch.setitem(launch.__globals__, "TensorDescriptor",
                        type("Desc", (), {"from_tensor": staticmethod(lambda t, b: None)}))
    args = {name: meta(*(sizes[d] for d in dims),
                       dtype={"bf16": torch.bfloat16, "f32": torch.float32,
                              "i32": torch.int32}[dt])
            for name, (dims, dt) in MOE.signature.items() if name != "out"}
    launch(**args)
    return calls


def test_moe_baseline_launcher_widens_only_the_weights(monkeypatch):
    calls = _launch_at_deepseek("baseline", monkeypatch)
    assert calls, "the launcher reached its kernels"
    flags = {k: v for k, v in calls[0].items() if k.startswith("I64_")}
    assert {k for k, v in flags.items() if v} == {"I64_w_gate", "I64_w_up", "I64_w_down"}, flags


def test_moe_expert_launcher_reads_weights_by_tma_without_span_limit(monkeypatch):
    calls = _launch_at_deepseek("expert", monkeypatch)
    assert calls and not any(k in calls[0] for k in ("I64_w_gate", "I64_w_up", "I64_w_down")), \
        "TMA-only weights need no offset flag"
    assert not any(v for k, v in calls[0].items() if k.startswith("I64_")), calls[0]


def test_widened_kernel_source():
    src = lower.source(MOE.program("baseline"))
    assert "if I64_w_gate:" in src and \
        "stride_w_gatee = tl.cast(stride_w_gatee, tl.int64)" in src, src
    assert "I64_w_gate = wide_offsets(w_gate, 'row_major')" in src
    assert "'row_major', 'tma')" in lower.source(MOE.program("expert"))


def test_widened_kernel_matches_torch_under_the_interpreter(monkeypatch):
    """Forcing every flag on: 64-bit strides compute the same result."""
    prog = GEMM.program("baseline")
    launch = lower.load(prog, interpret=True)
    monkeypatch.setitem(launch.__globals__, "wide_offsets", lambda t, order: True)
    sizes = GEMM.cpu_shapes[0]
    verdict = oracle.check(prog, GEMM, sizes, launch, seed=3)
    assert verdict.ok, verdict.message


@pytest.mark.slow
@pytest.mark.parametrize("which", ["baseline", "expert"])
def test_moe_compiles_for_hopper_with_64_bit_offsets(which):
    """The real compiler accepts the widened strides (every launch's kernel)."""
    from argus_env.lower.aot import compile_hopper
    prog = MOE.bind(MOE.program(which), DEEPSEEK)
    result = compile_hopper(prog, wide=True)
    assert result.ok, result.error
    assert result.kernels >= 2, result
