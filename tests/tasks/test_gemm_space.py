"""The GEMM configuration space: its template reproduces the task's programs, and every
program reachable by safe transformations is proven correct (no false alarms)."""

import dataclasses
import random

import pytest

from argus_env.check import check_program
from argus_env.space import TransformError
from argus_env.task import get_task
from argus_env.tasks.gemm.space import (BASELINE, EXPERT, SMALL_SHAPES, SPLITK, SPLITK_REDUCE,
                                        STREAM_K_WAVES, STREAMK, SWAPAB, GemmConfig)
from argus_env.target import load_target

TASK = get_task("gemm")
SPACE = TASK.space


@pytest.mark.parametrize("name,config", [("baseline", BASELINE), ("expert", EXPERT),
                                         ("splitk", SPLITK), ("swapab", SWAPAB),
                                         ("streamk", STREAMK), ("splitk_reduce", SPLITK_REDUCE)])
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


# ---------------------------------------------------------------- swap-AB and stream-K
H200 = load_target("h200")
SHAPES = {c.name: c.sizes for c in TASK.shapes}


def test_swap_ab_and_stream_k_are_catalog_actions_through_the_env():
    """Both are discrete actions the mask offers at a decode shape and text calls; the
    program they give is proven, priced as its own configuration (the feature key names
    it) and carries its own program hash."""
    import gymnasium as gym
    import numpy as np

    import argus_env  # noqa: F401
    env = gym.make("Argus-GEMM-v0", correctness="none")
    core = env.unwrapped
    obs, info = env.reset(seed=0, options={"shape": "decode-16"})
    keys = {info["measurement"]["details"]["config"]}
    for name in ("swap_ab", "stream_k"):
        i = core.catalog.index((name, True))
        assert obs["action_mask"][i], f"{name}(True) masked at decode-16"
        obs, _, _, _, info = env.step(i)
        assert info["error"] is None and info["report"]["ok"], info["report_text"]
        assert getattr(core.state.config, name) is True
        key = info["measurement"]["details"]["config"]
        assert f"{name}=True" in key and key not in keys, key
        keys.add(key)
    assert "A.trans(acc)" in info["program"] and "A.atomic_add" in info["program"]
    assert not np.array_equal(obs["config"], env.reset(seed=0, options={"shape": "decode-16"})[0]["config"])
    text = gym.make("Argus-GEMM-v0", mode="text", correctness="none")
    text.reset(seed=0, options={"shape": "ragged-1000"})
    _, _, _, _, info = text.step("stream_k(True)")
    assert info["error"] is None and info["report"]["ok"], info
    assert text.unwrapped.state.config.stream_k
    env.close()
    text.close()


def test_swap_ab_and_stream_k_preconditions_say_why():
    ctx = {"sizes": SHAPES["decode-16"], "target": H200}
    with pytest.raises(TransformError, match="undo persistent first"):
        SPACE.apply(dataclasses.replace(BASELINE, persistent=True), "stream_k", True, ctx)
    with pytest.raises(TransformError, match="undo stream_k first"):
        SPACE.apply(STREAMK, "persistent", True, ctx)
    with pytest.raises(TransformError, match="undo stream_k first"):
        SPACE.apply(STREAMK, "split_k", 4, ctx)
    with pytest.raises(TransformError, match="swizzle"):
        SPACE.apply(dataclasses.replace(BASELINE, group_m=8), "stream_k", True, ctx)
    with pytest.raises(TransformError, match="undo swap_ab first"):
        SPACE.apply(SWAPAB, "epilogue_subtile", 2, ctx)
    with pytest.raises(TransformError, match=f"at most {STREAM_K_WAVES} waves"):
        SPACE.apply(BASELINE, "stream_k", True, {"sizes": SHAPES["square-8192"], "target": H200})
    # swap-AB moves wgmma's 64-row rule to the tile's N side: 16 rows of M are fine
    small = GemmConfig(16, 128, 64, 4, 3, tma=True, kmajor_b=True)
    assert "block_m >= 64" in SPACE.config_reason(small, ctx)
    assert SPACE.config_reason(dataclasses.replace(small, swap_ab=True), ctx) is None


def test_swap_ab_programs_are_proven_for_all_sizes():
    from argus_env.check import check_for_all_sizes
    config = SMALL_SHAPES["swap-16x64x128-plain"]
    report, why = check_for_all_sizes(SPACE.program(config), SHAPES["decode-16"], TASK)
    assert report is not None and report.status == "proven", why or report.render()


def _legal_pairs():
    return [(name, case.name) for name, c in SMALL_SHAPES.items() for case in TASK.shapes
            if SPACE.config_reason(c, {"sizes": case.sizes, "target": H200}) is None]


def test_the_small_shape_configurations_are_offered_where_they_help():
    """Every swap-AB and stream-K configuration the GPU scripts time is legal at the
    small and ragged shapes; stream-K is refused only past its wave limit."""
    pairs = set(_legal_pairs())
    for shape in ("decode-16", "decode-64", "small-m-512", "ragged-1000", "square-2048"):
        assert {(n, shape) for n in SMALL_SHAPES} <= pairs, shape
    for name, c in SMALL_SHAPES.items():
        for case in TASK.shapes:
            reason = SPACE.config_reason(c, {"sizes": case.sizes, "target": H200})
            assert reason is None or "waves of tiles" in reason, (name, case.name, reason)


@pytest.mark.slow
@pytest.mark.parametrize("name,shape", _legal_pairs())
def test_small_shape_configurations_are_proven_at_every_suite_shape(name, shape):
    """No false alarm: each swap-AB / stream-K configuration is proven at every suite
    shape where the mask allows it (the checker's verdict at the episode's sizes)."""
    report = check_program(TASK.bind(SPACE.program(SMALL_SHAPES[name]), SHAPES[shape]),
                           SHAPES[shape], TASK, num_sms=H200.sms)
    assert report.ok and not report.notes, report.render()


def test_the_table_key_of_a_small_shape_configuration_recovers_it():
    """A GPU table row names a program by its feature key (`record_gemm_table.py`); the
    table backend recovers the configuration from it (`ConfigRecovery`) to find the row of
    a program that executes the same: swap-AB (tile named in the output's orientation) and
    stream-K are their own configurations, not the plain ones of the same dot; a reduction
    pass is not the atomic combine of the same split."""
    from argus_env.measure.features import extract
    from argus_env.measure.recorded import ConfigRecovery
    recover, sizes = ConfigRecovery(TASK), SHAPES["decode-64"]
    keys = set()
    for name, config in SMALL_SHAPES.items():
        program = SPACE.program(config)
        key = extract(TASK.bind(program, sizes), sizes, TASK, target=H200).key()
        back = recover({"config": key})
        assert back == config and SPACE.program(back).hash == program.hash, (name, key, back)
        plain = dataclasses.replace(config, swap_ab=False, stream_k=False)
        if config.combine == "reduce":   # the reduction pass is not the atomic combine
            plain = dataclasses.replace(config, combine="atomic")
        assert extract(SPACE.program(plain), sizes, TASK, target=H200).key() != key, name
        keys.add(key)
    assert len(keys) == len(SMALL_SHAPES)
