"""The attention task: O = softmax(Q K^T * scale [+ causal mask]) V in bf16, per head, with
grouped-query attention (GROUP query heads share one KV head)."""

from __future__ import annotations

import math
from pathlib import Path

from argus_env.dsl.program import Program
from argus_env.ir.rewrite import with_const
from argus_env.task import ShapeCase, Sizes, Task, Tolerance, register_task

from .invariants import PACK

HERE = Path(__file__).parent


def _case(name, b, h, s, d, causal, kvh=None, split="train") -> ShapeCase:
    sizes = {"B": b, "H": h, "KVH": kvh or h, "SQ": s, "SK": s, "D": d, "CAUSAL": int(causal)}
    return ShapeCase(name, sizes, split)


class AttentionTask(Task):
    name = "attention"
    description = ("Attention forward O = softmax(Q K^T / sqrt(D)) V in bf16 over batch and "
                   "heads, causal or not, with grouped-query attention; the library anchor is "
                   "the fastest PyTorch SDPA backend (cuDNN).")
    programs = {p.stem: p for p in sorted((HERE / "programs").glob("*.py"),
                                          key=lambda p: (p.stem not in ("baseline", "expert"), p.stem))}
    shapes = (
        _case("b4-h32-s4096-d128", 4, 32, 4096, 128, False),
        _case("b4-h32-s4096-d128-causal", 4, 32, 4096, 128, True),
        _case("b8-h16-s2048-d128", 8, 16, 2048, 128, False),
        _case("b8-h16-s2048-d128-causal", 8, 16, 2048, 128, True, split="test"),
        _case("b2-h32-s8192-d128-causal", 2, 32, 8192, 128, True),
        _case("b4-h32-s4096-d64", 4, 32, 4096, 64, False),
        _case("b4-h32-s4096-d64-causal", 4, 32, 4096, 64, True, split="test"),
        _case("b1-h32-s16384-d128-causal", 1, 32, 16384, 128, True, split="test"),
        _case("gqa8-b4-h32-s4096-d128-causal", 4, 32, 4096, 128, True, kvh=4),
        _case("gqa8-b2-h64-s4096-d128", 2, 64, 4096, 128, False, kvh=8, split="test"),
    )
    # small and ragged (masks exercised); causal, not, GQA, head dims 64 and 128
    cpu_shapes = (
        {"B": 1, "H": 2, "KVH": 2, "SQ": 80, "SK": 80, "D": 64, "CAUSAL": 0},
        {"B": 2, "H": 2, "KVH": 1, "SQ": 72, "SK": 72, "D": 128, "CAUSAL": 1},
        {"B": 1, "H": 4, "KVH": 2, "SQ": 130, "SK": 130, "D": 64, "CAUSAL": 1},
        {"B": 1, "H": 1, "KVH": 1, "SQ": 64, "SK": 96, "D": 128, "CAUSAL": 0},
    )
    env_check_shape = {"B": 1, "H": 2, "KVH": 1, "SQ": 72, "SK": 72, "D": 64, "CAUSAL": 1}
    # scale per query row: a causal row averages over as many keys as its position, so
    # early rows are larger and carry proportionally larger bf16 rounding errors
    tolerance = Tolerance(rtol=2e-2, atol=2e-2, row_dims=1)
    signature = {"q": (("B", "H", "SQ", "D"), "bf16"), "k": (("B", "KVH", "SK", "D"), "bf16"),
                 "v": (("B", "KVH", "SK", "D"), "bf16"), "o": (("B", "H", "SQ", "D"), "bf16")}
    anchor_dims = ("B", "H", "KVH", "SQ", "D", "CAUSAL")
    flags = ("CAUSAL",)
    #: batch and sequence lengths: heads, groups and the head dim are the program's own
    for_all_sizes = ("B", "SQ", "SK")
    anchors_file = HERE / "anchors_h200.json"
    #: problem constants a program receives from the shape (not tensor dims)
    problem_consts = ("CAUSAL", "GROUP", "HEAD_DIM", "SCALE")
    #: online softmax, exponent base, causal mask, GQA head map (`invariants.py`)
    invariants = PACK

    def store_coverage_for(self, consts: dict) -> dict:
        """Each output row sums over all its keys once: [0, SK), or [0, query + 1) causally."""
        if consts.get("CAUSAL"):
            return {"o": {"SK": ("0", "min(pos(SQ) + 1, SK)")}}
        return {"o": {"SK": ("0", "SK")}}

    def reduced_shapes(self, sizes: Sizes) -> list[dict]:
        """Small and ragged, with the same causal flag, GQA group and head dim."""
        group = sizes["H"] // sizes["KVH"]
        base = {"B": 1, "H": group, "KVH": 1, "D": sizes["D"],
                "CAUSAL": int(sizes.get("CAUSAL", 0))}
        return [{**base, "SQ": 72, "SK": 72}, {**base, "SQ": 40, "SK": 40}]

    def bind(self, program: Program, sizes: Sizes) -> Program:
        """The program with the problem's constants (causal flag, GQA group, head dim and
        softmax scale) set from the shape."""
        kernel = program.kernel
        values = {"CAUSAL": int(sizes.get("CAUSAL", 0)), "GROUP": sizes["H"] // sizes["KVH"],
                  "HEAD_DIM": sizes["D"], "SCALE": 1.0 / math.sqrt(sizes["D"])}
        for name, value in values.items():
            if kernel.param(name) is not None and kernel.consts[name] != value:
                kernel = with_const(kernel, name, value)
        return program if kernel is program.kernel else Program(kernel)

    def make_inputs(self, program: Program, sizes: Sizes, device, generator) -> dict:
        import torch
        dims = {"q": ("B", "H", "SQ", "D"), "k": ("B", "KVH", "SK", "D"), "v": ("B", "KVH", "SK", "D")}
        return {n: torch.randn([sizes[d] for d in ds], generator=generator, device=device)
                .to(torch.bfloat16) for n, ds in dims.items()}

    def reference(self, inputs: dict, sizes: Sizes) -> dict:
        import torch
        q, k, v = (inputs[n].float() for n in ("q", "k", "v"))
        group = q.shape[1] // k.shape[1]
        k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)
        causal = bool(sizes.get("CAUSAL", 0))
        # the plain math backend in float32: the fused fp32 backends were seen returning
        # exact zeros at a few early causal rows on an H200 (torch 2.11)
        from torch.nn.attention import SDPBackend, sdpa_kernel
        with sdpa_kernel([SDPBackend.MATH]):
            o = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal)
        return {"o": o}

    def flops(self, sizes: Sizes) -> float:
        f = 4.0 * sizes["B"] * sizes["H"] * sizes["SQ"] * sizes["SK"] * sizes["D"]
        return f / 2 if sizes.get("CAUSAL") else f

    def min_bytes(self, sizes: Sizes) -> float:
        b, h, kvh, sq, sk, d = (sizes[x] for x in ("B", "H", "KVH", "SQ", "SK", "D"))
        return 2.0 * (2 * b * h * sq * d + 2 * b * kvh * sk * d)

    def anchor(self, inputs: dict, sizes: Sizes):
        import torch
        from torch.nn.attention import SDPBackend, sdpa_kernel
        q, k, v = inputs["q"], inputs["k"], inputs["v"]
        causal = bool(sizes.get("CAUSAL", 0))
        group = q.shape[1] // k.shape[1]

        def run():
            with sdpa_kernel([SDPBackend.CUDNN_ATTENTION, SDPBackend.FLASH_ATTENTION]):
                return torch.nn.functional.scaled_dot_product_attention(
                    q, k, v, is_causal=causal, enable_gqa=group > 1)
        return run

    def cost_model(self, program: Program, sizes: Sizes, profile) -> dict:
        from .model import estimate
        return estimate(program, sizes, profile)

    @property
    def space(self):
        from .space import SPACE
        return SPACE


TASK = register_task(AttentionTask())
