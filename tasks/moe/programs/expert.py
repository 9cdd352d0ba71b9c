from argus_env import dsl as A


@A.kernel(num_warps=8)
def moe(
    x: A.Tensor[A.bf16, "T", "D"],
    w_gate: A.Tensor[A.bf16, "E", "D", "F"],
    w_up: A.Tensor[A.bf16, "E", "D", "F"],
    w_down: A.Tensor[A.bf16, "E", "F", "D"],
    topk_weights: A.Tensor[A.f32, "T", "TOPK"],
    topk_ids: A.Tensor[A.i32, "T", "TOPK"],
    sorted_ids: A.Tensor[A.i32, "P"],
    expert_ids: A.Tensor[A.i32, "NB"],
    out: A.Tensor[A.bf16, "T", "D"],
    h: A.Tensor[A.bf16, "P", "F"],
    BM: A.const = 64,
    BN: A.const = 128,
    BK: A.const = 64,
    KP: A.const = 2,
):
    """MoE expert layer: 64x128x64 tiles, 8 warps, 3 stages, fused gather, SwiGLU, scatter, top-k weight, persistent grouped GEMMs, TMA."""
    # gate/up projection with SwiGLU: one expert per block of sorted rows
    A.grid(A.minimum(A.num_sms(), NB * A.cdiv(F, BN)))
    num_n = A.cdiv(F, BN)
    for tile in A.range(A.program_id(0), NB * num_n, A.num_programs(0)):
        block = tile // num_n
        col0 = tile % num_n * BN
        e = A.load(expert_ids[block])
        if e >= 0:
            pos = block * BM + A.arange(BM)
            cols = col0 + A.arange(BN)
            pair = A.load(sorted_ids[pos])
            valid = pair < T * TOPK
            acc_g = A.zeros((BM, BN), A.f32)
            acc_u = A.zeros((BM, BN), A.f32)
            for k in A.range(0, D, BK, stages=3):
                ks = k + A.arange(BK)
                a = A.load(x[pair // TOPK, ks], mask=(valid, ks < D), other=0.0)
                acc_g = A.dot(a, A.load(w_gate[e, ks, cols], tma=True), acc_g)
                acc_u = A.dot(a, A.load(w_up[e, ks, cols], tma=True), acc_u)
            A.assert_tags(acc_g, P=pos[:, None], F=cols[None, :], D=A.covers(0, D))
            A.store(h[pos, cols], A.cast(acc_g * A.sigmoid(acc_g) * acc_u, A.bf16), tma=True)
    # down projection, scatter to (token, slot) and top-k weighted combine
    A.grid(A.minimum(A.num_sms(), NB * A.cdiv(D, BN)))
    num_n = A.cdiv(D, BN)
    for tile in A.range(A.program_id(0), NB * num_n, A.num_programs(0)):
        block = tile // num_n
        col0 = tile % num_n * BN
        e = A.load(expert_ids[block])
        if e >= 0:
            pos = block * BM + A.arange(BM)
            cols = col0 + A.arange(BN)
            acc = A.zeros((BM, BN), A.f32)
            for k in A.range(0, F, BK, stages=3):
                fs = k + A.arange(BK)
                acc = A.dot(A.load(h[pos, fs], tma=True), A.load(w_down[e, fs, cols], tma=True), acc)
            A.assert_tags(acc, P=pos[:, None], D=cols[None, :], F=A.covers(0, F))
            pair = A.load(sorted_ids[pos])
            valid = pair < T * TOPK
            tok = pair // TOPK
            slot = pair % TOPK
            wt = A.load(topk_weights[tok[:, None], slot[:, None]], mask=valid[:, None], other=0.0)
            A.atomic_add(out[tok[:, None], cols[None, :]], A.cast(acc * wt, A.bf16), mask=valid[:, None] & (cols < D)[None, :])
