"""MoE invariants: no false alarms on the task's programs, every seeded bug caught with a
counterexample."""

import dataclasses

import pytest

from argus_env.check import check_program
from argus_env.task import get_task

from argus_env.tasks.moe import routing
from argus_env.tasks.moe.postconditions import routing_of
from argus_env.tasks.moe.realize import arrays

from corpus_moe import CLEAN, CORPUS, Mutation

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
    assert len(CORPUS) >= 25 and len(CLEAN) >= 4
    assert sum(m.replays for m in CORPUS) >= 6 and sum(bool(m.clean) for m in CORPUS) >= 4
    kinds = set().union(*(m.expect for m in CORPUS))
    for needed in ("expert", "scatter", "combine", "padding", "exactly_once", "coverage", "bounds"):
        assert needed in kinds, needed


def _check(mutation, sizes=None, num_sms=None):
    sizes = mutation.sizes if sizes is None else sizes
    num_sms = mutation.num_sms if num_sms is None else num_sms
    program = mutation.program() if sizes is mutation.sizes else \
        dataclasses.replace(mutation, sizes=dict(sizes)).program()
    return check_program(program, sizes, TASK, **({"num_sms": num_sms} if num_sms else {}))


@pytest.mark.parametrize("mutation", CORPUS, ids=lambda m: m.name)
def test_seeded_moe_bug_is_caught(mutation):
    report = _check(mutation)
    assert mutation.expect <= report.kinds(), f"{mutation.name}:\n{report.render()}"
    v = next(v for v in report.violations if v.invariant in mutation.expect)
    # an instance, or (a pair's row no instance reaches) the output element left short
    assert v.line > 0 and v.source and (v.program_id or v.coords), v.render()
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


# ---------------------------------------------------------------- the fused combine, proven
def test_the_fused_combine_is_proven_not_noted():
    """Exactly once and complete over the top-k slots, every output element written: proven
    for the expert program, with nothing left as a note."""
    for sizes in SIZES:
        report = check_program(TASK.bind(TASK.program("expert"), sizes), sizes, TASK)
        proven = " ".join(report.proven)
        assert report.ok and not report.notes, report.render()
        assert "TOPK exactly once" in proven and "every element written" in proven, proven


@pytest.mark.parametrize("mutation", [m for m in CORPUS if m.clean], ids=lambda m: m.name)
def test_no_false_alarm_where_the_routing_cannot_break_it(mutation):
    """The same edit at shapes (and SM counts) where no routing the routing step produces
    makes it wrong: proven, not refuted by an array the routing never builds."""
    for sizes, num_sms in mutation.clean:
        report = _check(mutation, dict(sizes), num_sms or 132)
        assert report.ok and report.status == "proven", f"{sizes}:\n{report.render()}"


CLEAN_SIZES = list(TASK.cpu_shapes) + [TASK.shapes[i].sizes for i in (0, 3, 7, 11)]


@pytest.mark.parametrize("name,base,edits", CLEAN, ids=lambda x: x if isinstance(x, str) else "")
def test_correct_routed_programs_are_proven(name, base, edits):
    for sizes in CLEAN_SIZES:
        for num_sms in (3, 132):
            program = Mutation(name, base, tuple(edits), frozenset(), dict(sizes)).program()
            report = check_program(program, sizes, TASK, num_sms=num_sms)
            assert report.ok and not report.notes, f"{name} at {sizes}, {num_sms} SMs:\n" \
                f"{report.render()}"


# ---------------------------------------------------------------- realisable counterexamples
@pytest.mark.parametrize("mutation", CORPUS, ids=lambda m: m.name)
def test_every_counterexample_is_one_the_routing_step_produces(mutation):
    """Each violation carries a top-k choice; the routing step's own `align` of it meets
    the postconditions (checked on the arrays, not assumed)."""
    program = mutation.program()
    report = _check(mutation)
    assert report.violations, report.render()
    sizes = TASK.program_sizes(program, mutation.sizes)
    r = routing_of(program.kernel.consts, sizes)
    for v in report.violations:
        assert v.witness.get("routing"), v.render()
        ids, sorted_ids, expert_ids = arrays(v.witness["routing"], r)
        assert ids.shape == (sizes["T"], sizes["TOPK"])
        routing.check_postconditions(ids, sorted_ids, expert_ids, sizes["E"], r.block)
        assert sorted_ids.numel() == sizes["P"] and expert_ids.numel() == sizes["NB"]


@pytest.mark.parametrize("mutation", [m for m in CORPUS if m.replays], ids=lambda m: m.name)
def test_the_named_output_element_is_wrong_under_the_interpreter(mutation):
    """Replay: the program under the Triton interpreter on routing arrays that realise the
    counterexample (checked with the interpreter's 3 SMs) leaves the output element the
    violation names different from the torch reference."""
    from argus_env.tasks.moe.replay import replay
    program = mutation.program()
    report = check_program(program, mutation.sizes, TASK, num_sms=3)
    named = [v for v in report.violations if v.invariant in mutation.expect
             and v.witness.get("output")]
    assert named, report.render()
    got = replay(program, named[-1])
    assert got["differs"], (named[-1].render(), got)
    assert tuple(got["element"]) == tuple(named[-1].witness["output"])


# ---------------------------------------------------------------- every suite shape
@pytest.mark.parametrize("case", TASK.shapes, ids=lambda c: c.name)
def test_task_programs_are_proven_at_every_suite_shape(case):
    """Baseline and expert at every shape of the suite, with the target's SMs and the
    interpreter's: proven, no note, nothing undecided."""
    sizes = dict(case.sizes)
    for which in ("baseline", "expert"):
        for num_sms in (132, 3):
            report = check_program(TASK.bind(TASK.program(which), sizes), sizes, TASK,
                                   num_sms=num_sms)
            assert report.status == "proven" and not report.notes, \
                f"{which}, {num_sms} SMs:\n{report.render()}"


@pytest.mark.slow
@pytest.mark.parametrize("case", TASK.shapes, ids=lambda c: c.name)
def test_table_configurations_are_proven_at_every_suite_shape(case):
    from argus_env.tasks.moe.space import table_configurations
    sizes = dict(case.sizes)
    for c in table_configurations():
        report = check_program(TASK.bind(TASK.space.program(c), sizes), sizes, TASK)
        assert report.status == "proven" and not report.notes, f"{c.summary()}:\n{report.render()}"


def test_a_replay_can_weigh_every_slot_equally():
    """The replay's second try: the same routing arrays, every top-k weight 1/TOPK (what
    the routing gives where a token's selected logits tie), so that a dropped or doubled
    slot is never one whose softmax weight happens to be near zero."""
    from argus_env.tasks.moe.replay import inputs_for
    mutation = next(m for m in CORPUS if m.name == "down-stride-one-too-many")
    program = mutation.program()
    report = check_program(program, mutation.sizes, TASK, num_sms=3)
    v = next(v for v in report.violations if v.witness.get("output"))
    task_inputs, sizes = inputs_for(program, v, seed=0)
    equal, _ = inputs_for(program, v, seed=0, equal_weights=True)
    for name in ("topk_ids", "sorted_ids", "expert_ids"):
        assert (equal[name] == task_inputs[name]).all(), name
    w = equal["topk_weights"]
    assert w.shape == (sizes["T"], sizes["TOPK"])
    assert (w - 1.0 / sizes["TOPK"]).abs().max() < 1e-6
    assert (task_inputs["topk_weights"] - 1.0 / sizes["TOPK"]).abs().max() > 1e-3
