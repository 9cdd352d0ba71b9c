"""The attention configuration space: one dataclass, one template, the catalog.

The problem's own constants (causal flag, GQA group, head dim, scale) are not choices:
the task binds them from the shape. Two pairs of transformations are deliberately
primitive: `exp2` without `fold_log2e` breaks the exponent-base invariant, and
`skip_blocks` (stop the key loop after the diagonal block) without `diagonal_mask`
lets keys after their query into the exponent, which the causal invariant reports.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from argus_env.space import TaskSpace, Transform


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
        return ", ".join(parts)


BASELINE = AttentionConfig()
EXPERT = AttentionConfig(128, 64, 8, 3, True, True, True, True, True)

HEADER = '''from argus_env import dsl as A


@A.kernel(num_warps={warps})
def attention(
    q: A.Tensor[A.bf16, "B", "H", "SQ", "D"],
    k: A.Tensor[A.bf16, "B", "KVH", "SK", "D"],
    v: A.Tensor[A.bf16, "B", "KVH", "SK", "D"],
    o: A.Tensor[A.bf16, "B", "H", "SQ", "D"],
    BM: A.const = {bm},
    BN: A.const = {bn},
    HEAD_DIM: A.const = 128,
    GROUP: A.const = 1,
    CAUSAL: A.const = 0,
    SCALE: A.const = 0.08838834764831845,
):
    """Attention: {summary}."""
    A.grid(A.cdiv(SQ, BM), B * H)
    pid_m = A.program_id(0)
    bh = A.program_id(1)
    b = bh // H
    h = bh % H
    kvh = h // GROUP
    rows = pid_m * BM + A.arange(BM)
    ds = A.arange(HEAD_DIM)
'''


def render(c: AttentionConfig) -> str:
    head = HEADER.format(warps=c.num_warps, bm=c.block_m, bn=c.block_n, summary=c.summary())
    scale = "SCALE * 1.4426950408889634" if c.fold_log2e else "SCALE"
    body = [f"qk_scale = {scale}", _load("q", "h", "rows", "SQ", c.tma, "q_tile"),
            "m_i = A.full((BM,), -1.0e30, A.f32)", "l_i = A.zeros((BM,), A.f32)",
            "acc = A.zeros((BM, HEAD_DIM), A.f32)"]
    stages = f", stages={c.stages}" if c.stages else ""
    if c.skip_blocks:
        body += ["diagonal = A.minimum(pid_m * BM, SK)", "stop = SK + (diagonal - SK) * CAUSAL",
                 f"for start in A.range(0, stop, BN{stages}):"]
        body += ["    " + x for x in _step(c, causal=False)]
        body += ["if CAUSAL == 1:",
                 f"    for start in A.range(diagonal, A.minimum(diagonal + BM, SK), BN{stages}):"]
        body += ["        " + x for x in _step(c, causal=c.diagonal_mask)]
    else:
        body += [f"for start in A.range(0, SK, BN{stages}):"]
        body += ["    " + x for x in _step(c, causal=c.diagonal_mask)]
    body += ["out = acc / l_i[:, None]"]
    if c.tma:
        body += ["A.store(o[b, h, rows, ds], A.cast(out, A.bf16), tma=True)"]
    else:
        body += ["A.store(o[b, h, rows, ds], A.cast(out, A.bf16), mask=(None, None, rows < SQ, None))"]
    return head + "\n".join("    " + x for x in body) + "\n"


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
    return ["cols = start + A.arange(BN)", _load("k", "kvh", "cols", "SK", c.tma, "k_tile"),
            "s = A.dot(q_tile, A.trans(k_tile)) * qk_scale",
            f"s = A.where({mask}, s, -1.0e30)",
            "m_new = A.maximum(m_i, A.max(s, 1))", f"p = {exp}(s - m_new[:, None])",
            f"alpha = {exp}(m_i - m_new)", "l_i = l_i * alpha + A.sum(p, 1)",
            _load("v", "kvh", "cols", "SK", c.tma, "v_tile"),
            "acc = A.dot(A.cast(p, A.bf16), v_tile, acc * alpha[:, None])", "m_i = m_new"]


def _resources(c: AttentionConfig, ctx: dict) -> str | None:
    d = (ctx.get("sizes") or {}).get("D", 128)
    profile = ctx.get("profile")
    limit = getattr(profile, "smem_per_block", 232448)
    stages = c.stages or 2
    smem = c.block_m * d * 2 + stages * 2 * c.block_n * d * 2 + (c.block_m * d * 2 if c.tma else 0)
    if smem > limit:
        return (f"shared memory: Q {c.block_m}x{d} + {stages} stages x K,V {c.block_n}x{d} bf16 "
                f"= {smem} B > {limit} B per block")
    regs = (c.block_m * d + c.block_m * c.block_n) // (32 * c.num_warps) + 48
    if regs > getattr(profile, "max_regs_per_thread", 255):
        return (f"registers: accumulator {c.block_m}x{d} and scores {c.block_m}x{c.block_n} need "
                f"about {regs} per thread with {c.num_warps} warps")
    if c.tma and d % 8:
        return "TMA needs 16-byte rows: head dim must be a multiple of 8"
    return None


def _with(field):
    def check(c: AttentionConfig, value, ctx: dict) -> str | None:
        return _resources(replace(c, **{field: value}), ctx)
    return check


def _causal_only(field):
    def check(c: AttentionConfig, value, ctx: dict) -> str | None:
        if not (ctx.get("sizes") or {}).get("CAUSAL"):
            return "the problem is not causal"
        return None
    return check


TRANSFORMS = (
    Transform("tile_m", "block_m", (64, 128), "query rows per program (BM)", _with("block_m")),
    Transform("tile_n", "block_n", (32, 64, 128), "keys per step (BN)", _with("block_n")),
    Transform("warps", "num_warps", (4, 8), "warps per program", _with("num_warps")),
    Transform("stages", "stages", (2, 3, 4), "software-pipelining depth of the K/V loads", _with("stages")),
    Transform("exp2", "exp2", (True, False), "exponent by exp2; needs log2(e) folded into the "
              "scale (fold_log2e), else the exponent base is wrong", primitive=True),
    Transform("fold_log2e", "fold_log2e", (True, False), "fold log2(e) into the softmax scale",
              primitive=True),
    Transform("skip_blocks", "skip_blocks", (True, False), "causal: stop the key loop at the "
              "diagonal block; needs diagonal_mask, else later keys leak into the exponent",
              _causal_only("skip_blocks"), primitive=True),
    Transform("diagonal_mask", "diagonal_mask", (True, False), "causal: mask keys after the query",
              _causal_only("diagonal_mask")),
    Transform("tma", "tma", (True, False), "TMA tensor-descriptor loads and store", _with("tma")),
)


class AttentionSpace(TaskSpace):
    transforms = TRANSFORMS

    def baseline(self) -> AttentionConfig:
        return BASELINE

    def render(self, config: AttentionConfig) -> str:
        return render(config)


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
    seen, legal = set(), []
    for c in out:
        if c not in seen and _resources(c, {"sizes": {"D": 128}}) is None:
            seen.add(c)
            legal.append(c)
    return legal
