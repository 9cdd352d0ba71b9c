"""Seeded bugs in GEMM programs, each with the invariant that must catch it.

A mutation replaces one piece of text of a correct program of the GEMM task. `expect`
lists invariants the checker must report (it may report more, as one bug often breaks
several invariants); `sizes` is a small ragged problem where the bug shows, small enough
for the concrete enumerator.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from argus_env.dsl.program import Program
from argus_env.task import get_task

SMALL = {"M": 100, "N": 72, "K": 80}
EXPERT = {"M": 260, "N": 520, "K": 136}   # 3x3 tiles of 128x256: a partial last group
#: the symbolic checker's SM count (`argus_env.check.symbolic.checker.DEFAULT_NUM_SMS`):
#: a mutation whose verdict hangs on how programs share the work (stream-K) is run
#: concretely with it too
SMS = 132


@dataclass(frozen=True)
class Mutation:
    name: str
    base: str                       # program of the GEMM task
    edits: tuple[tuple[str, str], ...]
    expect: frozenset[str]
    sizes: dict = field(default_factory=lambda: dict(SMALL))
    num_sms: int | None = None      # `A.num_sms()` for the concrete run (None: its default)

    def program(self) -> Program:
        text = get_task("gemm").program(self.base).text
        for old, new in self.edits:
            assert old in text, f"{self.name}: {old!r} not in {self.base}"
            text = text.replace(old, new, 1)
        return Program.from_text(text, filename=f"<{self.name}>")


def M(name, base, edits, expect, sizes=None, num_sms=None):
    if isinstance(edits[0], str):
        edits = (edits,)
    return Mutation(name, base, tuple(edits), frozenset(expect.split()), dict(sizes or SMALL),
                    num_sms)


STORE = "A.store(c[rows, cols], A.cast(acc, A.bf16), mask=(rows < M, cols < N))"
LOAD_A = "a_tile = A.load(a[rows, ks], mask=(rows < M, ks < K), other=0.0)"
LOAD_B = "b_tile = A.load(b[ks, cols], mask=(ks < K, cols < N), other=0.0)"
ASSERT = "A.assert_tags(acc, M=rows[:, None], N=cols[None, :], K=A.covers(0, K))"

CORPUS = [
    # ---- output ownership and bounds
    M("store-col-off-by-one", "baseline", (STORE, STORE.replace("c[rows, cols]", "c[rows, cols + 1]")),
      "ownership"),
    M("store-row-off-by-one", "baseline", (STORE, STORE.replace("c[rows, cols]", "c[rows + 1, cols]")),
      "ownership"),
    M("store-transposed-tile", "baseline", (STORE, STORE.replace("A.cast(acc, A.bf16)",
                                                                 "A.cast(A.trans(acc), A.bf16)")),
      "ownership"),
    M("a-rows-from-pid-n", "baseline", (LOAD_A, LOAD_A.replace("a[rows, ks]", "a[pid_n * BM + A.arange(BM), ks]")),
      "ownership", {"M": 128, "N": 192, "K": 64}),
    M("cols-from-pid-m", "baseline", ("cols = pid_n * BN + A.arange(BN)", "cols = pid_m * BN + A.arange(BN)"),
      "exactly_once", {"M": 128, "N": 128, "K": 64}),
    M("missing-mask-a", "baseline", (LOAD_A, "a_tile = A.load(a[rows, ks])"), "bounds"),
    M("missing-mask-b", "baseline", (LOAD_B, "b_tile = A.load(b[ks, cols])"), "bounds"),
    M("missing-k-mask-b", "baseline", (LOAD_B, LOAD_B.replace("(ks < K, cols < N)", "(None, cols < N)")),
      "bounds"),
    M("missing-store-mask", "baseline", (STORE, "A.store(c[rows, cols], A.cast(acc, A.bf16))"), "bounds"),
    M("store-mask-one-short", "baseline", (STORE, STORE.replace("rows < M,", "rows < M - 1,")),
      "bijection"),
    M("row-mask-off-by-one", "baseline", (LOAD_A, LOAD_A.replace("rows < M", "rows <= M")), "bounds"),
    # ---- contraction
    M("b-k-shifted", "baseline", (LOAD_B, LOAD_B.replace("b[ks, cols]", "b[ks + 1, cols]")),
      "contraction"),
    M("a-k-shifted", "baseline", (LOAD_A, LOAD_A.replace("a[rows, ks]", "a[rows, ks + 1]")),
      "contraction"),
    M("a-k-reversed", "baseline", (LOAD_A, LOAD_A.replace("a[rows, ks]", "a[rows, k + BK - 1 - A.arange(BK)]")),
      "contraction"),
    M("expert-b-k-shifted", "expert", ("A.load(b[ks, cols], tma=True)", "A.load(b[ks + BK, cols], tma=True)"),
      "contraction", EXPERT),
    # ---- reduction coverage
    M("k-loop-skips-first", "baseline", ("A.range(0, K, BK)", "A.range(BK, K, BK)"), "coverage"),
    M("k-loop-double-step", "baseline", ("A.range(0, K, BK)", "A.range(0, K, 2 * BK)"), "coverage"),
    M("k-loop-half-step", "baseline", ("A.range(0, K, BK)", "A.range(0, K, BK // 2)"), "coverage"),
    M("k-loop-stops-early", "baseline", ("A.range(0, K, BK)", "A.range(0, K - BK, BK)"), "coverage"),
    M("acc-not-accumulated", "baseline", ("acc = A.dot(a_tile, b_tile, acc)", "acc = A.dot(a_tile, b_tile)"),
      "coverage"),
    M("expert-acc-reset-in-loop", "expert", ("ks = k + A.arange(BK)", "ks = k + A.arange(BK)\n            acc = A.zeros((BM, BN), A.f32)"),
      "coverage", EXPERT),
    M("expert-k-loop-skips-first", "expert", ("A.range(0, K, BK, stages=3)", "A.range(BK, K, BK, stages=3)"),
      "coverage", EXPERT),
    M("assert-covers-too-little", "baseline", (ASSERT, ASSERT.replace("A.covers(0, K)", "A.covers(0, K - 1)")),
      "coverage"),
    M("assert-wrong-row", "baseline", (ASSERT, ASSERT.replace("M=rows[:, None]", "M=rows[:, None] + 1")),
      "assertion"),
    # ---- program instances and tile maps
    M("grid-one-short", "baseline", ("A.grid(A.cdiv(M, BM), A.cdiv(N, BN))", "A.grid(A.cdiv(M, BM) - 1, A.cdiv(N, BN))"),
      "bijection"),
    M("rows-overlap", "baseline", ("rows = pid_m * BM + A.arange(BM)", "rows = pid_m * (BM // 2) + A.arange(BM)"),
      "exactly_once", {"M": 128, "N": 72, "K": 64}),
    M("swizzle-full-group-divisor", "expert", ("pid_n = tile % tiles_per_group // group_m", "pid_n = tile % tiles_per_group // GROUP_M"),
      "exactly_once bijection", EXPERT),
    M("swizzle-pid-m-mod-group", "expert", ("pid_m = first_m + tile % group_m", "pid_m = first_m + tile % GROUP_M"),
      "bijection", EXPERT),
    M("persistent-skips-tile-0", "expert", ("A.range(A.program_id(0), num_pid_m * num_pid_n", "A.range(A.program_id(0) + 1, num_pid_m * num_pid_n"),
      "bijection", EXPERT),
    M("persistent-stride-short", "expert", ("A.num_programs(0), warp", "A.num_programs(0) - 1, warp"),
      "exactly_once", EXPERT),
    # ---- split-K and pipelining
    M("splitk-without-combine", "splitk", ("A.atomic_add(c[rows, cols]", "A.store(c[rows, cols]"),
      "exactly_once coverage", {"M": 64, "N": 64, "K": 256}),
    M("splitk-overlapping-ranges", "splitk", ("k_hi = A.minimum(k_lo + k_per_split, K)", "k_hi = A.minimum(k_lo + k_per_split + BK, K)"),
      "coverage", {"M": 64, "N": 64, "K": 256}),
    M("splitk-gap", "splitk", ("k_lo = pid_k * k_per_split", "k_lo = pid_k * k_per_split + BK"),
      "coverage", {"M": 64, "N": 64, "K": 256}),
    M("prefetch-wrong-slice", "prefetch", ("ahead = ks + BK", "ahead = ks + 2 * BK"),
      "pipeline"),
    M("prefetch-consumed-late", "prefetch", (("a_tile = a_next\n        ", ""), ("acc = A.dot(a_tile, b_tile, acc)", "acc = A.dot(a_next, b_tile, acc)")),
      "pipeline"),
]

# ---- order: a sum goes on after it was rounded (every partial sum rounded to bf16)
LOOP_DOT = "acc = A.dot(a_tile, b_tile, acc)"
CORPUS += [
    M("rounds-running-sum", "baseline", (LOOP_DOT, "acc = A.dot(a_tile, b_tile, A.cast(A.cast(acc, A.bf16), A.f32))"),
      "order"),
    M("rounds-after-each-step", "baseline", (LOOP_DOT, f"acc = A.cast(A.cast({LOOP_DOT[6:]}, A.bf16), A.f32)"),
      "order"),
    M("prefetch-rounds-after-each-step", "prefetch", (LOOP_DOT, f"acc = A.cast(A.cast({LOOP_DOT[6:]}, A.bf16), A.f32)"),
      "order"),
    M("splitk-rounds-running-sum", "splitk", (LOOP_DOT, "acc = A.dot(a_tile, b_tile, A.cast(A.cast(acc, A.bf16), A.f32))"),
      "order", {"M": 64, "N": 64, "K": 256}),
]

# ---- coverage through memory: split-K partials in a workspace, summed by a second launch
TWO_PASS = {"M": 100, "N": 72, "K": 200}
PART_ASSERT = "    A.assert_tags(acc, M=rows[:, None], N=cols[None, :], K=A.covers(k_lo, k_hi))\n"
PART_MASK = "mask=(rows < M)[None, :, None]"
CORPUS += [
    M("reduce-drops-last-split", "splitk_reduce",
      (PART_MASK, "mask=(splits < SPLIT_K - 1)[:, None, None] & (rows < M)[None, :, None]"),
      "coverage", TWO_PASS),
    M("reduce-reads-a-split-twice", "splitk_reduce",
      ("splits = A.arange(SPLIT_K)", "splits = A.arange(SPLIT_K) % (SPLIT_K - 1)"), "coverage", TWO_PASS),
    M("partials-short-range", "splitk_reduce",
      ((PART_ASSERT, ""), ("k_hi = A.minimum(k_lo + k_per_split, K)", "k_hi = A.minimum(k_lo + k_per_split - BK, K)")),
      "coverage", TWO_PASS),
    M("partials-overlap", "splitk_reduce",
      ((PART_ASSERT, ""), ("k_hi = A.minimum(k_lo + k_per_split, K)", "k_hi = A.minimum(k_lo + k_per_split + BK, K)")),
      "coverage", TWO_PASS),
    M("partials-grid-one-split-short", "splitk_reduce",
      ((PART_ASSERT, ""), ("A.grid(A.cdiv(M, BM), A.cdiv(N, BN), SPLIT_K)", "A.grid(A.cdiv(M, BM), A.cdiv(N, BN), SPLIT_K - 1)")),
      "coverage", TWO_PASS),
    M("reduce-rows-shifted", "splitk_reduce",
      ("rows[None, :, None], cols", "rows[None, :, None] + 1, cols"), "bounds assertion", TWO_PASS),
]

# ---- swap-AB: the tile is computed transposed (C^T = B^T A^T) and must be stored back so
SWAP_STORE = "A.store(c[rows, cols], A.cast(A.trans(acc), A.bf16), mask=(rows < M, cols < N))"
CORPUS += [
    # the accumulator stored as computed, untransposed (square tiles, so that it types)
    M("swapab-store-untransposed", "swapab",
      (("BM: A.const = 16", "BM: A.const = 64"), (SWAP_STORE, SWAP_STORE.replace("A.trans(acc)", "acc"))),
      "ownership"),
    # the transposed tile stored with its offsets swapped: row offsets index C's columns
    M("swapab-store-offsets-swapped", "swapab",
      (SWAP_STORE, "A.store(c[cols, rows], A.cast(acc, A.bf16), mask=(cols < M, rows < N))"),
      "ownership"),
    # the row offset strides by the MMA's rows (BN), not the tile's (BM)
    M("swapab-rows-stride-bn", "swapab",
      ("rows = pid_m * BM + A.arange(BM)", "rows = pid_m * BN + A.arange(BM)"), "bijection"),
]

# ---- stream-K: each program's share of the flattened k steps, split tiles fixed up by
# atomic adds; checked with 132 programs (SMS) by both interpreters. OWNED has more tiles
# than programs, so that tiles whole in one program (stored) exist beside split ones.
OWNED = {"M": 768, "N": 768, "K": 64}
FIXUP = "if (k_lo == 0) & (k_hi == K):"
CORPUS += [
    # a program's range runs one k step into its neighbour's: that step's partial is
    # added twice
    M("streamk-partial-added-twice", "streamk",
      ("it_hi = A.minimum(it_lo + per, total)", "it_hi = A.minimum(it_lo + per + 1, total)"),
      "coverage", SMALL, SMS),
    # every range starts one k step late: the first k step of the first tile is skipped
    M("streamk-k-range-skipped", "streamk",
      ("it_lo = A.program_id(0) * per", "it_lo = A.program_id(0) * per + 1"),
      "coverage", SMALL, SMS),
    # a segment's k offset from the tile's start, not from the program's first step
    M("streamk-segment-from-tile-start", "streamk",
      ("k_lo = (A.maximum(it_lo, tile * iters) - tile * iters) * BK", "k_lo = 0"),
      "coverage", SMALL, SMS),
    # the fix-up stores a tile that only starts in this program: its neighbours' partials
    # are added to a stored value
    M("streamk-fixup-stores-split-tile", "streamk", (FIXUP, "if (k_lo == 0) | (k_hi == K):"),
      "exactly_once coverage", SMALL, SMS),
    # a whole tile is stored and added too
    M("streamk-fixup-adds-owned-tile", "streamk", ("        else:\n            A.atomic_add", "        A.atomic_add"),
      "exactly_once", OWNED, SMS),
]

# ---- fills: the masked lanes of a partial K tile (K = 80, BK = 32) hold what `A.where`
# puts there, and a dot adds their products (float facts, SEMANTICS.md)
FILLED = "acc = A.dot(A.where(ks[None, :] < K, a_tile, {a}), A.where(ks[:, None] < K, b_tile, {b}), acc)"
CORPUS += [
    M("where-fills-one-into-dot", "baseline", (LOOP_DOT, FILLED.format(a="1.0", b="1.0")),
      "coverage"),
    M("where-fill-against-scaled-fill", "baseline", (LOOP_DOT, FILLED.format(a="0.5", b="-2.0")),
      "coverage"),
    # the masked lanes are the zero fills plus one
    M("where-fill-offsets-masked-lanes", "baseline",
      (LOOP_DOT, "acc = A.dot(A.where(ks[None, :] < K, a_tile, a_tile + 1.0), "
                 "A.where(ks[:, None] < K, b_tile, b_tile + 1.0), acc)"), "coverage"),
]

assert len({m.name for m in CORPUS}) == len(CORPUS), "mutation names must be unique"
