"""The RMSNorm configuration space: one dataclass, one template, the catalog.

A program handles a block of BM rows at a time. In two passes (the baseline) it walks the
row's features in tiles of BH twice: the first pass adds the residual, writes it and sums
the squares, the second adds again and writes the normalised row. In one pass the whole
row is one tile of HP features (H rounded up to a power of two, a problem constant the
task binds from the shape): it is read once and stays in registers. A persistent grid
walks the row blocks from a few programs per SM.

The problem's constants (HP, EPS) are not choices. The hardware rule behind every
precondition (a tile within Triton's limit, registers and a program per SM from the
`Target`, through `argus_env.resources`) is the one the cost model applies
(`model.check`), so the mask and the model agree.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from argus_env.measure.legality import table_reason
from argus_env.space import TaskSpace, Transform, edit, kernel_header, target_of

from .model import check, space_config
from .problem import EPS, SIGNATURE

#: programs per SM of a persistent grid
PERSISTENT_PER_SM = 4


@dataclass(frozen=True)
class RMSNormConfig:
    block_m: int = 1              # rows per program (BM)
    block_h: int = 1024           # feature tile of the two-pass loops (BH)
    single_pass: bool = False     # the whole row as one tile of HP features, read once
    num_warps: int = 4
    persistent: bool = False      # PERSISTENT_PER_SM programs per SM walk the row blocks
    stages: int | None = None     # software-pipelining depth of the feature loops

    def summary(self) -> str:
        parts = [f"{self.block_m} row{'s' if self.block_m > 1 else ''} per program",
                 "whole row in one pass" if self.single_pass else f"two passes of {self.block_h}",
                 f"{self.num_warps} warps"]
        if self.stages and not self.single_pass:
            parts.append(f"{self.stages} stages")
        if self.persistent:
            parts.append("persistent")
        return ", ".join(parts)


BASELINE = RMSNormConfig()
EXPERT = RMSNormConfig(block_m=1, single_pass=True, num_warps=8)

_ADD = ("r = A.cast(A.load(x[rows, cols], mask=(live, cols < H), other=0.0), A.f32) + "
        "A.cast(A.load(residual[rows, cols], mask=(live, cols < H), other=0.0), A.f32)")
_RES = "A.store(residual_out[rows, cols], A.cast(r, A.bf16), mask=(live, cols < H))"
_W = "w = A.cast(A.load(weight[cols], mask=cols < H, other=0.0), A.f32)"
_OUT = ("A.store(out[rows, cols], A.cast(r * rstd[:, None] * w[None, :], A.bf16), "
        "mask=(live, cols < H))")


def _rows(c: RMSNormConfig) -> list[str]:
    if c.single_pass:
        return ["cols = A.arange(HP)", _ADD, _RES,
                "rstd = 1.0 / A.sqrt(A.sum(r * r, 1) / H + EPS)", _W, _OUT]
    loop = f"for start in A.range(0, H, BH{f', stages={c.stages}' if c.stages else ''}):"
    return ["sq = A.zeros((BM,), A.f32)", loop, "    cols = start + A.arange(BH)",
            "    " + _ADD, "    " + _RES, "    sq = sq + A.sum(r * r, 1)",
            "rstd = 1.0 / A.sqrt(sq / H + EPS)", loop, "    cols = start + A.arange(BH)",
            "    " + _ADD, "    " + _W, "    " + _OUT]


def render(c: RMSNormConfig) -> str:
    text = kernel_header("rmsnorm", SIGNATURE,
                         {"BM": c.block_m, "BH": c.block_h, "HP": 4096, "EPS": EPS},
                         c.num_warps, f"Fused residual add + RMSNorm: {c.summary()}.")
    head = ["rows = blk * BM + A.arange(BM)", "live = rows < T"]
    if c.persistent:
        body = [f"A.grid(A.minimum(A.num_sms() * {PERSISTENT_PER_SM}, A.cdiv(T, BM)))",
                "for blk in A.range(A.program_id(0), A.cdiv(T, BM), A.num_programs(0)):"] + \
            ["    " + s for s in head + _rows(c)]
    else:
        body = ["A.grid(A.cdiv(T, BM))", "blk = A.program_id(0)"] + head + _rows(c)
    return text + "".join(f"    {s}\n" for s in body)


# ---------------------------------------------------------------- catalog
def _structure(c: RMSNormConfig, ctx: dict) -> str | None:
    if c.single_pass and c.stages:
        return "a single pass has no feature loop to pipeline; stages go with two passes"
    return None


def _hardware(c: RMSNormConfig, ctx: dict) -> str | None:
    return (check(space_config(c, ctx.get("sizes")), target_of(ctx))
            or table_reason("rmsnorm", c, ctx))  # the compiler's verdict, where tabled


def _reason(c: RMSNormConfig, ctx: dict) -> str | None:
    return _structure(c, ctx) or _hardware(c, ctx)


def _stages(c: RMSNormConfig, value, ctx: dict) -> str | None:
    if c.single_pass:
        return "a single pass has no feature loop to pipeline; single_pass(False) first"
    return _reason(replace(c, stages=value), ctx)


TRANSFORMS = (
    Transform("rows", "block_m", (1, 2, 4, 8, 16), "rows per program (BM)",
              edit("block_m", _reason)),
    Transform("tile_h", "block_h", (256, 512, 1024, 2048, 4096, 8192),
              "feature tile of the two-pass loops (BH)", edit("block_h", _reason)),
    Transform("single_pass", "single_pass", (True, False), "keep the whole row (H rounded up "
              "to a power of two) in registers: read x and residual once instead of twice",
              lambda c, v, ctx: _reason(replace(c, single_pass=v, stages=None if v else c.stages),
                                        ctx)),
    Transform("warps", "num_warps", (1, 2, 4, 8, 16, 32), "warps per program",
              edit("num_warps", _reason)),
    Transform("persistent", "persistent", (True, False),
              f"{PERSISTENT_PER_SM} programs per SM walk the row blocks",
              edit("persistent", _reason)),
    Transform("stages", "stages", (2, 3, 4), "software-pipelining depth of the feature loops",
              _stages),
)


class RMSNormSpace(TaskSpace):
    transforms = TRANSFORMS
    task_name = "rmsnorm"

    def structure_reason(self, config: RMSNormConfig, ctx: dict) -> str | None:
        return _structure(config, ctx)

    def hardware_reason(self, config: RMSNormConfig, ctx: dict) -> str | None:
        return _hardware(config, ctx)

    def baseline(self) -> RMSNormConfig:
        return BASELINE

    def render(self, config: RMSNormConfig) -> str:
        return render(config)

    def after(self, config: RMSNormConfig, name: str) -> RMSNormConfig:
        """A single pass has no feature loop: its pipelining depth goes."""
        return replace(config, stages=None) if config.single_pass and config.stages else config


SPACE = RMSNormSpace()


def table_configurations(sizes: dict | None = None, target=None) -> list[RMSNormConfig]:
    """The configurations a GPU table records at `sizes`: baseline, expert, and the one-
    and two-pass programs over rows per program, warps and persistence, those legal on
    `target` (the default profile's)."""
    out = [BASELINE, EXPERT]
    for bm, warps in ((1, 4), (1, 16), (2, 8), (4, 8), (4, 16)):
        out.append(RMSNormConfig(block_m=bm, single_pass=True, num_warps=warps))
    out += [replace(EXPERT, persistent=True),
            RMSNormConfig(block_m=4, block_h=2048, num_warps=8),
            RMSNormConfig(block_m=1, block_h=4096, num_warps=8, stages=3)]
    ctx = {"sizes": sizes} if target is None else {"sizes": sizes, "target": target}
    return SPACE.legal_configurations(out, ctx)
