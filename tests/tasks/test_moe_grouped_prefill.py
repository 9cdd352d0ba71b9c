"""The grouped tile order at a prefill shape: its exactly-once proofs are settled within
z3's count of work, never by the default solver's clock.

At qwen3-prefill-16384 the sorted layout has 1151 blocks, so GROUP_M 16 leaves a last
group of 15: the two-instance queries divide the tile index by 15 beside 16 and 16 *
num_n, which are no chain. Asked of z3's default solver they took 2 to 5 s, and the
persistent program with 256-wide down tiles reached the timeout (refused as undecided, or
not, as the machine's load had it). The radix form now takes the digits of the chain
{16, 16 * num_n} and leaves the remainder by 15 to the SMT core (`symbolic.radix`), and
two instances of a grid-stride loop differ by their linear index (`whole._two_writes`).
"""

import pytest

from argus_env.check import check_program, isolated
from argus_env.dsl.program import Program
from argus_env.task import get_task
from argus_env.tasks.moe.space import FUSED, MoEConfig

TASK = get_task("moe")
SPACE = TASK.space
SHAPES = {s.name: s.sizes for s in TASK.shapes}
#: grouped order 16, persistent, 256-wide down tiles: the program that reached the timeout
GROUPED = MoEConfig(128, 128, 64, 8, 3, group_m=16, down_n=256, **FUSED)
#: the same with the primitive scatter: rows written at their sorted position
PRIMITIVE = MoEConfig(128, 128, 64, 8, 3, fuse_gather=True, fuse_swiglu=True,
                      fuse_scatter=True, persistent=True, tma=True, group_m=16, down_n=256)


def _clock_limited(monkeypatch) -> list:
    """The queries that reach z3's default solver (its answer bounded by the clock)."""
    calls = []
    original = isolated.Scope.solver

    def solver(self, simple=False):
        if not simple:
            calls.append(1)
        return original(self, simple)
    monkeypatch.setattr(isolated.Scope, "solver", solver)
    return calls


@pytest.mark.parametrize("shape", ["qwen3-prefill-16384-balanced", "qwen3-prefill-16384-skewed"])
def test_the_grouped_persistent_program_is_proven_at_qwen3_prefill(monkeypatch, shape):
    sizes = SHAPES[shape]
    assert TASK.program_sizes(SPACE.program(GROUPED), sizes)["NB"] % 16  # a short group
    clock = _clock_limited(monkeypatch)
    report = check_program(TASK.bind(SPACE.program(GROUPED), sizes), sizes, TASK)
    assert report.status == "proven", report.render()
    assert any("each pair's row added once" in p for p in report.proven), report.proven
    assert not clock  # every query within a work limit: the same verdict on a loaded machine


def test_the_primitive_scatter_gets_its_counterexamples_not_a_timeout():
    sizes = SHAPES["qwen3-prefill-16384-balanced"]
    report = check_program(TASK.bind(SPACE.program(PRIMITIVE), sizes), sizes, TASK)
    assert {"scatter", "padding"} <= report.kinds(), report.render()
    assert not report.undecided, report.render()


@pytest.mark.parametrize("old, new", [
    # the column stepped by GROUP_M in the short last group too: two tiles share an origin
    ("col0 = tile % tiles_per_group // rows_in_group * BND",
     "col0 = tile % tiles_per_group // GROUP_M * BND"),
    # groups one block apart less than GROUP_M: a block's tiles written by two groups
    ("first = tile // tiles_per_group * GROUP_M",
     "first = tile // tiles_per_group * (GROUP_M - 1)"),
])
def test_a_seeded_bug_in_the_grouped_order_is_never_proven_at_prefill(old, new):
    sizes = SHAPES["qwen3-prefill-16384-balanced"]
    text = SPACE.render(GROUPED)
    assert old in text
    bad = Program.from_text(text.replace(old, new))
    report = check_program(TASK.bind(bad, sizes), sizes, TASK)
    assert report.status != "proven", report.render()
    assert report.violations or report.undecided  # a counterexample, or a refusal
