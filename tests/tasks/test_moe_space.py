"""The MoE configuration space: the program files are its baseline and expert, safe
transformation sequences are proven, and the primitive scatter breaks exactly the
invariants it should until the inverse scatter completes it."""

import dataclasses
import random

import pytest

from argus_env.check import check_program
from argus_env.task import get_task
from argus_env.tasks.moe.space import BASELINE, EXPERT, table_configurations

TASK = get_task("moe")
SPACE = TASK.space
SHAPES = [TASK.cpu_shapes[1], TASK.shapes[7].sizes, TASK.shapes[1].sizes]


def test_program_files_are_the_spaces_baseline_and_expert():
    assert SPACE.program(BASELINE) == TASK.program("baseline")
    assert SPACE.program(EXPERT) == TASK.program("expert")
    assert len(TASK.program("baseline").info.grids) == BASELINE.launches() == 6
    assert len(TASK.program("expert").info.grids) == EXPERT.launches() == 2


def _safe(config):
    return dataclasses.replace(config, inverse_scatter=config.inverse_scatter or config.fuse_scatter)


@pytest.mark.parametrize("seed", range(6))
def test_safe_transformation_sequences_are_proven(seed):
    rng = random.Random(seed)
    sizes = rng.choice(SHAPES)
    ctx = {"sizes": sizes}
    config = BASELINE
    for _ in range(4):
        name, value = rng.choice(SPACE.legal(config, ctx))
        config = _safe(SPACE.apply(config, name, value, ctx))
    report = check_program(TASK.bind(SPACE.program(config), sizes), sizes, TASK)
    assert report.ok, f"{config.summary()} at {sizes}:\n{report.render()}"


def test_primitive_scatter_until_inverse():
    sizes = SHAPES[0]
    ctx = {"sizes": sizes}

    def kinds(c):
        return check_program(TASK.bind(SPACE.program(c), sizes), sizes, TASK).kinds()
    half = SPACE.apply(BASELINE, "fuse_scatter", True, ctx)
    assert {"scatter", "padding"} <= kinds(half)
    assert not kinds(SPACE.apply(half, "inverse_scatter", True, ctx))
    assert SPACE.why_illegal(BASELINE, "fuse_weight", True, ctx)
    assert SPACE.why_illegal(EXPERT, "fuse_scatter", False, ctx)


def test_table_configurations_are_proven_at_a_real_shape():
    sizes = TASK.shapes[10].sizes
    for c in table_configurations():
        report = check_program(TASK.bind(SPACE.program(c), sizes), sizes, TASK)
        assert report.ok, f"{c.summary()}:\n{report.render()}"


# ---------------------------------------------------------------- catalog 2: grouped tile
# order and the down projection's own tile width
GROUPED = [dataclasses.replace(EXPERT, block_m=128, group_m=8, down_n=256),
           dataclasses.replace(EXPERT, block_m=128, group_m=16, down_n=256, persistent=False),
           dataclasses.replace(EXPERT, block_m=32, block_n=32, group_m=8, tma=False),
           dataclasses.replace(EXPERT, down_n=64, group_m=4)]


@pytest.mark.parametrize("k", range(len(GROUPED)))
def test_grouped_orders_and_wide_down_tiles_are_proven(k):
    c = GROUPED[k]
    for sizes in (TASK.cpu_shapes[1], TASK.shapes[10].sizes):
        report = check_program(TASK.bind(SPACE.program(c), sizes), sizes, TASK)
        assert report.ok, f"{c.summary()} at {sizes}:\n{report.render()}"


def test_the_summed_table_set_is_legal_and_proven_at_prefill():
    """`SUMMED` (`record_programs.py --configs moe-summed`): the grouped programs with the
    top-k sum as its own launch; each is legal at a prefill shape where the H100 run timed
    them, and proven there and at a reduced shape."""
    from argus_env.tasks.moe.space import SUMMED
    prefill = next(c for c in TASK.shapes if c.name == "qwen3-prefill-16384-balanced").sizes
    assert len(set(SUMMED)) == len(SUMMED) and all(not c.fuse_weight for c in SUMMED)
    for c in SUMMED:
        for sizes in (TASK.cpu_shapes[1], prefill):
            if c.block_m >= 128 and sizes is prefill:
                assert SPACE.config_reason(c, {"sizes": sizes}) is None, c.summary()
            report = check_program(TASK.bind(SPACE.program(c), sizes), sizes, TASK)
            assert report.ok, f"{c.summary()} at {sizes}:\n{report.render()}"


def _seeded(c, old: str, new: str):
    from argus_env.dsl.program import Program
    text = SPACE.render(c)
    assert old in text
    return Program.from_text(text.replace(old, new))


def test_a_grouped_order_without_its_last_short_group_is_caught():
    """GROUP_M in place of the rows the last group has: at 11 blocks and GROUP_M 8 the
    last group's programs read expert_ids past its end (a bounds counterexample)."""
    c = GROUPED[2]
    sizes = TASK.cpu_shapes[1]
    assert TASK.program_sizes(SPACE.program(c), sizes)["NB"] % 8 != 0
    bad = _seeded(c, "block = first + tile % rows_in_group\n        col0 = tile % tiles_per_group "
                     "// rows_in_group * BN",
                  "block = first + tile % GROUP_M\n        col0 = tile % tiles_per_group "
                  "// GROUP_M * BN")
    report = check_program(TASK.bind(bad, sizes), sizes, TASK)
    assert "bounds" in report.kinds(), report.render()
    v = next(v for v in report.violations if v.invariant == "bounds")
    assert v.program_id and v.tensor in ("expert_ids", "sorted_ids", "x", "topk_weights"), v
    assert v.names["block"] >= TASK.program_sizes(SPACE.program(c), sizes)["NB"] or \
        v.tensor != "expert_ids", v


def test_a_grouped_order_that_skips_blocks_is_caught():
    c = GROUPED[2]
    sizes = TASK.cpu_shapes[1]
    bad = _seeded(c, "first = tile // tiles_per_group * GROUP_M",
                  "first = tile // tiles_per_group * GROUP_M + 1")
    report = check_program(TASK.bind(bad, sizes), sizes, TASK)
    assert "coverage" in report.kinds(), report.render()


def test_a_wrong_column_step_in_the_grouped_order_is_never_proven():
    c = GROUPED[2]
    sizes = TASK.cpu_shapes[1]
    bad = _seeded(c, "col0 = tile % tiles_per_group // rows_in_group * BN",
                  "col0 = tile % tiles_per_group // GROUP_M * BN")
    assert not check_program(TASK.bind(bad, sizes), sizes, TASK).ok


def test_unused_constants_do_not_change_the_model_price():
    """The model reads its tiles off the products the program runs and never credits a
    tile order: a BND or GROUP_M that nothing uses prices like the program without it,
    and a grouped order prices like the row-major one (the tables price it)."""
    from argus_env.dsl.program import Program
    from argus_env.tasks.moe.model import estimate
    sizes = TASK.shapes[0].sizes
    plain = SPACE.render(EXPERT)
    decoy = plain.replace("    KP: A.const = 2,\n", "    KP: A.const = 2,\n    BND: A.const = 256,\n"
                          "    GROUP_M: A.const = 16,\n")
    assert decoy != plain
    a = estimate(TASK.bind(Program.from_text(plain), sizes), sizes, "h200")
    b = estimate(TASK.bind(Program.from_text(decoy), sizes), sizes, "h200")
    assert a["ms"] == pytest.approx(b["ms"], rel=1e-9)
    grouped = estimate(TASK.bind(SPACE.program(dataclasses.replace(EXPERT, group_m=16)),
                                 sizes), sizes, "h200")
    assert grouped["ms"] == pytest.approx(a["ms"], rel=1e-9)   # a grouped order is not credited
    wide = estimate(TASK.bind(SPACE.program(dataclasses.replace(EXPERT, down_n=256)), sizes),
                    sizes, "h200")
    assert wide["features"].bn_down == 256 and wide["features"].bn == 128
    assert wide["ms"] != pytest.approx(a["ms"], rel=1e-6)
    # the constants' names count for nothing: BN renamed, the tiles are the products'
    renamed = plain.replace("BN", "WIDTH")
    c = estimate(TASK.bind(Program.from_text(renamed), sizes), sizes, "h200")
    assert (c["features"].bm, c["features"].bn, c["features"].bk) == (64, 128, 64)
    assert c["ms"] == pytest.approx(a["ms"], rel=1e-9)


def test_the_down_tiles_have_their_own_resource_check():
    ctx = {"sizes": TASK.shapes[0].sizes}
    wide = dataclasses.replace(EXPERT, block_m=128, down_n=256, stages=4, num_warps=4)
    reason = SPACE.hardware_reason(wide, ctx)
    assert reason, "a 128x256 fp32 accumulator over 4 warps does not fit the registers"
