"""The attention configuration space: safe transformation sequences are proven correct,
and the primitive pairs break exactly the invariant they should until completed."""

import dataclasses
import random

import pytest

from argus_env.check import check_program
from argus_env.task import get_task
from argus_env.tasks.attention.space import BASELINE, EXPERT

TASK = get_task("attention")
SPACE = TASK.space
SHAPES = [TASK.shapes[1].sizes, TASK.shapes[5].sizes, TASK.shapes[8].sizes,
          {"B": 1, "H": 4, "KVH": 2, "SQ": 130, "SK": 130, "D": 64, "CAUSAL": 1}]


def _safe(config):
    """Complete the primitive pairs: exp2 with its folded scale; block skipping with its
    diagonal mask and key blocks no wider than query blocks."""
    config = dataclasses.replace(config, fold_log2e=config.exp2)
    if config.skip_blocks:
        config = dataclasses.replace(config, diagonal_mask=True,
                                     block_n=min(config.block_n, config.block_m))
    return config


@pytest.mark.parametrize("seed", range(10))
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


def test_primitive_pairs_break_their_invariant_until_completed():
    sizes = SHAPES[0]
    ctx = {"sizes": sizes}

    def kinds(c):
        return check_program(TASK.bind(SPACE.program(c), sizes), sizes, TASK).kinds()
    half = SPACE.apply(BASELINE, "exp2", True, ctx)
    assert kinds(half) == {"exp_base"}
    assert not kinds(SPACE.apply(half, "fold_log2e", True, ctx))
    unmasked = dataclasses.replace(EXPERT, diagonal_mask=False)
    assert "causal" in kinds(unmasked)
    assert not kinds(SPACE.apply(unmasked, "diagonal_mask", True, ctx))
    wide = dataclasses.replace(EXPERT, block_m=64, block_n=128)
    assert "causal" in kinds(wide), "a key block wider than the query block leaks past the diagonal"
