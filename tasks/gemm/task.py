"""The GEMM task: C = A @ B in bf16 with float32 accumulation."""

from __future__ import annotations

from pathlib import Path

from argus_env.dsl.program import Program
from argus_env.task import ShapeCase, Sizes, Task, Tolerance, register_task

HERE = Path(__file__).parent


def _case(name: str, m: int, n: int, k: int, split: str = "train") -> ShapeCase:
    return ShapeCase(name, {"M": m, "N": n, "K": k}, split)


class GemmTask(Task):
    name = "gemm"
    description = ("Matrix multiplication C[M, N] = A[M, K] @ B[K, N] in bf16 with float32 "
                   "accumulation, as in a transformer's linear layers.")
    # baseline and expert first; every DSL file in programs/ is a program of the task
    programs = {p.stem: p for p in sorted((HERE / "programs").glob("*.py"),
                                          key=lambda p: (p.stem not in ("baseline", "expert"), p.stem))}
    shapes = (
        _case("square-8192", 8192, 8192, 8192),
        _case("square-4096", 4096, 4096, 4096),
        _case("up-proj", 4096, 14336, 4096),
        _case("down-proj", 4096, 4096, 14336),
        _case("small-m-512", 512, 4096, 4096),
        _case("tall-16384", 16384, 1024, 4096),
        _case("decode-16", 16, 4096, 4096),
        _case("decode-64", 64, 14336, 4096, split="test"),
        _case("ragged-3000", 3000, 5000, 2000, split="test"),
        _case("ragged-1000", 1000, 1000, 1000),
        _case("square-2048", 2048, 2048, 2048, split="test"),
        _case("llama-qkv", 8192, 6144, 4096, split="test"),
    )
    # ragged in every dim (masks and partial tiles exercised), K and N multiples of 8 so
    # that TMA's 16-byte stride rule holds
    cpu_shapes = (
        {"M": 64, "N": 64, "K": 64},
        {"M": 100, "N": 72, "K": 40},
        {"M": 17, "N": 264, "K": 136},
        {"M": 130, "N": 136, "K": 96},
    )
    # bf16 output: about two bf16 ulps of the typical magnitude, so split-K partial sums
    # combined by bf16 atomic adds pass, and an all-zero or unwritten output cannot
    tolerance = Tolerance(rtol=2e-2, atol=2e-2)
    signature = {"a": (("M", "K"), "bf16"), "b": (("K", "N"), "bf16"), "c": (("M", "N"), "bf16")}
    store_coverage = {"c": {"K": ("0", "K")}}
    for_all_sizes = ("M", "N", "K")
    env_check_shape = {"M": 100, "N": 72, "K": 80}
    anchors_file = HERE / "anchors_h200.json"   # cuBLAS TFLOP/s measured per shape
    anchor_dims = ("M", "N", "K")

    @property
    def space(self):
        from .space import SPACE
        return SPACE

    def numerics_class(self, config_key: str) -> str | None:
        """Split-K partials combined by bf16 atomic adds round the running sum once per
        split, whatever the tiles: the GPU found such programs wrong at a few of millions
        of elements (8 splits on the H200; 4 and 8 on the H100), far past the interpreter's
        reduced shapes. Other configurations round once, at the store."""
        from argus_env.measure.recorded import parse_config_text
        fields = parse_config_text(config_key) or {}
        split = int(fields.get("split_k", 1))
        if split > 1 and fields.get("atomic_output") is True:
            return f"split_k={split},atomic_output=True"
        return None

    def make_inputs(self, program: Program, sizes: Sizes, device, generator) -> dict:
        import torch
        out = {}
        for p in program.kernel.tensors:
            if p.name in program.info.outputs or p.name not in self.signature:
                continue  # outputs, and workspaces between launches, are not inputs
            shape = [sizes[d] for d in p.dims]
            if p.order == "col_major":
                t = torch.randn(shape[::-1], generator=generator, device=device).t()
            else:
                t = torch.randn(shape, generator=generator, device=device)
            out[p.name] = t.to(torch.bfloat16)
        return out

    def reference(self, inputs: dict, sizes: Sizes = None) -> dict:
        return {"c": inputs["a"].float() @ inputs["b"].float()}

    def flops(self, sizes: Sizes) -> float:
        return 2.0 * sizes["M"] * sizes["N"] * sizes["K"]

    def min_bytes(self, sizes: Sizes) -> float:
        m, n, k = sizes["M"], sizes["N"], sizes["K"]
        return 2.0 * (m * k + k * n + m * n)

    def anchor(self, inputs: dict, sizes: Sizes = None):
        import torch
        a, b = inputs["a"], inputs["b"]
        return lambda: torch.matmul(a, b)


TASK = register_task(GemmTask())
