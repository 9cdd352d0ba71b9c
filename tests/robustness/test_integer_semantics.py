"""Integers as the generated Triton code computes them, not as unbounded numbers.

The checker's integers are z3's (unbounded); the kernel's are 32-bit unless an operand is
64-bit, and wrap. An index or mask that passes 2**31 only at the episode's size was
proven in bounds (or every element written) and passed numerics at the reduced shapes,
while on the GPU it wrapped: `rows * 2**19 >= 0` is false for rows >= 4096. Booleans add
in one bit (`(r < 2) + (r < 3)` is 0 where both hold). Division truncates at run time but
floors compile-time values, and Triton makes a size equal to 1 compile-time: a division
of sizes that can be negative is read differently by the GPU at that size. The checker
now refuses (`CheckUnsupported`) what it cannot follow: an integer result outside its
width's range, such a division, a divisor that can be 0, a shift past the width.
"""

from __future__ import annotations

import pytest

from argus_env.check import CheckUnsupported, check_program
from argus_env.dsl import Program
from argus_env.task import get_task

GEMM = get_task("gemm")
BASE = GEMM.program("baseline").text
A_MASK = "mask=(rows < M, ks < K)"
REAL = {"M": 8192, "N": 8192, "K": 8192}


def gemm(old: str, new: str) -> Program:
    assert old in BASE
    return Program.from_text(BASE.replace(old, new))


def refused(program, sizes, task=GEMM, match="") -> str:
    with pytest.raises(CheckUnsupported, match=match) as info:
        check_program(program, sizes, task)
    return str(info.value)


# an a-row mask that is true for every row while rows * F < 2**31 and false past it
WRAPPED_MASK = {
    "mask": (A_MASK, "mask=((rows < M) & (rows * 524288 >= 0), ks < K)"),
    "index": ("a_tile = A.load(a[rows, ks]",
              "rw = rows * 524288 // 524288\n        a_tile = A.load(a[rw, ks]"),
    "shift": (A_MASK, "mask=((rows < M) & ((rows << 19) >= 0), ks < K)"),
    "sum": (A_MASK, "mask=((rows < M) & (rows + 2147479552 >= 0), ks < K)"),
    "loop": ("ks = k + A.arange(BK)", "ks = k + A.arange(BK) + (k * 524288 - k * 524288)"),
}


@pytest.mark.parametrize("name", list(WRAPPED_MASK))
def test_wrapping_integers_are_refused(name):
    program = gemm(*WRAPPED_MASK[name])
    message = refused(program, REAL, match="overflow")
    assert "A.i64" in message
    # at the reduced shapes nothing wraps: the numerics saw no fault
    assert check_program(program, GEMM.env_check_shape, GEMM).ok


def test_boolean_sums_have_no_integer_value():
    """Two booleans add in one bit on the GPU (1 + 1 = 0): the checker gives such a sum
    no value, so an index made of one is refused."""
    program = gemm("a_tile = A.load(a[rows, ks]",
                   "rw = rows + ((rows < M) + (rows < M)) - 2 * (rows < M)\n"
                   "        a_tile = A.load(a[rw, ks]")
    refused(program, REAL, match="not an integer")


def test_the_interpreter_wraps_where_the_checker_refused():
    """The small analogue of `mask` (wraps for rows >= 256): wrong under the interpreter at
    M = 300, right at the reduced shapes, and refused at M = 300."""
    from argus_env.lower.build import load
    from argus_env.measure import oracle
    program = gemm(A_MASK, "mask=((rows < M) & (rows * 8388608 >= 0), ks < K)")
    sizes = {"M": 300, "N": 64, "K": 64}
    refused(program, sizes, match="overflow")
    launch = load(program, interpret=True)
    assert oracle.check(program, GEMM, GEMM.env_check_shape, launch).ok
    verdict = oracle.check(program, GEMM, sizes, launch)
    assert not verdict.ok and verdict.first_mismatch[0] == 256, verdict


def test_64_bit_arithmetic_is_followed():
    program = gemm("a_tile = A.load(a[rows, ks]",
                   "rw = A.cast(rows, A.i64) * 524288 // 524288\n"
                   "        a_tile = A.load(a[rw, ks]")
    assert check_program(program, REAL, GEMM).ok
    # cast back to 32 bits while past them: the low bits only
    narrowed = gemm("a_tile = A.load(a[rows, ks]",
                    "rw = A.cast(A.cast(rows, A.i64) * 524288, A.i32) // 524288\n"
                    "        a_tile = A.load(a[rw, ks]")
    refused(narrowed, REAL, match="overflow")


def test_compile_time_constants_are_exact():
    """`BM * 2**40` is a Python integer in the generated code: no wrap, and an int64
    where it meets a run-time value."""
    program = gemm("a_tile = A.load(a[rows, ks]",
                   "rw = rows + (BM * 1099511627776 - BM * 1099511627776)\n"
                   "        a_tile = A.load(a[rw, ks]")
    assert check_program(program, REAL, GEMM).ok


def test_divisions_the_gpu_reads_otherwise_are_refused():
    # a negative compile-time dividend: floor in the generated code
    program = gemm("rows = pid_m * BM", "rows = ((BM - 128) // 3 + 22) * 0 + pid_m * BM")
    refused(program, REAL, match="negative")
    # run-time values truncate on the GPU too: followed
    program = gemm("a_tile = A.load(a[rows, ks]",
                   "rw = rows + ((pid_m - 1) // 2 - (pid_m - 1) // 2)\n"
                   "        a_tile = A.load(a[rw, ks]")
    assert check_program(program, REAL, GEMM).ok
    # a divisor that is 0 at the real size
    program = gemm("a_tile = A.load(a[rows, ks]",
                   "rw = rows + (rows // (M - 8192)) * 0\n        a_tile = A.load(a[rw, ks]")
    refused(program, REAL, match="divide by zero")
    assert check_program(program, GEMM.env_check_shape, GEMM).ok
    # a shift past the width
    program = gemm(A_MASK, "mask=((rows < M) & ((rows >> (pid_m + 30)) >= 0), ks < K)")
    refused(program, REAL, match="shifts")


def test_a_size_of_one_divides_with_the_floor():
    """Triton specialises an integer argument equal to 1 as a constant: `(T - 2) // 2` is
    -1 on the GPU at T = 1 (Python's floor), 0 under the interpreter and the checker
    (truncation). This offset is 0 for the checker at every T and -1 on the GPU at T = 1
    (the decode-1 shapes): refused there, followed where the dividend is non-negative."""
    task = get_task("rmsnorm")
    base = task.program("baseline").text
    old = "rows = blk * BM + A.arange(BM)"
    assert old in base
    program = Program.from_text(base.replace(
        old, old + " + ((T - 2) // 2 - T // 2 + 1 - 1 // T)"))
    refused(program, {"T": 1, "H": 4096}, task, match="negative")
    assert check_program(program, {"T": 4096, "H": 4096}, task).ok


def test_loops_that_would_not_end_or_wrap_are_refused():
    """A step that is 0 at the real size only (the loop never ends on the GPU) was proven:
    the modelled trip count was a contradiction, under which every later check held."""
    loop = "for k in A.range(0, K, BK):"
    program = gemm(loop, "for k in A.range(0, K, BK * (1 - M // 8192)):")
    refused(program, REAL, match="step below 1")
    assert check_program(program, GEMM.env_check_shape, GEMM).ok
    # the counter's last increment passes 2**31 (and would go on from a negative value)
    program = gemm(loop, "for k in A.range(0, K + (2147483640 - K) * (M // 8192), BK):")
    assert "last increment" in refused(program, REAL, match="overflow")


def test_a_proof_for_all_sizes_covers_tensors_of_32_bit_offsets_only():
    from argus_env.check import check_for_all_sizes, for_all_covers
    attention = get_task("attention")
    sizes = attention.shapes[0].sizes
    program = attention.bind(attention.program("baseline"), sizes)
    report, why = check_for_all_sizes(program, sizes, attention)
    assert report is not None and report.ok, why
    assert "fewer than 2147483648 elements" in report.notes[-1]
    assert for_all_covers(program, attention, sizes)
    assert not for_all_covers(program, attention, {**sizes, "B": 2**20})
