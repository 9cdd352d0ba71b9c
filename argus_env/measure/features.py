"""What a cost model needs to know about a program, read off its IR.

`extract(program, sizes, task)` finds the program's main contraction (the `dot` in the
deepest runtime loop), its tile shape, and the compiler and hardware policies around it
(pipeline stages, warps, TMA, warp specialization, persistent grid, split-K, swizzle
group, operand storage order), and counts the work: programs launched, output tiles,
useful FLOPs and compulsory bytes. It works on any program, written by a transformation
or by hand; what it cannot find falls back to the defaults Triton would apply on the
`Target` (its SM count for `A.num_sms()`, its MMA instruction where a dot has no `mma=`).

Everything is read off the part of the program that executes at the sizes
(`argus_env.ir.live`): loops that never iterate, branches never taken, values that reach no
store and constants nothing reads are gone first. Policies are read from what the program
does, not from names: the tile order from a `GROUP_M` that shapes the addresses with the
program's position, persistence from a loop over tiles strided by the grid size. A program
without a dot does its products on the CUDA cores (`mma="fma"`).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

from ..dsl.program import Program
from ..dsl.semantic import Scope
from ..dsl.types import RefT, ScalarT, TileT
from ..ir import nodes as ir
from ..ir.live import (_Eval, _known, depends_on_position, feeds_index, live_program,
                       loop_trips_by_axis, loop_work, order_depends_on, persistent_loop,
                       persistent_work, trips_at_most)
from ..ir.rewrite import walk
from ..target import Target

TRITON_DEFAULT_STAGES = 3


@dataclass(frozen=True)
class KernelFeatures:
    """Everything the analytic cost model reads. All sizes in elements unless noted."""

    task: str
    sizes: tuple[tuple[str, int], ...]
    flops: float                 # useful floating-point operations (the task's formula)
    min_bytes: float             # compulsory DRAM traffic: inputs once, outputs once
    block_m: int                 # the main dot's tile: (block_m x block_k) @ (block_k x block_n)
    block_n: int
    block_k: int
    dots: int                    # dots in the main loop body (attention has two)
    num_warps: int
    stages: int                  # software-pipelining depth of the main loop
    mma: str                     # the main dot's instruction: its `mma=`, else the target's
    tma_loads: bool              # main-loop operands arrive by TMA
    tma_store: bool
    warp_specialize: bool
    persistent: bool             # one program per SM walking tiles
    grid_programs: int           # programs launched
    tiles: int                   # output tiles of the main dot (work items), all splits
    split_k: int                 # programs sharing one output tile's reduction
    atomic_output: bool
    group_m: int                 # grouped (L2-friendly) tile order, 1 = row-major
    kmajor_b: bool               # the B operand is stored k-major (column-major)
    operand_bytes: int           # bytes per operand element
    output_bytes: int
    k_iterations: int            # main-loop trips per tile
    staging_bytes: int = 0       # shared memory staging the tiles stored by TMA (0: none)
    tma_pitches: tuple[tuple[str, int], ...] = ()   # TMA tensors: bytes per contiguous row
    swap_ab: bool = False        # the main dot computes the output tile transposed: its
                                 # rows (block_m) run over the output's columns
    stream_k: bool = False       # programs share the tiles' k steps: the main loop's range
                                 # follows the program and an enclosing loop over tiles
    busiest_steps: int = 0       # stream-K: main-loop trips of the busiest program
    busiest_segments: int = 0    # stream-K: its entries into the main loop (tile segments)
    zero_filled: bool = False    # the output is zeroed before the launch (an atomic add)
    reduce_pass: bool = False    # split-K partials go to a workspace that later launches
                                 # sum into the output (output_bytes: the partials')
    reduce_bytes: float = 0.0    # bytes those later launches read and write
    launches: int = 1

    def to_dict(self) -> dict:
        return asdict(self)

    def key(self) -> str:
        """Canonical configuration key (independent of how the program is written)."""
        fields = ("block_m", "block_n", "block_k", "num_warps", "stages", "tma_loads",
                  "tma_store", "warp_specialize", "persistent", "split_k", "atomic_output",
                  "group_m", "kmajor_b")
        # policies added later are named only where they hold, so that the keys of the
        # programs recorded before them stay as they were; a swapped tile is named in the
        # output's orientation (block_m rows of C), as its configuration names it
        later = [f for f in ("swap_ab", "stream_k", "reduce_pass") if getattr(self, f)]
        values = {f: getattr(self, f) for f in fields + tuple(later)}
        if self.swap_ab:
            values["block_m"], values["block_n"] = self.block_n, self.block_m
        return ",".join(f"{f}={v}" for f, v in values.items())


def extract(program: Program, sizes: dict[str, int], task=None, *, target: Target) -> KernelFeatures:
    if not isinstance(target, Target):
        raise TypeError(f"extract: `target` must be an argus_env.target.Target, got "
                        f"{type(target).__name__}")
    if task is not None and hasattr(task, "program_sizes"):
        sizes = task.program_sizes(program, sizes)
    program = live_program(program, sizes, target.sms)
    k = program.kernel
    finder = typed_dots(program)
    runs = _dot_runs(k, sizes, target, finder.dots)
    dot = _main_dot(finder, runs, target)
    bm, bk, bn = dot["shape"] if dot else (16, 16, 16)
    warps = int(k.option("num_warps", 4))
    loop = dot["loop"] if dot else None
    stages = _int_kw(loop, "stages") or int(k.option("num_stages", TRITON_DEFAULT_STAGES))
    consts = k.consts
    grid = _grid(program, sizes, consts, target.sms)
    programs = 1
    for g in grid:
        programs *= max(g, 0)
    persistent = persistent_loop(k) is not None
    atomic = bool(program.info.atomic) and not program.info.stored
    outputs = [p for p in k.tensors if p.name in program.info.outputs]
    out_dims = outputs[0].dims if outputs else ()
    swap = _swapped(k, finder, dot, out_dims)
    tiles_mn = 1
    for d, b in zip(out_dims[-2:], (bn, bm) if swap else (bm, bn)):
        tiles_mn *= -(-sizes.get(d, b) // b)
    # programs sharing one output tile's reduction: a grid of atomic writers larger than
    # the tiles, whichever axis carries the split; for a persistent grid, its work items
    # over the tiles (a walk over (tile, split) pairs is a split like any other)
    split = 1
    if atomic and not persistent:
        split = max(1, programs // max(tiles_mn, 1))
    elif atomic:
        split = max(1, (persistent_work(k, sizes, target.sms) or 0) // max(tiles_mn, 1))
    # a grid larger than the tiles writing partial sums to a workspace that a later launch
    # reads (split-K with a reduction pass): the split is its programs over the tiles, as
    # for atomic writers; what the main launch stores is the workspace's element type
    info = program.info
    first_writes = info.launch_writes[0] if info.launch_writes else set()
    staged = sorted(set(info.workspaces) & first_writes)
    reduce_pass = bool(staged) and not atomic and not persistent and len(info.grids) > 1
    reduce_bytes = 0.0
    if reduce_pass:
        split = max(1, programs // max(tiles_mn, 1))
        for p in k.tensors:
            if p.name in staged:
                reduce_bytes += _elements(p, sizes, k.consts) * _itemsize(p.dtype)
        reduce_bytes += sum(_elements(p, sizes, k.consts) * _itemsize(p.dtype) for p in outputs)
    stream = _stream_k(k, dot, persistent)
    work = loop_work(k, sizes, target.sms, stream) if stream is not None else None
    busiest = max(work) if work else (0, 0)
    k_iterations = max(1, -(-_contracted_size(program, sizes, dot) // (bk * split)))
    if split > 1 and not persistent and loop is not None and dot["for"] is not None:
        # the k steps the busiest split runs, counted on integers: a grid that claims more
        # splits than its loop's range takes is priced by the steps it executes
        trips = loop_trips_by_axis(k, sizes, target.sms, dot["for"])
        if trips is not None:
            k_iterations = max(1, trips)
    if dot is not None and work is None:
        # the main dot's calls in the busiest program, counted on integers (enclosing loops
        # included): a program that repeats its k loop, or runs more programs than tiles,
        # is priced for the k steps it executes, not for the contracted size once per tile
        per_program = -(-tiles_mn * split // max(programs, 1))   # tiles the model gives one

        def per_tile(steps: int) -> int:   # a program's steps, as steps of each of its tiles
            spread = -(-steps // max(per_program, 1))
            return spread if persistent else max(spread, -(-steps * programs //
                                                           max(tiles_mn * split, 1)))
        calls = runs.get(id(dot["call"]))
        if calls:
            k_iterations = max(k_iterations, per_tile(calls))
        # the dots outside the main loop, as the main loop's steps taking as long at the
        # main dot's instruction rate: a second pass over K costs a second pass
        side = _side_steps(finder.dots, dot, runs, target, warps)
        if side:
            k_iterations += per_tile(side)
    kmajor = any(p.order == "col_major" for p in k.tensors if p.name not in program.info.outputs)
    flops = task.flops(sizes) if task is not None else 2.0 * bm * bn * bk
    min_bytes = task.min_bytes(sizes) if task is not None else 0.0
    return KernelFeatures(
        task=getattr(task, "name", ""), sizes=tuple(sorted(sizes.items())), flops=flops,
        min_bytes=min_bytes, block_m=bm, block_n=bn, block_k=bk,
        dots=dot["count"] if dot else 1, num_warps=warps, stages=max(1, stages),
        mma=target.mma_of(dot["mma"], warps, bm) if dot else "fma",
        tma_loads=bool(dot and dot["tma"]), tma_store=finder.tma_store,
        warp_specialize=finder.warp_specialize, persistent=persistent,
        grid_programs=programs, tiles=tiles_mn * split, split_k=split, atomic_output=atomic,
        group_m=_group_m(k, sizes),
        kmajor_b=kmajor,
        operand_bytes=dot["bytes"] if dot else 2,
        output_bytes=_itemsize(next(p for p in k.tensors if p.name == staged[0]).dtype)
        if reduce_pass else _itemsize(outputs[0].dtype) if outputs else 2,
        k_iterations=k_iterations,
        staging_bytes=finder.staging_bytes, tma_pitches=_pitches(program, sizes, finder.tma_tensors),
        swap_ab=swap, stream_k=work is not None, busiest_steps=busiest[0],
        busiest_segments=busiest[1], zero_filled=bool(set(program.info.atomic) &
                                                      set(program.info.outputs)),
        reduce_pass=reduce_pass, reduce_bytes=reduce_bytes, launches=max(1, len(info.grids)))


def typed_dots(program: Program) -> "_MainDot":
    """The program walked with types: every product it runs (`.dots`, in program order,
    each with its tile shape and the tensors its operands come from: `.tensors`), the
    main one (`.best`), and what its stores stage."""
    finder = _MainDot(program)
    finder.block(program.kernel.body[1:], finder.typer.initial_scope(), depth=0, loop=None)
    return finder


class _MainDot:
    """Walks the program with types, remembering the dot in the deepest runtime loop."""

    def __init__(self, program: Program):
        self.program = program
        self.typer = program.typer  # the type check's: it knows every expression's type
        self.best: dict | None = None
        self.tma_store = False
        self.staging_bytes = 0          # bytes of the tiles stored by TMA
        self.tma_tensors: set[str] = set()
        self.warp_specialize = False
        self.sources: dict[str, frozenset] = {}   # name -> tensors its value was loaded from
        self.outer: list = []                     # the runtime loops around the statement
        self.enclosing: list = []                 # every loop around it (static ones too)
        self.dots: list[dict] = []                # every dot, in program order

    def block(self, stmts, scope: Scope, depth: int, loop) -> None:
        for s in stmts:
            self.stmt(s, scope, depth, loop)

    def stmt(self, s, scope: Scope, depth: int, loop) -> None:
        if isinstance(s, ir.For):
            if _flag(s.iter, "warp_specialize"):
                self.warp_specialize = True
            inner = scope.copy()
            inner.names[s.var] = ScalarT(self.typer.expr(s.iter, scope).dtype)
            runtime = s.iter.fn == "range"
            self.outer.append(s if runtime else None)
            self.enclosing.append(s)
            self.block(s.body, inner, depth + runtime, s.iter if runtime else loop)
            self.enclosing.pop()
            self.outer.pop()
            return
        if isinstance(s, ir.If):
            self.block(s.body, scope.copy(), depth, loop)
            self.block(s.orelse, scope.copy(), depth, loop)
            return
        value = s.value
        for node in walk(value):
            if isinstance(node, ir.Call) and node.fn == "dot":
                self.dot(node, scope, depth, loop)
            if isinstance(node, ir.Call) and node.fn in ("load", "store") and _flag(node, "tma"):
                self.tma_tensors.add(_tensor(node))
            if isinstance(node, ir.Call) and node.fn == "store" and _flag(node, "tma"):
                self.tma_store = True
                tile = self.typer.expr(node.arg("value"), scope)
                if isinstance(tile, TileT):
                    self.staging_bytes += tile.dtype.itemsize * _prod(tile.shape)
        if isinstance(s, ir.Assign):
            t = self.typer.expr(value, scope)
            if len(s.targets) == 1:
                scope.names[s.targets[0]] = t
                self.sources[s.targets[0]] = self.tensors(value)

    def dot(self, call: ir.Call, scope: Scope, depth: int, loop) -> None:
        a, b = self.typer.expr(call.arg("a"), scope), self.typer.expr(call.arg("b"), scope)
        if not (isinstance(a, TileT) and isinstance(b, TileT)):
            return
        tma = all(_loads_tma(call.arg(x)) for x in ("a", "b"))
        mma = call.arg("mma")
        loops = [x for x in self.outer if x is not None]
        info = {"shape": (a.shape[0], a.shape[1], b.shape[1]), "loop": loop, "depth": depth,
                "tma": tma, "bytes": a.dtype.itemsize, "count": 1,
                "mma": mma.name if isinstance(mma, ir.Symbol) else None,
                "a_from": self.tensors(call.arg("a")),
                "for": loops[-1] if loops else None, "around": loops[-2] if len(loops) > 1 else None,
                "enclosing": tuple(self.enclosing), "call": call}
        self.dots.append(dict(info))
        if self.best is None or depth > self.best["depth"]:
            self.best = info
        elif depth == self.best["depth"] and loop is self.best["loop"]:
            self.best["count"] += 1


    def tensors(self, e) -> frozenset:
        """The tensors expression `e` reads, through the names it uses."""
        out = set()
        for n in walk(e):
            if isinstance(n, ir.Call) and n.fn == "load" and _tensor(n):
                out.add(_tensor(n))
            elif isinstance(n, ir.Name):
                out |= self.sources.get(n.id, frozenset())
        return frozenset(out)


def _dot_runs(kernel: ir.Kernel, sizes: dict, target: Target, dots: list[dict]) -> dict:
    """{id of a dot call: its calls in the busiest program}, where they can be counted:
    the trips of its innermost runtime loop summed over that loop's entries, on integers
    per program (`loop_trips_by_axis`), else the product of its enclosing loops' trip
    bounds; times the unrolled loops inside that loop. A dot whose count is not known
    (a bound read off a tile) is left out."""
    ev = _Eval(_known(kernel, sizes), None, target.sms)
    out: dict = {}
    for d in dots:
        loops = d["enclosing"]
        runtime = [i for i, loop in enumerate(loops) if loop.iter.fn == "range"]
        inner = runtime[-1] if runtime else -1
        calls = 1.0
        for loop in loops[inner + 1:]:
            calls *= trips_at_most(loop.iter, ev)
        if inner >= 0:
            trips = loop_trips_by_axis(kernel, sizes, target.sms, loops[inner])
            if trips is None:
                trips = 1.0
                for loop in loops[:inner + 1]:
                    trips *= trips_at_most(loop.iter, ev)
            calls *= trips
        if not math.isinf(calls):
            out[id(d["call"])] = int(calls)
    return out


def _dot_rate(target: Target, mma: str) -> float:
    """A dot instruction's per-SM rate (FLOP/us), as the analytic model takes it."""
    from .calibration import CalibrationParams
    c, p = CalibrationParams.load(target.name), target.profile
    if mma == "fma":
        return p.fp32_tflops * 1e6 / p.sms
    eff = c.wgmma_efficiency if mma == "wgmma" else c.mma_v2_efficiency
    return p.bf16_tflops_peak * 1e6 / p.sms * eff


def _dot_flops(d: dict) -> float:
    m, kk, n = d["shape"]
    return 2.0 * m * kk * n


def _main_dot(finder: "_MainDot", runs: dict, target: Target) -> dict | None:
    """The main dot: of the loops holding dots, the one whose dots take longest at their
    instructions' rates in the busiest program (their calls counted, `_dot_runs`); the dot
    in the deepest runtime loop where no count is known or the times tie. A dot that runs
    once beside a loop of slow products does not set the program's tile or instruction."""
    best = finder.best
    if best is None or not finder.dots:
        return best
    warps = int(finder.program.kernel.option("num_warps", 4))

    def seconds(group) -> float:
        return sum(_dot_flops(d) * runs[id(d["call"])] /
                   _dot_rate(target, target.mma_of(d["mma"], warps, d["shape"][0]))
                   for d in group)

    groups: list[list[dict]] = []
    for d in finder.dots:
        for g in groups:
            if g[0]["loop"] is d["loop"] and g[0]["depth"] == d["depth"]:
                g.append(d)
                break
        else:
            groups.append([d])
    known = [g for g in groups if all(id(d["call"]) in runs for d in g)]
    mine = next((g for g in groups if any(d["call"] is best["call"] for d in g)), None)
    if not known or mine is None or mine not in known:
        return best
    top = max(known, key=seconds)
    if seconds(top) <= seconds(mine) * (1 + 1e-9):
        return best
    return {**top[0], "count": len(top)}


def _side_steps(dots: list[dict], main: dict, runs: dict, target: Target, warps: int) -> int:
    """The dots outside the main dot's loop in the busiest program (their calls counted,
    `_dot_runs`), as main-loop steps of the main dots taking as long at their rate."""
    group = [d for d in dots if d["loop"] is main["loop"] and d["depth"] == main["depth"]]
    step = sum(_dot_flops(d) / _dot_rate(target, target.mma_of(d["mma"], warps, d["shape"][0]))
               for d in group)
    side = sum(_dot_flops(d) * runs.get(id(d["call"]), 0) /
               _dot_rate(target, target.mma_of(d["mma"], warps, d["shape"][0]))
               for d in dots if not any(d is g for g in group))
    return math.ceil(side / step - 1e-9) if step > 0 and side > 0 else 0


def _swapped(kernel: ir.Kernel, finder: _MainDot, dot, out_dims) -> bool:
    """Whether the main dot computes the output tile transposed (swap-AB): its left
    operand is read from tensors holding the output's column dim and not its row dim."""
    if not dot or len(out_dims) < 2 or not dot["a_from"]:
        return False
    dims = {d for p in kernel.tensors if p.name in dot["a_from"] for d in p.dims}
    return out_dims[-1] in dims and out_dims[-2] not in dims


def _stream_k(kernel: ir.Kernel, dot, persistent: bool):
    """The main loop of a stream-K program, or None: a loop whose range follows the
    program's position, inside a loop over tiles whose range does too, in a launch that
    is not a persistent grid-stride walk."""
    if not dot or persistent or dot["for"] is None or dot["around"] is None:
        return None
    main, around = dot["for"], dot["around"]
    if main.iter.fn != "range" or around.iter.fn != "range":
        return None
    moving = all(any(depends_on_position(kernel, x) for x in (it.arg("start"), it.arg("stop"))
                     if x is not None) for it in (main.iter, around.iter))
    stores = any(isinstance(n, ir.Call) and n.fn in ("store", "atomic_add") for n in walk(around))
    return main if moving and stores else None


def _group_m(kernel: ir.Kernel, sizes: dict) -> int:
    """The grouped tile order's GROUP_M: where it moves the tiles the first programs
    store (worked out on integers), or else shapes the addresses with the program's
    position; 1 (row-major) otherwise."""
    value = int(kernel.consts.get("GROUP_M", 1) or 1)
    if value == 1 or not feeds_index(kernel, "GROUP_M"):
        return 1
    moves = order_depends_on(kernel, "GROUP_M", sizes)
    return value if moves is None or moves else 1


def _tensor(call: ir.Call) -> str | None:
    ref = call.arg("ref")
    return ref.base.id if isinstance(ref, ir.Subscript) and isinstance(ref.base, ir.Name) else None


def _elements(p, sizes: dict, consts: dict) -> int:
    """Elements of tensor parameter `p` at these sizes (a dim may name a constant)."""
    n = 1
    for d in p.dims:
        n *= int(sizes.get(d, consts.get(d, 1)) or 1)
    return n


def _prod(shape) -> int:
    out = 1
    for s in shape:
        out *= s
    return out


def _pitches(program: Program, sizes: dict, names: set) -> tuple[tuple[str, int], ...]:
    """Bytes per row along the contiguous dimension of each tensor accessed by TMA."""
    out = []
    for p in program.kernel.tensors:
        if p.name in names and p.dims:
            dim = p.dims[0] if p.order == "col_major" else p.dims[-1]
            if dim in sizes:
                out.append((p.name, int(sizes[dim]) * _itemsize(p.dtype)))
    return tuple(out)


def _loads_tma(e: ir.Expr) -> bool:
    loads = [n for n in walk(e) if isinstance(n, ir.Call) and n.fn == "load"]
    return bool(loads) and all(_flag(n, "tma") for n in loads)


def _flag(call, name: str) -> bool:
    v = call.arg(name) if call is not None else None
    return isinstance(v, ir.Const) and v.value is True


def _int_kw(call, name: str) -> int | None:
    v = call.arg(name) if call is not None else None
    return v.value if isinstance(v, ir.Const) and isinstance(v.value, int) else None


def _itemsize(dtype: str) -> int:
    from ..dsl.dtypes import DTYPES
    return DTYPES[dtype].itemsize


def _grid(program: Program, sizes: dict, consts: dict, num_sms: int) -> list[int]:
    """The launch grid at these sizes (evaluated like the launcher does)."""
    env = {**consts, **sizes}

    def ev(e):
        if isinstance(e, ir.Const):
            return e.value
        if isinstance(e, ir.Name):
            return env[e.id]
        if isinstance(e, ir.BinOp):
            a, b = ev(e.lhs), ev(e.rhs)
            return {"+": a + b, "-": a - b, "*": a * b, "//": a // b if b else 0,
                    "%": a % b if b else 0}[e.op]
        if isinstance(e, ir.Call):
            if e.fn == "num_sms":
                return num_sms
            a, b = ev(e.arg("a")), ev(e.arg("b"))
            return {"cdiv": -(-a // b) if b else 0, "minimum": min(a, b), "maximum": max(a, b)}[e.fn]
        raise ValueError(f"grid: cannot evaluate {type(e).__name__}")
    return [int(ev(d)) for d in program.info.grid.arg("dims").elts]


def _contracted_size(program: Program, sizes: dict, dot) -> int:
    """The size of the dimension the main dot reduces over (K for GEMM); without a dot,
    the task's contracted dimension all the same (the products are done another way)."""
    names = [d for p in program.kernel.tensors for d in p.dims]
    for name in ("K", "D", "SK"):
        if name in names and name in sizes:
            return sizes[name]
    return dot["shape"][1] if dot else 1


__all__ = ["KernelFeatures", "extract", "RefT"]
