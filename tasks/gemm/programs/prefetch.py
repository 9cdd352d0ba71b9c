from argus_env import dsl as A


@A.kernel(num_warps=4)
def gemm(
    a: A.Tensor[A.bf16, "M", "K"],
    b: A.Tensor[A.bf16, "K", "N"],
    c: A.Tensor[A.bf16, "M", "N"],
    BM: A.const = 64,
    BN: A.const = 64,
    BK: A.const = 32,
):
    """GEMM with a hand-pipelined prefetch: the A slice for the next k step is loaded
    before the current one is consumed."""
    A.grid(A.cdiv(M, BM), A.cdiv(N, BN))
    pid_m = A.program_id(0)
    pid_n = A.program_id(1)
    rows = pid_m * BM + A.arange(BM)
    cols = pid_n * BN + A.arange(BN)
    acc = A.zeros((BM, BN), A.f32)
    first = A.arange(BK)
    a_next = A.load(a[rows, first], mask=(rows < M, first < K), other=0.0)
    for k in A.range(0, K, BK):
        ks = k + A.arange(BK)
        a_tile = a_next
        ahead = ks + BK
        a_next = A.load(a[rows, ahead], mask=(rows < M, ahead < K), other=0.0)
        b_tile = A.load(b[ks, cols], mask=(ks < K, cols < N), other=0.0)
        acc = A.dot(a_tile, b_tile, acc)
    A.assert_tags(acc, M=rows[:, None], N=cols[None, :], K=A.covers(0, K))
    A.store(c[rows, cols], A.cast(acc, A.bf16), mask=(rows < M, cols < N))
