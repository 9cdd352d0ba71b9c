"""The GEMM configuration space: one dataclass, one template, the transformation catalog.

`GemmConfig` names every choice a GEMM program makes here; `render` writes the program
(the baseline, expert, split-K, split-K with a reduction pass, swap-AB and stream-K
programs in `programs/` are renderings of configs, which a test checks). Transformations
are edits of one field each, with preconditions on the configuration, the problem shape
and the target (`argus_env.space`'s toolkit).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from argus_env.measure.features import TRITON_DEFAULT_STAGES
from argus_env.measure.legality import table_reason
from argus_env.resources import Footprint, dot_footprint
from argus_env.space import TaskSpace, Transform, edit, kernel_header, resource_reason, target_of


@dataclass(frozen=True)
class GemmConfig:
    block_m: int = 64
    block_n: int = 64
    block_k: int = 32
    num_warps: int = 4
    stages: int | None = None      # None: Triton's default pipelining
    group_m: int = 1               # grouped tile order for L2 reuse (1 = row-major)
    split_k: int = 1
    combine: str | None = None     # how split-K partials combine: None (not yet), "atomic"
                                   # (bf16 atomic adds into C) or "reduce" (float32 partials
                                   # in a workspace, summed into C by a second launch)
    persistent: bool = False       # one program per SM walking the tiles
    tma: bool = False              # TMA tensor-descriptor loads and store
    warp_specialize: bool = False  # producer/consumer warps on the persistent tile loop
    kmajor_b: bool = False         # B stored k-major (column-major)
    subtile: int = 1               # output tile split into column halves, each with its
                                   # own accumulator and store (smaller epilogue)
    swap_ab: bool = False          # C^T = B^T A^T: the tile's N side feeds the MMA's M
                                   # (>= 64 rows for wgmma), its M side the MMA's small N
    stream_k: bool = False         # a persistent grid sharing every tile's k steps evenly;
                                   # tiles split between programs are fixed up by atomic adds

    def summary(self) -> str:
        parts = [f"{self.block_m}x{self.block_n}x{self.block_k} tiles", f"{self.num_warps} warps"]
        if self.stages:
            parts.append(f"{self.stages}-stage pipeline")
        if self.group_m > 1:
            parts.append(f"grouped tile order ({self.group_m})")
        if self.split_k > 1:
            parts.append(f"split-K x{self.split_k}" + (f" with {self.combine} combine"
                                                        if self.combine else " (uncombined)"))
        if self.subtile > 1:
            parts.append(f"epilogue in {self.subtile} column subtiles")
        for flag, text in ((self.persistent, "persistent grid"), (self.tma, "TMA"),
                           (self.warp_specialize, "warp-specialized"),
                           (self.kmajor_b, "k-major B"), (self.swap_ab, "swapped A and B"),
                           (self.stream_k, "stream-K")):
            if flag:
                parts.append(text)
        return ", ".join(parts)


BASELINE = GemmConfig()
EXPERT = GemmConfig(128, 256, 64, 8, 3, 8, persistent=True, tma=True, warp_specialize=True,
                    kmajor_b=True)
SPLITK = GemmConfig(split_k=4, combine="atomic")
SPLITK_REDUCE = GemmConfig(split_k=4, combine="reduce")
SWAPAB = GemmConfig(block_m=16, swap_ab=True)
STREAMK = GemmConfig(stream_k=True)
#: swap-AB, stream-K and split-K-with-reduction-pass configurations for small and ragged
#: shapes, by name: what the GPU
#: scripts time (`benchmarks/gemm_suite.py --configs`, `record_gemm_table.py
#: --small-shapes`, `record_programs.py plan --configs small-shapes`) and what the tests
#: check and compile for sm_90 at every suite shape where the mask allows them
SMALL_SHAPES = {
    "swap-16x128x128": GemmConfig(16, 128, 128, 4, 4, tma=True, kmajor_b=True, swap_ab=True),
    "swap-32x128x128": GemmConfig(32, 128, 128, 4, 4, tma=True, kmajor_b=True, swap_ab=True),
    "swap-64x128x64": GemmConfig(64, 128, 64, 4, 4, tma=True, kmajor_b=True, swap_ab=True),
    "swap-32x256x64": GemmConfig(32, 256, 64, 8, 3, tma=True, kmajor_b=True, swap_ab=True),
    "swap-16x64x128-plain": GemmConfig(16, 64, 128, 4, 4, swap_ab=True),
    "swap-splitk4-16x128x128": GemmConfig(16, 128, 128, 4, 4, split_k=4, combine="atomic",
                                          tma=True, kmajor_b=True, swap_ab=True),
    "sk-128x128x64": GemmConfig(128, 128, 64, 8, 3, tma=True, kmajor_b=True, stream_k=True),
    "sk-128x256x64": GemmConfig(128, 256, 64, 8, 3, tma=True, kmajor_b=True, stream_k=True),
    "sk-64x128x64": GemmConfig(64, 128, 64, 4, 4, tma=True, kmajor_b=True, stream_k=True),
    "sk-128x128x64-plain": GemmConfig(128, 128, 64, 8, 3, stream_k=True),
    "swap-sk-32x128x128": GemmConfig(32, 128, 128, 4, 4, tma=True, kmajor_b=True, swap_ab=True,
                                     stream_k=True),
    "swap-sk-64x128x64": GemmConfig(64, 128, 64, 4, 3, tma=True, kmajor_b=True, swap_ab=True,
                                    stream_k=True),
    "red2-128x256x64": GemmConfig(128, 256, 64, 8, 3, split_k=2, combine="reduce", tma=True,
                                  kmajor_b=True),
    "red2-128x128x64": GemmConfig(128, 128, 64, 8, 3, split_k=2, combine="reduce", tma=True,
                                  kmajor_b=True),
    "red4-64x128x64-plain": GemmConfig(64, 128, 64, 4, 3, split_k=4, combine="reduce"),
    "swap-red4-16x128x128": GemmConfig(16, 128, 128, 4, 4, split_k=4, combine="reduce",
                                       tma=True, kmajor_b=True, swap_ab=True),
}
#: stream-K spreads the k steps of at most this many waves of tiles (one wave: one tile
#: per SM): past that the last wave's imbalance is a small share of the work, and the
#: checker's enumeration of the tile segments (one per program and tile it touches,
#: `argus_env.check.symbolic.tiles.LIMIT`) would outgrow its bound
STREAM_K_WAVES = 8


# ---------------------------------------------------------------- rendering
def render(c: GemmConfig) -> str:
    consts = {"BM": c.block_m, "BN": c.block_n, "BK": c.block_k}
    if c.group_m > 1:
        consts["GROUP_M"] = c.group_m
    if c.split_k > 1:
        consts["SPLIT_K"] = c.split_k
    reduce = c.split_k > 1 and c.combine == "reduce"
    if reduce:
        consts["RM"], consts["RN"] = reduce_tile(c)
    head = kernel_header("gemm", SPACE.signature, consts, c.num_warps, f"GEMM: {c.summary()}.",
                         orders={"b": "col_major"} if c.kmajor_b else None,
                         workspaces=[WORKSPACE] if reduce else ())
    body = _grid(c) + _tile_loop(c) + (_reduce_pass() if reduce else [])
    return head + "\n".join("    " + b if b else b for b in body) + "\n"


#: the float32 partial sums of a split-K program combined by a reduction pass, one
#: M x N slice per split
WORKSPACE = ("partial", ("SPLIT_K", "M", "N"), "f32")
#: elements of the partial-sum block one program of the reduction pass loads at once
#: (SPLIT_K x RM x RN): 64 float32 values per thread at 4 warps
REDUCE_ELEMENTS = 8192


def reduce_tile(c: GemmConfig) -> tuple[int, int]:
    """The reduction pass's output tile (RM x RN): 64 columns (256 contiguous bytes per
    partial row) and as many rows as keep the SPLIT_K partials of the tile in registers."""
    return max(1, REDUCE_ELEMENTS // (64 * c.split_k)), 64


def _reduce_pass() -> list[str]:
    """The second launch: one program per RM x RN output tile sums the SPLIT_K float32
    partials and stores the bf16 result."""
    return ["# the reduction pass: the SPLIT_K partials of each output tile summed into C",
            "A.grid(A.cdiv(M, RM), A.cdiv(N, RN))",
            "pid_m = A.program_id(0)", "pid_n = A.program_id(1)",
            "rows = pid_m * RM + A.arange(RM)", "cols = pid_n * RN + A.arange(RN)",
            "splits = A.arange(SPLIT_K)",
            "parts = A.load(partial[splits[:, None, None], rows[None, :, None], "
            "cols[None, None, :]], mask=(rows < M)[None, :, None] & (cols < N)[None, None, :], "
            "other=0.0)",
            "total = A.sum(parts, 0)",
            "A.assert_tags(total, M=rows[:, None], N=cols[None, :], K=A.covers(0, K))",
            "A.store(c[rows, cols], A.cast(total, A.bf16), mask=(rows < M, cols < N))"]


def _grid(c: GemmConfig) -> list[str]:
    tiles = "A.cdiv(M, BM) * A.cdiv(N, BN)"
    split = ", SPLIT_K" if c.split_k > 1 else ""
    if c.stream_k:   # one program per SM, or per k step where there are fewer
        return [f"A.grid(A.minimum(A.num_sms(), {tiles} * A.cdiv(K, BK)))",
                "num_pid_m = A.cdiv(M, BM)", "num_pid_n = A.cdiv(N, BN)"]
    if c.persistent:
        return [f"A.grid(A.minimum(A.num_sms(), {tiles}))",
                "num_pid_m = A.cdiv(M, BM)", "num_pid_n = A.cdiv(N, BN)"]
    if c.group_m > 1:
        return [f"A.grid({tiles}{split})", "num_pid_m = A.cdiv(M, BM)",
                "num_pid_n = A.cdiv(N, BN)", "tile = A.program_id(0)"]
    return [f"A.grid(A.cdiv(M, BM), A.cdiv(N, BN){split})",
            "pid_m = A.program_id(0)", "pid_n = A.program_id(1)"]


def _swizzle(c: GemmConfig) -> list[str]:
    if c.group_m > 1:
        return ["first_m = (tile // tiles_per_group) * GROUP_M",
                "group_m = A.minimum(num_pid_m - first_m, GROUP_M)",
                "pid_m = first_m + tile % group_m",
                "pid_n = tile % tiles_per_group // group_m"]
    return ["pid_m = tile // num_pid_n", "pid_n = tile % num_pid_n"]


def _tile_loop(c: GemmConfig) -> list[str]:
    if c.stream_k:
        # the flattened k steps of all tiles, [it_lo, it_hi) of them for this program: the
        # tiles it touches, each over the k steps it owns
        return ["iters = A.cdiv(K, BK)", "total = num_pid_m * num_pid_n * iters",
                "per = A.cdiv(total, A.num_programs(0))", "it_lo = A.program_id(0) * per",
                "it_hi = A.minimum(it_lo + per, total)",
                "for tile in A.range(it_lo // iters, A.cdiv(it_hi, iters)):"] + \
            ["    " + x for x in _swizzle(c) + _tile(c)]
    if c.persistent:
        head = ["tiles_per_group = GROUP_M * num_pid_n"] if c.group_m > 1 else []
        ws = ", warp_specialize=True" if c.warp_specialize else ""
        head.append("for tile in A.range(A.program_id(0), num_pid_m * num_pid_n, "
                    f"A.num_programs(0), flatten=True{ws}):")
        return head + ["    " + x for x in _swizzle(c) + _tile(c)]
    if c.group_m > 1:
        return ["tiles_per_group = GROUP_M * num_pid_n"] + _swizzle(c) + _tile(c)
    return _tile(c)


def _tile(c: GemmConfig) -> list[str]:
    if c.subtile > 1:
        return _subtiled(c)
    out = ["rows = pid_m * BM + A.arange(BM)", "cols = pid_n * BN + A.arange(BN)"]
    lo, hi, bound = "0", "K", "K"
    if c.split_k > 1:
        axis = 1 if c.group_m > 1 else 2
        out += [f"pid_k = A.program_id({axis})",
                "k_per_split = A.cdiv(A.cdiv(K, BK), SPLIT_K) * BK",
                "k_lo = pid_k * k_per_split", "k_hi = A.minimum(k_lo + k_per_split, K)"]
        lo, hi, bound = "k_lo", "k_hi", "k_hi"
    if c.stream_k:
        out += ["k_lo = (A.maximum(it_lo, tile * iters) - tile * iters) * BK",
                "k_hi = A.minimum((A.minimum(it_hi, tile * iters + iters) - tile * iters) * BK, K)"]
        lo, hi = "k_lo", "k_hi"
    stages = f", stages={c.stages}" if c.stages else ""
    shape = "(BN, BM)" if c.swap_ab else "(BM, BN)"
    out += [f"acc = A.zeros({shape}, A.f32)", f"for k in A.range({lo}, {hi}, BK{stages}):",
            "    ks = k + A.arange(BK)"]
    if c.tma and c.swap_ab:
        out += ["    acc = A.dot(A.trans(A.load(b[ks, cols], tma=True)), "
                "A.trans(A.load(a[rows, ks], tma=True)), acc, mma=A.wgmma)"]
    elif c.tma:
        out += ["    acc = A.dot(A.load(a[rows, ks], tma=True), A.load(b[ks, cols], tma=True), "
                "acc, mma=A.wgmma)"]
    else:
        out += [f"    a_tile = A.load(a[rows, ks], mask=(rows < M, ks < {bound}), other=0.0)",
                f"    b_tile = A.load(b[ks, cols], mask=(ks < {bound}, cols < N), other=0.0)",
                "    acc = A.dot(A.trans(b_tile), A.trans(a_tile), acc)" if c.swap_ab else
                "    acc = A.dot(a_tile, b_tile, acc)"]
    tags = "M=rows[None, :], N=cols[:, None]" if c.swap_ab else "M=rows[:, None], N=cols[None, :]"
    out.append(f"A.assert_tags(acc, {tags}, K=A.covers({lo}, {hi}))")
    value = "A.cast(A.trans(acc), A.bf16)" if c.swap_ab else "A.cast(acc, A.bf16)"
    atomic = f"A.atomic_add(c[rows, cols], {value}, mask=(rows < M, cols < N))"
    store = f"A.store(c[rows, cols], {value}, tma=True)" if c.tma else \
        f"A.store(c[rows, cols], {value}, mask=(rows < M, cols < N))"
    if c.split_k > 1 and c.combine == "atomic":
        out.append(atomic)
    elif c.split_k > 1 and c.combine == "reduce":   # this split's float32 partial sums
        partial = "A.trans(acc)" if c.swap_ab else "acc"
        out.append(f"A.store(partial[pid_k, rows, cols], {partial}, mask=(None, rows < M, cols < N))")
    elif c.stream_k:   # a tile whole in this program is stored, one shared is added up
        out += ["if (k_lo == 0) & (k_hi == K):", "    " + store, "else:", "    " + atomic]
    else:
        out.append(store)
    return out


def _subtiled(c: GemmConfig) -> list[str]:
    """The output tile in two column halves: one A tile feeds two half-width dots, and
    each half is stored on its own (no split-K here: a precondition)."""
    out = ["rows = pid_m * BM + A.arange(BM)", "cols = pid_n * BN + A.arange(BN // 2)",
           "cols_hi = cols + BN // 2", "acc = A.zeros((BM, BN // 2), A.f32)",
           "acc_hi = A.zeros((BM, BN // 2), A.f32)"]
    stages = f", stages={c.stages}" if c.stages else ""
    out += [f"for k in A.range(0, K, BK{stages}):", "    ks = k + A.arange(BK)"]
    if c.tma:
        out += ["    a_tile = A.load(a[rows, ks], tma=True)",
                "    acc = A.dot(a_tile, A.load(b[ks, cols], tma=True), acc, mma=A.wgmma)",
                "    acc_hi = A.dot(a_tile, A.load(b[ks, cols_hi], tma=True), acc_hi, mma=A.wgmma)"]
    else:
        out += ["    a_tile = A.load(a[rows, ks], mask=(rows < M, ks < K), other=0.0)",
                "    b_tile = A.load(b[ks, cols], mask=(ks < K, cols < N), other=0.0)",
                "    b_hi = A.load(b[ks, cols_hi], mask=(ks < K, cols_hi < N), other=0.0)",
                "    acc = A.dot(a_tile, b_tile, acc)", "    acc_hi = A.dot(a_tile, b_hi, acc_hi)"]
    for acc, cols in (("acc", "cols"), ("acc_hi", "cols_hi")):
        out.append(f"A.assert_tags({acc}, M=rows[:, None], N={cols}[None, :], K=A.covers(0, K))")
        if c.tma:
            out.append(f"A.store(c[rows, {cols}], A.cast({acc}, A.bf16), tma=True)")
        else:
            out.append(f"A.store(c[rows, {cols}], A.cast({acc}, A.bf16), mask=(rows < M, {cols} < N))")
    return out


# ---------------------------------------------------------------- preconditions
def mma_rows(c: GemmConfig) -> int:
    """The rows of the MMA: the tile's N side when A and B are swapped."""
    return c.block_n if c.swap_ab else c.block_m


def footprint(c: GemmConfig) -> Footprint:
    """One program's shared memory and registers: the A/B ring, the fp32 accumulators
    (two half-width ones when subtiled), the TMA-store staging of the output tile, and
    for atomic adds the bf16 output tile's layout conversion, made in shared memory
    after the loop (Triton 3.9 for sm_90: 32,768 B for 256x64, above a 3-stage ring of
    30,744 B); for float32 partial sums stored to a workspace, the same conversion at four
    bytes per element. Stream-K stores whole tiles (staged by TMA) and adds split ones."""
    atomic = (c.split_k > 1 and c.combine == "atomic") or c.stream_k
    staged = c.tma and not (c.split_k > 1 and c.combine in ("atomic", "reduce"))
    halves = c.subtile if c.subtile > 1 else 1
    fp = dot_footprint(c.block_m, c.block_n // halves, c.block_k, c.num_warps,
                       c.stages or TRITON_DEFAULT_STAGES, halves, 2,
                       c.block_m * c.block_n * 2 if staged else 0,
                       f"{c.block_m}x{c.block_n} output staging" if staged else "")
    if c.split_k > 1 and c.combine == "reduce":
        return replace(fp, scratch_bytes=c.block_m * c.block_n * 4,
                       scratch_text=f"the {c.block_m}x{c.block_n} float32 partial-sum store's "
                                    "layout conversion")
    if not atomic:
        return fp
    return replace(fp, scratch_bytes=c.block_m * c.block_n * 2,
                   scratch_text=f"the {c.block_m}x{c.block_n} bf16 atomic-add layout conversion")


def structure_reason(c: GemmConfig, ctx: dict) -> str | None:
    """Choices that do not combine (the transitions below keep to them, with messages on
    what to undo first) or do not fit the problem (a too narrow subtile, more splits
    than k-tiles)."""
    sizes = ctx.get("sizes", {})
    if c.warp_specialize and not (c.persistent and c.tma and c.num_warps >= 8):
        return "warp specialization needs the persistent grid, TMA loads and at least 8 warps"
    if c.split_k > 1 and (c.persistent or c.subtile > 1):
        return "split-K needs a grid axis per split and one accumulator per tile"
    if c.swap_ab and c.subtile > 1:
        return "a swapped tile leaves as one transposed accumulator; it is not subtiled"
    if c.stream_k and (c.persistent or c.split_k > 1 or c.subtile > 1 or c.group_m > 1):
        return ("stream-K is its own persistent schedule over row-major tiles, each tile's "
                "k steps in one accumulator: no persistent grid, split-K, subtiles or swizzle")
    if c.split_k > 1 and c.combine == "reduce" and c.group_m > 1:
        return ("split-K with a reduction pass walks the tiles in row-major order (the "
                "checker proves the workspace complete over that order, not a grouped one)")
    if c.subtile > 1 and c.block_n < 32:
        return f"a {c.block_n}-column tile is too narrow to split"
    if c.subtile > 1 and c.block_n // c.subtile < 16:
        return f"a {c.block_n}-column tile is too narrow to split in {c.subtile}"
    k = sizes.get("K", 0)
    if c.split_k > 1 and k and -(-k // c.block_k) < c.split_k:
        return f"split_k {c.split_k} exceeds the {-(-k // c.block_k)} k-tiles of K={k}"
    if c.stream_k and {"M", "N"} <= sizes.keys():
        sms = target_of(ctx).sms
        tiles = -(-sizes["M"] // c.block_m) * -(-sizes["N"] // c.block_n)
        if tiles > STREAM_K_WAVES * sms:
            return (f"stream-K spreads at most {STREAM_K_WAVES} waves of tiles "
                    f"({STREAM_K_WAVES * sms} on {sms} SMs); {c.block_m}x{c.block_n} tiles "
                    f"make {tiles} here, where the last wave is a small share of the work")
    return None


def hardware_reason(c: GemmConfig, ctx: dict) -> str | None:
    """What the target refuses: TMA (and its 16-byte rows), warp specialization, wgmma on
    the TMA path's warps, shared memory and registers (a 16-row tile with 8 warps
    compiles for sm_90: no rule on warps per tile beyond the MMA's)."""
    target, sizes = target_of(ctx), ctx.get("sizes", {})
    if c.tma:
        pitches = {t: sizes[d] * 2 for t, d in (("a", "K"), ("b", "K" if c.kmajor_b else "N"),
                                                ("c", "N")) if d in sizes}
        reason = target.tma_reason(pitches) or target.mma_reason("wgmma", c.num_warps, mma_rows(c))
        if reason:
            return reason
    if c.warp_specialize and target.warp_specialization_reason():
        return target.warp_specialization_reason()
    reason = resource_reason(footprint(c), ctx)
    if reason:
        return reason
    return table_reason("gemm", c, ctx)  # the compiler's verdict, where the table has it


def _legal(c: GemmConfig, ctx: dict) -> str | None:
    return structure_reason(c, ctx) or hardware_reason(c, ctx)


def _with(field):
    """A precondition that checks the configuration the transformation would produce."""
    return edit(field, _legal)


def _persistent(c: GemmConfig, value, ctx: dict) -> str | None:
    if value and c.split_k > 1:
        return "a persistent grid walks whole tiles; undo split_k first"
    if value and c.stream_k:
        return "stream-K is a persistent schedule of its own; undo stream_k first"
    if not value and c.warp_specialize:
        return "warp specialization runs on the persistent tile loop; turn it off first"
    return _with("persistent")(c, value, ctx)


def _warp_specialize(c: GemmConfig, value, ctx: dict) -> str | None:
    if value and not (c.persistent and c.tma):
        return "warp specialization needs the persistent grid and TMA loads"
    if value and c.num_warps < 8:
        return "warp specialization needs at least 8 warps (a producer and consumers)"
    return _with("warp_specialize")(c, value, ctx)


def _subtile(c: GemmConfig, value, ctx: dict) -> str | None:
    if value > 1 and c.split_k > 1:
        return "subtiling splits a finished tile's epilogue; undo split_k first"
    if value > 1 and c.swap_ab:
        return "a swapped tile leaves as one transposed accumulator; undo swap_ab first"
    if value > 1 and c.stream_k:
        return "stream-K keeps one accumulator per tile segment; undo stream_k first"
    if value > 1 and c.block_n < 32:
        return f"a {c.block_n}-column tile is too narrow to split"
    return _with("subtile")(c, value, ctx)


def _split_k(c: GemmConfig, value, ctx: dict) -> str | None:
    if value > 1 and c.persistent:
        return "split-K needs a grid axis per split; undo persistent first"
    if value > 1 and c.stream_k:
        return "stream-K already splits the k steps between programs; undo stream_k first"
    if value > 1 and c.subtile > 1:
        return "split-K needs one accumulator per tile; undo epilogue_subtile first"
    return _with("split_k")(c, value, ctx)


def _combine(c: GemmConfig, value, ctx: dict) -> str | None:
    if c.split_k == 1:
        return "there are no partial sums to combine (split_k is 1)"
    if value == "reduce" and c.group_m > 1:
        return "the reduction pass keeps the row-major tile order; swizzle(1) first"
    return _with("combine")(c, value, ctx)


def _swap_ab(c: GemmConfig, value, ctx: dict) -> str | None:
    if value and c.subtile > 1:
        return "a swapped tile leaves as one transposed accumulator; undo epilogue_subtile first"
    return _with("swap_ab")(c, value, ctx)


def _stream_k(c: GemmConfig, value, ctx: dict) -> str | None:
    if value and c.persistent:
        return "stream-K is a persistent schedule of its own; undo persistent first"
    if value and c.split_k > 1:
        return "stream-K splits the k steps between programs itself; undo split_k first"
    if value and c.subtile > 1:
        return "stream-K keeps one accumulator per tile segment; undo epilogue_subtile first"
    if value and c.group_m > 1:
        return "stream-K walks the tiles in row-major order; swizzle(1) first"
    return _with("stream_k")(c, value, ctx)


def _tma(c: GemmConfig, value, ctx: dict) -> str | None:
    if not value and c.warp_specialize:
        return "warp specialization needs TMA loads; turn it off first"
    return _with("tma")(c, value, ctx)


def _warps(c: GemmConfig, value, ctx: dict) -> str | None:
    if c.warp_specialize and value < 8:
        return "warp specialization needs at least 8 warps"
    return _with("num_warps")(c, value, ctx)


TRANSFORMS = (
    Transform("tile_m", "block_m", (16, 32, 64, 128, 256), "rows of the output tile (BM)", _with("block_m")),
    Transform("tile_n", "block_n", (32, 64, 128, 256), "columns of the output tile (BN)", _with("block_n")),
    Transform("tile_k", "block_k", (16, 32, 64, 128), "depth of one k step (BK)", _with("block_k")),
    Transform("warps", "num_warps", (2, 4, 8), "warps per program", _warps),
    Transform("stages", "stages", (2, 3, 4, 5), "software-pipelining depth of the k loop", _with("stages")),
    Transform("swizzle", "group_m", (1, 4, 8, 16), "grouped tile order for L2 reuse (1 = off)", _with("group_m")),
    Transform("split_k", "split_k", (1, 2, 4, 8), "split the k loop over programs; the "
              "partial sums stay uncombined until `combine`", _split_k, primitive=True),
    Transform("combine", "combine", ("atomic", "reduce"), "combine split-K partial sums: "
              "'atomic' adds them into C (bf16 atomic adds, one rounding per split), 'reduce' "
              "stores them in float32 to a workspace that a second launch sums into C",
              _combine),
    Transform("persistent", "persistent", (True, False), "one program per SM walking the tiles", _persistent),
    Transform("tma", "tma", (True, False), "TMA tensor-descriptor loads and store", _tma),
    Transform("warp_specialize", "warp_specialize", (True, False),
              "producer/consumer warp specialization of the tile loop", _warp_specialize),
    Transform("kmajor_b", "kmajor_b", (True, False), "store B k-major (column-major)", _with("kmajor_b")),
    Transform("epilogue_subtile", "subtile", (1, 2), "split the output tile into two column "
              "halves with their own accumulators and stores", _subtile),
    Transform("swap_ab", "swap_ab", (True, False), "compute the transposed tile C^T = B^T A^T, "
              "so that a small M is the MMA's N and wgmma's 64-row M side is N; the tile is "
              "stored transposed back", _swap_ab),
    Transform("stream_k", "stream_k", (True, False), "one program per SM, each taking an equal "
              "share of all tiles' k steps; a tile whole in one program is stored, one split "
              "between programs is fixed up by atomic adds", _stream_k),
)


class GemmSpace(TaskSpace):
    transforms = TRANSFORMS
    task_name = "gemm"

    def baseline(self) -> GemmConfig:
        return BASELINE

    def render(self, config: GemmConfig) -> str:
        return render(config)

    def structure_reason(self, config: GemmConfig, ctx: dict) -> str | None:
        return structure_reason(config, ctx)

    def hardware_reason(self, config: GemmConfig, ctx: dict) -> str | None:
        return hardware_reason(config, ctx)

    def after(self, config: GemmConfig, name: str) -> GemmConfig:
        if name == "split_k" and config.split_k == 1:
            return replace(config, combine=None)  # nothing left to combine
        if name == "split_k" and config.combine is not None:
            return replace(config, combine=None)  # a new split needs its combine again
        return config


SPACE = GemmSpace()
