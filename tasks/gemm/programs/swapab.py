from argus_env import dsl as A


@A.kernel(num_warps=4)
def gemm(
    a: A.Tensor[A.bf16, "M", "K"],
    b: A.Tensor[A.bf16, "K", "N"],
    c: A.Tensor[A.bf16, "M", "N"],
    BM: A.const = 16,
    BN: A.const = 64,
    BK: A.const = 32,
):
    """Swap-AB GEMM for small M: the program computes the transposed tile C^T = B^T A^T,
    so the MMA's rows run over N (wgmma needs 64 per warpgroup) and its small N side over
    M (16 rows here); the tile is stored transposed back into C."""
    A.grid(A.cdiv(M, BM), A.cdiv(N, BN))
    pid_m = A.program_id(0)
    pid_n = A.program_id(1)
    rows = pid_m * BM + A.arange(BM)
    cols = pid_n * BN + A.arange(BN)
    acc = A.zeros((BN, BM), A.f32)
    for k in A.range(0, K, BK):
        ks = k + A.arange(BK)
        a_tile = A.load(a[rows, ks], mask=(rows < M, ks < K), other=0.0)
        b_tile = A.load(b[ks, cols], mask=(ks < K, cols < N), other=0.0)
        acc = A.dot(A.trans(b_tile), A.trans(a_tile), acc)
    A.assert_tags(acc, M=rows[None, :], N=cols[:, None], K=A.covers(0, K))
    A.store(c[rows, cols], A.cast(A.trans(acc), A.bf16), mask=(rows < M, cols < N))
