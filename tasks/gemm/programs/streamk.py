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
    """Stream-K GEMM: one program per SM (or per k step, where there are fewer), each
    taking an equal share of the k steps of all tiles in row-major order; a tile whose k
    steps lie in one program is stored, one split between neighbouring programs is
    added into the zero-filled C by each of them."""
    A.grid(A.minimum(A.num_sms(), A.cdiv(M, BM) * A.cdiv(N, BN) * A.cdiv(K, BK)))
    num_pid_m = A.cdiv(M, BM)
    num_pid_n = A.cdiv(N, BN)
    iters = A.cdiv(K, BK)
    total = num_pid_m * num_pid_n * iters
    per = A.cdiv(total, A.num_programs(0))
    it_lo = A.program_id(0) * per
    it_hi = A.minimum(it_lo + per, total)
    for tile in A.range(it_lo // iters, A.cdiv(it_hi, iters)):
        pid_m = tile // num_pid_n
        pid_n = tile % num_pid_n
        rows = pid_m * BM + A.arange(BM)
        cols = pid_n * BN + A.arange(BN)
        k_lo = (A.maximum(it_lo, tile * iters) - tile * iters) * BK
        k_hi = A.minimum((A.minimum(it_hi, tile * iters + iters) - tile * iters) * BK, K)
        acc = A.zeros((BM, BN), A.f32)
        for k in A.range(k_lo, k_hi, BK):
            ks = k + A.arange(BK)
            a_tile = A.load(a[rows, ks], mask=(rows < M, ks < K), other=0.0)
            b_tile = A.load(b[ks, cols], mask=(ks < K, cols < N), other=0.0)
            acc = A.dot(a_tile, b_tile, acc)
        A.assert_tags(acc, M=rows[:, None], N=cols[None, :], K=A.covers(k_lo, k_hi))
        if (k_lo == 0) & (k_hi == K):
            A.store(c[rows, cols], A.cast(acc, A.bf16), mask=(rows < M, cols < N))
        else:
            A.atomic_add(c[rows, cols], A.cast(acc, A.bf16), mask=(rows < M, cols < N))
