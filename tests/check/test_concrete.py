"""The concrete tag checker: clean GEMM programs stay clean, seeded bugs are caught with a
counterexample that `replay` reproduces."""

import json
import time

import numpy as np
import pytest
import torch

from argus_env.check.concrete import interp as concrete_interp
from argus_env.check.concrete import ConcreteError, check_concrete, replay, size_expr
from argus_env.dsl.errors import DSLError
from argus_env.dsl.program import Program
from argus_env.layout.tv import fragment_layout
from argus_env.task import get_task

TASK = get_task("gemm")
BASE = TASK.program("baseline").text
EXPERT = TASK.program("expert").text
RAGGED = {"M": 100, "N": 72, "K": 40}


def mutate(text: str, *edits: tuple[str, str]) -> Program:
    for old, new in edits:
        assert old in text, f"{old!r} not in the program"
        text = text.replace(old, new)
    return Program.from_text(text)


# ---------------------------------------------------------------- seeded programs
SPLIT_K = mutate(
    BASE,
    ("A.grid(A.cdiv(M, BM), A.cdiv(N, BN))", "A.grid(A.cdiv(M, BM), A.cdiv(N, BN), SPLIT_K)"),
    ("    BK: A.const = 32,\n", "    BK: A.const = 32,\n    SPLIT_K: A.const = 2,\n"),
    ("    pid_n = A.program_id(1)\n",
     "    pid_n = A.program_id(1)\n    pid_k = A.program_id(2)\n"
     "    k_per = A.cdiv(K, SPLIT_K * BK) * BK\n    k_lo = pid_k * k_per\n"
     "    k_hi = A.minimum(K, k_lo + k_per)\n"),
    ("A.range(0, K, BK)", "A.range(k_lo, k_hi, BK)")).text
SPLIT_K_ATOMIC = SPLIT_K.replace("A.covers(0, K)", "A.covers(k_lo, k_hi)").replace(
    "A.store(c[rows, cols]", "A.atomic_add(c[rows, cols]")

PIPELINED = BASE.replace("""    for k in A.range(0, K, BK):
        ks = k + A.arange(BK)
        a_tile = A.load(a[rows, ks], mask=(rows < M, ks < K), other=0.0)
        b_tile = A.load(b[ks, cols], mask=(ks < K, cols < N), other=0.0)
        acc = A.dot(a_tile, b_tile, acc)
""", """    k0 = A.arange(BK)
    a_cur = A.load(a[rows, k0], mask=(rows < M, k0 < K), other=0.0)
    b_cur = A.load(b[k0, cols], mask=(k0 < K, cols < N), other=0.0)
    for k in A.range(0, K, BK):
        ks = k + BK + A.arange(BK)
        ka = ks
        a_nxt = A.load(a[rows, ka], mask=(rows < M, ka < K), other=0.0)
        b_nxt = A.load(b[ks, cols], mask=(ks < K, cols < N), other=0.0)
        acc = A.dot(a_cur, b_cur, acc)
        a_cur = a_nxt
        b_cur = b_nxt
""")
assert PIPELINED != BASE, "the baseline's k loop changed; update PIPELINED"

#: name -> (program, sizes, the invariants that must be reported)
BUGS = {
    "store-shifted-column": (mutate(BASE, ("A.store(c[rows, cols]", "A.store(c[rows, cols + 1]")),
                             RAGGED, {"ownership"}),
    "load-swapped-pid": (mutate(BASE, ("a[rows, ks]", "a[cols, ks]")), RAGGED, {"ownership"}),
    "load-missing-mask": (mutate(BASE, ("A.load(a[rows, ks], mask=(rows < M, ks < K), other=0.0)",
                                        "A.load(a[rows, ks])")), RAGGED, {"bounds"}),
    "swizzle-not-bijective": (mutate(EXPERT, ("tile % tiles_per_group // group_m",
                                              "tile % tiles_per_group // GROUP_M")),
                              {"M": 130, "N": 264, "K": 72}, {"bijection", "exactly_once"}),
    "split-k-no-combine": (Program.from_text(SPLIT_K), RAGGED, {"exactly_once", "coverage"}),
    "split-k-atomic-gap": (mutate(SPLIT_K_ATOMIC, ("k_lo + k_per)", "k_lo + k_per - BK)")),
                           {"M": 100, "N": 72, "K": 136}, {"coverage"}),
    "k-loop-from-BK": (mutate(BASE, ("A.range(0, K, BK)", "A.range(BK, K, BK)")), RAGGED,
                       {"coverage"}),
    "k-step-2BK": (mutate(BASE, ("A.range(0, K, BK)", "A.range(0, K, 2 * BK)")),
                   {"M": 100, "N": 72, "K": 136}, {"coverage"}),
    "b-loaded-ks-plus-1": (mutate(BASE, ("b[ks, cols]", "b[ks + 1, cols]")), RAGGED,
                           {"contraction"}),
    "prefetch-wrong-slice": (mutate(PIPELINED, ("ka = ks", "ka = k + A.arange(BK)")),
                             {"M": 100, "N": 72, "K": 136}, {"pipeline"}),
    # the buffer refilled for the next step is consumed in this one
    "prefetch-consumed-early": (mutate(PIPELINED, ("        acc = A.dot(a_cur, b_cur, acc)\n"
                                                   "        a_cur = a_nxt\n",
                                                   "        a_cur = a_nxt\n"
                                                   "        acc = A.dot(a_cur, b_cur, acc)\n")),
                                {"M": 100, "N": 72, "K": 136}, {"pipeline"}),
    "assert-wrong-column": (mutate(BASE, ("N=cols[None, :]", "N=cols[None, :] + 1")), RAGGED,
                            {"assertion"}),
    "acc-transposed": (mutate(BASE, ("A.dot(a_tile, b_tile, acc)",
                                     "A.dot(a_tile, b_tile, A.trans(acc))")),
                       RAGGED, {"tag_conflict"}),
}
CLEAN = {
    "split-k-atomic": (Program.from_text(SPLIT_K_ATOMIC), [RAGGED, {"M": 64, "N": 64, "K": 136}]),
    "prefetch": (Program.from_text(PIPELINED), [RAGGED, {"M": 100, "N": 72, "K": 136}]),
}


def assert_replays(program: Program, v) -> dict:
    """`replay` must show the actual value the violation states."""
    rp = replay(program, v, task=TASK)
    assert rp["names"] == v.names if v.program_id else True, (rp["names"], v.names)
    if v.invariant in ("ownership", "assertion"):
        for name, got in v.actual.items():
            assert rp["value"]["tags"].get(name) == got, (name, rp["value"], v.render())
    elif v.invariant == "coverage" and v.program_id:
        for name, got in v.actual.items():
            assert rp["value"]["coverage"].get(name, "{}") == got, (rp["value"], v.render())
    elif v.invariant == "coverage":   # summed over all atomic_add contributions
        assert rp["coverage"] == v.actual, (rp, v.render())
    elif v.invariant in ("contraction", "pipeline"):
        for name in v.actual:
            assert rp["a"]["tags"][name] == v.expected[name], (rp["a"], v.render())
            assert rp["b"]["tags"][name] == v.actual[name], (rp["b"], v.render())
    elif v.invariant == "tag_conflict":   # the accumulator meets the new product
        for name in v.actual:
            assert rp["acc"]["tags"][name] == v.expected[name], (rp["acc"], v.render())
            assert rp["product"]["tags"][name] == v.actual[name], (rp["product"], v.render())
    elif v.invariant == "bijection":
        assert rp["writes"] == v.actual["writes"] == 0, rp
    if v.tensor and v.program_id:
        assert tuple(rp["coords"]) == tuple(v.coords), (rp["coords"], v.coords)
    if v.invariant == "bounds":
        assert rp["mask"] and (rp.get("in_bounds") is False or v.op != "load"), rp
    return rp


# ---------------------------------------------------------------- clean programs
@pytest.mark.parametrize("which,sizes", [
    ("baseline", {"M": 100, "N": 72, "K": 40}), ("baseline", {"M": 64, "N": 64, "K": 64}),
    ("baseline", {"M": 17, "N": 264, "K": 136}), ("baseline", {"M": 64, "N": 64, "K": 33}),
    ("expert", {"M": 130, "N": 264, "K": 72}), ("expert", {"M": 64, "N": 64, "K": 64}),
    ("expert", {"M": 17, "N": 264, "K": 136}), ("expert", {"M": 300, "N": 8, "K": 8}),
], ids=lambda x: x if isinstance(x, str) else "x".join(map(str, x.values())))
def test_gemm_programs_are_clean(which, sizes):
    report = check_concrete(TASK.program(which), sizes, task=TASK)
    assert report.ok, report.render()
    assert report.method == "concrete"
    kinds = {p.split(": ")[1] for p in report.proven}
    assert {"contraction", "ownership", "exactly_once", "coverage", "bijection",
            "assertion"} <= kinds, report.proven


@pytest.mark.parametrize("name", CLEAN)
def test_correct_variants_raise_no_false_alarm(name):
    program, shapes = CLEAN[name]
    for sizes in shapes:
        report = check_concrete(program, sizes, task=TASK)
        assert report.ok, f"{name} at {sizes}: {report.render()}"


# ---------------------------------------------------------------- seeded bugs
@pytest.mark.parametrize("name", BUGS)
def test_seeded_bug_is_caught_and_replays(name):
    program, sizes, expected = BUGS[name]
    report = check_concrete(program, sizes, task=TASK)
    assert expected <= report.kinds(), f"{name}: {report.render(limit=10)}"
    json.loads(report.to_json())  # every field serialises
    keys = [(v.invariant, v.line) for v in report.violations]
    assert len(keys) == len(set(keys)), f"one violation per (invariant, line): {keys}"
    for v in report.violations:
        assert v.source and v.message and v.sizes == sizes, v
        assert v.program_id or v.invariant in ("bijection", "coverage"), v
        assert v.expected != v.actual, v.render()
        assert_replays(program, v)


def by_kind(report, invariant):
    return next(v for v in report.violations if v.invariant == invariant)


def test_shifted_store_names_column_and_thread():
    program, sizes, _ = BUGS["store-shifted-column"]
    v = by_kind(check_concrete(program, sizes, task=TASK), "ownership")
    assert v.tensor == "c" and v.expected["N"] == v.actual["N"] + 1, v.render()
    assert v.coords == (v.actual["M"], v.actual["N"] + 1)
    # the stored value is a cast of the dot's accumulator: wgmma fragment at 4 warps
    thread, reg = fragment_layout("wgmma", (64, 64), 4).owner_of(*v.element)
    assert (v.thread, v.register) == (thread, reg), v.render()


def test_split_k_double_write_names_both_instances():
    program, sizes, _ = BUGS["split-k-no-combine"]
    v = by_kind(check_concrete(program, sizes, task=TASK), "exactly_once")
    assert v.names["pid_k"] == 1 and v.other["names"]["pid_k"] == 0, v.render()
    assert v.program_id[:2] == tuple(v.other["program_id"][:2]), v.other


def test_prefetch_violation_names_the_iteration():
    program, sizes, _ = BUGS["prefetch-wrong-slice"]
    v = by_kind(check_concrete(program, sizes, task=TASK), "pipeline")
    assert v.names["k"] == 32 and v.actual["K"] - v.expected["K"] == 32, v.render()
    assert v.thread is not None and "a_cur" in v.source


def test_loop_from_bk_misses_the_first_slice():
    program, sizes, _ = BUGS["k-loop-from-BK"]
    report = check_concrete(program, sizes, task=TASK)
    ops = {v.op: v for v in report.violations if v.invariant == "coverage"}
    assert set(ops) == {"assert_tags", "store"}, report.render()
    assert ops["store"].actual == {"K": "[32, 40)"} and ops["store"].expected == {"K": "[0, 40)"}


# ---------------------------------------------------------------- integer data, reductions
GATHER = '''from argus_env import dsl as A


@A.kernel(num_warps=4)
def gather(
    src: A.Tensor[A.f32, "T", "D"],
    perm: A.Tensor[A.i32, "P"],
    dst: A.Tensor[A.f32, "P", "D"],
    BP: A.const = 16,
    BD: A.const = 32,
):
    A.grid(A.cdiv(P, BP))
    offs = A.program_id(0) * BP + A.arange(BP)
    cols = A.arange(BD)
    tok = A.load(perm[offs], mask=offs < P, other=0)
    x = A.load(src[tok, cols], mask=(offs < P, cols < D), other=0.0)
    A.assert_tags(x, P=offs[:, None], T=tok[:, None])
    A.store(dst[offs, cols], x, mask=(offs < P, cols < D))
'''
GATHER_SIZES = {"T": 40, "D": 24, "P": 40}


def test_integer_inputs_drive_indices():
    perm = np.random.default_rng(0).permutation(40).astype(np.int32)
    program = Program.from_text(GATHER)
    assert check_concrete(program, GATHER_SIZES, inputs={"perm": torch.from_numpy(perm)}).ok
    scattered = Program.from_text(GATHER.replace("dst[offs, cols]", "dst[tok, cols]"))
    v = by_kind(check_concrete(scattered, GATHER_SIZES, inputs={"perm": perm}), "ownership")
    assert v.coords[0] == perm[v.element[0]] and v.actual["P"] == v.element[0], v.render()
    perm[5] = 40  # a routing entry past the end: a data-dependent bounds violation
    v = by_kind(check_concrete(program, GATHER_SIZES, inputs={"perm": perm}), "bounds")
    assert v.tensor == "src" and v.coords == (40, 0) and v.element == (5, 0), v.render()
    rp = replay(program, v, inputs={"perm": perm})
    assert rp["coords"] == [40, 0] and rp["in_bounds"] is False


def test_integer_input_is_required():
    with pytest.raises(ConcreteError, match="perm"):
        check_concrete(Program.from_text(GATHER), GATHER_SIZES)


ROWSUM = '''from argus_env import dsl as A


@A.kernel(num_warps=4)
def rowstats(
    x: A.Tensor[A.f32, "R", "C"],
    s: A.Tensor[A.f32, "R"],
    m: A.Tensor[A.f32, "R"],
    BR: A.const = 16,
    BC: A.const = 32,
):
    A.grid(A.cdiv(R, BR))
    rows = A.program_id(0) * BR + A.arange(BR)
    acc = A.zeros((BR,), A.f32)
    mx = A.full((BR,), -1000000.0, A.f32)
    for c in A.range(0, C, BC):
        cols = c + A.arange(BC)
        t = A.load(x[rows, cols], mask=(rows < R, cols < C), other=0.0)
        acc = acc + A.sum(t, 1)
        mx = A.maximum(mx, A.max(A.where(cols[None, :] < C, t, -1000000.0), 1))
    A.assert_tags(acc, R=rows, C=A.covers(0, C))
    A.assert_tags(mx, R=rows, C=A.covers(0, C))
    A.store(s[rows], acc, mask=rows < R)
    A.store(m[rows], mx, mask=rows < R)
'''


def test_reductions_cover_their_axis():
    assert check_concrete(Program.from_text(ROWSUM), {"R": 40, "C": 70}).ok
    twice = Program.from_text(ROWSUM.replace("acc = acc + A.sum(t, 1)",
                                             "acc = acc + A.sum(t, 1) + A.sum(t, 1)"))
    v = by_kind(check_concrete(twice, {"R": 40, "C": 70}), "coverage")
    assert v.actual == {"C": "[0, 70) x2"} and v.op == "assert_tags", v.render()
    assert replay(twice, v)["value"]["coverage"]["C"] == "[0, 70) x2"


# ---------------------------------------------------------------- errors and helpers
def test_errors_name_what_is_wrong(monkeypatch):
    with pytest.raises(ValueError, match="max_instances"):
        check_concrete(TASK.program("baseline"), RAGGED, max_instances=3)
    with pytest.raises(ValueError, match="K"):
        check_concrete(TASK.program("baseline"), {"M": 8, "N": 8})
    monkeypatch.delitem(concrete_interp.EXPR_RULES, "arange")
    with pytest.raises(ConcreteError, match="A.arange"):
        check_concrete(TASK.program("baseline"), RAGGED)


def test_size_expressions_are_parsed_not_evaluated():
    assert size_expr("K", {"K": 40}) == 40
    assert size_expr("(K + 1) // 2 - 3 * 2", {"K": 40}) == 14
    for bad in ("__import__('os')", "K.bit_length()", "M"):
        with pytest.raises(ValueError, match="coverage bound"):
            size_expr(bad, {"K": 40})


def test_tag_relation_of_the_wrong_shape_is_named():
    """`M=rows` against a (64, 32) tile would compare rows along the columns: refused with
    both shapes, by the semantic layer or else by the checker itself."""
    text = BASE.replace("BN: A.const = 64", "BN: A.const = 32").replace("M=rows[:, None]", "M=rows")
    with pytest.raises(DSLError, match=r"M.*\(64,\).*\(64, 32\)"):
        check_concrete(Program.from_text(text), RAGGED, task=TASK)
