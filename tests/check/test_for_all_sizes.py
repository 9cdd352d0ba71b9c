"""Proofs for all problem sizes at once (`check_for_all_sizes`): the task's varying sizes
are z3 variables over [1, 2**30]; a proof holds for every value, an undecided query is no
proof, and a program outside the fragment is checked size by size."""

from __future__ import annotations

import pytest

from argus_env.check import FOR_ALL_RANGE, CheckUnsupported, check_for_all_sizes, check_program
from argus_env.dsl.program import Program
from argus_env.envs.evaluate import Evaluator
from argus_env.measure.analytic import ModelBackend
from argus_env.task import get_task

import corpus
import corpus_attention

GEMM, ATTENTION, RMSNORM, MOE = (get_task(t) for t in ("gemm", "attention", "rmsnorm", "moe"))

PROVEN = [(GEMM, "baseline", GEMM.shapes[0].sizes), (GEMM, "prefetch", GEMM.shapes[0].sizes),
          (RMSNORM, "baseline", RMSNORM.shapes[0].sizes), (RMSNORM, "expert", RMSNORM.shapes[0].sizes)]
PROVEN += [(ATTENTION, w, c.sizes) for w in ("baseline", "expert") for c in ATTENTION.shapes[:2]]


@pytest.mark.parametrize("task,which,sizes", PROVEN,
                         ids=lambda x: x if isinstance(x, str) else getattr(x, "name", None))
def test_task_programs_are_proven_for_all_sizes(task, which, sizes):
    report, why = check_for_all_sizes(task.bind(task.program(which), sizes), sizes, task)
    assert report is not None, why
    assert report.status == "proven", report.render()
    assert report.notes[-1].startswith(f"for all {', '.join(task.for_all_sizes)}")


MUTATIONS = [(GEMM, m) for m in corpus.CORPUS] + [(ATTENTION, m) for m in corpus_attention.CORPUS]


@pytest.mark.parametrize("task,mutation", MUTATIONS, ids=lambda x: getattr(x, "name", None))
def test_no_seeded_bug_is_proven_for_all_sizes(task, mutation):
    """Soundness: each corpus program is wrong at its corpus sizes, so no proof for all
    sizes may cover it; a refutation's counterexample sizes show a violation of the same
    class when checked at exactly those sizes."""
    prog = mutation.program()
    report, why = check_for_all_sizes(prog, mutation.sizes, task)
    if report is None:
        assert why, "a fallback says why"
        return
    assert not report.ok, f"{mutation.name} proven for all sizes:\n{report.render()}"
    v = report.violations[0]
    again = check_program(task.bind(prog, v.sizes) if task is ATTENTION else prog, v.sizes, task)
    assert v.invariant in again.kinds(), (v.render(), again.render())


def test_a_program_that_tests_its_sizes_is_checked_size_by_size():
    """`A.where(M <= 130, ...)` switches behaviour at a size: no proof for all sizes."""
    text = GEMM.program("baseline").text.replace(
        "acc = A.dot(a_tile, b_tile, acc)",
        "acc = A.dot(a_tile, b_tile, acc) * A.where(M <= 130, 1.0, 0.0)")
    report, why = check_for_all_sizes(Program.from_text(text), GEMM.shapes[0].sizes, GEMM)
    assert report is None and "tests its sizes" in why and "M <= 130" in why, why


def test_a_task_without_varying_sizes_and_an_undecided_proof_fall_back():
    moe = MOE.shapes[0].sizes
    report, why = check_for_all_sizes(MOE.program("expert"), moe, MOE)
    assert report is None and "episode's sizes only" in why
    # stream-K: its k ranges per program divide by the grid, a term of the sizes twice
    report, why = check_for_all_sizes(GEMM.program("streamk"), GEMM.shapes[0].sizes, GEMM)
    assert report is None and why.startswith("undecided for all sizes"), why


def test_the_environment_reuses_one_proof_across_shapes():
    """A program met at a second shape is proven for all sizes once; a third shape takes
    that proof without a check of its own; the verdicts are the per-shape ones."""
    ev = Evaluator(GEMM, ModelBackend("h200"), correctness="none", legality=False)
    try:
        prog = GEMM.program("baseline")
        shapes = [c.sizes for c in GEMM.shapes[:3]]
        first = ev.evaluate(prog, shapes[0])
        second = ev.evaluate(prog, shapes[1])
        third = ev.evaluate(prog, shapes[2])
        assert first.report.ok and second.report.ok and third.report.ok
        assert not any(n.startswith("for all") for n in first.report.notes)
        assert second.report.notes[-1].startswith("for all M, N, K")
        assert third.report is second.report  # one proof, no third check
        lo, hi = FOR_ALL_RANGE
        assert all(lo <= s[n] < hi for s in shapes for n in "MNK")
    finally:
        ev.close()


def test_a_proof_is_not_reused_where_a_fixed_size_differs():
    ev = Evaluator(ATTENTION, ModelBackend("h200"), correctness="none", legality=False)
    try:
        a, b = ATTENTION.shapes[0].sizes, dict(ATTENTION.shapes[0].sizes)
        b["SQ"] = b["SK"] = 1024  # same fixed sizes: proven for all
        c = {**a, "H": 16, "KVH": 16}  # another head count: its own proof
        prog = ATTENTION.bind(ATTENTION.program("expert"), a)
        ev.evaluate(prog, a)
        second = ev.evaluate(prog, b)
        third = ev.evaluate(prog, c)
        assert second.report.notes[-1].startswith("for all B, SQ, SK")
        assert third.report is not second.report
    finally:
        ev.close()


def test_a_counterexample_for_all_sizes_stands_only_where_its_sizes_show_it(monkeypatch):
    """A violation the all-sizes query reports is checked again at its own sizes; where
    that check finds no violation of its class, the answer is no proof and no refutation
    (checked size by size), never a reported bug."""
    import dataclasses

    from argus_env.check import symbolic
    from argus_env.check.report import Violation
    real = symbolic.check
    sizes = dict(GEMM.shapes[0].sizes)
    program = GEMM.bind(GEMM.program("baseline"), sizes)

    def with_a_false_counterexample(prog, at, task=None, **kw):
        report = real(prog, at, task, **kw)
        if "for_all" in kw:   # as if the all-sizes query had found a model
            fake = Violation("coverage", "store", 1, "a made-up counterexample",
                             sizes={"M": 3, "N": 5, "K": 7})
            report = dataclasses.replace(report, violations=[fake])
        return report

    monkeypatch.setattr(symbolic, "check", with_a_false_counterexample)
    report, why = check_for_all_sizes(program, sizes, GEMM)
    assert report is None
    assert "coverage counterexample at M=3, N=5, K=7 is not one" in why
    assert "proven" in why   # the check at those sizes


# ------------------------------------------------ tile maps dividing by a tile count
#: a grouped tile order on a one-dimensional grid (the catalog's `group_m` without a
#: persistent grid): the tile is read off the program id through divisions by
#: `GROUP_M * cdiv(N, BN)` and by the group's width
GROUPED = '''
from argus_env import dsl as A


@A.kernel(num_warps=4)
def gemm(
    a: A.Tensor[A.bf16, "M", "K"],
    b: A.Tensor[A.bf16, "K", "N"],
    c: A.Tensor[A.bf16, "M", "N"],
    BM: A.const = 64,
    BN: A.const = 128,
    BK: A.const = 32,
    GROUP_M: A.const = 8,
):
    A.grid(A.cdiv(M, BM) * A.cdiv(N, BN))
    num_pid_m = A.cdiv(M, BM)
    num_pid_n = A.cdiv(N, BN)
    tile = A.program_id(0)
    tiles_per_group = GROUP_M * num_pid_n
    first_m = tile // tiles_per_group * GROUP_M
    group_m = A.minimum(num_pid_m - first_m, GROUP_M)
    pid_m = first_m + tile % group_m
    pid_n = tile % tiles_per_group // group_m
    rows = pid_m * BM + A.arange(BM)
    cols = pid_n * BN + A.arange(BN)
    acc = A.zeros((BM, BN), A.f32)
    for k in A.range(0, K, BK):
        ks = k + A.arange(BK)
        a_tile = A.load(a[rows, ks], mask=(rows < M, ks < K), other=0.0)
        b_tile = A.load(b[ks, cols], mask=(ks < K, cols < N), other=0.0)
        acc = A.dot(a_tile, b_tile, acc)
    A.assert_tags(acc, M=rows[:, None], N=cols[None, :], K=A.covers(0, K))
    A.store(c[rows, cols], A.cast(acc, A.bf16), mask=(rows < M, cols < N))
'''


def _edit(text: str, old: str, new: str) -> Program:
    assert old in text, old
    return Program.from_text(text.replace(old, new, 1))


def _subtiles(text: str) -> str:
    """`text` with its epilogue in two column subtiles (two accumulators, two stores)."""
    for old, new in [
            ("    cols = pid_n * BN + A.arange(BN)\n    acc = A.zeros((BM, BN), A.f32)",
             "    cols = pid_n * BN + A.arange(BN // 2)\n    cols_hi = cols + BN // 2\n"
             "    acc = A.zeros((BM, BN // 2), A.f32)\n    acc_hi = A.zeros((BM, BN // 2), A.f32)"),
            ("        acc = A.dot(a_tile, b_tile, acc)",
             "        b_hi = A.load(b[ks, cols_hi], mask=(ks < K, cols_hi < N), other=0.0)\n"
             "        acc = A.dot(a_tile, b_tile, acc)\n        acc_hi = A.dot(a_tile, b_hi, acc_hi)"),
            ("    A.store(c[rows, cols], A.cast(acc, A.bf16), mask=(rows < M, cols < N))",
             "    A.store(c[rows, cols], A.cast(acc, A.bf16), mask=(rows < M, cols < N))\n"
             "    A.assert_tags(acc_hi, M=rows[:, None], N=cols_hi[None, :], K=A.covers(0, K))\n"
             "    A.store(c[rows, cols_hi], A.cast(acc_hi, A.bf16), mask=(rows < M, cols_hi < N))")]:
        assert old in text, old
        text = text.replace(old, new, 1)
    return text


#: programs whose tiles are read off an index through divisions by tile counts, proven
#: for all sizes by counting (`whole._counted_for_all`) over their digits (`digits`)
TILE_MAPS = {
    "grouped": lambda: Program.from_text(GROUPED),
    "grouped, GROUP_M 16": lambda: _edit(GROUPED, "GROUP_M: A.const = 8", "GROUP_M: A.const = 16"),
    "grouped, two column subtiles": lambda: Program.from_text(_subtiles(GROUPED)),
    "persistent grouped (expert)": lambda: GEMM.program("expert"),
    "split-K": lambda: GEMM.program("splitk"),
    "split-K with a reduction pass": lambda: GEMM.program("splitk_reduce"),
}


@pytest.mark.parametrize("name", list(TILE_MAPS))
def test_tile_maps_dividing_by_a_tile_count_are_proven_for_all_sizes(name):
    sizes = GEMM.shapes[0].sizes
    report, why = check_for_all_sizes(GEMM.bind(TILE_MAPS[name](), sizes), sizes, GEMM)
    assert report is not None, why
    assert report.status == "proven", report.render()


#: seeded bugs wrong only at some sizes: (name, program, the sizes where it is wrong,
#: whether the all-sizes check must name a counterexample)
SOMETIMES_WRONG = [
    # rows <= M: one row past the end where M is not a multiple of BM
    ("row mask `rows <= M`", lambda: _edit(GROUPED, "mask=(rows < M, cols < N))",
                                          "mask=(rows <= M, cols < N))"),
     {"M": 100, "N": 128, "K": 64}, True),
    # a group seven rows wide for eight: wrong only from eight tile rows on
    ("group width off by one", lambda: _edit(GROUPED, "A.minimum(num_pid_m - first_m, GROUP_M)",
                                            "A.minimum(num_pid_m - first_m, GROUP_M - 1)"),
     {"M": 1024, "N": 256, "K": 64}, False),
    # the grouped order's tile count per group one row short
    ("tiles per group one short", lambda: _edit(GROUPED, "tiles_per_group = GROUP_M * num_pid_n",
                                               "tiles_per_group = (GROUP_M - 1) * num_pid_n"),
     {"M": 1024, "N": 256, "K": 64}, False),
    # a persistent stride one less than the grid: two programs meet on one tile
    ("persistent stride one too small",
     lambda: _edit(GEMM.program("expert").text, "A.num_programs(0), warp_specialize",
                   "A.num_programs(0) - 1, warp_specialize"),
     {"M": 4096, "N": 4096, "K": 64}, False),
    # two column subtiles a column apart (a gap, and a column past each tile's end) or
    # overlapping, or the second one's mask a column short
    ("subtiles a column apart", lambda: _edit(_subtiles(GROUPED), "cols_hi = cols + BN // 2",
                                             "cols_hi = cols + BN // 2 + 1"),
     {"M": 100, "N": 200, "K": 64}, False),
    ("subtiles overlapping", lambda: _edit(_subtiles(GROUPED), "cols_hi = cols + BN // 2",
                                          "cols_hi = cols + BN // 4"),
     {"M": 100, "N": 200, "K": 64}, False),
    ("second subtile's mask a column short",
     lambda: _edit(_subtiles(GROUPED), "mask=(rows < M, cols_hi < N))",
                   "mask=(rows < M, cols_hi < N - 1))"),
     {"M": 100, "N": 200, "K": 64}, False),
    # a grid of M // BM tile rows: the last partial row of tiles is never written (a
    # size divided other than by cdiv is a size test: checked size by size)
    ("tile grid `M // BM`", lambda: _edit(GROUPED, "A.grid(A.cdiv(M, BM) * A.cdiv(N, BN))",
                                         "A.grid(M // BM * A.cdiv(N, BN))"),
     {"M": 100, "N": 128, "K": 64}, False),
    ("plain grid `M // BM`", lambda: _edit(GEMM.program("baseline").text,
                                          "A.grid(A.cdiv(M, BM), A.cdiv(N, BN))",
                                          "A.grid(M // BM, A.cdiv(N, BN))"),
     {"M": 100, "N": 128, "K": 64}, False),
]


@pytest.mark.parametrize("name,make,wrong_at,refuted", SOMETIMES_WRONG,
                         ids=[m[0] for m in SOMETIMES_WRONG])
def test_a_bug_wrong_only_at_some_sizes_is_not_proven_for_all_sizes(name, make, wrong_at,
                                                                    refuted):
    """Each program is wrong at `wrong_at` (most of them right at the first shape, 8192^3,
    where every size is a multiple of every tile); the all-sizes check never proves it,
    and where it refutes it, its counterexample's sizes show a violation of the same
    class."""
    prog = make()
    at_shape = GEMM.shapes[0].sizes
    try:
        wrong = check_program(prog, wrong_at, GEMM)
        assert not wrong.ok, f"{name}: the seeded bug is not wrong at {wrong_at}"
    except CheckUnsupported as e:  # refused there: a division by zero, say
        assert "divide by zero" in str(e), e
    report, why = check_for_all_sizes(prog, at_shape, GEMM)
    assert report is None or not report.ok, f"{name} proven for all sizes:\n{report.render()}"
    if report is None:
        assert not refuted, f"{name}: no counterexample for all sizes ({why})"
        return
    v = report.violations[0]
    assert set(v.sizes) >= {"M", "N", "K"}
    again = check_program(prog, v.sizes, GEMM)
    assert v.invariant in again.kinds(), (v.render(), again.render())
