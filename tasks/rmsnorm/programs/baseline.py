from argus_env import dsl as A


@A.kernel(num_warps=4)
def rmsnorm(
    x: A.Tensor[A.bf16, "T", "H"],
    residual: A.Tensor[A.bf16, "T", "H"],
    weight: A.Tensor[A.bf16, "H"],
    out: A.Tensor[A.bf16, "T", "H"],
    residual_out: A.Tensor[A.bf16, "T", "H"],
    BM: A.const = 1,
    BH: A.const = 1024,
    HP: A.const = 4096,
    EPS: A.const = 1e-06,
):
    """Fused residual add + RMSNorm: 1 row per program, two passes of 1024, 4 warps."""
    A.grid(A.cdiv(T, BM))
    blk = A.program_id(0)
    rows = blk * BM + A.arange(BM)
    live = rows < T
    sq = A.zeros((BM,), A.f32)
    for start in A.range(0, H, BH):
        cols = start + A.arange(BH)
        r = A.cast(A.load(x[rows, cols], mask=(live, cols < H), other=0.0), A.f32) + A.cast(A.load(residual[rows, cols], mask=(live, cols < H), other=0.0), A.f32)
        A.store(residual_out[rows, cols], A.cast(r, A.bf16), mask=(live, cols < H))
        sq = sq + A.sum(r * r, 1)
    rstd = 1.0 / A.sqrt(sq / H + EPS)
    for start in A.range(0, H, BH):
        cols = start + A.arange(BH)
        r = A.cast(A.load(x[rows, cols], mask=(live, cols < H), other=0.0), A.f32) + A.cast(A.load(residual[rows, cols], mask=(live, cols < H), other=0.0), A.f32)
        w = A.cast(A.load(weight[cols], mask=cols < H, other=0.0), A.f32)
        A.store(out[rows, cols], A.cast(r * rstd[:, None] * w[None, :], A.bf16), mask=(live, cols < H))
