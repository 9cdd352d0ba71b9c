"""The caches outside the evaluator are bounded: a task space remembers the programs of
its `PROGRAMS_KEPT` configurations used last; profile, target and anchor files are read
once per path into read-only views, a bounded number of them."""

from __future__ import annotations

import dataclasses

import pytest

import argus_env  # noqa: F401
import argus_env.space as space_mod
from argus_env import target as target_mod
from argus_env.measure import measurement
from argus_env.task import get_task


def test_a_space_keeps_the_programs_of_its_latest_configurations(monkeypatch):
    space = get_task("gemm").space
    monkeypatch.setattr(space_mod, "PROGRAMS_KEPT", 2)
    monkeypatch.setitem(space.__dict__, "_programs", None)  # a fresh cache for the test
    base = space.baseline()
    configs = [dataclasses.replace(base, block_n=v) for v in (64, 128, 256)]
    first = space.program(configs[0])
    assert space.program(configs[0]) is first
    space.program(configs[1])
    space.program(configs[0])          # used again: the second is now the oldest
    space.program(configs[2])
    kept = list(space.__dict__["_programs"])
    assert kept == [configs[0], configs[2]]
    assert space.program(configs[0]) is first


def test_shipped_files_are_read_into_bounded_read_only_views():
    for cached in (target_mod._load, target_mod._target, measurement._anchors):
        assert cached.cache_info().maxsize is not None
    task = get_task("gemm")
    view = measurement._anchors(str(task.anchors_file))
    with pytest.raises(TypeError):
        view["1x1x1"] = 1.0
    assert target_mod.load_target("h200") is target_mod.load_target("h200")
