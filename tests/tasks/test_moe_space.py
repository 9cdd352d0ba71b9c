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
