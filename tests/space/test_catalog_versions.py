"""Transformation catalogs have versions: a space only appends, `TaskSpace.at(v)` gives
catalog `v` back (its actions at the indices they had, `undo` and `submit` after them),
the env plays it with the observation it had, and records name the version they played
so that they replay under it."""

import gymnasium as gym
import pytest

import argus_env  # noqa: F401  (registers the envs)
from argus_env.bench.results import LEGACY_CATALOG, line_setting
from argus_env.envs.record import Recorder
from argus_env.registry import TASKS
from argus_env.task import get_task


@pytest.mark.parametrize("name", list(TASKS))
def test_every_space_appends_its_transformations_in_version_order(name):
    space = get_task(name).space
    versions = [t.since for t in type(space).transforms]
    assert versions == sorted(versions) and versions[0] == 1, versions
    for v in range(1, space.latest_catalog() + 1):
        old = space.at(v).catalog()
        new = space.catalog()
        # transformations keep their index; only undo and submit move to the end
        assert new[:len(old) - 2] == old[:-2], (name, v)
        assert old[-2:] == new[-2:] == [("undo", None), ("submit", None)]


def test_moe_catalog_1_is_the_one_before_the_grouped_order_and_down_tiles():
    task = get_task("moe")
    space, old = task.space, task.space.at(1)
    assert space.latest_catalog() >= 2 and old.catalog_version == 1
    names = {t.name for t in old.transforms}
    assert "swizzle" not in names and "tile_n_down" not in names
    assert {"swizzle", "tile_n_down"} <= {t.name for t in space.transforms}
    assert len(old.transforms) == 12
    assert len(old.catalog()) == sum(len(t.values) for t in old.transforms) + 2
    assert old.hidden_fields() == {"group_m", "down_n"}
    # the observation of catalog 1 has the length it had before the fields existed
    assert task.config_dim_of(old) == task.config_dim - 2
    assert "group_m" not in task.config_fields(old) and "group_m" in task.config_fields()


@pytest.mark.parametrize("bad", [0, 3, 99, "1", 1.0, True])
def test_a_catalog_version_the_space_never_had_is_refused(bad):
    with pytest.raises(ValueError, match="catalog version"):
        get_task("moe").space.at(bad)


def test_the_env_plays_the_catalog_it_is_given():
    new = gym.make("Argus-MoE-v0", mode="text", measure="model", correctness="none")
    old = gym.make("Argus-MoE-v0", mode="text", measure="model", correctness="none", catalog=1)
    try:
        for env in (new, old):
            env.reset(seed=0, options={"shape": "qwen3-decode-256-skewed"})
        assert old.observation_space["config"].shape[0] == new.observation_space["config"].shape[0] - 2
        assert old.observation_space["action_mask"].n < new.observation_space["action_mask"].n
        _, _, _, _, info = new.step("swizzle(8)")
        assert "no such transformation" not in str(info.get("error") or "")
        _, reward, _, _, info = old.step("swizzle(8)")
        assert "no such transformation" in str(info.get("error") or info), info
        rec_new = Recorder(new, "test", 0).rec
        rec_old = Recorder(old, "test", 0).rec
        assert (rec_new.catalog, rec_old.catalog) == (get_task("moe").space.latest_catalog(), 1)
        assert '"catalog": 1' in rec_old.to_json()
    finally:
        new.close()
        old.close()


def test_a_line_from_before_catalog_versions_played_the_first():
    assert LEGACY_CATALOG == 1
    assert line_setting({"measure": "table"}, "catalog") == 1
    assert line_setting({"measure": "table", "catalog": 2}, "catalog") == 2


@pytest.mark.slow
def test_a_record_replays_under_the_catalog_it_names():
    import json

    from argus_env.bench.validate import validate
    env = gym.make("Argus-MoE-v0", measure="model", correctness="none")
    try:
        catalog = env.unwrapped.catalog
        rec = Recorder(env, "test", 0)
        _, info = env.reset(seed=0, options={"shape": "qwen3-decode-256-skewed"})
        rec.start(info)
        for action in (catalog.index(("swizzle", 8)), catalog.index(("tile_n_down", 256)),
                       catalog.index(("submit", None))):
            _, reward, terminated, _, info = env.step(action)
            rec.step(action, reward, info)
            if terminated:
                break
        line = json.loads(rec.rec.to_json())
    finally:
        env.close()
    assert line["catalog"] == 2 and line["steps"] == 3
    assert validate(line) == []
    # the same indices under catalog 1 are other actions (past its end, or undo/submit)
    older = dict(line, catalog=1)
    assert validate(older) != []


def test_a_suite_plays_each_env_with_its_catalog():
    from argus_env.bench.config import BenchConfig
    newest = get_task("moe").space.latest_catalog()
    assert BenchConfig(name="t").catalog_for("Argus-MoE-v0") == newest
    assert BenchConfig(name="t", catalog=1).catalog_for("Argus-MoE-v0") == 1
    # a version past a task's newest is that task's newest
    assert BenchConfig(name="t", catalog=newest + 5).catalog_for("Argus-GEMM-v0") == \
        get_task("gemm").space.latest_catalog()
    with pytest.raises(ValueError, match="catalog"):
        BenchConfig(name="t", catalog=0).catalog_for("Argus-MoE-v0")


def test_a_results_file_of_another_catalog_is_not_resumed(tmp_path):
    import json

    from argus_env.bench.config import BenchConfig
    from argus_env.bench.runner import Runner
    cfg = BenchConfig(name="t", envs=["Argus-MoE-v0"], seeds=[0], budget=2,
                      agents={"random": {}}, measure="model")
    line = {"agent": "random", "env_id": "Argus-MoE-v0", "shape": "x", "seed": 0, "budget": 2,
            "measure": "model", "hardware": "h200", "mode": "discrete", "reward": "default",
            "estimator": "corrected"}      # no catalog: played the first
    (tmp_path / "t.jsonl").write_text(json.dumps(line) + "\n")
    with pytest.raises(ValueError, match="'catalog': 1"):
        Runner(cfg, out_dir=tmp_path).pending()
