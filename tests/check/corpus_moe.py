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
    num_sms: int | None = None    # A.num_sms() of the check (None: the checker's default)
    #: (sizes, num_sms) where the same program is correct: the routing can never produce
    #: what breaks it there, so the checker must prove it (no unrealisable counterexample)
    clean: tuple = ()
    #: confirmed under the Triton interpreter: replaying the counterexample (check with the
    #: interpreter's 3 SMs) leaves the output element it names wrong
    replays: bool = False

    def program(self) -> Program:
        task = get_task("moe")
        text = task.program(self.base).text
        for old, new in self.edits:
            assert text.count(old) >= 1, f"{self.name}: {old!r} not in {self.base}"
            text = text.replace(old, new, 1)
        return task.bind(Program.from_text(text, filename=f"<{self.name}>"), self.sizes)


def _m(name, base, edits, *expect, sizes=None, num_sms=None, clean=(), replays=False):
    return Mutation(name, base, tuple(edits), frozenset(expect), dict(sizes or SIZES), num_sms,
                    tuple(clean), replays)


DOWN_SCATTER = "tok = pair // TOPK"
#: the down projection's persistent tile loop and its branch (the expert's second launch)
DOWN_LOOP = ("num_n = A.cdiv(D, BN)\n"
             "    for tile in A.range(A.program_id(0), NB * num_n, A.num_programs(0)):")
DOWN_GUARD = ("e = A.load(expert_ids[block])\n"
              "        if e >= 0:\n"
              "            pos = block * BM + A.arange(BM)\n"
              "            cols = col0 + A.arange(BN)\n"
              "            acc = A.zeros((BM, BN), A.f32)")
#: every block can hold pairs (T*TOPK = E: each expert may take exactly one pair)
EVERY_BLOCK = {"T": 8, "D": 64, "F": 48, "E": 16, "TOPK": 2, "SKEW": 0}
ODD_TOPK = {"T": 13, "D": 64, "F": 48, "E": 6, "TOPK": 3, "SKEW": 1}
#: the baseline's combine launch, and the same as a loop over two slots at a time
COMBINE = """    slots = A.arange(KP)
    ds = A.program_id(1) * BK + A.arange(BK)
    wt = A.load(topk_weights[toks[:, None], slots[None, :]], mask=(toks < T)[:, None] & (slots < TOPK)[None, :], other=0.0)
    rows = A.load(ys[toks[:, None, None], slots[None, :, None], ds[None, None, :]], mask=(toks < T)[:, None, None] & (slots < TOPK)[None, :, None] & (ds < D)[None, None, :], other=0.0)
    acc = A.sum(wt[:, :, None] * A.cast(rows, A.f32), 1)
"""
COMBINE_LOOP = """    ds = A.program_id(1) * BK + A.arange(BK)
    acc = A.zeros((BM, BK), A.f32)
    for k0 in A.range(0, TOPK, 2):
        slots = k0 + A.arange(2)
        wt = A.load(topk_weights[toks[:, None], slots[None, :]], mask=(toks < T)[:, None] & (slots < TOPK)[None, :], other=0.0)
        rows = A.load(ys[toks[:, None, None], slots[None, :, None], ds[None, None, :]], mask=(toks < T)[:, None, None] & (slots < TOPK)[None, :, None] & (ds < D)[None, None, :], other=0.0)
        acc = acc + A.sum(wt[:, :, None] * A.cast(rows, A.f32), 1)
"""
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
    # ---- the fused combine, proven (issue 21): exactly once and complete over the top-k
    # slots, every output element written; INTERP: small shapes the interpreter replays
    _m("down-stride-one-too-few", "expert", [(DOWN_LOOP, DOWN_LOOP.replace(
        "A.num_programs(0))", "A.num_programs(0) - 1)"))], "coverage", num_sms=3,
       clean=[(SIZES, None)], replays=True),
    _m("down-stride-one-too-many", "expert", [(DOWN_LOOP, DOWN_LOOP.replace(
        "A.num_programs(0))", "A.num_programs(0) + 1)"))], "coverage", num_sms=3,
       replays=True),
    _m("down-skips-expert-zero", "expert", [(DOWN_GUARD, DOWN_GUARD.replace(
        "if e >= 0", "if e > 0"))], "coverage", num_sms=3, replays=True),
    _m("down-skips-last-block", "expert", [(DOWN_LOOP, DOWN_LOOP.replace(
        "NB * num_n", "(NB - 1) * num_n"))], "coverage", sizes=EVERY_BLOCK, num_sms=3,
       clean=[(SIZES, 3), (QWEN, None)], replays=True),
    _m("combine-weight-slot-mod-kp", "expert", [("slot = pair % TOPK", "slot = pair % KP")],
       "combine", sizes=ODD_TOPK, num_sms=3, clean=[(SIZES, None), (QWEN, None)],
       replays=True),
    _m("combine-weight-slot-reversed", "expert",
       [("wt = A.load(topk_weights[tok[:, None], slot[:, None]]",
         "wt = A.load(topk_weights[tok[:, None], (TOPK - 1 - slot)[:, None]]")],
       "combine", num_sms=3, replays=True),
    _m("topk-loop-misses-last-slot", "baseline", [(COMBINE, COMBINE_LOOP.replace(
        "A.range(0, TOPK, 2)", "A.range(0, TOPK - 1, 2)"))], "coverage", sizes=ODD_TOPK,
       clean=[(SIZES, None), (QWEN, None)], replays=True),
]

#: programs that are correct at every shape although an assumption weaker than the routing
#: step's postconditions would refute them (each names the fact it needs)
CLEAN = [
    # no block from `hi` on is ever used: a loop over the blocks that can be used suffices
    ("down-loops-over-usable-blocks", "expert", [(DOWN_LOOP, DOWN_LOOP.replace(
        "NB * num_n", "A.minimum(NB, E + (T * TOPK - E) // BM) * num_n"))]),
    # a used block starts with a pair: its first row needs no mask
    ("gather-row0-unmasked", "expert",
     [("mask=(valid, ks < D)", "mask=(valid | (A.arange(BM) == 0), ks < D)")]),
    # an empty block holds only padding: without the guard its rows are all masked off
    ("down-no-empty-block-guard", "expert", [(DOWN_GUARD, DOWN_GUARD.replace(
        "if e >= 0:", "if True:"))]),
    # the top-k combine as a loop over pairs of slots
    ("topk-loop", "baseline", [(COMBINE, COMBINE_LOOP)]),
]

