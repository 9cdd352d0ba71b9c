"""The checker on programs it used to crash on (found by fuzzing the environments with
mutated task programs): each now gets a report, or a refusal that names the construct and
its line (`CheckUnsupported`, a `DSLError`), never an exception from inside a rule."""

import gymnasium as gym
import pytest

import argus_env.envs  # noqa: F401  (registers the environment ids)
from argus_env.check import CheckUnsupported, check_program
from argus_env.dsl.errors import DSLError
from argus_env.dsl.program import Program
from argus_env.task import get_task

GEMM = get_task("gemm")
SMALL = {"M": 100, "N": 72, "K": 80}


def gemm(*edits: tuple[str, str]) -> Program:
    text = GEMM.program("baseline").text
    for old, new in edits:
        assert old in text, old
        text = text.replace(old, new, 1)
    return Program.from_text(text, filename="<mutated>")


def line_of(program: Program, snippet: str) -> int:
    return next(i for i, line in enumerate(program.text.splitlines(), 1) if snippet in line)


# ---------------------------------------------------------------- program ids beyond the grid
def test_program_id_of_an_axis_the_grid_does_not_launch_is_zero():
    """Was IndexError (attention: `bh = A.program_id(2)` under a 2-D grid). An axis the
    grid does not launch has one program, id 0, as in Triton and the concrete checker:
    every column block is then written by program row 0 only."""
    prog = gemm(("A.program_id(1)", "A.program_id(2)"))
    report = check_program(prog, SMALL, GEMM)
    assert "bijection" in report.kinds(), report.render()
    concrete = check_program(prog, SMALL, GEMM, method="concrete")
    assert "bijection" in concrete.kinds(), concrete.render()


def test_num_programs_of_an_axis_the_grid_does_not_launch_is_one():
    # pid_n = num_programs(2) - 1 = 0: the same program ids as above
    prog = gemm(("A.program_id(1)", "A.num_programs(2) - 1"))
    assert "bijection" in check_program(prog, SMALL, GEMM).kinds()
    ok = gemm(("A.program_id(1)", "A.program_id(1) * A.num_programs(2)"))
    report = check_program(ok, SMALL, GEMM)
    assert report.ok, report.render()


def test_a_second_launch_with_fewer_grid_axes():
    """Attention's second crash: a mutation duplicated `A.grid` as `A.grid(10**12)`, so the
    program ids that follow belong to a 1-D launch and `A.program_id(1)` is 0 there: only
    the first column block of `c` is written."""
    prog = gemm(("    pid_m = A.program_id(0)", "    A.grid(1000)\n"
                 "    pid_m = A.program_id(0)"))
    report = check_program(prog, SMALL, GEMM)
    assert report.kinds() == {"bijection"}, report.render()
    assert report.violations[0].message.startswith("no program instance writes `c[0, ")
    # as the mutation had it: program ids up to 10**12, whose rows `pid_m * BM` wrap in
    # 32 bits (no GPU launches such a grid): refused, with the line
    prog = gemm(("    pid_m = A.program_id(0)", "    A.grid(1000000000000)\n"
                 "    pid_m = A.program_id(0)"))
    with pytest.raises(CheckUnsupported, match="overflow: `pid_m \\* BM`"):
        check_program(prog, SMALL, GEMM)


# ---------------------------------------------------------------- integer bit operations
def test_a_shifted_constant_in_a_covered_range_is_folded():
    """Was Z3Exception 'parser error' (MoE: `A.covers(1 << 20, F)`): `<<` gave no value and
    the range bound reached z3 as None. Now folded: the reduction misses [2**20, K)."""
    prog = gemm(("A.covers(0, K)", "A.covers(1 << 20, K)"))
    report = check_program(prog, SMALL, GEMM)
    assert report.kinds() == {"coverage"}, report.render()
    assert report.violations[0].line == line_of(prog, "A.assert_tags")


@pytest.mark.parametrize("lo,ok", [("K >> 1", False), ("(K >> 7) * 0", True), ("0 << 3", True),
                                   ("(2 | 1) ^ 3", True), ("6 & 8", True), ("1 & 1", False)])
def test_shifts_and_constant_bit_operations_have_values(lo, ok):
    report = check_program(gemm(("A.covers(0, K)", f"A.covers({lo}, K)")), SMALL, GEMM)
    assert report.ok == ok, report.render()


def test_a_shift_of_a_runtime_value_is_an_arithmetic_shift():
    # rows >> 0 and (rows << 1) >> 1 are rows: nothing changes
    report = check_program(gemm(("A.load(a[rows, ks]", "A.load(a[(rows << 1) >> 1, ks >> 0]")),
                           SMALL, GEMM)
    assert report.ok, report.render()
    report = check_program(gemm(("A.load(a[rows, ks]", "A.load(a[rows >> 1, ks]")), SMALL, GEMM)
    assert "ownership" in report.kinds() or "contraction" in report.kinds(), report.render()


def test_an_unknown_bit_operation_in_a_covered_range_is_refused_with_its_line():
    prog = gemm(("A.covers(0, K)", "A.covers(pid_m & 1, K)"))
    with pytest.raises(CheckUnsupported) as e:
        check_program(prog, SMALL, GEMM)
    assert e.value.line == line_of(prog, "A.assert_tags"), e.value
    assert "A.covers(pid_m & 1, K)" in str(e.value) and isinstance(e.value, DSLError)


def test_an_unknown_tag_value_in_assert_tags_is_refused_with_its_line():
    prog = gemm(("M=rows[:, None]", "M=rows[:, None] & 127"))
    with pytest.raises(CheckUnsupported) as e:
        check_program(prog, SMALL, GEMM)
    assert e.value.line == line_of(prog, "A.assert_tags") and "tag M" in str(e.value)


def test_an_unknown_index_is_refused_with_its_line():
    prog = gemm(("A.load(a[rows, ks]", "A.load(a[rows ^ pid_n, ks]"))
    with pytest.raises(CheckUnsupported) as e:
        check_program(prog, SMALL, GEMM)
    assert e.value.line == line_of(prog, "a_tile = A.load") and "index of `a`" in str(e.value)


def test_a_mask_part_without_a_value_masks_nothing():
    """A tuple mask whose part has no symbolic value (`(ks & 1) == 0`) reached z3.And as
    None; it is now no mask, so the load may reach past K: a bounds violation."""
    prog = gemm(("mask=(rows < M, ks < K)", "mask=(rows < M, (ks & 1) == 0)"))
    report = check_program(prog, SMALL, GEMM)
    assert "bounds" in report.kinds(), report.render()


# ---------------------------------------------------------------- launch options
@pytest.mark.parametrize("value", ["-0.0", "0", "3", "64", "True", "-4", "4.0"])
def test_num_warps_outside_what_triton_launches_is_a_dsl_error(value):
    """`num_warps=-0.0` passed the parser and divided by zero in the attention cost model."""
    with pytest.raises(DSLError, match="num_warps must be a power of two"):
        gemm(("num_warps=4", f"num_warps={value}"))


@pytest.mark.parametrize("value", ["0", "-1", "2.5", "False"])
def test_num_stages_must_be_a_positive_integer(value):
    with pytest.raises(DSLError, match="num_stages must be a positive integer"):
        gemm(("num_warps=4", f"num_warps=4, num_stages={value}"))
    assert gemm(("num_warps=4", "num_warps=32, num_stages=1")).kernel.option("num_stages") == 1


# ---------------------------------------------------------------- parsing
def test_a_lone_surrogate_in_program_text_is_a_syntax_error():
    """`Program.from_text` let UnicodeEncodeError out of `ast.parse` (the environments
    screen such text first; other callers of the parser did not)."""
    text = GEMM.program("baseline").text.replace("BK: A.const = 32", "BK: A.const = 32\ud800")
    with pytest.raises(DSLError, match="not valid Unicode") as e:
        Program.from_text(text)
    assert e.value.line == line_of(GEMM.program("baseline"), "BK: A.const = 32")


# ---------------------------------------------------------------- in the environments
@pytest.mark.parametrize("env_id,edits,expect", [
    ("Argus-GEMM-v0", [("A.program_id(1)", "A.program_id(2)")], "violations"),
    ("Argus-GEMM-v0", [("A.covers(0, K)", "A.covers(1 << 20, K)")], "violations"),
    ("Argus-GEMM-v0", [("A.covers(0, K)", "A.covers(pid_m & 1, K)")], "cannot analyse"),
    ("Argus-GEMM-v0", [("num_warps=4", "num_warps=-0.0")], "num_warps"),
    ("Argus-Attention-v0", [("A.program_id(1)", "A.program_id(2)")], "violations"),
    ("Argus-Attention-v0", [("num_warps=4", "num_warps=-0.0")], "num_warps"),
    ("Argus-MoE-v0", [("A.covers(0, D)", "A.covers(1 << 20, D)")], "violations"),
])
def test_the_envs_answer_without_an_internal_error(env_id, edits, expect):
    env = gym.make(env_id, mode="text", correctness="none")
    try:
        env.reset(seed=0)
        text = env.unwrapped.task.program("baseline").text
        for old, new in edits:
            assert old in text, (env_id, old)
            text = text.replace(old, new)
        _, reward, _, _, info = env.step(text)
        assert not info["internal_error"], info["error"]
        if expect == "violations":
            assert info["error"] is None and not info["report"]["ok"], info
        else:
            assert expect in info["error"] and reward < 0, info["error"]
    finally:
        env.close()
