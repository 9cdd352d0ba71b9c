"""The Task protocol: a task that lacks part of it is refused when it registers, with every
gap named, instead of failing later inside an environment."""

from __future__ import annotations

import pytest

from argus_env.registry import TASKS
from argus_env.task import (REQUIRED_HOOKS, ShapeCase, Task, TaskDefinitionError,
                            definition_errors, get_task, register_task)


@pytest.mark.parametrize("name", list(TASKS))
def test_every_registered_task_is_complete(name):
    assert definition_errors(get_task(name)) == []


def test_an_empty_task_is_refused_with_every_gap_named():
    class Empty(Task):
        name = "empty"

    with pytest.raises(TaskDefinitionError) as e:
        register_task(Empty())
    text = str(e.value)
    for item in ("`programs`", "`shapes`", "`signature`", "`space`", *REQUIRED_HOOKS):
        assert item in text, item
    with pytest.raises(KeyError):
        get_task("empty")  # nothing was registered


def test_a_task_missing_one_hook_and_a_program_file_is_refused(tmp_path):
    gemm = get_task("gemm")

    class Partial(type(gemm)):
        name = "partial"
        programs = {"baseline": gemm.programs["baseline"], "expert": tmp_path / "nope.py"}
        reference = Task.reference  # not implemented

    errors = definition_errors(Partial())
    assert any("reference" in e for e in errors)
    assert any("nope.py" in e for e in errors)
    assert not any("flops" in e for e in errors)


def test_shapes_naming_a_size_no_tensor_has_are_refused():
    gemm = get_task("gemm")

    class Odd(type(gemm)):
        name = "odd"
        shapes = (ShapeCase("x", {"M": 16, "N": 16, "K": 16, "Q": 3}),)

    assert any("Q" in e for e in definition_errors(Odd()))
