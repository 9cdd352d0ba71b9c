"""MoE invariants: no false alarms on the task's programs, every seeded bug caught with a
counterexample."""

import dataclasses

import pytest

from argus_env.check import check_program
from argus_env.task import get_task

from corpus_moe import CORPUS

TASK = get_task("moe")
SIZES = list(TASK.cpu_shapes) + [TASK.shapes[0].sizes, TASK.shapes[7].sizes,
                                  TASK.shapes[11].sizes]


@pytest.mark.parametrize("sizes", SIZES, ids=lambda s: "-".join(f"{k}{v}" for k, v in s.items()))
@pytest.mark.parametrize("which", ["baseline", "expert"])
def test_no_false_alarms(which, sizes):
    report = check_program(TASK.bind(TASK.program(which), sizes), sizes, TASK)
    assert report.ok, report.render()
    proven = " ".join(report.proven)
    assert "each sorted row meets its own expert's weights" in proven, proven
    assert "goes to the T of its pair" in proven, proven
    assert report.status == "proven" and not report.undecided, report.render()


def test_corpus_is_large_and_covers_the_moe_invariants():
    assert len(CORPUS) >= 15
    kinds = set().union(*(m.expect for m in CORPUS))
    for needed in ("expert", "scatter", "combine", "padding", "exactly_once", "coverage", "bounds"):
        assert needed in kinds, needed


@pytest.mark.parametrize("mutation", CORPUS, ids=lambda m: m.name)
def test_seeded_moe_bug_is_caught(mutation):
    report = check_program(mutation.program(), mutation.sizes, TASK)
    assert mutation.expect <= report.kinds(), f"{mutation.name}:\n{report.render()}"
    v = next(v for v in report.violations if v.invariant in mutation.expect)
    assert v.line > 0 and v.source and v.program_id, v.render()
    if v.invariant in ("expert", "scatter", "combine"):
        assert v.element and v.expected and v.actual, v.render()
        key = next(iter(v.expected))
        assert v.expected[key] != v.actual[key], v.render()


def test_postconditions_are_what_proves_the_programs():
    """Without the routing step's postconditions (a task that states no routing), the
    expert program's rows could meet any expert: the proof rests on them."""
    class NoRouting(type(TASK)):  # no routing at all: nothing assumed, nothing realised
        invariants = dataclasses.replace(TASK.invariants, axioms=None, witness=None)
    sizes = TASK.cpu_shapes[0]
    report = check_program(TASK.bind(TASK.program("expert"), sizes), sizes, NoRouting())
    assert "bounds" in report.kinds(), report.render()

    class Unrealised(type(TASK)):  # the counterexamples found then are no routing's
        invariants = dataclasses.replace(TASK.invariants, axioms=None)
    report = check_program(TASK.bind(TASK.program("expert"), sizes), sizes, Unrealised())
    assert report.status == "undecided" and not report.violations, report.render()
