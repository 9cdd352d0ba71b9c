"""The GEMM configuration space: its template reproduces the task's programs, and every
program reachable by safe transformations is proven correct (no false alarms)."""

import dataclasses
import random

import pytest

from argus_env.check import check_program
from argus_env.space import TransformError
from argus_env.task import get_task
from argus_env.tasks.gemm.space import BASELINE, EXPERT, SPLITK, GemmConfig

TASK = get_task("gemm")
SPACE = TASK.space


@pytest.mark.parametrize("name,config", [("baseline", BASELINE), ("expert", EXPERT),
                                         ("splitk", SPLITK)])
def test_task_programs_are_renderings_of_configs(name, config):
    rendered = dataclasses.replace(SPACE.program(config).kernel, doc=None)
    written = dataclasses.replace(TASK.program(name).kernel, doc=None)
    assert rendered == written, f"{name}:\n{SPACE.program(config).text}"


def _safe_walk(rng, length: int, sizes: dict):
    """Random legal transformations; split_k is always followed by its combine."""
    config, ctx = BASELINE, {"sizes": sizes}
    for _ in range(length):
        name, value = rng.choice(SPACE.legal(config, ctx, skip=("combine",)))
        config = SPACE.apply(config, name, value, ctx)
        if config.split_k > 1 and config.combine is None:
            config = SPACE.apply(config, "combine", "atomic", ctx)
    return config


@pytest.mark.parametrize("seed", range(24))
def test_programs_reachable_by_safe_transformations_are_proven(seed):
    rng = random.Random(seed)
    sizes = rng.choice([{"M": 100, "N": 72, "K": 80}, {"M": 4096, "N": 4096, "K": 4096},
                        {"M": 16, "N": 4096, "K": 4096}, {"M": 3000, "N": 5000, "K": 2000}])
    config = _safe_walk(rng, 4, sizes)
    report = check_program(SPACE.program(config), sizes, TASK)
    assert report.ok, f"{config.summary()} at {sizes}:\n{report.render()}"


def test_split_k_alone_is_caught_and_combine_fixes_it():
    sizes = {"M": 64, "N": 4096, "K": 4096}
    ctx = {"sizes": sizes}
    split = SPACE.apply(BASELINE, "split_k", 4, ctx)
    assert split.combine is None
    kinds = check_program(SPACE.program(split), sizes, TASK).kinds()
    assert {"coverage", "exactly_once"} <= kinds, kinds
    fixed = SPACE.apply(split, "combine", "atomic", ctx)
    assert check_program(SPACE.program(fixed), sizes, TASK).ok


def test_illegal_applications_say_why():
    ctx = {"sizes": {"M": 4096, "N": 4096, "K": 4096}}
    big = GemmConfig(256, 256, 128, 8, 4)
    with pytest.raises(TransformError, match="shared memory"):
        SPACE.apply(dataclasses.replace(big, stages=3), "stages", 4, ctx)
    with pytest.raises(TransformError, match="persistent grid and TMA"):
        SPACE.apply(BASELINE, "warp_specialize", True, ctx)
    with pytest.raises(TransformError, match="16-byte aligned rows"):
        SPACE.apply(BASELINE, "tma", True, {"sizes": {"M": 100, "N": 100, "K": 100}})
    with pytest.raises(TransformError, match="already"):
        SPACE.apply(BASELINE, "tile_m", 64, ctx)
    with pytest.raises(TransformError, match="did you mean tile_m"):
        SPACE.apply(BASELINE, "tile_mm", 64, ctx)


def test_text_calls_are_parsed_not_evaluated():
    act = SPACE.parse_call("split_k(4)")
    assert (act.kind, act.name, act.value) == ("transform", "split_k", 4)
    for bad in ("split_k(__import__('os'))", "split_k(x=4)", "os.system('x')", "split_k(4)(5)"):
        with pytest.raises(TransformError):
            SPACE.parse_call(bad)
