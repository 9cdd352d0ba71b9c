"""The routing step of an MoE layer, on the host in PyTorch: top-k over router logits, then
sorting the (token, slot) pairs by expert and aligning each expert's run to the block size.

    weights, ids = topk(logits, TOPK)                 # [T, TOPK] f32, [T, TOPK] i32
    sorted_ids, expert_ids = align(ids, E, BM)        # [P] i32, [P // BM] i32

`sorted_ids[p]` is the pair index `token * TOPK + slot` routed to position p, or the padding
sentinel `T * TOPK`; every block of BM positions belongs to one expert, `expert_ids[b]`, or to
none (-1: a block past the last expert's run). These are the postconditions the invariant
checker assumes of the arrays (`invariants.py`); `check_postconditions` tests them
on real arrays.
"""

from __future__ import annotations

SKEW = 1.5  # Zipf-like popularity exponent of skewed routing (see router_logits)


def padded_rows(tokens: int, experts: int, topk: int, block: int) -> int:
    """Positions of the aligned array: every pair, plus at most block - 1 padding rows for
    each expert that receives a token (at most min(E, T * TOPK) of them), in whole blocks."""
    pairs = tokens * topk
    rows = pairs + min(experts, pairs) * (block - 1)
    return -(-rows // block) * block


def router_logits(tokens: int, experts: int, skew: float, generator, device="cpu"):
    """Seeded router logits: balanced (skew 0: every expert equally likely) or skewed (a
    Zipf-like popularity bias over a random order of experts: a few experts take most tokens
    and several receive none)."""
    import torch
    logits = torch.randn(tokens, experts, generator=generator, device=device)
    if skew:
        order = torch.randperm(experts, generator=generator, device=device)
        rank = torch.empty_like(order)
        rank[order] = torch.arange(experts, device=device)
        logits = logits - skew * torch.log1p(rank.float())[None, :] * 2.0
    return logits


def topk(logits, k: int):
    """Top-k experts per token and their weights: a softmax over the k selected logits
    (Mixtral's rule; equal to Qwen3-MoE's renormalised softmax over all experts)."""
    import torch
    vals, ids = torch.topk(logits.float(), k, dim=-1)
    return torch.softmax(vals, dim=-1).float(), ids.to(torch.int32)


def align(ids, experts: int, block: int, rows: int | None = None):
    """`sorted_ids[P]` and `expert_ids[P // block]` for top-k expert ids `[T, TOPK]`."""
    import torch
    tokens, k = ids.shape
    pairs = tokens * k
    rows = padded_rows(tokens, experts, k, block) if rows is None else rows
    device = ids.device
    flat = ids.reshape(-1).long()
    counts = torch.bincount(flat, minlength=experts)
    padded = (counts + block - 1) // block * block
    starts = torch.cumsum(padded, 0) - padded                # aligned start of each expert
    order = torch.sort(flat, stable=True).indices            # pairs grouped by expert
    first = torch.cumsum(counts, 0) - counts                 # compact start of each expert
    expert_of = flat[order]
    rank = torch.arange(pairs, device=device) - first[expert_of]
    sorted_ids = torch.full((rows,), pairs, dtype=torch.int32, device=device)
    sorted_ids[starts[expert_of] + rank] = order.to(torch.int32)
    expert_ids = torch.full((rows // block,), -1, dtype=torch.int32, device=device)
    used = torch.repeat_interleave(torch.arange(experts, device=device), padded // block)
    expert_ids[:used.numel()] = used.to(torch.int32)
    return sorted_ids, expert_ids


def align_numpy(ids, experts: int, block: int, rows: int | None = None):
    """`align` of top-k expert ids given as a numpy array `[T, TOPK]`, in numpy: the same
    arrays (`tests/tasks/test_moe_task.py` holds them equal), as int32 numpy arrays. The
    checker's realiser asks it of a few small choices per counterexample, where torch's
    intra-op threads cost more than the work (milliseconds a call on a loaded 2-core
    machine)."""
    import numpy as np
    tokens, k = ids.shape
    pairs = tokens * k
    rows = padded_rows(tokens, experts, k, block) if rows is None else rows
    flat = np.asarray(ids).reshape(-1).astype(np.int64)
    counts = np.bincount(flat, minlength=experts)
    padded = (counts + block - 1) // block * block
    starts = np.cumsum(padded) - padded                      # aligned start of each expert
    order = np.argsort(flat, kind="stable")                  # pairs grouped by expert
    first = np.cumsum(counts) - counts                       # compact start of each expert
    expert_of = flat[order]
    rank = np.arange(pairs) - first[expert_of]
    sorted_ids = np.full((rows,), pairs, dtype=np.int32)
    sorted_ids[starts[expert_of] + rank] = order.astype(np.int32)
    expert_ids = np.full((rows // block,), -1, dtype=np.int32)
    used = np.repeat(np.arange(experts), padded // block)
    expert_ids[:used.size] = used.astype(np.int32)
    return sorted_ids, expert_ids


def check_postconditions(ids, sorted_ids, expert_ids, experts: int, block: int) -> None:
    """Raise AssertionError unless the arrays satisfy the routing postconditions."""
    import torch
    tokens, k = ids.shape
    pad = tokens * k
    sid, bexp = sorted_ids.long().cpu(), expert_ids.long().cpu()
    assert sid.numel() == bexp.numel() * block, "sorted_ids is not whole blocks"
    assert bool(((bexp >= -1) & (bexp < experts)).all()), "an expert id out of [-1, E)"
    real = sid != pad
    assert bool(((sid >= 0) & (sid <= pad)).all()), "a pair index out of range"
    assert torch.equal(torch.sort(sid[real]).values, torch.arange(pad)), \
        "sorted_ids is not a permutation of the pairs plus padding"
    flat = ids.reshape(-1).long().cpu()
    block_of = torch.arange(sid.numel()) // block
    assert torch.equal(flat[sid[real]], bexp[block_of[real]]), \
        "a pair sits in a block of another expert"
