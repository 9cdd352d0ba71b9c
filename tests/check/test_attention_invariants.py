"""Attention invariants: no false alarms on the task's programs, every seeded bug caught."""

import pytest

from argus_env.check import check_program
from argus_env.task import get_task

from argus_env.check.symbolic.checker import DEFAULT_NUM_SMS

from corpus_attention import CAUSAL, CORPUS, FULL, GQA4, SAFE

TASK = get_task("attention")
SIZES = list(TASK.cpu_shapes) + [c.sizes for c in TASK.shapes[:2]] + [TASK.shapes[8].sizes]


@pytest.mark.parametrize("sizes", SIZES, ids=lambda s: "-".join(f"{k}{v}" for k, v in s.items()))
@pytest.mark.parametrize("which", ["baseline", "expert"])
def test_no_false_alarms(which, sizes):
    report = check_program(TASK.bind(TASK.program(which), sizes), sizes, TASK)
    assert report.ok, report.render()
    assert not report.notes, report.notes
    proven = " ".join(report.proven)
    assert "exponent base matches" in proven and "SK covered exactly once" in proven, proven
    if sizes["CAUSAL"]:
        assert "no key after its query reaches the exponent" in proven, proven


def test_corpus_is_large_and_covers_the_attention_invariants():
    assert len(CORPUS) >= 15
    kinds = set().union(*(m.expect for m in CORPUS))
    for needed in ("causal", "softmax", "exp_base", "head_map", "contraction", "coverage"):
        assert needed in kinds, needed


@pytest.mark.parametrize("mutation", CORPUS, ids=lambda m: m.name)
def test_seeded_attention_bug_is_caught(mutation):
    report = check_program(mutation.program(), mutation.sizes, TASK)
    assert mutation.expect <= report.kinds(), f"{mutation.name}:\n{report.render()}"
    v = next(v for v in report.violations if v.invariant in mutation.expect)
    assert v.line > 0 and v.source and v.sizes == mutation.sizes, v
    if v.invariant in ("causal", "head_map", "softmax", "contraction", "ownership"):
        assert v.program_id and v.element and v.actual, v.render()
    if v.invariant == "causal":
        assert v.actual["SK"] > v.actual["SQ"], v.render()
    if v.invariant == "head_map":
        group = mutation.sizes["H"] // mutation.sizes["KVH"]
        assert v.actual["KVH"] != v.actual["H"] // group, v.render()


@pytest.mark.parametrize("mutation", SAFE, ids=lambda m: m.name)
def test_rewrites_that_change_nothing_are_proven(mutation):
    report = check_program(mutation.program(), mutation.sizes, TASK)
    assert report.ok, f"{mutation.name}:\n{report.render()}"


# ---- the concrete enumerator against the symbolic checker, on every corpus program
@pytest.mark.parametrize("mutation", CORPUS + SAFE, ids=lambda m: m.name)
def test_the_concrete_enumerator_agrees(mutation):
    """Every instance run at the corpus sizes, with the symbolic checker's SM count; an `if`
    on floating-point data (lazy rescaling) is run both ways."""
    prog = mutation.program()
    sym = check_program(prog, mutation.sizes, TASK)
    con = check_program(prog, mutation.sizes, TASK, method="concrete", num_sms=DEFAULT_NUM_SMS)
    assert sym.kinds() == con.kinds(), \
        f"symbolic {sorted(sym.kinds())} vs concrete {sorted(con.kinds())}\n{sym.render()}\n{con.render()}"


@pytest.mark.parametrize("which", ["baseline", "expert"])
@pytest.mark.parametrize("sizes", [CAUSAL, FULL, GQA4], ids=["causal", "full", "gqa4"])
def test_the_concrete_enumerator_proves_the_task_programs(which, sizes):
    report = check_program(TASK.bind(TASK.program(which), sizes), sizes, TASK, method="concrete",
                           num_sms=DEFAULT_NUM_SMS)
    assert report.ok, report.render()
