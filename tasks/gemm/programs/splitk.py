from argus_env import dsl as A


@A.kernel(num_warps=4)
def gemm(
    a: A.Tensor[A.bf16, "M", "K"],
    b: A.Tensor[A.bf16, "K", "N"],
    c: A.Tensor[A.bf16, "M", "N"],
    BM: A.const = 64,
    BN: A.const = 64,
    BK: A.const = 32,
    SPLIT_K: A.const = 4,
):
    """Split-K GEMM for small M: a third grid axis splits the K loop into SPLIT_K ranges,
    and the partial products are combined with atomic adds into C."""
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
    A.atomic_add(c[rows, cols], A.cast(acc, A.bf16), mask=(rows < M, cols < N))
