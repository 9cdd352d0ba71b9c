from argus_env import dsl as A


@A.kernel(num_warps=8)
def attention(
    q: A.Tensor[A.bf16, "B", "H", "SQ", "D"],
    k: A.Tensor[A.bf16, "B", "KVH", "SK", "D"],
    v: A.Tensor[A.bf16, "B", "KVH", "SK", "D"],
    o: A.Tensor[A.bf16, "B", "H", "SQ", "D"],
    BM: A.const = 128,
    BN: A.const = 64,
    HEAD_DIM: A.const = 128,
    GROUP: A.const = 1,
    CAUSAL: A.const = 0,
    SCALE: A.const = 0.08838834764831845,
):
    """Attention forward for Hopper: Q, K, V and O move by TMA; exp2 with log2(e) folded
    into the scale; causal programs skip the key blocks after their diagonal and mask only
    the diagonal block; K/V loads are software-pipelined."""
    A.grid(A.cdiv(SQ, BM), B * H)
    pid_m = A.program_id(0)
    bh = A.program_id(1)
    b = bh // H
    h = bh % H
    kvh = h // GROUP
    rows = pid_m * BM + A.arange(BM)
    ds = A.arange(HEAD_DIM)
    qk_scale = SCALE * 1.4426950408889634
    q_tile = A.load(q[b, h, rows, ds], tma=True)
    m_i = A.full((BM,), -1.0e30, A.f32)
    l_i = A.zeros((BM,), A.f32)
    acc = A.zeros((BM, HEAD_DIM), A.f32)
    diagonal = A.minimum(pid_m * BM, SK)
    stop = SK + (diagonal - SK) * CAUSAL
    for start in A.range(0, stop, BN, stages=3):
        cols = start + A.arange(BN)
        s = A.dot(q_tile, A.trans(A.load(k[b, kvh, cols, ds], tma=True))) * qk_scale
        s = A.where((cols < SK)[None, :], s, -1.0e30)
        m_new = A.maximum(m_i, A.max(s, 1))
        p = A.exp2(s - m_new[:, None])
        alpha = A.exp2(m_i - m_new)
        l_i = l_i * alpha + A.sum(p, 1)
        acc = A.dot(A.cast(p, A.bf16), A.load(v[b, kvh, cols, ds], tma=True), acc * alpha[:, None])
        m_i = m_new
    if CAUSAL == 1:
        for start in A.range(diagonal, A.minimum(diagonal + BM, SK), BN, stages=3):
            cols = start + A.arange(BN)
            s = A.dot(q_tile, A.trans(A.load(k[b, kvh, cols, ds], tma=True))) * qk_scale
            s = A.where((cols[None, :] <= rows[:, None]) & (cols < SK)[None, :], s, -1.0e30)
            m_new = A.maximum(m_i, A.max(s, 1))
            p = A.exp2(s - m_new[:, None])
            alpha = A.exp2(m_i - m_new)
            l_i = l_i * alpha + A.sum(p, 1)
            acc = A.dot(A.cast(p, A.bf16), A.load(v[b, kvh, cols, ds], tma=True), acc * alpha[:, None])
            m_i = m_new
    out = acc / l_i[:, None]
    A.store(o[b, h, rows, ds], A.cast(out, A.bf16), tma=True)
