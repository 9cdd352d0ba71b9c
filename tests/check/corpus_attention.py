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
        text = task.program(self.base).text
        for old, new in self.edits:
            assert old in text, f"{self.name}: {old!r} not in {self.base}"
            text = text.replace(old, new)
        return task.bind(Program.from_text(text, filename=f"<{self.name}>"), self.sizes)


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
assert len({m.name for m in CORPUS}) == len(CORPUS)
