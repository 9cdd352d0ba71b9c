"""The MoE configuration space: one dataclass, a template per launch, the catalog.

A program is a sequence of launches over the routing step's block-aligned sorted layout
(`tasks.moe.routing`): the baseline gathers token rows into sorted order, runs the gate/up
projection per block of one expert, SwiGLU, the down projection, scatters the rows back to
(token, slot) order and combines the top-k slots of each token: six launches. The
transformations fuse those passes into the GEMMs' prologues and epilogues, down to the
expert's two persistent grouped GEMMs.

`fuse_scatter` is deliberately primitive: it makes the down projection write its rows from
its epilogue, but at their sorted position, until `inverse_scatter` maps each row back to
the token and slot it came from (else the checker reports `scatter` and `padding`).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from argus_env.measure.legality import table_reason
from argus_env.resources import Footprint, dot_footprint
from argus_env.space import TaskSpace, Transform, edit, kernel_header, resource_reason, target_of

DEFAULT_STAGES = 2            # the pipeline depth priced where the loops name none


@dataclass(frozen=True)
class MoEConfig:
    block_m: int = 64             # sorted rows per block (the routing aligns to it)
    block_n: int = 64
    block_k: int = 32
    num_warps: int = 4
    stages: int | None = None
    fuse_gather: bool = False     # the gate/up GEMM gathers token rows itself
    fuse_swiglu: bool = False     # SwiGLU in the gate/up GEMM's epilogue
    fuse_scatter: bool = False    # the down GEMM's epilogue writes the (token, slot) rows ...
    inverse_scatter: bool = False  # ... through the inverse of the sorting permutation
    fuse_weight: bool = False     # ... scaled by the top-k weight, added into the output
    persistent: bool = False      # grouped GEMMs as one persistent launch each
    tma: bool = False             # weight tiles (and sorted rows) by TMA
    group_m: int = 1              # grouped tile order: GROUP_M blocks sweep the columns
                                  # together (each weight tile is reused from L2); 1 = off
    down_n: int | None = None     # the down projection's BN (one accumulator, so up to
                                  # twice the gate/up BN in the same registers); None = BN

    @property
    def block_n_down(self) -> int:
        return self.down_n or self.block_n

    def summary(self) -> str:
        parts = [f"{self.block_m}x{self.block_n}x{self.block_k} tiles", f"{self.num_warps} warps"]
        if self.block_n_down != self.block_n:
            parts.append(f"down projection {self.block_m}x{self.block_n_down}")
        if self.stages:
            parts.append(f"{self.stages} stages")
        fused = [n for n, on in (("gather", self.fuse_gather), ("SwiGLU", self.fuse_swiglu),
                                 ("scatter", self.fuse_scatter), ("top-k weight", self.fuse_weight))
                 if on]
        if fused:
            parts.append("fused " + ", ".join(fused))
        if self.fuse_scatter and not self.inverse_scatter:
            parts.append("rows written at their sorted position")
        if self.persistent:
            parts.append("persistent grouped GEMMs")
        if self.group_m > 1:
            parts.append(f"grouped tile order ({self.group_m})")
        if self.tma:
            parts.append("TMA")
        return ", ".join(parts)

    def launches(self) -> int:
        return 2 + (not self.fuse_gather) + (not self.fuse_swiglu) + \
            (not self.fuse_scatter) + (not self.fuse_weight)


BASELINE = MoEConfig()
EXPERT = MoEConfig(64, 128, 64, 8, 3, True, True, True, True, True, True, True)
#: every pass fused, persistent grouped GEMMs, TMA: the fields the GPU tables' sets share
FUSED = dict(fuse_gather=True, fuse_swiglu=True, fuse_scatter=True, inverse_scatter=True,
             fuse_weight=True, persistent=True, tma=True)

#: the intermediates a launch writes for a later one (the launcher allocates them)
WORKSPACES = {"xs": ("P", "D"), "g": ("P", "F"), "u": ("P", "F"), "h": ("P", "F"),
              "y": ("P", "D"), "ys": ("T", "TOPK", "D")}


def _workspaces(c: MoEConfig) -> list[str]:
    out = [] if c.fuse_gather else ["xs"]
    out += ["h"] if c.fuse_swiglu else ["g", "u", "h"]
    if not c.fuse_scatter:
        out += ["y", "ys"]
    elif not c.fuse_weight:
        out += ["ys"]
    return out


def render(c: MoEConfig) -> str:
    workspaces = [(n, WORKSPACES[n], "bf16") for n in _workspaces(c)]
    consts = {"BM": c.block_m, "BN": c.block_n, "BK": c.block_k, "KP": 2}
    if c.block_n_down != c.block_n:
        consts["BND"] = c.block_n_down
    if c.group_m > 1:
        consts["GROUP_M"] = c.group_m
    text = kernel_header("moe", SPACE.signature, consts,
                         c.num_warps, f"MoE expert layer: {c.summary()}.", workspaces=workspaces)
    launches = []
    if not c.fuse_gather:
        launches.append(_gather())
    launches.append(_up(c))
    if not c.fuse_swiglu:
        launches.append(_swiglu())
    launches.append(_down(c))
    if not c.fuse_scatter:
        launches.append(_scatter())
    if not c.fuse_weight:
        launches.append(_combine())
    return text + "\n".join("\n".join("    " + line if line else "" for line in block)
                            for block in launches) + "\n"


def _gather() -> list[str]:
    return ["# gather: token rows into sorted order (padding rows read zeros)",
            "A.grid(NB, A.cdiv(D, BK))",
            "pos = A.program_id(0) * BM + A.arange(BM)",
            "pair = A.load(sorted_ids[pos])",
            "ds = A.program_id(1) * BK + A.arange(BK)",
            "rows = A.load(x[pair // TOPK, ds], mask=(pair < T * TOPK, ds < D), other=0.0)",
            "A.store(xs[pos, ds], rows, mask=(None, ds < D))"]


def _tiles(c: MoEConfig, n: str, body: list[str], bn: str = "BN") -> list[str]:
    """A grouped GEMM launch: for each (block, column tile), over a grid or persistently,
    `body` runs when the block belongs to an expert. With a grouped tile order, GROUP_M
    consecutive blocks (mostly one expert's) take each column tile in turn, so a weight
    tile is read from memory once per group rather than once per block."""
    inner = ["e = A.load(expert_ids[block])", "if e >= 0:"] + ["    " + x for x in body]
    if c.group_m > 1:
        order = ["first = tile // tiles_per_group * GROUP_M",
                 "rows_in_group = A.minimum(NB - first, GROUP_M)",
                 "block = first + tile % rows_in_group",
                 f"col0 = tile % tiles_per_group // rows_in_group * {bn}"]
    else:
        order = ["block = tile // num_n", f"col0 = tile % num_n * {bn}"]
    head = [f"num_n = A.cdiv({n}, {bn})"] + \
        (["tiles_per_group = GROUP_M * num_n"] if c.group_m > 1 else [])
    if c.persistent:
        return [f"A.grid(A.minimum(A.num_sms(), NB * A.cdiv({n}, {bn})))", *head,
                "for tile in A.range(A.program_id(0), NB * num_n, A.num_programs(0)):"] + \
            ["    " + x for x in order + inner]
    if c.group_m > 1:
        return [f"A.grid(NB * A.cdiv({n}, {bn}))", *head, "tile = A.program_id(0)"] + \
            order + inner
    return [f"A.grid(NB, A.cdiv({n}, {bn}))", "block = A.program_id(0)",
            f"col0 = A.program_id(1) * {bn}"] + inner


def _stages(c: MoEConfig) -> str:
    return f", stages={c.stages}" if c.stages else ""


def _w(c: MoEConfig, w: str, k: str, kdim: str, cols: str, ndim: str) -> str:
    if c.tma:
        return f"A.load({w}[e, {k}, {cols}], tma=True)"
    return f"A.load({w}[e, {k}, {cols}], mask=(None, {k} < {kdim}, {cols} < {ndim}), other=0.0)"


def _up(c: MoEConfig) -> list[str]:
    body = ["pos = block * BM + A.arange(BM)", "cols = col0 + A.arange(BN)"]
    if c.fuse_gather:
        body += ["pair = A.load(sorted_ids[pos])", "valid = pair < T * TOPK"]
    body += ["acc_g = A.zeros((BM, BN), A.f32)", "acc_u = A.zeros((BM, BN), A.f32)",
             f"for k in A.range(0, D, BK{_stages(c)}):", "    ks = k + A.arange(BK)"]
    if c.fuse_gather:
        body += ["    a = A.load(x[pair // TOPK, ks], mask=(valid, ks < D), other=0.0)"]
    elif c.tma:
        body += ["    a = A.load(xs[pos, ks], tma=True)"]
    else:
        body += ["    a = A.load(xs[pos, ks], mask=(None, ks < D), other=0.0)"]
    body += [f"    acc_g = A.dot(a, {_w(c, 'w_gate', 'ks', 'D', 'cols', 'F')}, acc_g)",
             f"    acc_u = A.dot(a, {_w(c, 'w_up', 'ks', 'D', 'cols', 'F')}, acc_u)",
             "A.assert_tags(acc_g, P=pos[:, None], F=cols[None, :], D=A.covers(0, D))"]
    if c.fuse_swiglu:
        body += [_row_store(c, "h", "A.cast(acc_g * A.sigmoid(acc_g) * acc_u, A.bf16)", "F")]
    else:
        body += [_row_store(c, "g", "A.cast(acc_g, A.bf16)", "F"),
                 _row_store(c, "u", "A.cast(acc_u, A.bf16)", "F")]
    what = "gate/up projection" + (" with SwiGLU" if c.fuse_swiglu else "")
    return [f"# {what}: one expert per block of sorted rows", *_tiles(c, "F", body)]


def _row_store(c: MoEConfig, t: str, value: str, ndim: str) -> str:
    if c.tma:
        return f"A.store({t}[pos, cols], {value}, tma=True)"
    return f"A.store({t}[pos, cols], {value}, mask=(None, cols < {ndim}))"


def _swiglu() -> list[str]:
    return ["# SwiGLU: h = silu(gate) * up, row by row",
            "A.grid(NB, A.cdiv(F, BN))",
            "pos = A.program_id(0) * BM + A.arange(BM)",
            "cols = A.program_id(1) * BN + A.arange(BN)",
            "gate = A.cast(A.load(g[pos, cols], mask=(None, cols < F), other=0.0), A.f32)",
            "up = A.cast(A.load(u[pos, cols], mask=(None, cols < F), other=0.0), A.f32)",
            "A.store(h[pos, cols], A.cast(gate * A.sigmoid(gate) * up, A.bf16), "
            "mask=(None, cols < F))"]


def _down(c: MoEConfig) -> list[str]:
    hload = "A.load(h[pos, fs], tma=True)" if c.tma else \
        "A.load(h[pos, fs], mask=(None, fs < F), other=0.0)"
    bn = "BND" if c.block_n_down != c.block_n else "BN"
    body = ["pos = block * BM + A.arange(BM)", f"cols = col0 + A.arange({bn})",
            f"acc = A.zeros((BM, {bn}), A.f32)",
            f"for k in A.range(0, F, BK{_stages(c)}):", "    fs = k + A.arange(BK)",
            f"    acc = A.dot({hload}, {_w(c, 'w_down', 'fs', 'F', 'cols', 'D')}, acc)",
            "A.assert_tags(acc, P=pos[:, None], D=cols[None, :], F=A.covers(0, F))"]
    if not c.fuse_scatter:
        body += [_row_store(c, "y", "A.cast(acc, A.bf16)", "D")]
    else:
        body += ["pair = A.load(sorted_ids[pos])"]
        if c.inverse_scatter:
            body += ["valid = pair < T * TOPK", "tok = pair // TOPK", "slot = pair % TOPK"]
        else:  # the row's sorted position, not the pair it holds
            body += ["valid = pos < T * TOPK", "tok = pos // TOPK", "slot = pos % TOPK"]
        keep = "valid[:, None] & (cols < D)[None, :]"
        if c.fuse_weight:
            body += ["wt = A.load(topk_weights[tok[:, None], slot[:, None]], mask=valid[:, None], "
                     "other=0.0)",
                     f"A.atomic_add(out[tok[:, None], cols[None, :]], A.cast(acc * wt, A.bf16), "
                     f"mask={keep})"]
        else:
            body += [f"A.store(ys[tok[:, None], slot[:, None], cols[None, :]], A.cast(acc, A.bf16), "
                     f"mask={keep})"]
    what = "down projection" + (", scatter to (token, slot)" if c.fuse_scatter else "") + \
        (" and top-k weighted combine" if c.fuse_weight else "")
    return [f"# {what}", *_tiles(c, "D", body, bn)]


def _scatter() -> list[str]:
    return ["# scatter: each sorted row back to the (token, slot) it came from",
            "A.grid(NB, A.cdiv(D, BK))",
            "pos = A.program_id(0) * BM + A.arange(BM)",
            "pair = A.load(sorted_ids[pos])",
            "valid = pair < T * TOPK",
            "ds = A.program_id(1) * BK + A.arange(BK)",
            "rows = A.load(y[pos, ds], mask=(None, ds < D), other=0.0)",
            "A.store(ys[(pair // TOPK)[:, None], (pair % TOPK)[:, None], ds[None, :]], rows, "
            "mask=valid[:, None] & (ds < D)[None, :])"]


def _combine() -> list[str]:
    return ["# combine: each token's top-k rows weighted by their routing weights",
            "A.grid(A.cdiv(T, BM), A.cdiv(D, BK))",
            "toks = A.program_id(0) * BM + A.arange(BM)",
            "slots = A.arange(KP)",
            "ds = A.program_id(1) * BK + A.arange(BK)",
            "wt = A.load(topk_weights[toks[:, None], slots[None, :]], "
            "mask=(toks < T)[:, None] & (slots < TOPK)[None, :], other=0.0)",
            "rows = A.load(ys[toks[:, None, None], slots[None, :, None], ds[None, None, :]], "
            "mask=(toks < T)[:, None, None] & (slots < TOPK)[None, :, None] & (ds < D)[None, None, :], "
            "other=0.0)",
            "acc = A.sum(wt[:, :, None] * A.cast(rows, A.f32), 1)",
            "A.assert_tags(acc, T=toks[:, None], D=ds[None, :], TOPK=A.covers(0, TOPK))",
            "A.store(out[toks, ds], A.cast(acc, A.bf16), mask=(toks < T, ds < D))"]


# ---------------------------------------------------------------- catalog
def footprint(c: MoEConfig) -> Footprint:
    """The gate/up GEMM's program, the larger of the two unless the down projection's
    tiles are wider: per stage an A tile and the gate and up weight tiles, two fp32
    accumulators, and with TMA the staging of its stored tiles (h, or g and u)."""
    stored = (1 if c.fuse_swiglu else 2) * c.block_m * c.block_n * 2 if c.tma else 0
    return dot_footprint(c.block_m, c.block_n, c.block_k, c.num_warps,
                         c.stages or DEFAULT_STAGES, 2, 2, stored,
                         f"{stored // (c.block_m * c.block_n * 2)} x {c.block_m}x{c.block_n} "
                         "output staging" if stored else "")


def down_footprint(c: MoEConfig) -> Footprint:
    """The down projection's program: per stage an h tile and a w_down tile, one fp32
    accumulator, and with TMA and no fused scatter the staging of its stored y tile."""
    bn = c.block_n_down
    stored = c.block_m * bn * 2 if c.tma and not c.fuse_scatter else 0
    return dot_footprint(c.block_m, bn, c.block_k, c.num_warps, c.stages or DEFAULT_STAGES,
                         1, 2, stored, f"{c.block_m}x{bn} output staging" if stored else "")


def tma_pitches(sizes: dict) -> dict[str, int]:
    """Row bytes of the tensors the TMA path moves (weights, sorted rows, intermediates)."""
    return {t: sizes[d] * 2 for t, d in (("w_gate", "F"), ("w_down", "D")) if d in sizes}


def hardware_reason(c: MoEConfig, ctx: dict) -> str | None:
    """What the target refuses: shared memory and registers of the gate/up GEMM, TMA."""
    reason = resource_reason(footprint(c), ctx)
    if reason:
        return reason
    if c.block_n_down != c.block_n:
        reason = resource_reason(down_footprint(c), ctx)
        if reason:
            return f"the down projection's {c.block_m}x{c.block_n_down} tiles: {reason}"
    if c.tma and target_of(ctx).tma_reason(tma_pitches(ctx.get("sizes") or {})):
        return target_of(ctx).tma_reason(tma_pitches(ctx.get("sizes") or {}))
    return table_reason("moe", c, ctx)  # the compiler's verdict, where the table has it


def _resources(c: MoEConfig, ctx: dict) -> str | None:
    return hardware_reason(c, ctx)


def _with(field):
    return edit(field, _resources)


def _weight(c: MoEConfig, value, ctx: dict) -> str | None:
    if value and not (c.fuse_scatter and c.inverse_scatter):
        return "the top-k weight goes into the epilogue that scatters rows to their tokens: " \
               "apply fuse_scatter(True) and inverse_scatter(True) first"
    return None


def _scatter_off(c: MoEConfig, value, ctx: dict) -> str | None:
    if not value and c.fuse_weight:
        return "the fused top-k weight needs the fused scatter; fuse_weight(False) first"
    return None


def _inverse_off(c: MoEConfig, value, ctx: dict) -> str | None:
    return _scatter_off(c, value, ctx)


TRANSFORMS = (
    Transform("tile_m", "block_m", (16, 32, 64, 128), "sorted rows per block (BM); the routing "
              "step aligns each expert's rows to it", _with("block_m")),
    Transform("tile_n", "block_n", (32, 64, 128, 256), "output columns per tile (BN)",
              _with("block_n")),
    Transform("tile_k", "block_k", (32, 64, 128), "reduction step (BK)", _with("block_k")),
    Transform("warps", "num_warps", (4, 8), "warps per program", _with("num_warps")),
    Transform("stages", "stages", (2, 3, 4), "software-pipelining depth of the GEMM loops",
              _with("stages")),
    Transform("fuse_gather", "fuse_gather", (True, False), "gather token rows in the gate/up "
              "GEMM's loads through sorted_ids (drops the gather launch)"),
    Transform("fuse_swiglu", "fuse_swiglu", (True, False), "SwiGLU in the gate/up GEMM's "
              "epilogue (drops the SwiGLU launch and the gate/up intermediates)",
              _with("fuse_swiglu")),
    Transform("fuse_scatter", "fuse_scatter", (True, False), "token sorting in the down GEMM's "
              "epilogue: write its rows to (token, slot) order there (drops the scatter launch); "
              "needs inverse_scatter, else each row lands at its sorted position",
              _scatter_off, primitive=True),
    Transform("inverse_scatter", "inverse_scatter", (True, False), "map each sorted row back "
              "through the inverse permutation (sorted_ids) and drop padding rows",
              _inverse_off),
    Transform("fuse_weight", "fuse_weight", (True, False), "scale by the top-k weight in the "
              "down GEMM's epilogue and add into the output atomically (drops the combine "
              "launch)", _weight),
    Transform("persistent", "persistent", (True, False), "grouped GEMMs as one persistent "
              "launch each: one program per SM walks every (block, column tile)"),
    Transform("tma", "tma", (True, False), "weight tiles and sorted-row tiles by TMA",
              _with("tma")),
    # catalog 2: appended, so that catalog 1's action indices keep their meaning
    Transform("swizzle", "group_m", (1, 4, 8, 16), "grouped tile order: GROUP_M blocks of "
              "sorted rows take each column tile in turn, so a weight tile is reused from L2 "
              "(1 = row-major)", _with("group_m"), since=2),
    Transform("tile_n_down", "down_n", (64, 128, 256), "output columns per tile of the down "
              "projection (one accumulator: up to twice the gate/up BN in the same registers)",
              _with("down_n"), since=2),
)


class MoESpace(TaskSpace):
    transforms = TRANSFORMS
    task_name = "moe"

    def baseline(self) -> MoEConfig:
        return BASELINE

    def render(self, config: MoEConfig) -> str:
        return render(config)

    def hardware_reason(self, config: MoEConfig, ctx: dict) -> str | None:
        return hardware_reason(config, ctx)


SPACE = MoESpace()


def table_configurations() -> list[MoEConfig]:
    """The configurations a GPU table records: baseline, expert, and the fused persistent
    program over block shapes, warps and stages (decode wants small BM, prefill large)."""
    out = [BASELINE, EXPERT]
    for bm, bn, bk, warps, stages in ((16, 64, 64, 4, 3), (16, 128, 128, 4, 3),
                                      (32, 64, 64, 4, 3), (32, 128, 64, 4, 4),
                                      (64, 64, 64, 4, 3), (64, 128, 64, 4, 3),
                                      (128, 128, 64, 8, 3), (128, 64, 64, 4, 3),
                                      (64, 256, 64, 8, 3)):
        out.append(MoEConfig(bm, bn, bk, warps, stages, **FUSED))
    out.append(replace(EXPERT, persistent=False))
    out.append(replace(EXPERT, tma=False))
    return SPACE.legal_configurations(out, {})


def _grouped() -> tuple:
    """Catalog 2's configurations for the GPU tables (`record_programs.py --configs
    moe-grouped`): the fused persistent program with the grouped tile order and the wider
    down projection, at the block shapes prefill (128 rows) and decode (16 to 64) want."""
    out = []
    for group, down in ((1, 256), (8, None), (8, 256), (16, 256)):
        out.append(MoEConfig(128, 128, 64, 8, 3, group_m=group, down_n=down, **FUSED))
    out.append(MoEConfig(128, 128, 64, 8, 3, group_m=8, down_n=256,
                         **{**FUSED, "persistent": False}))
    out += [MoEConfig(16, 128, 128, 4, 3, down_n=256, **FUSED),
            MoEConfig(32, 128, 64, 4, 4, group_m=8, **FUSED),
            replace(EXPERT, group_m=8), replace(EXPERT, down_n=256)]
    return tuple(out)


GROUPED = _grouped()


def _summed() -> tuple:
    """The grouped programs with the weighted top-k sum as its own launch instead of TOPK
    atomic adds (`fuse_weight(False)`, the fused anchor's structure), one program per tile,
    for the GPU tables (`record_programs.py --configs moe-summed`): at prefill over stages,
    the grouped order and BK; at decode the small-block programs over stages."""
    out = []
    for stages, group, bk in ((3, 8, 64), (3, 16, 64), (4, 8, 64), (4, 16, 64), (3, 8, 32),
                              (4, 8, 32), (5, 8, 32), (5, 16, 32)):
        out.append(MoEConfig(128, 128, bk, 8, stages, group_m=group, down_n=256,
                             **{**FUSED, "persistent": False, "fuse_weight": False}))
    for stages in (3, 4, 5):
        out.append(replace(EXPERT, down_n=256, stages=stages, fuse_weight=False))
    out.append(MoEConfig(16, 128, 128, 4, 3, **{**FUSED, "fuse_weight": False}))
    return tuple(out)


SUMMED = _summed()
