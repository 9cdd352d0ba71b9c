"""The concrete checker: run EVERY program instance of the grid at one small size.

`check_concrete(program, sizes)` evaluates the grid on the host, runs each instance with the
numpy interpreter of `interp` (tags, coverage and integer values per element, per
SEMANTICS.md), records every write, and then applies the whole-program checks: no element
written twice unless atomically (**exactly_once**, checked as writes arrive), every element
of an output written (**bijection**), and the task's coverage of stored elements (except
what the task's pack settles itself, `InvariantPack.concrete_outputs`). It is the
soundness cross-check of the symbolic checker at one size, and `replay` re-runs the single
instance a violation names to show the tags there.

Choices where SEMANTICS.md leaves room (closest to Triton's behaviour):
- a second plain `store` of an element is **exactly_once** whatever the two writes are
  (instances, iterations, two statements, or one access naming an element twice);
- the task's store coverage is checked per `store` (a store overwrites, so each must carry
  the whole range) and over the sum of all `atomic_add` contributions;
- instances run with axis 0 fastest, as the hardware launches them; "first" counterexample
  means first in that order.
"""

from __future__ import annotations

import itertools
import math
import time

import numpy as np

from ...dsl.program import Program
from ...dsl.semantic import launches
from ...ir.rewrite import assigned as _assigned
from ...ir import nodes as ir
from ...ir.rewrite import walk
from .bounds import bound, size_expr
from .interp import Fork, Interp, Probe, ProbeDone, Shared, stmt_text
from .memory import TensorWrites
from .ops import ConcreteError
from .values import Val, cov_text, coverage_mismatch, describe, expect_range, first
from ..pack import pack_of
from ..report import InvariantReport, Violation

__all__ = ["check_concrete", "replay", "ConcreteError"]


def check_concrete(program: Program, sizes: dict[str, int], task=None, inputs: dict | None = None,
                   num_sms: int = 3, max_instances: int = 100_000,
                   target=None) -> InvariantReport:
    """Check `program` by running all its instances at `sizes` (method "concrete").

    `task` supplies the coverage every output element must end with; `inputs` the content
    of integer input tensors (numpy or torch) and values of runtime scalars; `num_sms` is
    what `A.num_sms()` returns; `target` (an `argus_env.target.Target`) gives the MMA
    instruction of a `dot` without `mma=` (the thread named in a counterexample). Raises `ValueError` when the grid has more than
    `max_instances` instances, `ConcreteError` when an op cannot be run concretely.
    """
    start = time.perf_counter()
    sh = _prepare(program, sizes, task, inputs, num_sms)
    sh.target = target
    grids, total = [], 0
    for i in range(len(launches(program.kernel))):
        # each launch runs after the previous one: its own grid, its own whole-program
        # checks; what it reads from a tensor an earlier launch wrote covers what was written
        _launch(sh, program, i)
        count = math.prod(sh.grid)
        if total + count > max_instances:
            raise ValueError(f"check_concrete: the grid {sh.grid} at {sh.sizes} brings the "
                             f"instances to {total + count}, more than "
                             f"max_instances={max_instances}")
        total += count
        grids.append(sh.grid)
        for pid in instances(sh.grid):
            run_instance(sh, pid)
        _whole_program(sh, program)
    sizes_text = ", ".join(f"{k}={v}" for k, v in sh.sizes.items())
    shown = ", ".join(str(g) for g in grids)
    return InvariantReport(
        program.name, program.hash, list(sh.rec.found.values()), sh.rec.proven(),
        queries=0, milliseconds=(time.perf_counter() - start) * 1e3, method="concrete",
        notes=[f"concrete run at {sizes_text}: grid{'s' if len(grids) > 1 else ''} {shown}, "
               f"{total} instances, num_sms={num_sms}"])


def replay(program: Program, violation: Violation, task=None, inputs: dict | None = None,
           num_sms: int = 3) -> dict:
    """Re-run the instance `violation.program_id` at `violation.sizes` and read the values
    at the op, loop iteration (`violation.names`) and element the violation names.

    Pass the `task`, `inputs` and `num_sms` the check used. Returns a dict with
    `invariant`, `op`, `line`, `program_id`, `sizes`, `element` copied from the violation,
    `names` (integer variables in scope there, loop variables included: equal to
    `violation.names` when the replay found the same iteration), and per op:

    - `store` / `atomic_add`: `coords` (destination), `mask`, `value` (the stored element);
    - `load`: `coords`, `mask`, `in_bounds`, `value` (the loaded element);
    - `dot`: `lane` (from `violation.other`), `a` = a[i, lane], `b` = b[lane, j], and at
      (i, j): `acc` (the accumulator in), `product` (a @ b alone), `result` (their sum);
    - `assert_tags`: `value` (the asserted element);
    - elementwise ops (`+`, `tag`, ...): `operands`, one per operand.

    Each element summary is `{"tags": {name: int}, "coverage": {name: text},
    "sets": {name: text}, "value": int | bool | None}`, coverage spelt as in violations
    ("[0, 40)", "[0, 32) x2"). A whole-program violation (no `program_id`: bijection, the
    coverage summed over atomic_adds) re-runs the whole grid and returns `tensor`,
    `coords`, `writes` (how many writes the element got) and `coverage` (atomic sum).
    Raises `LookupError` when the op is not reached in that iteration.
    """
    sh = _prepare(program, violation.sizes, task, inputs, num_sms)
    head = {"invariant": violation.invariant, "op": violation.op, "line": violation.line,
            "program_id": tuple(violation.program_id), "sizes": dict(sh.sizes),
            "element": tuple(violation.element)}
    last = _launch_at(program, violation.line)
    for i in range(last):  # the launches before write what this one reads
        _launch(sh, program, i)
        for pid in instances(sh.grid):
            run_instance(sh, pid)
    _launch(sh, program, last)
    if not violation.program_id:
        for pid in instances(sh.grid):
            run_instance(sh, pid)
        return {**head, **_element_writes(sh, violation.tensor, violation.coords)}
    sh.probe = Probe(violation)
    try:
        Interp(sh, tuple(violation.program_id)).run()
    except ProbeDone:
        pass
    if sh.probe.found is None:
        raise LookupError(f"replay: {violation.op} at line {violation.line} is not reached by "
                          f"program {tuple(violation.program_id)} with {violation.names}")
    return {**head, **sh.probe.found}


#: most paths one instance is run along (each `if` on floating-point data doubles them)
MAX_PATHS = 1024


def run_instance(sh: Shared, pid: tuple[int, ...]) -> None:
    """Run instance `pid` along every way its `if`s on floating-point data can go (the
    symbolic checker merges both branches; here each is a path of its own). Every path's
    violations are recorded; the writes are those of the last path, each path starting
    from the writes the instances before left."""
    sh.decisions, sh.cursor = [], 0
    if not sh.branches:  # no `if` in this launch: one path
        Interp(sh, pid).run()
        return
    saved = {n: tw.copy() for n, tw in sh.writes.items()}
    todo, paths = [[]], 0
    while todo:
        paths += 1
        if paths > MAX_PATHS:
            raise ConcreteError(f"concrete: program {pid} branches on floating-point data along "
                                f"more than {MAX_PATHS} paths; the concrete checker is meant "
                                "for small sizes")
        sh.decisions, sh.cursor = todo.pop(), 0
        if paths > 1:
            sh.writes = {n: tw.copy() for n, tw in saved.items()}
        try:
            Interp(sh, pid).run()
        except Fork:
            todo += [sh.decisions + [False], sh.decisions + [True]]
    sh.decisions, sh.cursor = [], 0


# ---------------------------------------------------------------- setup
def instances(grid: tuple[int, ...]):
    """Program id tuples, axis 0 fastest."""
    for rest in itertools.product(*(range(g) for g in reversed(grid))):
        yield tuple(reversed(rest))


def _prepare(program: Program, sizes: dict[str, int], task, inputs, num_sms: int) -> Shared:
    kernel = program.kernel
    missing = [s for s in kernel.sizes if s not in sizes]
    if missing:
        raise ValueError(f"check_concrete: sizes lack {missing}; {program.name} needs "
                         f"{list(kernel.sizes)}")
    sizes = {s: int(sizes[s]) for s in kernel.sizes}
    # the coverage each output element must end with, as bound texts (`bounds.bound`: a
    # causal row's keys depend on the row)
    required = task.store_coverage_for(kernel.consts) if hasattr(task, "store_coverage_for") \
        else getattr(task, "store_coverage", None)
    task_cov = {tensor: dict(rels) for tensor, rels in (required or {}).items()}
    sh = Shared(kernel, sizes, (), num_sms, dict(inputs or {}), task_cov, loop_carried(kernel),
                pack=pack_of(task))
    _launch(sh, program, 0)
    return sh


def _launch(sh: Shared, program: Program, i: int) -> None:
    """Make launch `i` the one `Interp.run` runs: its statements and grid, and a fresh
    record of its writes; the finished launch's writes go to `sh.memory` for tensors a
    later launch reads."""
    kernel, info = program.kernel, program.info
    if i and sh.writes:
        for name, tw in sh.writes.items():
            if tw.keep:
                sh.memory.setdefault(name, []).append(tw)
    grid, body = launches(kernel)[i]
    sh.body = tuple(body)
    sh.branches = any(isinstance(n, ir.If) for s in body for n in walk(s))
    host = Interp(sh, ())
    sh.grid = tuple(max(int(host.known(host.val(d), "grid")), 0) for d in grid.arg("dims").elts)
    later = set().union(*info.launch_loads[i + 1:]) if i + 1 < len(info.launch_loads) else set()
    sh.writes = {}
    for p in kernel.tensors:
        if p.name in info.launch_writes[i]:
            sh.writes[p.name] = TensorWrites(tuple(kernel.extents(sh.sizes)[d] for d in p.dims),
                                             keep=p.name in later)


def _launch_at(program: Program, line: int) -> int:
    """The launch whose statements hold source line `line` (the last one starting before)."""
    starts = [grid.loc.line for grid, _ in launches(program.kernel)]
    return max([i for i, s in enumerate(starts) if s <= line], default=0)


def loop_carried(kernel: ir.Kernel) -> dict[int, frozenset[str]]:
    """For each loop (by id), the names assigned in its body that are defined before it."""
    out: dict[int, frozenset[str]] = {}

    def block(stmts, defined: set[str]) -> None:
        for s in stmts:
            if isinstance(s, ir.Assign):
                defined.update(s.targets)
            elif isinstance(s, ir.For):
                body = _assigned(s.body)
                out[id(s)] = frozenset(body & defined)
                block(s.body, defined | {s.var})
                defined.update(body | {s.var})
            elif isinstance(s, ir.If):
                block(s.body, set(defined))
                block(s.orelse, set(defined))
                defined.update(_assigned(s.body) | _assigned(s.orelse))

    block(kernel.body, {p.name for p in kernel.params} | set(kernel.sizes))
    return out


# ---------------------------------------------------------------- whole program
def _writers(kernel: ir.Kernel) -> dict[tuple[str, str], ir.ExprStmt]:
    """The first `store` / `atomic_add` statement of each (tensor, op), in program order."""
    out: dict[tuple[str, str], ir.ExprStmt] = {}
    for node in walk(kernel):
        if isinstance(node, ir.ExprStmt) and node.value.fn in ("store", "atomic_add"):
            ref = node.value.arg("ref")
            out.setdefault((ref.base.id, node.value.fn), node)
    return out


def _whole_program(sh: Shared, program: Program) -> None:
    """The whole-program checks of the launch just run, over its writes."""
    writers = _writers(sh.kernel)
    settle = sh.pack.concrete_outputs if sh.pack is not None else None
    settled = {}   # output -> the obligations the pack settled itself
    for name in program.info.outputs:
        if name not in sh.writes:
            continue
        tw = sh.writes[name]
        settled[name] = frozenset(settle(sh, name, tw)) if settle is not None else frozenset()
        if "written" in settled[name]:
            continue
        s = writers.get((name, "store")) or writers[(name, "atomic_add")]
        sh.rec.checked(s.value.fn, s.loc.line, "bijection")
        unwritten = (tw.stores + tw.atomics) == 0
        if unwritten.any() and sh.rec.wants("bijection", s.loc.line):
            coords = _coords(tw, int(np.argmax(unwritten)))
            sh.rec.add(Violation(
                "bijection", s.value.fn, s.value.loc.line, f"{name}{list(coords)} is written "
                "by no program instance (the program-id remap is not onto the tiles)",
                source=stmt_text(s), sizes=dict(sh.sizes), tensor=name, coords=coords,
                expected={"writes": 1}, actual={"writes": 0}))
    for tensor, rels in sh.task_cov.items():
        tw = sh.writes.get(tensor)
        if tw is None or not tw.atomics.any():
            continue
        s = writers[(tensor, "atomic_add")]
        for name, (lo, hi) in rels.items():
            if name not in settled.get(tensor, ()):
                _atomic_coverage(sh, s, tensor, tw, name, lo, hi)


def _atomic_coverage(sh: Shared, s: ir.ExprStmt, tensor: str, tw: TensorWrites, name: str,
                     lo_text: str, hi_text: str) -> None:
    """The coverage summed over all atomic_add contributions must be the task's range."""
    line = tw.atomic_line or s.loc.line
    sh.rec.checked("atomic_add", line, "coverage")
    c = tw.atomic_cov.get(name)
    v = Val((tw.atomics.size,), cov={} if c is None else {name: c})
    dims = sh.kernel.param(tensor).dims
    flat = np.unravel_index(np.arange(tw.atomics.size), tw.extent)
    lo, hi = (bound(t, sh.sizes, dict(zip(dims, flat))) for t in (lo_text, hi_text))
    el = first(coverage_mismatch(v, name, lo, hi, tw.atomics > 0))
    if el is None or not sh.rec.wants("coverage", line):
        return
    coords, got = _coords(tw, el[0]), cov_text(v, name, el)
    want = expect_range(int(np.broadcast_to(lo, v.shape)[el]), int(np.broadcast_to(hi, v.shape)[el]))
    sh.rec.add(Violation(
        "coverage", "atomic_add", line, f"the atomic_add contributions to {tensor}"
        f"{list(coords)} cover {name} as {got}; the task requires {want}, "
        "each index once", source=stmt_text(s), sizes=dict(sh.sizes), tensor=tensor,
        coords=coords, expected={name: want}, actual={name: got}))


def _coords(tw: TensorWrites, flat: int) -> tuple[int, ...]:
    return tuple(int(i) for i in np.unravel_index(flat, tw.extent))


def _element_writes(sh: Shared, tensor: str, coords: tuple[int, ...]) -> dict:
    tw = sh.writes[tensor]
    k = int(np.ravel_multi_index(tuple(coords), tw.extent))
    cov = {n: describe(c.counts[k], c.lo) for n, c in tw.atomic_cov.items()}
    return {"tensor": tensor, "coords": tuple(coords),
            "writes": int(tw.stores[k] + tw.atomics[k]), "coverage": cov}
