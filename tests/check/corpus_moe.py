"""Seeded bugs in MoE programs, each with the invariant that must catch it."""

from __future__ import annotations

from dataclasses import dataclass, field

from argus_env.dsl.program import Program
from argus_env.task import get_task

SIZES = {"T": 40, "D": 72, "F": 136, "E": 8, "TOPK": 2, "SKEW": 1}
QWEN = {"T": 33, "D": 80, "F": 96, "E": 16, "TOPK": 4, "SKEW": 0}


@dataclass(frozen=True)
class Mutation:
    name: str
    base: str                     # "baseline" or "expert"
    edits: tuple                  # (old, new) text replacements
    expect: frozenset             # invariants that must be reported
    sizes: dict = field(default_factory=lambda: dict(SIZES))

    def program(self) -> Program:
        task = get_task("moe")
        text = task.program(self.base).text
        for old, new in self.edits:
            assert text.count(old) >= 1, f"{self.name}: {old!r} not in {self.base}"
            text = text.replace(old, new, 1)
        return task.bind(Program.from_text(text, filename=f"<{self.name}>"), self.sizes)


def _m(name, base, edits, *expect, sizes=None):
    return Mutation(name, base, tuple(edits), frozenset(expect), dict(sizes or SIZES))


DOWN_SCATTER = "tok = pair // TOPK"
CORPUS = [
    # expert: a block's rows meet another expert's weights
    _m("next-block-expert", "expert", [("e = A.load(expert_ids[block])",
                                        "e = A.load(expert_ids[A.minimum(block + 1, NB - 1)])")],
       "expert"),
    _m("expert-by-column-tile", "baseline",
       [("e = A.load(expert_ids[block])", "e = A.load(expert_ids[A.program_id(1) % NB])")],
       "expert"),
    _m("down-uses-expert-zero", "expert",
       [("A.load(w_down[e, fs, cols], tma=True)", "A.load(w_down[0, fs, cols], tma=True)")],
       "expert"),
    _m("rows-of-next-block", "baseline",
       [("a = A.load(xs[pos, ks]", "a = A.load(xs[(pos + BM) % P, ks]")], "expert"),
    # scatter: a row written to another token or slot
    _m("scatter-slot-swapped", "baseline",
       [("(pair % TOPK)[:, None], ds[None, :]]", "((pair + 1) % TOPK)[:, None], ds[None, :]]")],
       "scatter"),
    _m("scatter-token-off-by-one", "baseline",
       [("ys[(pair // TOPK)[:, None]", "ys[((pair // TOPK + 1) % T)[:, None]")], "scatter"),
    _m("expert-scatter-by-position", "expert",
       [(DOWN_SCATTER, "tok = pos // TOPK"), ("slot = pair % TOPK", "slot = pos % TOPK"),
        ("valid = pair < T * TOPK\n            tok", "valid = pos < T * TOPK\n            tok")],
       "scatter"),
    _m("gather-token-not-pair", "expert",
       [(DOWN_SCATTER, "tok = pair % T")], "scatter"),
    # padding: a padding row stored in token order (and its gather index out of range)
    _m("scatter-keeps-padding", "baseline",
       [("mask=valid[:, None] & (ds < D)[None, :])",
         "mask=(pair <= T * TOPK)[:, None] & (ds < D)[None, :])")], "padding"),
    _m("expert-atomic-keeps-padding", "expert",
       [("mask=valid[:, None] & (cols < D)[None, :])",
         "mask=(pair <= T * TOPK)[:, None] & (cols < D)[None, :])")], "padding"),
    _m("clamped-token-unmasked", "expert",
       [(DOWN_SCATTER, "tok = A.minimum(pair // TOPK, T - 1)"),
        ("mask=valid[:, None] & (cols < D)[None, :])", "mask=(cols < D)[None, :])")],
       "padding"),
    _m("gather-unmasked-padding", "expert",
       [("a = A.load(x[pair // TOPK, ks], mask=(valid, ks < D), other=0.0)",
         "a = A.load(x[pair // TOPK, ks], mask=(None, ks < D), other=0.0)")], "bounds"),
    # combine: another slot's or token's weight, or none
    _m("weight-of-slot-zero", "expert",
       [("wt = A.load(topk_weights[tok[:, None], slot[:, None]]",
         "wt = A.load(topk_weights[tok[:, None], (slot * 0)[:, None]]")], "combine"),
    _m("weight-of-next-token", "expert",
       [("wt = A.load(topk_weights[tok[:, None], slot[:, None]]",
         "wt = A.load(topk_weights[((tok + 1) % T)[:, None], slot[:, None]]")], "combine"),
    _m("no-weight", "expert", [("A.cast(acc * wt, A.bf16)", "A.cast(acc, A.bf16)")], "combine"),
    _m("combine-weights-shifted", "baseline",
       [("wt = A.load(topk_weights[toks[:, None], slots[None, :]]",
         "wt = A.load(topk_weights[toks[:, None], ((slots + 1) % TOPK)[None, :]]")], "combine"),
    # exactly once: a pair processed twice, or one slot dropped from the combine
    _m("scatter-not-exactly-once", "baseline",
       [("ys[(pair // TOPK)[:, None], (pair % TOPK)[:, None], ds[None, :]]",
         "ys[(pair // TOPK)[:, None], (pair % TOPK)[:, None], (ds % 8)[None, :]]")],
       "exactly_once"),
    _m("expert-store-not-atomic", "expert",
       [("A.atomic_add(out[tok[:, None], cols[None, :]]", "A.store(out[tok[:, None], cols[None, :]]")],
       "exactly_once"),
    _m("combine-drops-last-slot", "baseline",
       [("(slots < TOPK)[None, :], other=0.0)", "(slots < TOPK - 1)[None, :], other=0.0)")],
       "coverage", sizes=QWEN),
    _m("down-k-loop-short", "expert", [("for k in A.range(0, F, BK, stages=3)",
                                        "for k in A.range(BK, F, BK, stages=3)")], "coverage"),
]
