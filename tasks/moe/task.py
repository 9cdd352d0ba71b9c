"""The MoE task: the expert layer of a mixture-of-experts block in bf16.

    out[t] = sum over slots k of  w[t, k] * (silu(x[t] @ Wg[e]) * (x[t] @ Wu[e])) @ Wd[e],
             e = ids[t, k]

The routing step (`routing.py`: top-k over router logits, pairs sorted by expert, each
expert's run aligned to the program's block size BM) runs on the host in PyTorch; the DSL
program consumes its arrays. Its postconditions are what the invariant checker assumes of
them (`invariants.py`, the task's invariant pack).
"""

from __future__ import annotations

from pathlib import Path

from argus_env.dsl.program import Program
from argus_env.ir.rewrite import with_const
from argus_env.task import ShapeCase, Sizes, Task, Tolerance, register_task

from . import routing
from .routing import SKEW
from .invariants import PACK

HERE = Path(__file__).parent
MODELS = {  # E experts, top-k, hidden D, expert FFN width F
    "mixtral": (8, 2, 4096, 14336),      # Mixtral-8x7B
    "qwen3": (128, 8, 2048, 768),        # Qwen3-30B-A3B
    "deepseek": (256, 8, 7168, 2048),    # DeepSeek-V3 routed experts
}


def _case(model: str, phase: str, tokens: int, skew: bool, split: str = "train") -> ShapeCase:
    e, k, d, f = MODELS[model]
    name = f"{model}-{phase}-{tokens}-{'skewed' if skew else 'balanced'}"
    return ShapeCase(name, {"T": tokens, "D": d, "F": f, "E": e, "TOPK": k, "SKEW": int(skew)},
                     split)


def _pow2(n: int) -> int:
    return 1 << max(1, (n - 1).bit_length())


class MoETask(Task):
    name = "moe"
    description = ("Mixture-of-experts expert layer in bf16: routing arrays from the top-k of "
                   "router logits (sorted by expert, block-aligned), gate/up projections with "
                   "SwiGLU, the down projection, and the top-k weighted combine back to token "
                   "order; the library anchor is a PyTorch pipeline of sort/gather, grouped "
                   "GEMMs and index_add.")
    programs = {p.stem: p for p in sorted((HERE / "programs").glob("*.py"),
                                          key=lambda p: (p.stem not in ("baseline", "expert"), p.stem))}
    shapes = (
        _case("mixtral", "prefill", 8192, False),
        _case("mixtral", "prefill", 8192, True),
        _case("mixtral", "decode", 16, False),
        _case("mixtral", "decode", 16, True, split="test"),
        _case("qwen3", "prefill", 16384, False),
        _case("qwen3", "prefill", 16384, True, split="test"),
        _case("qwen3", "decode", 256, False, split="test"),
        _case("qwen3", "decode", 256, True),
        _case("deepseek", "prefill", 4096, False, split="test"),
        _case("deepseek", "prefill", 4096, True),
        _case("deepseek", "decode", 64, False),
        _case("deepseek", "decode", 64, True),
    )
    # small and ragged: D, F not multiples of the tiles' 64, tokens not of BM; skewed
    # routing leaves experts without tokens. D and F stay multiples of 8 (TMA's 16 bytes).
    cpu_shapes = (
        {"T": 24, "D": 96, "F": 80, "E": 4, "TOPK": 2, "SKEW": 0},
        {"T": 40, "D": 72, "F": 136, "E": 8, "TOPK": 2, "SKEW": 1},
        {"T": 13, "D": 64, "F": 48, "E": 6, "TOPK": 3, "SKEW": 1},
        {"T": 33, "D": 80, "F": 96, "E": 16, "TOPK": 4, "SKEW": 0},
    )
    env_check_shape = {"T": 24, "D": 96, "F": 80, "E": 4, "TOPK": 2, "SKEW": 0}
    # bf16 rounding of two intermediate products and of the top-k atomic adds
    tolerance = Tolerance(rtol=3e-2, atol=3e-2)
    signature = {"x": (("T", "D"), "bf16"), "w_gate": (("E", "D", "F"), "bf16"),
                 "w_up": (("E", "D", "F"), "bf16"), "w_down": (("E", "F", "D"), "bf16"),
                 "topk_weights": (("T", "TOPK"), "f32"), "topk_ids": (("T", "TOPK"), "i32"),
                 "sorted_ids": (("P",), "i32"), "expert_ids": (("NB",), "i32"),
                 "out": (("T", "D"), "bf16")}
    # every output element sums its token's top-k slots once each
    store_coverage = {"out": {"TOPK": ("0", "TOPK")}}
    anchor_dims = ("T", "D", "F", "E", "TOPK", "SKEW")
    anchors_file = HERE / "anchors_h200.json"
    problem_consts = ("KP",)
    #: expert, scatter, combine, padding under the routing step's postconditions
    invariants = PACK

    # ------------------------------------------------------------ sizes and constants
    #: router logits the routing step may draw (T x E floats; the largest listed shape
    #: draws 2**21)
    MAX_ROUTER_LOGITS = 2**26
    flags = ("SKEW",)

    def check_sizes(self, sizes: Sizes) -> None:
        if sizes["TOPK"] > sizes["E"]:
            raise ValueError(f"moe: TOPK={sizes['TOPK']} experts per token, but only "
                             f"E={sizes['E']} experts")
        if sizes["T"] * sizes["E"] > self.MAX_ROUTER_LOGITS:
            raise ValueError(f"moe: the routing step would draw T x E = "
                             f"{sizes['T'] * sizes['E']:,} router logits; at most "
                             f"{self.MAX_ROUTER_LOGITS:,} (2**26)")

    def program_sizes(self, program: Program, sizes: Sizes) -> dict:
        """The shape's sizes plus the routing step's: P sorted rows padded to the program's
        block size BM, in NB blocks."""
        out = dict(sizes)
        bm = int(program.kernel.consts.get("BM", 64))
        out["P"] = routing.padded_rows(sizes["T"], sizes["E"], sizes["TOPK"], bm)
        out["NB"] = out["P"] // bm
        return out

    def bind(self, program: Program, sizes: Sizes) -> Program:
        """KP: the top-k slots rounded up to a power of two (a tile extent)."""
        kernel = program.kernel
        if kernel.param("KP") is not None and kernel.consts["KP"] != _pow2(sizes["TOPK"]):
            kernel = with_const(kernel, "KP", _pow2(sizes["TOPK"]))
        return program if kernel is program.kernel else Program(kernel)

    def reduced_shapes(self, sizes: Sizes) -> list[dict]:
        """Small shapes with the episode's top-k and routing skew."""
        k, skew = sizes["TOPK"], int(sizes.get("SKEW", 0))
        return [{"T": 12, "D": 48, "F": 40, "E": max(k + 2, 4), "TOPK": k, "SKEW": skew},
                {"T": 9, "D": 32, "F": 24, "E": max(k + 1, 6), "TOPK": k, "SKEW": 1 - skew}]

    # ------------------------------------------------------------ data
    def route(self, sizes: Sizes, block: int, device, generator) -> dict:
        """Router logits drawn from the shape's distribution, through the routing step."""
        logits = routing.router_logits(sizes["T"], sizes["E"], SKEW * int(sizes.get("SKEW", 0)),
                                       generator, device)
        weights, ids = routing.topk(logits, sizes["TOPK"])
        sorted_ids, expert_ids = routing.align(ids, sizes["E"], block,
                                               routing.padded_rows(sizes["T"], sizes["E"],
                                                                   sizes["TOPK"], block))
        return {"topk_weights": weights, "topk_ids": ids, "sorted_ids": sorted_ids,
                "expert_ids": expert_ids}

    def make_inputs(self, program: Program, sizes: Sizes, device, generator) -> dict:
        import torch
        t, d, f, e = sizes["T"], sizes["D"], sizes["F"], sizes["E"]
        block = int(program.kernel.consts.get("BM", 64)) if program is not None else 64

        def randn(*shape, scale=1.0):
            return (torch.randn(*shape, generator=generator, device=device) * scale) \
                .to(torch.bfloat16)
        # weights scaled so activations stay O(1) through both projections
        out = {"x": randn(t, d), "w_gate": randn(e, d, f, scale=d ** -0.5),
               "w_up": randn(e, d, f, scale=d ** -0.5), "w_down": randn(e, f, d, scale=f ** -0.5)}
        out.update(self.route(sizes, block, device, generator))
        return out

    def reference(self, inputs: dict, sizes: Sizes) -> dict:
        """Float32, token by token per expert, from the top-k ids and weights alone (not
        from the sorted layout the kernels read)."""
        import torch
        x = inputs["x"].float()
        ids, weights = inputs["topk_ids"].long(), inputs["topk_weights"].float()
        out = torch.zeros_like(x)
        for e in torch.unique(ids).tolist():
            tok, slot = torch.nonzero(ids == e, as_tuple=True)
            xe = x[tok]
            h = torch.nn.functional.silu(xe @ inputs["w_gate"][e].float()) * \
                (xe @ inputs["w_up"][e].float())
            y = h @ inputs["w_down"][e].float()
            out.index_add_(0, tok, y * weights[tok, slot][:, None])
        return {"out": out}

    def flops(self, sizes: Sizes) -> float:
        """Useful work: three projections of every (token, slot) pair."""
        return 6.0 * sizes["T"] * sizes["TOPK"] * sizes["D"] * sizes["F"]

    def min_bytes(self, sizes: Sizes) -> float:
        """Tokens in and out, plus the weights of the fewest experts any routing uses (a
        token's TOPK distinct experts): a lower bound whatever the routing."""
        t, d, f, k = (sizes[n] for n in ("T", "D", "F", "TOPK"))
        return 2.0 * (2 * t * d + 3 * k * d * f)

    def anchor(self, inputs: dict, sizes: Sizes):
        from .pipeline import prepare, torch_pipeline
        ready = prepare(inputs)
        return lambda: torch_pipeline(ready)

    def cost_model(self, program: Program, sizes: Sizes, profile) -> dict:
        from .model import estimate
        return estimate(program, sizes, profile)

    @property
    def space(self):
        from .space import SPACE
        return SPACE


TASK = register_task(MoETask())
