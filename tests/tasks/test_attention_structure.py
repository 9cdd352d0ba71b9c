"""The attention catalog's program-structure transformations (rescaling policy, Q in
registers, warp specialization, persistent grid, GQA packing): each applies where legal,
is proven at several shapes, matches SDPA under the Triton interpreter, and its seeded
mistakes are refuted with counterexamples."""

import dataclasses

import pytest

from argus_env import lower
from argus_env.check import check_program
from argus_env.dsl.program import Program
from argus_env.measure import oracle
from argus_env.measure.backends import make_backend
from argus_env.space import TransformError
from argus_env.target import load_target
from argus_env.task import get_task
from argus_env.tasks.attention.model import features
from argus_env.tasks.attention.space import BASELINE, EXPERT, render

TASK = get_task("attention")
SPACE = TASK.space
R = dataclasses.replace
CAUSAL_GQA = {"B": 1, "H": 4, "KVH": 2, "SQ": 130, "SK": 130, "D": 64, "CAUSAL": 1}
SHAPES = [CAUSAL_GQA, TASK.shapes[5].sizes, TASK.shapes[8].sizes,
          {"B": 2, "H": 2, "KVH": 2, "SQ": 72, "SK": 96, "D": 128, "CAUSAL": 0}]
NEW = {"rescale": "lazy", "q_registers": False, "warp_specialize": True, "persistent": True,
       "gqa_pack": True}
ALL = R(EXPERT, rescale="lazy", warp_specialize=True, persistent=True, gqa_pack=True)


def _ids(s):
    return "-".join(f"{k}{v}" for k, v in s.items())


def test_each_new_transformation_applies_and_changes_the_program():
    ctx = {"sizes": TASK.shapes[8].sizes}
    for name, value in NEW.items():
        config = SPACE.apply(EXPERT, name, value, ctx)
        assert config != EXPERT and render(config) != render(EXPERT), name
        assert SPACE.program(config).kernel is not None
    f = features(SPACE.program(ALL))
    assert (f.lazy_rescale, f.warp_specialize, f.persistent, f.gqa_pack) == (True,) * 4, f
    assert not features(SPACE.program(R(EXPERT, q_in_registers=False))).q_in_registers


def test_preconditions_name_what_is_missing():
    gqa, mha = {"sizes": TASK.shapes[8].sizes}, {"sizes": TASK.shapes[0].sizes}
    with pytest.raises(TransformError, match="no GQA group"):
        SPACE.apply(EXPERT, "gqa_pack", True, mha)
    with pytest.raises(TransformError, match="needs TMA"):
        SPACE.apply(BASELINE, "warp_specialize", True, gqa)
    with pytest.raises(TransformError, match="turn warp_specialize off"):
        SPACE.apply(R(EXPERT, warp_specialize=True), "tma", False, gqa)
    group3 = {"sizes": {**CAUSAL_GQA, "H": 6, "KVH": 2}}
    with pytest.raises(TransformError, match="multiple of 3"):
        SPACE.apply(BASELINE, "gqa_pack", True, group3)

    no_ws = dataclasses.replace(load_target("h200"), name="no-ws", warp_specialization=False)
    with pytest.raises(TransformError, match="warp specialization: not available on no-ws"):
        SPACE.apply(EXPERT, "warp_specialize", True, {**gqa, "target": no_ws})


CONFIGS = [R(BASELINE, rescale="lazy"), R(EXPERT, rescale="lazy"), R(BASELINE, q_in_registers=False),
           R(EXPERT, persistent=True, warp_specialize=True), R(BASELINE, gqa_pack=True),
           R(EXPERT, gqa_pack=True, block_n=32), ALL]


@pytest.mark.parametrize("sizes", SHAPES, ids=_ids)
def test_new_structures_are_proven(sizes):
    for config in CONFIGS:
        if config.gqa_pack and sizes["H"] == sizes["KVH"]:
            continue
        report = check_program(TASK.bind(SPACE.program(config), sizes), sizes, TASK)
        assert report.ok and not report.notes, f"{config.summary()} at {sizes}:\n{report.render()}"
        proven = " ".join(report.proven)
        assert "every element written" in proven and "SK covered exactly once" in proven, proven
        if config.gqa_pack:
            assert "KVH follows from H" in proven, proven


@pytest.mark.parametrize("config", [R(BASELINE, rescale="lazy", q_in_registers=False, persistent=True),
                                    ALL], ids=["plain", "all"])
def test_new_structures_match_sdpa_in_the_interpreter(config):
    for sizes in ({"B": 1, "H": 4, "KVH": 2, "SQ": 72, "SK": 72, "D": 64, "CAUSAL": 1},
                  {"B": 2, "H": 2, "KVH": 1, "SQ": 40, "SK": 96, "D": 128, "CAUSAL": 0}):
        program = TASK.bind(SPACE.program(config), sizes)
        verdict = oracle.check(program, TASK, sizes, lower.load(program, interpret=True), seed=5)
        assert verdict.ok, f"{config.summary()} at {sizes}: {verdict.message}"


def test_lazy_rescaling_is_exact_when_the_maximum_jumps():
    """Keys after the first block score far higher, so the threshold test fires mid-loop."""
    import torch
    sizes = {"B": 1, "H": 2, "KVH": 1, "SQ": 64, "SK": 160, "D": 64, "CAUSAL": 0}
    config = R(BASELINE, rescale="lazy", block_n=32, gqa_pack=True)
    program = TASK.bind(SPACE.program(config), sizes)
    inputs = TASK.make_inputs(program, sizes, "cpu", torch.Generator().manual_seed(1))
    inputs["k"][:, :, 64:] *= 6
    out = lower.load(program, interpret=True)(**{n: inputs[n].clone() for n in ("q", "k", "v")})
    verdict = oracle.compare({"o": out}, TASK.reference(inputs, sizes), TASK, sizes)
    assert verdict.ok, verdict.message


def _mutant(config, edits, sizes):
    text = render(config)
    for old, new in edits:
        assert old in text, old
        text = text.replace(old, new)
    return check_program(TASK.bind(Program.from_text(text), sizes), sizes, TASK)


@pytest.mark.parametrize("edits,invariant", [
    ((("l_i = l_i * alpha\n", "l_i = l_i\n"),), "softmax"),
    ((("acc = acc * alpha[:, None]\n", "acc = acc\n"),), "softmax"),
], ids=["rowsum-only-acc", "acc-only-rowsum"])
def test_lazy_rescale_of_only_one_is_refuted(edits, invariant):
    report = _mutant(R(EXPERT, rescale="lazy"), edits, CAUSAL_GQA)
    v = next(v for v in report.violations if v.invariant == invariant)
    assert v.program_id and v.element is not None and v.expected != v.actual, v.render()


def test_wrong_head_packing_and_non_bijective_remap_are_refuted():
    packed = R(EXPERT, gqa_pack=True, persistent=True)
    report = _mutant(packed, [("h = kvh * GROUP + r // (BM // GROUP)",
                               "h = kvh + r // (BM // GROUP) * KVH")], CAUSAL_GQA)
    v = next(v for v in report.violations if v.invariant == "head_map")
    assert v.actual["KVH"] != v.actual["H"] // 2, v.render()
    report = _mutant(packed, [("pid_m = tile % num_pid_m", "pid_m = tile % num_pid_m // 2 * 2")],
                     {**CAUSAL_GQA, "B": 2})
    assert {"exactly_once", "bijection"} <= report.kinds(), report.render()
    unwritten = next(v for v in report.violations if v.invariant == "bijection")
    assert unwritten.actual == {"writes": 0}, unwritten.render()


def test_cost_model_follows_the_h200_timings_of_the_new_knobs():
    """Each knob moves the model's estimate the way it moved the H200 timing
    (`table_structure_h200.csv`: the expert with each knob, per shape): a clear change
    (over 3%, geomean over the shapes) in the same direction, no change a small one."""
    import csv
    import math
    from pathlib import Path
    rows = list(csv.DictReader((Path(TASK.anchors_file).parent
                                / "table_structure_h200.csv").open()))
    measured = {(r["shape"], r["program_hash"]): float(r["tflops"]) for r in rows if r["ok"] == "True"}
    backend = make_backend("model")
    knobs = {"lazy": dict(rescale="lazy"), "reload": dict(q_in_registers=False),
             "ws": dict(warp_specialize=True), "persistent": dict(persistent=True)}
    seen = {k: ([], []) for k in knobs}
    for case in TASK.shape_cases():
        base_prog = TASK.bind(SPACE.program(EXPERT), case.sizes)
        base_t = measured.get((case.name, base_prog.hash))
        if base_t is None:
            continue
        base_m = backend.measure(base_prog, case.sizes, TASK).tflops
        for knob, change in knobs.items():
            prog = TASK.bind(SPACE.program(R(EXPERT, **change)), case.sizes)
            if (case.name, prog.hash) in measured:
                seen[knob][0].append(math.log(measured[(case.name, prog.hash)] / base_t))
                seen[knob][1].append(math.log(backend.measure(prog, case.sizes, TASK).tflops / base_m))
    for knob, (gpu, model) in seen.items():
        assert len(gpu) >= 5, (knob, len(gpu))
        g, m = math.exp(sum(gpu) / len(gpu)), math.exp(sum(model) / len(model))
        if abs(g - 1) > 0.03:
            assert (g > 1) == (m > 1) and abs(m - 1) > 0.01, (knob, g, m)
        else:
            assert abs(m - 1) < 0.05, (knob, g, m)
