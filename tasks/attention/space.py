"""The attention configuration space: one dataclass, one template, the catalog.

The problem's own constants (causal flag, GQA group, head dim, scale) are not choices:
the task binds them from the shape. Two pairs of transformations are deliberately
primitive: `exp2` without `fold_log2e` breaks the exponent-base invariant, and
`skip_blocks` (stop the key loop after the diagonal block) without `diagonal_mask`
lets keys after their query into the exponent, which the causal invariant reports.

Program structure choices: the rescaling policy of the online softmax (every block, or
lazily, FA4-style, only where a row's running maximum grew past a threshold), Q kept in
registers across the key loop or reloaded per key block, warp specialization of the key
loop (of the tile loop on a persistent grid), a persistent grid walking (query block,
batch, head) tiles, and GQA packing (the GROUP query heads that share a KV head fill one
program's query tile, so each K/V block is loaded once per group).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from argus_env.measure.legality import table_reason
from argus_env.space import TaskSpace, Transform, edit, kernel_header, resource_reason, target_of

from .model import DEFAULT_STAGES, footprint

#: lazy rescaling: a row's reference maximum moves only when the block maximum exceeds it
#: by more than this many binary orders of magnitude (probabilities stay below 2**8)
LAZY_LOG2 = 8.0
LN2 = 0.6931471805599453


@dataclass(frozen=True)
class AttentionConfig:
    block_m: int = 64
    block_n: int = 64
    num_warps: int = 4
    stages: int | None = None
    exp2: bool = False            # exponent by exp2 ...
    fold_log2e: bool = False      # ... with log2(e) folded into the scale
    skip_blocks: bool = False     # causal: stop the key loop after the diagonal block
    diagonal_mask: bool = True    # causal: mask keys after the query (all blocks, or the diagonal)
    tma: bool = False
    rescale: str = "always"       # online-softmax rescaling: "always" or "lazy" (threshold)
    q_in_registers: bool = True   # Q loaded once before the key loop (else per key block)
    warp_specialize: bool = False  # producer/consumer warps on the key (or tile) loop
    persistent: bool = False      # one program per SM walking (query block, batch, head) tiles
    gqa_pack: bool = False        # the GROUP query heads of one KV head share a query tile

    def summary(self) -> str:
        parts = [f"{self.block_m}x{self.block_n} blocks", f"{self.num_warps} warps"]
        if self.stages:
            parts.append(f"{self.stages}-stage K/V pipeline")
        parts.append("exp2" + (" with log2(e) folded" if self.fold_log2e else " (scale not folded)")
                     if self.exp2 else "exp" + (" of a log2(e)-scaled score" if self.fold_log2e else ""))
        if self.skip_blocks:
            parts.append("causal block skipping" + ("" if self.diagonal_mask else " (diagonal unmasked)"))
        elif not self.diagonal_mask:
            parts.append("causal mask off")
        if self.tma:
            parts.append("TMA")
        for flag, text in ((self.rescale == "lazy", "lazy rescaling"),
                           (not self.q_in_registers, "Q reloaded per key block"),
                           (self.warp_specialize, "warp-specialized"),
                           (self.persistent, "persistent grid"),
                           (self.gqa_pack, "GQA heads packed")):
            if flag:
                parts.append(text)
        return ", ".join(parts)


BASELINE = AttentionConfig()
EXPERT = AttentionConfig(128, 64, 8, 3, True, True, True, True, True)

#: the problem constants' placeholders (`Task.bind` sets them from the shape)
PROBLEM_CONSTS = {"HEAD_DIM": 128, "GROUP": 1, "CAUSAL": 0, "SCALE": 0.08838834764831845}


def render(c: AttentionConfig) -> str:
    head = kernel_header("attention", SPACE.signature,
                         {"BM": c.block_m, "BN": c.block_n, **PROBLEM_CONSTS}, c.num_warps,
                         f"Attention: {c.summary()}.")
    top, ids = _grid(c)
    body = ids + _indices(c)
    scale = "SCALE * 1.4426950408889634" if c.fold_log2e else "SCALE"
    body += [f"qk_scale = {scale}"]
    if c.q_in_registers:
        body += [_load_q(c)]
    body += ["m_i = A.full((BM,), -1.0e30, A.f32)", "l_i = A.zeros((BM,), A.f32)",
             "acc = A.zeros((BM, HEAD_DIM), A.f32)"]
    opts = (f", stages={c.stages}" if c.stages else "") + \
        (", warp_specialize=True" if c.warp_specialize and not c.persistent else "")
    if c.skip_blocks:
        if c.gqa_pack:
            # a packed tile spans BM // GROUP query positions, maybe fewer than BN keys: the
            # unmasked loop stops at the last key block wholly before the tile's first query
            body += ["diagonal = A.minimum(pid_m * (BM // GROUP) // BN * BN, SK)",
                     "last = A.minimum(pid_m * (BM // GROUP) + BM // GROUP, SK)"]
        else:
            body += ["diagonal = A.minimum(pid_m * BM, SK)"]
        body += ["stop = SK + (diagonal - SK) * CAUSAL", f"for start in A.range(0, stop, BN{opts}):"]
        body += ["    " + x for x in _step(c, causal=False)]
        end = "last" if c.gqa_pack else "A.minimum(diagonal + BM, SK)"
        body += ["if CAUSAL == 1:", f"    for start in A.range(diagonal, {end}, BN{opts}):"]
        body += ["        " + x for x in _step(c, causal=c.diagonal_mask)]
    else:
        body += [f"for start in A.range(0, SK, BN{opts}):"]
        body += ["    " + x for x in _step(c, causal=c.diagonal_mask)]
    body += ["out = acc / l_i[:, None]", _store_o(c)]
    if c.persistent:
        body = ["    " + x for x in body]
    return head + "\n".join("    " + x for x in top + body) + "\n"


def _grid(c: AttentionConfig) -> tuple[list[str], list[str]]:
    """The launch grid and the program's (query block, batch-head) ids: a plain 2-D grid,
    or a persistent loop over the tiles (query blocks fastest: the programs running at
    once share their head's K/V in L2)."""
    qb, heads = ("(BM // GROUP)", "B * KVH") if c.gqa_pack else ("BM", "B * H")
    if not c.persistent:
        return [f"A.grid(A.cdiv(SQ, {qb}), {heads})"], \
            ["pid_m = A.program_id(0)", "bh = A.program_id(1)"]
    ws = ", warp_specialize=True" if c.warp_specialize else ""
    return [f"A.grid(A.minimum(A.num_sms(), A.cdiv(SQ, {qb}) * {heads}))",
            f"num_pid_m = A.cdiv(SQ, {qb})",
            f"for tile in A.range(A.program_id(0), num_pid_m * {heads}, A.num_programs(0){ws}):"], \
        ["pid_m = tile % num_pid_m", "bh = tile // num_pid_m"]


def _indices(c: AttentionConfig) -> list[str]:
    if c.gqa_pack:
        # tile row r: query head kvh * GROUP + r // (BM // GROUP), position r % (BM // GROUP)
        return ["b = bh // KVH", "kvh = bh % KVH", "r = A.arange(BM)",
                "h = kvh * GROUP + r // (BM // GROUP)",
                "rows = pid_m * (BM // GROUP) + r % (BM // GROUP)", "ds = A.arange(HEAD_DIM)"]
    return ["b = bh // H", "h = bh % H", "kvh = h // GROUP", "rows = pid_m * BM + A.arange(BM)",
            "ds = A.arange(HEAD_DIM)"]


def _load_q(c: AttentionConfig) -> str:
    if c.gqa_pack:  # a gather over (head, position) rows: no TMA box
        return ("q_tile = A.load(q[b, h[:, None], rows[:, None], ds[None, :]], "
                "mask=(None, None, (rows < SQ)[:, None], None), other=0.0)")
    return _load("q", "h", "rows", "SQ", c.tma, "q_tile")


def _store_o(c: AttentionConfig) -> str:
    if c.gqa_pack:
        return ("A.store(o[b, h[:, None], rows[:, None], ds[None, :]], A.cast(out, A.bf16), "
                "mask=(None, None, (rows < SQ)[:, None], None))")
    if c.tma:
        return "A.store(o[b, h, rows, ds], A.cast(out, A.bf16), tma=True)"
    return "A.store(o[b, h, rows, ds], A.cast(out, A.bf16), mask=(None, None, rows < SQ, None))"


def _load(t: str, head: str, idx: str, size: str, tma: bool, name: str) -> str:
    if tma:
        return f"{name} = A.load({t}[b, {head}, {idx}, ds], tma=True)"
    return (f"{name} = A.load({t}[b, {head}, {idx}, ds], mask=(None, None, {idx} < {size}, None), "
            "other=0.0)")


def _step(c: AttentionConfig, causal: bool) -> list[str]:
    exp = "A.exp2" if c.exp2 else "A.exp"
    mask = "(cols < SK)[None, :]"
    if causal:
        mask += " & ((cols[None, :] <= rows[:, None]) | (CAUSAL == 0))"
    out = ["cols = start + A.arange(BN)"]
    if not c.q_in_registers:
        out.append(_load_q(c))
    out += [_load("k", "kvh", "cols", "SK", c.tma, "k_tile"),
            "s = A.dot(q_tile, A.trans(k_tile)) * qk_scale",
            f"s = A.where({mask}, s, -1.0e30)"]
    if c.rescale == "lazy":
        # FA4: one block-uniform test; the reference maxima move (and the accumulator and
        # row sum are rescaled) only when some row's block maximum exceeds its reference by
        # more than the threshold (in the exponent's units): p stays below 2**LAZY_LOG2
        limit = LAZY_LOG2 if c.exp2 else LAZY_LOG2 * LN2
        out += ["m_blk = A.maximum(m_i, A.max(s, 1))",
                f"if A.max(m_blk - m_i, 0) > {limit!r}:",
                f"    alpha = {exp}(m_i - m_blk)", "    l_i = l_i * alpha",
                "    acc = acc * alpha[:, None]", "    m_i = m_blk",
                f"p = {exp}(s - m_i[:, None])", "l_i = l_i + A.sum(p, 1)",
                _load("v", "kvh", "cols", "SK", c.tma, "v_tile"),
                "acc = A.dot(A.cast(p, A.bf16), v_tile, acc)"]
        return out
    out += ["m_new = A.maximum(m_i, A.max(s, 1))",
            f"p = {exp}(s - m_new[:, None])",
            f"alpha = {exp}(m_i - m_new)", "l_i = l_i * alpha + A.sum(p, 1)",
            _load("v", "kvh", "cols", "SK", c.tma, "v_tile"),
            "acc = A.dot(A.cast(p, A.bf16), v_tile, acc * alpha[:, None])", "m_i = m_new"]
    return out


def _group(ctx: dict) -> int:
    sizes = ctx.get("sizes") or {}
    return max(1, sizes.get("H", 1) // max(1, sizes.get("KVH", 1)))


def structure_reason(c: AttentionConfig, ctx: dict) -> str | None:
    """Choices that do not combine or do not fit the problem (GQA packing, warp
    specialization's TMA and pipeline)."""
    if c.gqa_pack:
        group = _group(ctx)
        if group == 1:
            return "the problem has no GQA group (H == KVH): nothing to pack"
        if c.block_m % group:
            return (f"GQA packing puts the {group} query heads of a KV head in one tile: "
                    f"BM={c.block_m} must be a multiple of {group}")
    if c.warp_specialize:
        if not c.tma:
            return "warp specialization needs TMA loads (the producer warps issue them)"
        if (c.stages or 0) < 2:
            return "warp specialization needs a K/V pipeline of at least 2 stages"
    return None


def hardware_reason(c: AttentionConfig, ctx: dict) -> str | None:
    """What the target refuses: shared memory and registers, TMA's 16-byte rows, warp
    specialization (the cost model's `hardware_reasons`, the same rules)."""
    target, d = target_of(ctx), (ctx.get("sizes") or {}).get("D", 128)
    reason = resource_reason(footprint(c.block_m, c.block_n, d, c.num_warps,
                                      c.stages or DEFAULT_STAGES, c.tma), ctx)
    if reason:
        return reason
    if c.tma and target.tma_reason({"q": d * 2}):
        return target.tma_reason({"q": d * 2})
    if c.warp_specialize and target.warp_specialization_reason():
        return target.warp_specialization_reason()
    return table_reason("attention", c, ctx)  # the compiler's verdict, where the table has it


def _resources(c: AttentionConfig, ctx: dict) -> str | None:
    return structure_reason(c, ctx) or hardware_reason(c, ctx)


def _with(field):
    return edit(field, _resources)


def _causal_only(field):
    def check(c: AttentionConfig, value, ctx: dict) -> str | None:
        if not (ctx.get("sizes") or {}).get("CAUSAL"):
            return "the problem is not causal"
        return None
    return check


def _tma(c: AttentionConfig, value, ctx: dict) -> str | None:
    if not value and c.warp_specialize:
        return "warp specialization needs TMA loads; turn warp_specialize off first"
    return _with("tma")(c, value, ctx)


def _stages(c: AttentionConfig, value, ctx: dict) -> str | None:
    if c.warp_specialize and value < 2:
        return "warp specialization needs at least 2 stages; turn warp_specialize off first"
    return _with("stages")(c, value, ctx)


TRANSFORMS = (
    Transform("tile_m", "block_m", (64, 128), "query rows per program (BM)", _with("block_m")),
    Transform("tile_n", "block_n", (32, 64, 128), "keys per step (BN)", _with("block_n")),
    Transform("warps", "num_warps", (4, 8), "warps per program", _with("num_warps")),
    Transform("stages", "stages", (2, 3, 4), "software-pipelining depth of the K/V loads", _stages),
    Transform("exp2", "exp2", (True, False), "exponent by exp2; needs log2(e) folded into the "
              "scale (fold_log2e), else the exponent base is wrong", primitive=True),
    Transform("fold_log2e", "fold_log2e", (True, False), "fold log2(e) into the softmax scale",
              primitive=True),
    Transform("skip_blocks", "skip_blocks", (True, False), "causal: stop the key loop at the "
              "diagonal block; needs diagonal_mask, else later keys leak into the exponent",
              _causal_only("skip_blocks"), primitive=True),
    Transform("diagonal_mask", "diagonal_mask", (True, False), "causal: mask keys after the query",
              _causal_only("diagonal_mask")),
    Transform("tma", "tma", (True, False), "TMA tensor-descriptor loads and store", _tma),
    Transform("rescale", "rescale", ("always", "lazy"), "online-softmax rescaling policy: the "
              "accumulator and row sum by every change of the running maximum, or lazily "
              f"(FA4) only where a row's maximum grew by more than 2**{LAZY_LOG2:g}", _with("rescale")),
    Transform("q_registers", "q_in_registers", (True, False), "load the Q tile once before the "
              "key loop and keep it (True), or reload it for every key block (False)",
              _with("q_in_registers")),
    Transform("warp_specialize", "warp_specialize", (True, False), "producer/consumer warp "
              "specialization of the key loop (of the tile loop on a persistent grid)",
              _with("warp_specialize")),
    Transform("persistent", "persistent", (True, False), "one program per SM walking the "
              "(query block, batch, head) tiles", _with("persistent")),
    Transform("gqa_pack", "gqa_pack", (True, False), "GQA: the GROUP query heads that share a "
              "KV head fill one program's query tile (BM // GROUP positions each), so each K/V "
              "block is loaded once per group", _with("gqa_pack")),
)


class AttentionSpace(TaskSpace):
    transforms = TRANSFORMS
    task_name = "attention"

    def baseline(self) -> AttentionConfig:
        return BASELINE

    def render(self, config: AttentionConfig) -> str:
        return render(config)

    def structure_reason(self, config: AttentionConfig, ctx: dict) -> str | None:
        return structure_reason(config, ctx)

    def hardware_reason(self, config: AttentionConfig, ctx: dict) -> str | None:
        return hardware_reason(config, ctx)


SPACE = AttentionSpace()


def table_configurations() -> list[AttentionConfig]:
    """The configurations recorded on the GPU: the baseline, and the Hopper-style program
    (exp2 folded, causal block skipping, TMA) over block shapes, warps and stages."""
    out = [BASELINE, EXPERT]
    for bm, bn, warps, stages in ((64, 64, 4, 2), (64, 128, 4, 2), (128, 64, 8, 2),
                                  (128, 64, 8, 3), (128, 128, 8, 2), (128, 32, 4, 3),
                                  (128, 64, 4, 3), (64, 64, 4, 3)):
        out.append(AttentionConfig(bm, bn, warps, stages, True, True, True, True, True))
    out.append(AttentionConfig(128, 64, 8, 3, True, True, True, True, False))  # no TMA
    return SPACE.legal_configurations(out, {"sizes": {"D": 128}})


def structure_configurations(sizes: dict) -> list[AttentionConfig]:
    """The expert with each program-structure knob turned (lazy rescaling, Q reloaded per
    key block, warp specialization, persistent grid, GQA packing where the shape has a
    group), and the knobs together: the configurations worth timing on a GPU to calibrate
    their terms of the cost model."""
    one = [replace(EXPERT, rescale="lazy"), replace(EXPERT, q_in_registers=False),
           replace(EXPERT, warp_specialize=True), replace(EXPERT, persistent=True),
           replace(EXPERT, gqa_pack=True), replace(EXPERT, persistent=True, warp_specialize=True),
           replace(EXPERT, rescale="lazy", persistent=True, gqa_pack=True)]
    return SPACE.legal_configurations([EXPERT] + one, {"sizes": sizes})
