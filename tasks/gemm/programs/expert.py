from argus_env import dsl as A


@A.kernel(num_warps=8)
def gemm(
    a: A.Tensor[A.bf16, "M", "K"],
    b: A.Tensor[A.bf16, "K", "N", A.col_major],
    c: A.Tensor[A.bf16, "M", "N"],
    BM: A.const = 128,
    BN: A.const = 256,
    BK: A.const = 64,
    GROUP_M: A.const = 8,
):
    """GEMM for Hopper: a persistent grid of one program per SM walks the output tiles in
    grouped order; A and the k-major B arrive by TMA into a 3-stage pipeline feeding wgmma,
    with the tile loop warp-specialized; C leaves by TMA."""
    A.grid(A.minimum(A.num_sms(), A.cdiv(M, BM) * A.cdiv(N, BN)))
    num_pid_m = A.cdiv(M, BM)
    num_pid_n = A.cdiv(N, BN)
    tiles_per_group = GROUP_M * num_pid_n
    for tile in A.range(A.program_id(0), num_pid_m * num_pid_n, A.num_programs(0),
                        flatten=True, warp_specialize=True):
        first_m = (tile // tiles_per_group) * GROUP_M
        group_m = A.minimum(num_pid_m - first_m, GROUP_M)
        pid_m = first_m + tile % group_m
        pid_n = tile % tiles_per_group // group_m
        rows = pid_m * BM + A.arange(BM)
        cols = pid_n * BN + A.arange(BN)
        acc = A.zeros((BM, BN), A.f32)
        for k in A.range(0, K, BK, stages=3):
            ks = k + A.arange(BK)
            acc = A.dot(A.load(a[rows, ks], tma=True), A.load(b[ks, cols], tma=True), acc,
                        mma=A.wgmma)
        A.assert_tags(acc, M=rows[:, None], N=cols[None, :], K=A.covers(0, K))
        A.store(c[rows, cols], A.cast(acc, A.bf16), tma=True)
