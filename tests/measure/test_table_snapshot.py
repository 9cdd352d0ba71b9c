"""A table snapshot: a board line keeps how many rows each GPU table file held when it was
played, and its replay reads only those rows, so a recording that appends rows later (the
programs agents visit, timed on the GPU) does not change what the line replays to."""

import csv
import shutil

import pytest

from argus_env.measure import analytic
from argus_env.measure.analytic import TableBackend, format_snapshot, parse_snapshot
from argus_env.task import get_task

TASK = get_task("rmsnorm")


@pytest.fixture
def tables(tmp_path, monkeypatch):
    """The RMSNorm H100 tables, copied to a folder the backend reads instead."""
    real = TableBackend("h100")._paths(TASK)
    copies = []
    for p in real[1]:
        shutil.copy(p, tmp_path / p.name)
        copies.append(tmp_path / p.name)
    main = tmp_path / real[0].name

    def paths(self, task):
        assert task.name == TASK.name
        return main, sorted(p for p in tmp_path.glob(f"table*_{self.hardware}.csv"))
    monkeypatch.setattr(TableBackend, "_paths", paths)
    analytic._EXECUTED.clear()
    yield main
    analytic._EXECUTED.clear()


def _row_like(path, sizes, program_hash, ratio):
    with path.open(newline="") as f:
        reader = csv.DictReader(f)
        header, rows = reader.fieldnames, list(reader)
    base = next(r for r in rows if r["ok"] == "True"
                and all(int(r[d]) == sizes[d] for d in TASK.anchor_dims))
    scale = float(base["ratio"]) / ratio
    return header, dict(base, program_hash=program_hash, ratio=str(ratio),
                        ms=str(float(base["ms"]) * scale),
                        tflops=str(float(base["tflops"]) / scale))


def test_a_snapshot_prices_as_the_tables_did_before_rows_were_appended(tables):
    case = next(c for c in TASK.shapes if c.name == "llama70b-decode-256")   # timed on H100s
    sizes = dict(case.sizes)
    before = TableBackend("h100")
    snapshot = before.snapshot_of(TASK)
    for config in TASK.space.configurations():   # a program the tables lack: a model price
        program = TASK.bind(TASK.space.program(config), sizes)
        first = before.measure(program, sizes, TASK)
        if first.ok and first.backend != "table":
            break
    else:
        pytest.fail("every configuration is in the tables")
    header, row = _row_like(tables, sizes, program.hash, 3.5 * (first.frac_anchor or 0.1))
    with tables.open("a", newline="") as f:     # a later recording appends a row
        csv.DictWriter(f, header).writerow(row)
    analytic._EXECUTED.clear()
    now = TableBackend("h100").measure(program, sizes, TASK)
    then = TableBackend("h100", snapshot=snapshot).measure(program, sizes, TASK)
    assert now.backend == "table" and now.frac_anchor != pytest.approx(first.frac_anchor)
    assert then.backend == first.backend and then.frac_anchor == pytest.approx(first.frac_anchor)
    assert TableBackend("h100", snapshot=snapshot).snapshot_of(TASK) == snapshot
    assert TableBackend("h100").snapshot_of(TASK) != snapshot


def test_a_snapshot_of_a_table_that_was_cut_is_refused(tables):
    snapshot = parse_snapshot(TableBackend("h100").snapshot_of(TASK))
    grown = dict(snapshot, **{tables.name: snapshot[tables.name] + 1})
    with pytest.raises(ValueError, match="cut or rewritten"):
        TableBackend("h100", snapshot=grown).table(TASK)
    with pytest.raises(ValueError, match="not among"):
        TableBackend("h100", snapshot=dict(snapshot, **{"table_gone_h100.csv": 3})).table(TASK)


@pytest.mark.parametrize("bad", ["table_h100.csv", "table_h100.csv:x", ":3",
                                 "../x.csv:3", "table_h100.csv:-1"])
def test_a_malformed_snapshot_is_refused(bad):
    with pytest.raises(ValueError):
        parse_snapshot(bad)


def test_snapshot_text_round_trips():
    counts = {"table_h100.csv": 12, "table_walks_h100.csv": 3}
    assert parse_snapshot(format_snapshot(counts)) == counts
    assert parse_snapshot(None) is None


def test_the_env_takes_a_snapshot_only_in_table_mode():
    import gymnasium as gym

    import argus_env  # noqa: F401
    with pytest.raises(ValueError, match="table_snapshot"):
        gym.make("Argus-RMSNorm-v0", measure="model", table_snapshot="table_h100.csv:1")


def test_a_program_timed_again_is_priced_by_its_last_row_and_a_snapshot_keeps_the_first(
        tables, monkeypatch):
    """`record_programs.py plan --retime`: a program's new row, appended after its old one
    (its anchor changed), is what the tables price it by and what decides the best known;
    a snapshot taken before the new row still reads the old one."""
    from argus_env.measure import optimum
    from argus_env.measure.optimum import best_known
    monkeypatch.setattr(optimum, "table_paths", lambda task, hw: sorted(
        tables.parent.glob(f"table*_{hw}.csv")))
    case = next(c for c in TASK.shapes if c.name == "llama70b-decode-256")
    sizes = dict(case.sizes)
    known = best_known(TASK, sizes, "h100")
    program = next(TASK.bind(TASK.space.program(c), sizes) for c in TASK.space.configurations()
                   if TASK.bind(TASK.space.program(c), sizes).hash == known["program_hash"])
    snapshot = TableBackend("h100").snapshot_of(TASK)
    old = TableBackend("h100").measure(program, sizes, TASK)
    assert old.backend == "table" and old.frac_anchor == pytest.approx(known["frac_anchor"],
                                                                          rel=1e-3)
    header, row = _row_like(tables, sizes, program.hash, 0.5 * known["frac_anchor"])
    with tables.open("a", newline="") as f:     # timed again: half as fast as recorded
        csv.DictWriter(f, header).writerow(row)
    analytic._EXECUTED.clear()
    new = TableBackend("h100").measure(program, sizes, TASK)
    assert new.frac_anchor == pytest.approx(0.5 * known["frac_anchor"], rel=1e-3)
    then = TableBackend("h100", snapshot=snapshot).measure(program, sizes, TASK)
    assert then.frac_anchor == pytest.approx(old.frac_anchor)
    again = best_known(TASK, sizes, "h100")
    assert again["program_hash"] != program.hash or \
        again["frac_anchor"] == pytest.approx(0.5 * known["frac_anchor"], rel=1e-3)
    assert again["frac_anchor"] < known["frac_anchor"]


def test_a_row_without_its_sizes_is_named_by_file_and_line(tables):
    """Every reader of the tables (prices, snapshots, best known) reads them through one
    function, which refuses a row it cannot key rather than dropping it."""
    from argus_env.measure.recorded import read_table_rows
    with tables.open() as f:
        n = sum(1 for _ in f)
    with tables.open("a", newline="") as f:
        f.write("broken-row\n")
    with pytest.raises(ValueError, match=rf"{tables.name}:{n + 1}: a row without its sizes"):
        read_table_rows([tables], TASK.anchor_dims)
    with pytest.raises(ValueError, match="rmsnorm tables of h100"):
        TableBackend("h100").table(TASK)


def test_the_best_known_leaves_a_bad_row_out_with_a_warning(tables, monkeypatch):
    """A reset reads the best known at every shape in every mode: one malformed row of a
    table warns and is left out there, while pricing from the same table refuses it."""
    from argus_env.measure import optimum
    from argus_env.measure.optimum import best_known
    monkeypatch.setattr(optimum, "table_paths",
                        lambda task, hw: TableBackend(hw)._paths(task)[1])
    case = next(c for c in TASK.shapes if c.name == "llama70b-decode-256")
    before = best_known(TASK, case.sizes, "h100")
    with tables.open("a", newline="") as f:
        f.write("broken-row\n")
    with pytest.warns(UserWarning, match="left out"):
        after = best_known(TASK, case.sizes, "h100")
    assert after == before and after is not None
    with pytest.raises(ValueError, match="a row without its sizes"):
        TableBackend("h100").table(TASK)
