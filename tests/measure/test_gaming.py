"""Prices follow what a program executes, not what its text mentions.

Each test is a route by which a program was once priced like something it does not run:
a decoy loop that never iterates, a program without a tensor-core dot, names read as
policies (`GROUP_M`, `num_sms()` in the grid, two loops holding dots, `exp2` anywhere),
and dead statements that changed the table key. The gamed program's price must equal that
of the same program without the decoy (within 5%), and a recorded GPU failure must follow
the program it was recorded for.
"""

from __future__ import annotations

import csv
import dataclasses

import pytest

from argus_env.dsl.program import Program
from argus_env.measure.analytic import ModelBackend, TableBackend
from argus_env.measure.recorded import ConfigRecovery, table_paths
from argus_env.target import load_target
from argus_env.task import get_task

H200 = load_target("h200")
GEMM, ATTENTION = get_task("gemm"), get_task("attention")
SQUARE = {"M": 8192, "N": 8192, "K": 8192}
CAUSAL = {"B": 4, "H": 32, "KVH": 32, "SQ": 4096, "SK": 4096, "D": 128, "CAUSAL": 1}
D64 = {"B": 4, "H": 32, "KVH": 32, "SQ": 4096, "SK": 4096, "D": 64, "CAUSAL": 1}  # exp2: 8.6%


def add_after(text: str, needle: str, *lines: str, indent: int | None = None) -> str:
    """`text` with `lines` inserted after the first line containing `needle`, indented like
    it (or by `indent` spaces)."""
    out, done = [], False
    for line in text.splitlines():
        out.append(line)
        if not done and needle in line:
            pad = " " * (indent if indent is not None else len(line) - len(line.lstrip()))
            out.extend(pad + x for x in lines)
            done = True
    assert done, f"no line contains {needle!r}"
    return "\n".join(out) + "\n"


def price(program: Program, sizes: dict, task=GEMM, backend=None):
    m = (backend or ModelBackend(H200)).measure(task.bind(program, sizes), sizes, task)
    assert m.ok, m.error
    return m


def assert_same_price(gamed: Program, clean: Program, sizes: dict, task=GEMM,
                      tolerance: float = 0.05) -> None:
    a, b = price(gamed, sizes, task), price(clean, sizes, task)
    assert abs(a.ms / b.ms - 1) <= tolerance, (a.ms, b.ms, a.details, b.details)


FMA_GEMM = '''
from argus_env import dsl as A


@A.kernel(num_warps=8)
def gemm(
    a: A.Tensor[A.bf16, "M", "K"],
    b: A.Tensor[A.bf16, "K", "N"],
    c: A.Tensor[A.bf16, "M", "N"],
    BM: A.const = 16,
    BN: A.const = 16,
    BK: A.const = 16,
):
    A.grid(A.cdiv(M, BM), A.cdiv(N, BN))
    pid_m = A.program_id(0)
    pid_n = A.program_id(1)
    rows = pid_m * BM + A.arange(BM)
    cols = pid_n * BN + A.arange(BN)
    acc = A.zeros((BM, BN), A.f32)
    for k in A.range(0, K, BK):
        ks = k + A.arange(BK)
        a_tile = A.load(a[rows, ks], mask=(rows < M, ks < K), other=0.0)
        b_tile = A.load(b[ks, cols], mask=(ks < K, cols < N), other=0.0)
        acc = A.dot(a_tile, b_tile, acc, mma=A.fma)
    A.store(c[rows, cols], A.cast(acc, A.bf16), mask=(rows < M, cols < N))
'''

# a 128x256x64 TMA wgmma product in a loop that never runs (and whose value is never stored)
DECOY = ("big = A.zeros((128, 256), A.f32)",
         "for j in A.range(0, 0, 64):",
         "    js = j + A.arange(64)",
         "    big = A.dot(A.load(a[pid_m * 128 + A.arange(128), js], tma=True),",
         "                A.load(b[js, pid_n * 256 + A.arange(256)], tma=True), big,",
         "                mma=A.wgmma)")


def test_zero_trip_decoy_loop_is_not_the_main_dot():
    clean = Program.from_text(FMA_GEMM)
    gamed = Program.from_text(add_after(FMA_GEMM, "acc = A.dot(", *DECOY))
    assert gamed.hash != clean.hash
    assert price(clean, SQUARE).tflops <= H200.profile.fp32_tflops * (1 + 1e-9)
    assert_same_price(gamed, clean, SQUARE)


def test_program_without_a_dot_is_cuda_core_work():
    text = FMA_GEMM.replace("acc = A.dot(a_tile, b_tile, acc, mma=A.fma)",
                            "acc = acc + a_tile * b_tile")
    m = price(Program.from_text(text), SQUARE)
    assert m.ms > 0
    assert m.tflops <= H200.profile.fp32_tflops * (1 + 1e-9), m.details
    # the same program with a CUDA-core dot costs no more than one without
    fma = price(Program.from_text(FMA_GEMM), SQUARE)
    assert m.ms >= fma.ms * 0.95


def test_unused_group_m_constant_is_not_a_tile_order():
    base = GEMM.program("baseline")
    gamed = Program.from_text(add_after(base.text, "BK: A.const", "GROUP_M: A.const = 8,"))
    assert gamed.kernel.consts["GROUP_M"] == 8
    assert_same_price(gamed, base, SQUARE)


def test_group_m_used_outside_the_addresses_is_not_a_tile_order():
    base = GEMM.program("baseline")
    text = add_after(base.text, "BK: A.const", "GROUP_M: A.const = 8,")
    text = add_after(text, "for k in A.range", "spin = GROUP_M * k", indent=8)
    assert_same_price(Program.from_text(text), base, SQUARE)


def test_group_m_in_the_addresses_that_moves_no_tile_is_not_a_tile_order():
    base = GEMM.program("baseline")
    text = add_after(base.text, "BK: A.const", "GROUP_M: A.const = 8,")
    text = text.replace("rows = pid_m * BM + A.arange(BM)",
                        "rows = pid_m * BM + A.arange(BM) + GROUP_M * 0")
    assert "GROUP_M * 0" in text
    assert_same_price(Program.from_text(text), base, SQUARE)


def test_grouped_tile_order_of_the_space_is_still_read():
    grouped = dataclasses.replace(GEMM.space.baseline(), group_m=8)
    a, b = price(GEMM.space.program(grouped), SQUARE), price(GEMM.program("baseline"), SQUARE)
    assert a.details["config"].split("group_m=")[1].startswith("8"), a.details["config"]
    assert b.details["config"].split("group_m=")[1].startswith("1")


def test_num_sms_in_the_grid_without_a_tile_loop_is_not_persistent():
    base = GEMM.program("baseline")
    text = base.text.replace("A.grid(A.cdiv(M, BM), A.cdiv(N, BN))",
                             "A.grid(A.minimum(A.num_sms() * 4096, A.cdiv(M, BM)), A.cdiv(N, BN))")
    assert "num_sms" in text
    assert_same_price(Program.from_text(text), base, SQUARE)


RAGGED = {"M": 1000, "N": 1000, "K": 1000}


def test_swapped_operand_names_are_not_swap_ab():
    """Swap-AB is read from where the dot's operands come from, not from their names."""
    base = GEMM.program("baseline")
    text = base.text.replace("a_tile = A.load(a[", "b_tile = A.load(a[", 1)
    text = text.replace("b_tile = A.load(b[", "a_tile = A.load(b[", 1)
    text = text.replace("A.dot(a_tile, b_tile, acc)", "A.dot(b_tile, a_tile, acc)")
    gamed = Program.from_text(text)
    assert "swap_ab" not in price(gamed, SQUARE).details["config"]
    assert_same_price(gamed, base, SQUARE, tolerance=0.0)
    swapped = price(GEMM.program("swapab"), SQUARE)
    assert "swap_ab=True" in swapped.details["config"], swapped.details


def test_a_tile_loop_around_a_fixed_k_loop_is_not_stream_k():
    """A loop of one trip per program around the baseline's k loop: the k range does not
    follow the program, so nothing is shared out; priced as the baseline."""
    base = GEMM.program("baseline")
    lines = base.text.splitlines()
    at = next(i for i, x in enumerate(lines) if "rows = pid_m * BM" in x)
    body = ["    for once in A.range(pid_m, pid_m + 1):"] + ["    " + x for x in lines[at:]]
    gamed = Program.from_text("\n".join(lines[:at] + body) + "\n")
    assert "stream_k" not in price(gamed, RAGGED).details["config"]
    assert_same_price(gamed, base, RAGGED)


def test_stream_k_is_priced_by_its_busiest_program():
    """A stream-K program that gives every k step to program 0 (the others idle) is
    priced as the work of one SM, not as an even share of the grid."""
    even = GEMM.program("streamk")
    text = even.text.replace("per = A.cdiv(total, A.num_programs(0))", "per = total")
    lazy = Program.from_text(text)
    a, b = price(even, RAGGED), price(lazy, RAGGED)
    assert "stream_k=True" in a.details["config"] and "stream_k=True" in b.details["config"]
    assert b.ms > 20 * a.ms, (a.ms, b.ms)


@pytest.mark.parametrize("name", ["splitk", "splitk_reduce"])
def test_a_split_grid_whose_splits_each_run_every_k_step_is_priced_by_those_steps(name):
    """A split-K grid whose k loop ignores its split (every split runs the whole of K):
    priced by the k steps its programs execute, SPLIT_K times the honest split's, not by
    the grid's claim; the honest program's k steps are its split's share."""
    sizes = {"M": 512, "N": 4096, "K": 4096}
    honest = GEMM.program(name)
    text = honest.text.replace("for k in A.range(k_lo, k_hi, BK", "for k in A.range(0, K, BK")
    assert text != honest.text
    greedy = Program.from_text(text)
    a, b = price(honest, sizes), price(greedy, sizes)
    from argus_env.measure.features import extract
    fa = extract(GEMM.bind(honest, sizes), sizes, GEMM, target=H200)
    fb = extract(GEMM.bind(greedy, sizes), sizes, GEMM, target=H200)
    assert fa.k_iterations == -(-sizes["K"] // (fa.block_k * fa.split_k)), fa
    assert fb.k_iterations == fa.k_iterations * fa.split_k, (fa.k_iterations, fb.k_iterations)
    assert b.ms > 2 * a.ms, (a.ms, b.ms)


# a 128x256x64 TMA-free wgmma product that runs (one trip of a two-deep loop nest) beside
# the program's real work, its value folded into the output times zero
RUNNING_DECOY = ("big = A.zeros((128, 256), A.f32)",
                 "brow = A.arange(128)",
                 "bcol = A.arange(256)",
                 "for j in A.range(0, 1):",
                 "    for i in A.range(0, 64, 64):",
                 "        js = i + A.arange(64)",
                 "        big = A.dot(A.load(a[brow, js], mask=(brow < M, js < K), other=0.0),",
                 "                    A.load(b[js, bcol], mask=(js < K, bcol < N), other=0.0),",
                 "                    big, mma=A.wgmma)",
                 "acc = acc + A.sum(A.sum(big, 1), 0) * 0.0")
BASE_K_LOOP = """    for k in A.range(0, K, BK):
        ks = k + A.arange(BK)
        a_tile = A.load(a[rows, ks], mask=(rows < M, ks < K), other=0.0)
        b_tile = A.load(b[ks, cols], mask=(ks < K, cols < N), other=0.0)
        acc = A.dot(a_tile, b_tile, acc)
"""


def _features(program: Program, sizes: dict):
    from argus_env.measure.features import extract
    return extract(GEMM.bind(program, sizes), sizes, GEMM, target=H200)


def test_a_dot_run_once_in_a_deeper_loop_does_not_lend_its_tile_to_the_real_work():
    """A wgmma 128x256 product run once per program in a two-deep loop nest (deeper than
    the k loop) beside a 16x16 FMA k loop doing the work: was taken as the main dot and
    priced like the expert (41x below the FMA program). The main dot is the loop whose
    dots take longest in the busiest program."""
    clean = Program.from_text(FMA_GEMM)
    gamed = Program.from_text(add_after(FMA_GEMM, "acc = A.dot(", *RUNNING_DECOY, indent=4))
    f = _features(gamed, SQUARE)
    assert (f.block_m, f.block_n, f.mma) == (16, 16, "fma"), f.key()
    assert price(gamed, SQUARE).ms >= price(clean, SQUARE).ms * 0.99


def test_a_k_loop_repeated_by_an_enclosing_loop_is_priced_for_every_pass():
    """The baseline's k loop run four times over (the accumulator reset each pass, the last
    stored): four times the k steps, once priced as one."""
    base = GEMM.program("baseline")
    repeated = "    for rep in A.range(0, 4):\n        acc = A.zeros((BM, BN), A.f32)\n" + \
        "".join("    " + x + "\n" for x in BASE_K_LOOP.splitlines())
    text = base.text.replace(BASE_K_LOOP, repeated)
    assert text != base.text
    gamed = Program.from_text(text)
    assert _features(gamed, SQUARE).k_iterations == 4 * _features(base, SQUARE).k_iterations
    assert price(gamed, SQUARE).ms > 2 * price(base, SQUARE).ms


def test_a_second_pass_over_k_in_a_loop_of_its_own_is_priced():
    """A second k loop beside the main one (its product folded in times zero): the same
    dots again, once left out of the price."""
    base = GEMM.program("baseline")
    text = base.text.replace(BASE_K_LOOP, BASE_K_LOOP.replace("acc", "acc2") + BASE_K_LOOP)
    text = text.replace("    acc = A.zeros((BM, BN), A.f32)\n",
                        "    acc = A.zeros((BM, BN), A.f32)\n    acc2 = A.zeros((BM, BN), A.f32)\n")
    text = text.replace("A.cast(acc, A.bf16)", "A.cast(acc + acc2 * 0.0, A.bf16)")
    gamed = Program.from_text(text)
    assert _features(gamed, SQUARE).k_iterations == 2 * _features(base, SQUARE).k_iterations
    assert price(gamed, SQUARE).ms > 1.3 * price(base, SQUARE).ms


@pytest.mark.parametrize("name", ["baseline", "expert", "prefetch", "splitk", "splitk_reduce",
                                  "swapab"])
def test_the_catalog_programs_main_loop_is_counted_as_the_contracted_size(name):
    program = GEMM.program(name)
    for sizes in (SQUARE, {"M": 512, "N": 4096, "K": 4096}, RAGGED):
        f = _features(program, sizes)
        assert f.k_iterations == -(-sizes["K"] // (f.block_k * f.split_k)), (name, sizes, f)


def _branches_on(cond: str, fast: str, slow: str) -> str:
    """The baseline with its k loop as `if cond:` the loop with `fast` dots, `else:` with
    `slow` ones."""
    base = GEMM.program("baseline").text
    ind = lambda t: "".join("    " + x + "\n" for x in t.splitlines())
    return base.replace(BASE_K_LOOP, f"    if {cond}:\n" + ind(BASE_K_LOOP.replace("acc)", fast)) +
                        "    else:\n" + ind(BASE_K_LOOP.replace("acc)", slow)))


@pytest.mark.parametrize("cond", ["(0 - M) % 5 == 3", "(0 - M) // 3 == -2731",
                                  "A.cdiv(0 - M, 5) == -1638"])
def test_a_branch_on_a_negative_remainder_is_not_decided_by_pythons_rounding(cond):
    """`(0 - M) % 5` is 3 in Python and -2 on the GPU (and in the Triton interpreter): a
    runtime integer's remainder takes the dividend's sign, its division rounds toward zero.
    The live-program analysis decided the branch the Python way, so the program was priced
    (and keyed in the table) as the baseline while the GPU runs the FMA loop of the other
    branch."""
    from argus_env.ir.live import live_key
    base = GEMM.program("baseline")
    gamed = Program.from_text(_branches_on(cond, "acc)", "acc, mma=A.fma)"))
    bound = GEMM.bind(gamed, SQUARE)
    assert live_key(bound, SQUARE, H200.sms) != live_key(GEMM.bind(base, SQUARE), SQUARE, H200.sms)
    assert _table_hit(gamed, SQUARE).ms > 1.5 * _table_hit(base, SQUARE).ms


def test_a_branch_on_a_non_negative_remainder_is_still_decided():
    from argus_env.ir.live import live_key
    base = GEMM.program("baseline")
    gamed = Program.from_text(_branches_on("M % 5 == 2", "acc)", "acc, mma=A.fma)"))
    assert live_key(GEMM.bind(gamed, SQUARE), SQUARE, H200.sms) == \
        live_key(GEMM.bind(base, SQUARE), SQUARE, H200.sms)


@pytest.mark.parametrize("cond", ["M * 1.00000001 > M", "M + 0.00000001 > M",
                                  "M * 1.0 + 0.00000001 > M"])
def test_a_branch_on_a_float_comparison_is_not_decided_in_float64(cond):
    """`M * 1.00000001 > M` holds in Python's float64 and never in float32, where the GPU
    (and Triton's interpreter) decides it: the literal is 1.0f. The live-program analysis
    decided it the float64 way, so the table priced the branch the GPU never runs. Now
    such a branch is left undecided (the program is priced with both branches, above the
    fast one alone), and the size regimes refuse it (`check.regimes`): the numerics at
    reduced shapes cannot be shown to run the branch the real size runs."""
    from argus_env.check.regimes import conditions
    from argus_env.ir.live import live_key
    base = GEMM.program("baseline")
    gamed = Program.from_text(_branches_on(cond, "acc)", "acc, mma=A.fma)"))
    bound = GEMM.bind(gamed, SQUARE)
    assert live_key(bound, SQUARE, H200.sms) != live_key(GEMM.bind(base, SQUARE), SQUARE, H200.sms)
    assert _table_hit(gamed, SQUARE).ms > 1.5 * _table_hit(base, SQUARE).ms
    opaque = [c for c in conditions(bound.kernel) if c.opaque]
    assert any(c.text.endswith("> M") for c in opaque), \
        [c.text for c in conditions(bound.kernel)]


def test_an_integer_size_test_is_still_followed_by_the_regimes():
    from argus_env.check.regimes import conditions
    gamed = Program.from_text(_branches_on("M * 2 > M + 4096", "acc)", "acc, mma=A.fma)"))
    found = conditions(GEMM.bind(gamed, SQUARE).kernel)
    assert found and not any(c.opaque for c in found)


def _split_key_loop(text: str) -> str:
    """The baseline's key loop as two loops over halves of the keys: the same work, two
    innermost loops holding dots, no bound that follows the causal diagonal."""
    lines = text.splitlines()
    start = next(i for i, x in enumerate(lines) if "for start in A.range(0, SK, BN)" in x)
    end = next(i for i in range(start + 1, len(lines))
               if lines[i].strip() and not lines[i].startswith(" " * 8))
    body = lines[start + 1:end]
    pad = lines[start][:len(lines[start]) - len(lines[start].lstrip())]
    first = [pad + "half = SK // (2 * BN) * BN", pad + "for start in A.range(0, half, BN):"]
    second = [pad + "for start in A.range(half, SK, BN):"]
    return "\n".join(lines[:start] + first + body + second + body + lines[end:]) + "\n"


def test_two_key_loops_without_a_diagonal_bound_skip_nothing():
    base = ATTENTION.program("baseline")
    gamed = Program.from_text(_split_key_loop(base.text))
    assert gamed.text.count("A.range(") == 2
    assert_same_price(gamed, base, CAUSAL, ATTENTION)


def test_attention_tiles_are_read_off_the_products_not_the_names_bm_and_bn():
    """A 16x16-tile attention whose tile constants are named TM and TN, declaring
    BM = 128 and BN = 64 (live: used times zero in the grid), was priced as the 128x64
    program (2.9 ms against its own 6.0 at 4x32x4096^2)."""
    import re
    base = ATTENTION.program("baseline").text
    small = base.replace("BM: A.const = 64", "BM: A.const = 16").replace(
        "BN: A.const = 64", "BN: A.const = 16")
    renamed = re.sub(r"\bBM\b", "TM", re.sub(r"\bBN\b", "TN", small))
    renamed = renamed.replace("    TM: A.const = 16,\n", "    TM: A.const = 16,\n    BM: A.const = 128,\n")
    renamed = renamed.replace("    TN: A.const = 16,\n", "    TN: A.const = 16,\n    BN: A.const = 64,\n")
    renamed = renamed.replace("A.grid(A.cdiv(SQ, TM), B * H)",
                              "A.grid(A.cdiv(SQ, TM) + 0 * BM * BN, B * H)")
    assert "0 * BM * BN" in renamed
    gamed = Program.from_text(renamed)
    assert "'block_m': 16," in price(gamed, CAUSAL, ATTENTION).details["config"]
    assert_same_price(gamed, Program.from_text(small), CAUSAL, ATTENTION, tolerance=0.01)


def test_exp2_off_the_softmax_path_is_not_exp2():
    base = ATTENTION.program("baseline")
    gamed = Program.from_text(add_after(base.text, "p = A.exp(", "unused = A.exp2(s)"))
    assert_same_price(gamed, base, D64, ATTENTION, tolerance=0.01)


def test_exp2_in_a_branch_that_never_runs_is_not_exp2():
    base = ATTENTION.program("baseline")
    gamed = Program.from_text(add_after(base.text, "p = A.exp(", "if CAUSAL == 7:",
                                        "    p = A.exp2(s - m_new[:, None])"))
    assert_same_price(gamed, base, D64, ATTENTION, tolerance=0.01)


def _table_hit(program: Program, sizes: dict, task=GEMM):
    return TableBackend(H200).measure(task.bind(program, sizes), sizes, task)


def test_dead_statements_and_docstring_keep_the_table_price():
    expert = GEMM.space.program(GEMM.space.baseline())   # a program the table recorded
    recorded = _table_hit(expert, SQUARE)
    assert recorded.backend == "table" and not recorded.details.get("table_miss")
    text = add_after(expert.text, "pid_n = A.program_id(1)", "spare = A.cdiv(M, 7) * BK")
    text = add_after(text, "acc = A.zeros(", "junk = A.zeros((BM, BN), A.f32)",
                     "for j in A.range(0, 0, 1):", "    junk = junk + 1.0")
    gamed = Program.from_text(text)
    gamed = Program(dataclasses.replace(gamed.kernel, doc="Another description."))
    assert gamed.hash != expert.hash
    m = _table_hit(gamed, SQUARE)
    assert m.backend == "table" and not m.details.get("table_miss"), m.details
    assert m.ms == recorded.ms


def _recorded_failure(task=GEMM):
    """A row of the task's tables the GPU failed, with the program it was recorded for."""
    recover = ConfigRecovery(task)
    for path in table_paths(task):
        with path.open() as f:
            for row in csv.DictReader(f):
                if row["ok"] == "True":
                    continue
                config = recover(row)
                if config is None:
                    continue
                sizes = {d: int(row[d]) for d in task.size_names()}
                program = task.bind(task.space.program(config), sizes)
                if program.hash == row["program_hash"]:
                    return row, program, sizes
    pytest.fail("no recorded failure whose program is recovered")


def test_a_recorded_gpu_failure_is_inherited_through_dead_code():
    row, program, sizes = _recorded_failure()
    assert not _table_hit(program, sizes).ok
    text = add_after(program.text, "acc = A.zeros(", "junk = A.cdiv(M, 3)")
    gamed = Program(dataclasses.replace(Program.from_text(text).kernel, doc="Fast."))
    assert gamed.hash != program.hash
    m = _table_hit(gamed, sizes)
    assert not m.ok and m.error.startswith("recorded on the GPU"), (m.ok, m.error, m.details)


# ---- a numerics class the GPU found wrong is not priced by the model where it is larger
def _atomic_split(split: int):
    from argus_env.tasks.gemm.space import GemmConfig
    return GEMM.space.program(GemmConfig(128, 32, 64, 4, 4, split_k=split, combine="atomic"))


def test_the_recorded_numerics_classes_are_the_bf16_atomic_splits():
    failures = TableBackend("h200").numerics_failures(GEMM)
    assert set(failures) == {"split_k=8,atomic_output=True"}, set(failures)
    # the smallest output the H200 found wrong: ragged-1000's 1,000,000 elements
    assert min(failures["split_k=8,atomic_output=True"])[:2] == (1_000_000, "ragged-1000")


def test_a_numerically_wrong_class_is_not_priced_at_a_larger_shape_the_tables_lack():
    sizes = {"M": 3000, "N": 5000, "K": 2000}   # 15M outputs, no S=8 row recorded there
    program = _atomic_split(8)
    backend = TableBackend("h200")
    assert backend.table(GEMM)["rows"].get((3000, 5000, 2000, program.hash)) is None
    m = backend.measure(program, sizes, GEMM)
    assert not m.ok and m.details["status"] == "mismatch", m.to_dict()
    assert m.details["inherited"] == {"class": "split_k=8,atomic_output=True",
                                      "shape": "ragged-1000"}, m.details
    assert m.frac_anchor == 0.0
    # fewer splits round fewer times: priced by the model as before
    two = backend.measure(_atomic_split(2), sizes, GEMM)
    assert two.ok and two.details.get("table_miss"), two.to_dict()


def test_a_smaller_output_than_any_failure_is_still_priced():
    sizes = {"M": 16, "N": 4096, "K": 4096}   # 65,536 outputs: below every recorded failure
    m = TableBackend("h200").measure(_atomic_split(8), sizes, GEMM)
    assert m.ok and "inherited" not in m.details, m.to_dict()


def test_the_h100_tables_add_their_own_failures():
    failures = TableBackend("h100").numerics_failures(GEMM)
    assert {"split_k=4,atomic_output=True", "split_k=8,atomic_output=True"} <= set(failures)


AXIS1_SPLIT = '''from argus_env import dsl as A


@A.kernel(num_warps=4)
def gemm(
    a: A.Tensor[A.bf16, "M", "K"],
    b: A.Tensor[A.bf16, "K", "N"],
    c: A.Tensor[A.bf16, "M", "N"],
    BM: A.const = 128,
    BN: A.const = 32,
    BK: A.const = 64,
    SPLIT_K: A.const = 8,
):
    A.grid(A.cdiv(M, BM) * A.cdiv(N, BN), SPLIT_K)
    num_pid_n = A.cdiv(N, BN)
    tile = A.program_id(0)
    rows = tile // num_pid_n * BM + A.arange(BM)
    cols = tile % num_pid_n * BN + A.arange(BN)
    pid_k = A.program_id(1)
    k_per_split = A.cdiv(A.cdiv(K, BK), SPLIT_K) * BK
    k_lo = pid_k * k_per_split
    k_hi = A.minimum(k_lo + k_per_split, K)
    acc = A.zeros((BM, BN), A.f32)
    for k in A.range(k_lo, k_hi, BK, stages=4):
        ks = k + A.arange(BK)
        a_tile = A.load(a[rows, ks], mask=(rows < M, ks < k_hi), other=0.0)
        b_tile = A.load(b[ks, cols], mask=(ks < k_hi, cols < N), other=0.0)
        acc = A.dot(a_tile, b_tile, acc)
    A.assert_tags(acc, M=rows[:, None], N=cols[None, :], K=A.covers(k_lo, k_hi))
    A.atomic_add(c[rows, cols], A.cast(acc, A.bf16), mask=(rows < M, cols < N))
'''


def test_moving_the_split_to_another_grid_axis_keeps_the_numerics_class():
    """The attempt: the same 8-split bf16 atomic combine with the split on grid axis 1
    (the features once read a split only on axis 2, so it was priced as unsplit)."""
    from argus_env.dsl import parse_program
    sizes = {"M": 3000, "N": 5000, "K": 2000}
    program = parse_program(AXIS1_SPLIT)
    program = program if isinstance(program, Program) else Program(program)
    m = TableBackend("h200").measure(program, sizes, GEMM)
    assert not m.ok and m.details["inherited"]["class"] == "split_k=8,atomic_output=True", \
        m.to_dict()


PERSISTENT_SPLIT = '''from argus_env import dsl as A


@A.kernel(num_warps=4)
def gemm(
    a: A.Tensor[A.bf16, "M", "K"],
    b: A.Tensor[A.bf16, "K", "N"],
    c: A.Tensor[A.bf16, "M", "N"],
    BM: A.const = 128,
    BN: A.const = 32,
    BK: A.const = 64,
    SPLIT_K: A.const = 8,
):
    A.grid(A.num_sms())
    num_pid_n = A.cdiv(N, BN)
    tiles = A.cdiv(M, BM) * num_pid_n
    k_per_split = A.cdiv(A.cdiv(K, BK), SPLIT_K) * BK
    for work in A.range(A.program_id(0), tiles * SPLIT_K, A.num_programs(0)):
        tile = work % tiles
        pid_k = work // tiles
        rows = tile // num_pid_n * BM + A.arange(BM)
        cols = tile % num_pid_n * BN + A.arange(BN)
        k_lo = pid_k * k_per_split
        k_hi = A.minimum(k_lo + k_per_split, K)
        acc = A.zeros((BM, BN), A.f32)
        for k in A.range(k_lo, k_hi, BK, stages=4):
            ks = k + A.arange(BK)
            a_tile = A.load(a[rows, ks], mask=(rows < M, ks < k_hi), other=0.0)
            b_tile = A.load(b[ks, cols], mask=(ks < k_hi, cols < N), other=0.0)
            acc = A.dot(a_tile, b_tile, acc)
        A.assert_tags(acc, M=rows[:, None], N=cols[None, :], K=A.covers(k_lo, k_hi))
        A.atomic_add(c[rows, cols], A.cast(acc, A.bf16), mask=(rows < M, cols < N))
'''


def test_a_persistent_grid_over_tile_and_split_pairs_keeps_the_numerics_class():
    """The attempt: the 8-split bf16 atomic combine walked by a persistent grid over
    (tile, split) work items (the features once read every persistent atomic writer as
    unsplit, so it had no numerics class and was priced by the model)."""
    from argus_env.dsl import parse_program
    from argus_env.measure.features import extract
    from argus_env.target import load_target
    sizes = {"M": 3000, "N": 5000, "K": 2000}
    program = parse_program(PERSISTENT_SPLIT)
    program = program if isinstance(program, Program) else Program(program)
    f = extract(program, sizes, GEMM, target=load_target("h200"))
    assert f.persistent and f.atomic_output and f.split_k == 8, f
    m = TableBackend("h200").measure(program, sizes, GEMM)
    assert not m.ok and m.details["inherited"]["class"] == "split_k=8,atomic_output=True", \
        m.to_dict()
    # the same walk with 2 splits: a class no GPU found wrong, priced as before
    two = parse_program(PERSISTENT_SPLIT.replace("SPLIT_K: A.const = 8", "SPLIT_K: A.const = 2"))
    two = two if isinstance(two, Program) else Program(two)
    assert extract(two, sizes, GEMM, target=load_target("h200")).split_k == 2
    assert TableBackend("h200").measure(two, sizes, GEMM).ok
