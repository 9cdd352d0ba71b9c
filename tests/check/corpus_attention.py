"""Seeded bugs in attention programs, each with the invariant that must catch it."""

from __future__ import annotations

from dataclasses import dataclass, field

from argus_env.dsl.program import Program
from argus_env.task import get_task

CAUSAL = {"B": 1, "H": 4, "KVH": 2, "SQ": 130, "SK": 130, "D": 64, "CAUSAL": 1}
FULL = {"B": 1, "H": 4, "KVH": 2, "SQ": 130, "SK": 130, "D": 64, "CAUSAL": 0}


@dataclass(frozen=True)
class Mutation:
    name: str
    base: str
    edits: tuple
    expect: frozenset
    sizes: dict = field(default_factory=lambda: dict(CAUSAL))

    def program(self) -> Program:
        task = get_task("attention")
        text = _base_text(task, self.base)
        for old, new in self.edits:
            assert old in text, f"{self.name}: {old!r} not in {self.base}"
            text = text.replace(old, new)
        return task.bind(Program.from_text(text, filename=f"<{self.name}>"), self.sizes)


#: catalog configurations the new mutations start from (a base name "space:<key>")
SPACE_BASES = {
    "lazy": {"rescale": "lazy"},
    "lazy-expert": {"block_m": 128, "block_n": 64, "num_warps": 8, "stages": 3, "exp2": True,
                    "fold_log2e": True, "skip_blocks": True, "tma": True, "rescale": "lazy"},
    "packed": {"gqa_pack": True},
    "persistent": {"persistent": True},
    "persistent-packed": {"persistent": True, "gqa_pack": True, "rescale": "lazy"},
}


def _base_text(task, base: str) -> str:
    if not base.startswith("space:"):
        return task.program(base).text
    from dataclasses import replace
    from argus_env.tasks.attention.space import BASELINE, render
    return render(replace(BASELINE, **SPACE_BASES[base.split(":", 1)[1]]))


def M(name, base, edits, expect, sizes=None):
    if isinstance(edits[0], str):
        edits = (edits,)
    return Mutation(name, base, tuple(edits), frozenset(expect.split()), dict(sizes or CAUSAL))


KEEP = "keep = (cols[None, :] < SK) & ((cols[None, :] <= rows[:, None]) | (CAUSAL == 0))"
CORPUS = [
    M("no-causal-mask", "baseline", (KEEP, "keep = cols[None, :] < SK"), "causal"),
    M("causal-off-by-one", "baseline", (KEEP, KEEP.replace("<= rows[:, None]", "<= rows[:, None] + 1")), "causal"),
    M("causal-excludes-diagonal", "baseline", (KEEP, KEEP.replace("<= rows[:, None]", "< rows[:, None]")), "coverage"),
    M("acc-not-rescaled", "baseline", ("acc * alpha[:, None]", "acc"), "softmax"),
    M("rowsum-not-rescaled", "baseline", ("l_i = l_i * alpha + A.sum(p, 1)", "l_i = l_i + A.sum(p, 1)"), "softmax"),
    M("rescale-backwards", "baseline", ("alpha = A.exp(m_i - m_new)", "alpha = A.exp(m_new - m_i)"), "softmax"),
    M("exp2-without-log2e", "baseline", (("A.exp(s - m_new[:, None])", "A.exp2(s - m_new[:, None])"),
                                          ("A.exp(m_i - m_new)", "A.exp2(m_i - m_new)")), "exp_base"),
    M("expert-exp-with-log2e", "expert", ("p = A.exp2(s - m_new[:, None])", "p = A.exp(s - m_new[:, None])"), "exp_base", FULL),
    M("gqa-wrong-kv-head", "baseline", ("kvh = h // GROUP", "kvh = h % KVH"), "head_map"),
    M("q-from-kv-head", "baseline", ("q[b, h, rows, ds]", "q[b, kvh, rows, ds]"), "head_map"),
    M("v-keys-shifted", "baseline", ("v[b, kvh, cols, ds]", "v[b, kvh, cols + 1, ds]"), "contraction", FULL),
    M("k-keys-shifted", "baseline", ("k[b, kvh, cols, ds]", "k[b, kvh, cols + 1, ds]"), "assertion", FULL),
    M("key-loop-skips-first-block", "baseline", ("A.range(0, SK, BN)", "A.range(BN, SK, BN)"), "coverage", FULL),
    M("key-loop-double-step", "baseline", ("A.range(0, SK, BN)", "A.range(0, SK, 2 * BN)"), "coverage", FULL),
    M("store-rows-shifted", "baseline", ("o[b, h, rows, ds]", "o[b, h, rows + 1, ds]"), "ownership", FULL),
    M("store-to-kv-head", "baseline", ("o[b, h, rows, ds]", "o[b, kvh, rows, ds]"), "ownership", FULL),
    M("missing-key-mask", "baseline", ("k[b, kvh, cols, ds], mask=(None, None, cols < SK, None), other=0.0)",
                                       "k[b, kvh, cols, ds])"), "bounds", FULL),
    M("batch-index-collides", "baseline", ("b = bh // H", "b = bh % B"), "exactly_once", {**FULL, "B": 2}),
    M("expert-diagonal-unmasked", "expert", ("A.where((cols[None, :] <= rows[:, None]) & (cols < SK)[None, :], s, -1e+30)",
                                             "A.where((cols < SK)[None, :], s, -1e+30)"), "causal"),
    M("expert-skips-diagonal-block", "expert", ("if CAUSAL == 1:", "if CAUSAL == 2:"), "coverage"),
]

GQA4 = {"B": 2, "H": 8, "KVH": 2, "SQ": 72, "SK": 72, "D": 64, "CAUSAL": 1}
LAZY_IF = "if A.max(m_blk - m_i, 0) > 5.545177444479562:"
CORPUS += [
    # lazy (thresholded) rescaling: the accumulator and row sum must move with the maximum
    M("lazy-rowsum-not-rescaled", "space:lazy", ("l_i = l_i * alpha\n", "l_i = l_i\n"), "softmax"),
    M("lazy-acc-not-rescaled", "space:lazy", ("acc = acc * alpha[:, None]\n", "acc = acc\n"), "softmax"),
    M("lazy-max-not-moved", "space:lazy", ("m_i = m_blk\n", "m_i = m_i\n"), "softmax"),
    M("lazy-p-against-block-max", "space:lazy", ("p = A.exp(s - m_i[:, None])", "p = A.exp(s - m_blk[:, None])"), "softmax", FULL),
    M("lazy-acc-rescaled-outside-test", "space:lazy-expert",
      (("acc = acc * alpha[:, None]\n", "acc = acc\n"), ("acc = A.dot(A.cast(p, A.bf16), v_tile, acc)",
                                                          "acc = A.dot(A.cast(p, A.bf16), v_tile, acc * A.exp2(m_i - m_blk)[:, None])")), "softmax", FULL),
    # GQA packing: tile row r is query head kvh * GROUP + r // (BM // GROUP)
    M("packed-heads-strided", "space:packed", ("h = kvh * GROUP + r // (BM // GROUP)",
                                               "h = kvh + r // (BM // GROUP) * KVH"), "head_map", GQA4),
    M("packed-heads-off-by-one-group", "space:packed", ("h = kvh * GROUP + r // (BM // GROUP)",
                                                        "h = (kvh + 1) % KVH * GROUP + r // (BM // GROUP)"), "head_map", GQA4),
    M("packed-rows-collide", "space:packed", ("rows = pid_m * (BM // GROUP) + r % (BM // GROUP)",
                                              "rows = pid_m * (BM // GROUP) + r // GROUP"), "exactly_once bijection", GQA4),
    M("packed-grid-by-query-heads", "space:packed", ("b = bh // KVH", "b = bh // H"), "bijection", GQA4),
    # persistent grid: tile -> (query block, batch-head) must be a bijection
    M("persistent-remap-drops-batch", "space:persistent", ("bh = tile // num_pid_m", "bh = tile // num_pid_m % H"),
      "exactly_once bijection", {**FULL, "B": 2}),
    M("persistent-remap-wraps-heads", "space:persistent", ("bh = tile // num_pid_m", "bh = tile % H"),
      "exactly_once bijection", {**FULL, "B": 2}),
    M("persistent-packed-remap-collides", "space:persistent-packed",
      ("pid_m = tile % num_pid_m", "pid_m = tile % num_pid_m // 2 * 2"), "exactly_once bijection", GQA4),
]
# order: the output normalised (or rounded) before its last key block is added
PV = "acc = A.dot(A.cast(p, A.bf16), v_tile, acc * alpha[:, None])"
NORM = "out = acc / l_i[:, None]"
CORPUS += [
    M("normalised-inside-key-loop", "baseline", ((PV, PV + "\n        acc = acc / l_i[:, None]"),
                                                 (NORM, "out = acc")), "order", FULL),
    M("expert-normalised-before-diagonal", "expert",
      (("        m_i = m_new\n    if CAUSAL == 1:", "        m_i = m_new\n    acc = acc / l_i[:, None]\n    if CAUSAL == 1:"),
       (NORM, "out = acc")), "order"),
    M("rounds-output-accumulator", "baseline", (PV, "acc = A.cast(A.cast(" + PV[6:] + ", A.bf16), A.f32)"),
      "order", FULL),
]
# fills: a masked score that `exp` does not take to 0 adds exp(fill - m) to the row sum and
# its value row to the output (float facts, SEMANTICS.md)
FILL = "s = A.where(keep, s, -1e+30)"
CORPUS += [
    M("mask-filled-with-zero", "baseline", (FILL, "s = A.where(keep, s, 0.0)"), "coverage"),
    M("mask-filled-with-zero-full", "baseline", (FILL, "s = A.where(keep, s, 0.0)"), "coverage",
      FULL),
    M("mask-fill-not-inf-like", "baseline", (FILL, "s = A.where(keep, s, -1000.0)"), "coverage"),
    M("expert-tail-filled-with-zero", "expert",
      ("A.where((cols < SK)[None, :], s, -1e+30)", "A.where((cols < SK)[None, :], s, 0.0)"),
      "coverage", FULL),
    # the scores are masked, but the probabilities of the masked lanes are taken from the
    # unmasked scores
    M("probabilities-of-unmasked-scores", "baseline",
      ((FILL, "s_all = s\n        " + FILL), ("p = A.exp(s - m_new[:, None])",
                                                "p = A.exp(s_all - m_new[:, None])")),
      "coverage", FULL),
]
assert len({m.name for m in CORPUS}) == len(CORPUS)

#: rewrites that change nothing a program computes: never a violation (the first was a
#: corpus case once, caught as `softmax`: the factor written out again is alpha itself, and
#: the symbolic checker gave the two copies of `A.max(s, 1)` independent lanes)
SAFE = [
    M("lazy-rowsum-factor-written-out", "space:lazy",
      ("l_i = l_i * alpha\n", "l_i = l_i * A.exp(m_i - A.maximum(m_i, A.max(s, 1)))\n"), ""),
    M("max-taken-twice", "baseline", ("m_new = A.maximum(m_i, A.max(s, 1))",
                                      "m_new = A.maximum(A.maximum(m_i, A.max(s, 1)), A.max(s, 1))"),
      "", FULL),
]
