from argus_env import dsl as A


@A.kernel(num_warps=4)
def gemm(
    a: A.Tensor[A.bf16, "M", "K"],
    b: A.Tensor[A.bf16, "K", "N"],
    c: A.Tensor[A.bf16, "M", "N"],
    partial: A.Tensor[A.f32, "SPLIT_K", "M", "N"],
    BM: A.const = 64,
    BN: A.const = 64,
    BK: A.const = 32,
    SPLIT_K: A.const = 4,
    RM: A.const = 32,
    RN: A.const = 64,
):
    """Split-K GEMM with a reduction pass: SPLIT_K programs per output tile each sum one
    range of K into a float32 workspace; a second launch, one program per RM x RN output
    tile, sums the partials into C (the catalog's `split_k(4)` then `combine('reduce')`)."""
    A.grid(A.cdiv(M, BM), A.cdiv(N, BN), SPLIT_K)
    pid_m = A.program_id(0)
    pid_n = A.program_id(1)
    rows = pid_m * BM + A.arange(BM)
    cols = pid_n * BN + A.arange(BN)
    pid_k = A.program_id(2)
    k_per_split = A.cdiv(A.cdiv(K, BK), SPLIT_K) * BK
    k_lo = pid_k * k_per_split
    k_hi = A.minimum(k_lo + k_per_split, K)
    acc = A.zeros((BM, BN), A.f32)
    for k in A.range(k_lo, k_hi, BK):
        ks = k + A.arange(BK)
        a_tile = A.load(a[rows, ks], mask=(rows < M, ks < k_hi), other=0.0)
        b_tile = A.load(b[ks, cols], mask=(ks < k_hi, cols < N), other=0.0)
        acc = A.dot(a_tile, b_tile, acc)
    A.assert_tags(acc, M=rows[:, None], N=cols[None, :], K=A.covers(k_lo, k_hi))
    A.store(partial[pid_k, rows, cols], acc, mask=(None, rows < M, cols < N))
    # the reduction pass: one program per RM x RN output tile sums the SPLIT_K partials
    A.grid(A.cdiv(M, RM), A.cdiv(N, RN))
    pid_m = A.program_id(0)
    pid_n = A.program_id(1)
    rows = pid_m * RM + A.arange(RM)
    cols = pid_n * RN + A.arange(RN)
    splits = A.arange(SPLIT_K)
    parts = A.load(partial[splits[:, None, None], rows[None, :, None], cols[None, None, :]],
                   mask=(rows < M)[None, :, None] & (cols < N)[None, None, :], other=0.0)
    total = A.sum(parts, 0)
    A.assert_tags(total, M=rows[:, None], N=cols[None, :], K=A.covers(0, K))
    A.store(c[rows, cols], A.cast(total, A.bf16), mask=(rows < M, cols < N))
