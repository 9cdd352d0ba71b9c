from argus_env import dsl as A


@A.kernel(num_warps=4)
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
    xs: A.Tensor[A.bf16, "P", "D"],
    g: A.Tensor[A.bf16, "P", "F"],
    u: A.Tensor[A.bf16, "P", "F"],
    h: A.Tensor[A.bf16, "P", "F"],
    y: A.Tensor[A.bf16, "P", "D"],
    ys: A.Tensor[A.bf16, "T", "TOPK", "D"],
    BM: A.const = 64,
    BN: A.const = 64,
    BK: A.const = 32,
    KP: A.const = 2,
):
    """MoE expert layer: 64x64x32 tiles, 4 warps."""
    # gather: token rows into sorted order (padding rows read zeros)
    A.grid(NB, A.cdiv(D, BK))
    pos = A.program_id(0) * BM + A.arange(BM)
    pair = A.load(sorted_ids[pos])
    ds = A.program_id(1) * BK + A.arange(BK)
    rows = A.load(x[pair // TOPK, ds], mask=(pair < T * TOPK, ds < D), other=0.0)
    A.store(xs[pos, ds], rows, mask=(None, ds < D))
    # gate/up projection: one expert per block of sorted rows
    A.grid(NB, A.cdiv(F, BN))
    block = A.program_id(0)
    col0 = A.program_id(1) * BN
    e = A.load(expert_ids[block])
    if e >= 0:
        pos = block * BM + A.arange(BM)
        cols = col0 + A.arange(BN)
        acc_g = A.zeros((BM, BN), A.f32)
        acc_u = A.zeros((BM, BN), A.f32)
        for k in A.range(0, D, BK):
            ks = k + A.arange(BK)
            a = A.load(xs[pos, ks], mask=(None, ks < D), other=0.0)
            acc_g = A.dot(a, A.load(w_gate[e, ks, cols], mask=(None, ks < D, cols < F), other=0.0), acc_g)
            acc_u = A.dot(a, A.load(w_up[e, ks, cols], mask=(None, ks < D, cols < F), other=0.0), acc_u)
        A.assert_tags(acc_g, P=pos[:, None], F=cols[None, :], D=A.covers(0, D))
        A.store(g[pos, cols], A.cast(acc_g, A.bf16), mask=(None, cols < F))
        A.store(u[pos, cols], A.cast(acc_u, A.bf16), mask=(None, cols < F))
    # SwiGLU: h = silu(gate) * up, row by row
    A.grid(NB, A.cdiv(F, BN))
    pos = A.program_id(0) * BM + A.arange(BM)
    cols = A.program_id(1) * BN + A.arange(BN)
    gate = A.cast(A.load(g[pos, cols], mask=(None, cols < F), other=0.0), A.f32)
    up = A.cast(A.load(u[pos, cols], mask=(None, cols < F), other=0.0), A.f32)
    A.store(h[pos, cols], A.cast(gate * A.sigmoid(gate) * up, A.bf16), mask=(None, cols < F))
    # down projection
    A.grid(NB, A.cdiv(D, BN))
    block = A.program_id(0)
    col0 = A.program_id(1) * BN
    e = A.load(expert_ids[block])
    if e >= 0:
        pos = block * BM + A.arange(BM)
        cols = col0 + A.arange(BN)
        acc = A.zeros((BM, BN), A.f32)
        for k in A.range(0, F, BK):
            fs = k + A.arange(BK)
            acc = A.dot(A.load(h[pos, fs], mask=(None, fs < F), other=0.0), A.load(w_down[e, fs, cols], mask=(None, fs < F, cols < D), other=0.0), acc)
        A.assert_tags(acc, P=pos[:, None], D=cols[None, :], F=A.covers(0, F))
        A.store(y[pos, cols], A.cast(acc, A.bf16), mask=(None, cols < D))
    # scatter: each sorted row back to the (token, slot) it came from
    A.grid(NB, A.cdiv(D, BK))
    pos = A.program_id(0) * BM + A.arange(BM)
    pair = A.load(sorted_ids[pos])
    valid = pair < T * TOPK
    ds = A.program_id(1) * BK + A.arange(BK)
    rows = A.load(y[pos, ds], mask=(None, ds < D), other=0.0)
    A.store(ys[(pair // TOPK)[:, None], (pair % TOPK)[:, None], ds[None, :]], rows, mask=valid[:, None] & (ds < D)[None, :])
    # combine: each token's top-k rows weighted by their routing weights
    A.grid(A.cdiv(T, BM), A.cdiv(D, BK))
    toks = A.program_id(0) * BM + A.arange(BM)
    slots = A.arange(KP)
    ds = A.program_id(1) * BK + A.arange(BK)
    wt = A.load(topk_weights[toks[:, None], slots[None, :]], mask=(toks < T)[:, None] & (slots < TOPK)[None, :], other=0.0)
    rows = A.load(ys[toks[:, None, None], slots[None, :, None], ds[None, None, :]], mask=(toks < T)[:, None, None] & (slots < TOPK)[None, :, None] & (ds < D)[None, None, :], other=0.0)
    acc = A.sum(wt[:, :, None] * A.cast(rows, A.f32), 1)
    A.assert_tags(acc, T=toks[:, None], D=ds[None, :], TOPK=A.covers(0, TOPK))
    A.store(out[toks, ds], A.cast(acc, A.bf16), mask=(toks < T, ds < D))
