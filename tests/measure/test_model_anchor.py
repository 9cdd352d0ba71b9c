"""The library figure a model price is a fraction of. Off the H200 (no recorded anchors
file), a model-priced program at a shape the GPU tables timed is set against the library
as those tables timed it there (the median of the rows' own anchor figures), not 0.9 x the
roofline, which is tens of times too fast at a launch-bound shape; the measurement says
where its anchor came from; a table backend reads the anchor from the rows it prices
with (a pinned snapshot's); and records name the anchor, so lines made before it replay
against the roofline's."""

from __future__ import annotations

import csv
import statistics

import pytest

from argus_env.measure.analytic import (LEGACY_ANCHOR, ModelBackend, TableBackend,
                                        anchor_medians)
from argus_env.measure.recorded import table_paths
from argus_env.task import get_task

#: a launch-bound held-out shape (one token) and a bandwidth-bound one, both timed on the
#: H100: the model's roofline anchor put programs there at 0.015 and 1.111 of the library
#: against 1.48 and 0.75-0.79 live (`benchmarks/results/heldout-h100/`)
SHAPES = ("llama405b-decode-1", "deepseek-prefill-4096")


def _case(task, name):
    return next(c for c in task.shapes if c.name == name)


def _timed(task, sizes) -> list[float]:
    """The library's figures the H100 tables timed at `sizes`, read here independently."""
    out = []
    for path in table_paths(task, "h100"):
        with open(path) as f:
            for row in csv.DictReader(f):
                if all(str(row.get(d)) == str(sizes[d]) for d in task.anchor_dims):
                    v = row.get("anchor_tflops") or row.get("cublas_tflops")
                    if v and float(v) > 0:
                        out.append(float(v))
    return out


@pytest.mark.parametrize("shape", SHAPES)
def test_off_the_h200_a_model_price_is_set_against_the_library_as_the_tables_timed_it(shape):
    task = get_task("rmsnorm")
    sizes = _case(task, shape).sizes
    program = task.bind(task.program("expert"), sizes)
    timed = _timed(task, sizes)
    assert len(timed) >= 3, "the H100 tables timed the library at this shape"
    measured = ModelBackend("h100").measure(program, sizes, task)
    legacy = ModelBackend("h100", model_anchor=LEGACY_ANCHOR).measure(program, sizes, task)
    assert measured.details["anchor"] == "tables"
    assert measured.anchor_tflops == pytest.approx(statistics.median(timed))
    assert legacy.details["anchor"] == "roofline estimate"
    assert legacy.anchor_tflops == pytest.approx(0.9 * legacy.roofline_tflops)
    # the same program time, another denominator
    assert measured.ms == legacy.ms
    assert measured.frac_anchor != pytest.approx(legacy.frac_anchor, rel=0.05)


def test_the_h200_keeps_its_recorded_anchors_file_first():
    task = get_task("gemm")
    case = task.shapes[0]
    program = task.bind(task.program("baseline"), case.sizes)
    for anchor in ("measured", "roofline"):
        m = ModelBackend("h200", model_anchor=anchor).measure(program, case.sizes, task)
        assert m.details["anchor"] == "recorded"


def test_a_shape_no_table_timed_falls_back_to_the_roofline_and_says_so():
    task = get_task("rmsnorm")
    sizes = dict(_case(task, SHAPES[0]).sizes, T=3)   # no table row at three tokens
    assert not _timed(task, sizes)
    m = ModelBackend("h100").measure(task.bind(task.program("expert"), sizes), sizes, task)
    assert m.details["anchor"] == "roofline estimate"
    assert m.anchor_tflops == pytest.approx(0.9 * m.roofline_tflops)


def test_a_table_backend_takes_the_anchor_from_the_rows_it_reads():
    """A snapshot of no rows (the tables as they were before this task's were recorded)
    has no timing of the library: its model prices fall back to the roofline."""
    task = get_task("rmsnorm")
    sizes = _case(task, SHAPES[0]).sizes
    program = task.bind(task.program("expert"), sizes)
    full = TableBackend("h100")
    assert full.model.anchor_rows(task) == anchor_medians(full.table(task)["rows"])
    empty = TableBackend("h100", snapshot={p.name: 0 for p in table_paths(task, "h100")})
    assert empty.model.anchor_rows(task) == {}
    m = empty.measure(program, sizes, task)
    assert m.details.get("table_miss") and m.details["anchor"] == "roofline estimate"


def test_anchor_medians_take_each_rows_own_figure_and_skip_rows_without_one():
    rows = {(1, 2, "a"): {"anchor_tflops": "10"}, (1, 2, "b"): {"anchor_tflops": "30"},
            (1, 2, "c"): {"anchor_tflops": "20"}, (1, 2, "d"): {"anchor_tflops": ""},
            (3, 4, "e"): {"cublas_tflops": "5.5"}, (3, 4, "f"): {"anchor_tflops": "nan"}}
    assert anchor_medians(rows) == {(1, 2): 20.0, (3, 4): 5.5}


def test_an_unknown_anchor_is_refused_and_records_name_the_anchor():
    import gymnasium as gym

    import argus_env  # noqa: F401
    from argus_env.bench.results import line_setting
    with pytest.raises(ValueError, match="model_anchor"):
        ModelBackend("h100", model_anchor="guess")
    with pytest.raises(ValueError, match="model_anchor"):
        gym.make("Argus-RMSNorm-v0", model_anchor="guess")
    from argus_env.envs.record import Recorder
    env = gym.make("Argus-RMSNorm-v0", measure="table", hardware="h100",
                   correctness="none")
    try:
        rec = Recorder(env, "test", 0).rec
        assert rec.model_anchor == "measured" and '"model_anchor": "measured"' in rec.to_json()
    finally:
        env.close()
    # a line made before the field was priced against the roofline's anchor
    assert line_setting({"measure": "table"}, "model_anchor") == LEGACY_ANCHOR
    assert line_setting({"measure": "gpu"}, "model_anchor") is None
