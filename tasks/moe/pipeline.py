"""The library anchor: the MoE expert layer as a PyTorch pipeline of its best pieces.

sort the (token, slot) pairs by expert -> gather token rows -> `torch._grouped_mm` over the
concatenated gate/up weights -> SwiGLU -> `torch._grouped_mm` with the down weights ->
scale by the top-k weights -> `index_add_` back to token order. Where `torch._grouped_mm`
is unavailable (CPU, older GPUs), one matmul per expert stands in. On the GPU the pipeline
makes no host round trip, so it is timed, like the kernels, by CUDA-graph replay.
"""

from __future__ import annotations


def grouped_mm_available(device) -> bool:
    import torch
    if getattr(device, "type", str(device)) != "cuda" or not hasattr(torch, "_grouped_mm"):
        return False
    return torch.cuda.get_device_capability(device) >= (9, 0)


def prepare(inputs: dict) -> dict:
    """Host-side setup outside the timed region: gate and up weights side by side."""
    import torch
    return {**inputs, "w13": torch.cat([inputs["w_gate"], inputs["w_up"]], dim=2).contiguous(),
            "w2": inputs["w_down"].contiguous()}


def torch_pipeline(inputs: dict):
    """`out[T, D]` (bf16) from x, the expert weights and the top-k ids and weights."""
    import torch
    x, ids, weights = inputs["x"], inputs["topk_ids"], inputs["topk_weights"]
    w13 = inputs.get("w13")
    if w13 is None:
        w13 = torch.cat([inputs["w_gate"], inputs["w_up"]], dim=2)
    w2 = inputs.get("w2", inputs["w_down"])
    tokens, k = ids.shape
    experts, _, f2 = w13.shape
    flat = ids.reshape(-1)
    order = torch.argsort(flat, stable=True)
    tok = order // k
    xs = x.index_select(0, tok)
    # per-expert counts without a host round trip (`bincount` reads the maximum back to
    # size its output, which CUDA-graph capture forbids)
    counts = torch.zeros(experts, dtype=torch.int64, device=x.device).scatter_add_(
        0, flat.long(), torch.ones_like(flat, dtype=torch.int64))
    if grouped_mm_available(x.device):
        offs = torch.cumsum(counts, 0, dtype=torch.int32)
        gu = torch._grouped_mm(xs, w13, offs=offs)
        g, u = gu[:, :f2 // 2], gu[:, f2 // 2:]
        h = (torch.nn.functional.silu(g.float()) * u.float()).to(torch.bfloat16)
        y = torch._grouped_mm(h, w2, offs=offs)
    else:
        y = torch.empty(xs.shape[0], w2.shape[2], dtype=torch.bfloat16, device=x.device)
        start = 0
        for e, n in enumerate(counts.tolist()):
            if n:
                gu = xs[start:start + n].float() @ w13[e].float()
                h = torch.nn.functional.silu(gu[:, :f2 // 2]) * gu[:, f2 // 2:]
                y[start:start + n] = (h.to(torch.bfloat16).float() @ w2[e].float()).to(torch.bfloat16)
            start += n
    y = y.float() * weights.reshape(-1)[order][:, None]
    out = torch.zeros(tokens, x.shape[1], dtype=torch.float32, device=x.device)
    return out.index_add_(0, tok, y).to(torch.bfloat16)
