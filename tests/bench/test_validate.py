"""`validate` replays a record in a fresh env and returns structured divergences."""

import copy
import json

import gymnasium as gym
import pytest

import argus_env  # noqa: F401
from argus_env.agents import load_agent
from argus_env.bench import results as R
from argus_env.bench.validate import Divergence, Validator, validate
from argus_env.cli import main


@pytest.fixture(scope="module")
def lines(tiny_results):
    return R.read_lines(tiny_results)


@pytest.mark.slow
def test_untouched_records_replay_exactly(lines):
    v = Validator()
    for line in lines:
        assert v.validate(line) == [], (line["agent"], line["shape"], line["seed"])
    assert validate(lines[0]) == [], "a fresh evaluator agrees with the shared one"


@pytest.mark.slow
def test_an_edited_reward_is_caught(lines):
    line = copy.deepcopy(lines[0])
    line["rewards"][1] += 0.25
    got = validate(line)
    assert got and got[0] == Divergence(2, "reward", lines[0]["rewards"][1] + 0.25,
                                        lines[0]["rewards"][1]), got
    assert str(got[0]).startswith("step 2: reward: expected"), str(got[0])
    assert set(got[0].to_dict()) == {"step", "field", "expected", "got"}


@pytest.mark.slow
def test_an_edited_action_list_is_caught(lines):
    env = gym.make("Argus-GEMM-v0")
    catalog = env.unwrapped.catalog
    line = copy.deepcopy(lines[0])
    first = line["actions"][0]
    line["actions"][0] = next(i for i, (name, _) in enumerate(catalog)
                              if name != catalog[first][0] and name not in ("undo", "submit"))
    got = validate(line)
    assert got and got[0].step == 1, got
    assert {d.field for d in got} & {"action", "reward", "tflops", "final_program"}, got

    shorter = copy.deepcopy(lines[0])
    del shorter["actions"][-1]           # the submit: fewer actions than steps and rewards
    got = validate(shorter)
    assert [d.field for d in got] == ["steps"] and got[0].step is None, got


@pytest.mark.slow
def test_an_agent_that_resets_is_validated_on_every_episode():
    """The evolutionary search resets for every genome: the record carries each earlier
    episode's actions, the replay plays them all, and the figures that span the episodes
    (env steps, trace, best found, counts) are compared exactly: a trace raised inside an
    earlier episode is caught. A record without them (written before they were recorded)
    still replays its last episode, its spanning figures bounded by that replay."""
    module = load_agent("evolutionary")
    env = gym.make("Argus-GEMM-v0", measure="table", max_episode_steps=20)
    rec = module.run(env, module.Args(budget=14, seed=0, shape="decode-16", population=3,
                                      genome_length=2))
    assert rec.env_steps > rec.steps and rec.submitted, rec
    assert len(rec.earlier_actions) > 1
    assert sum(map(len, rec.earlier_actions)) + rec.steps == rec.env_steps
    assert validate(rec) == []
    line = json.loads(rec.to_json())
    tampered = copy.deepcopy(line)
    tampered["final_frac_anchor"] += 0.5
    assert [d.field for d in validate(tampered)] == ["final_frac_anchor"]
    early = copy.deepcopy(line)          # the best reached at the first step, not later
    early["trace"] = [[s, early["best_frac_anchor"]] for s, _ in early["trace"]]
    assert early["trace"] != line["trace"]
    assert [d.field for d in validate(early)] == ["trace"], validate(early)
    legacy = {k: v for k, v in early.items() if k != "earlier_actions"}
    assert validate(legacy) == [], "bounded by the last episode, as before"


@pytest.mark.slow
def test_a_record_that_cannot_replay_is_one_divergence(lines):
    line = dict(lines[0], shape="custom", sizes={"M": 16, "N": 4096, "K": 0})
    got = validate(line)
    assert len(got) == 1 and got[0].field == "replay" and "K" in got[0].got, got


def test_a_record_outside_the_schema_is_not_replayed():
    got = validate({"env_id": "Argus-GEMM-v0", "task": "gemm", "shape": "no-such-shape",
                    "sizes": {}, "agent": "x", "seed": 0, "mode": "discrete",
                    "measure": "table", "hardware": "h200", "actions": [0]})
    assert got and all(d.step is None for d in got), got
    assert {d.field for d in got} >= {"rewards", "final_program"}, "missing fields are named"
    assert all(d.got == "missing" for d in got), [str(d) for d in got]


@pytest.mark.slow
def test_argus_validate_exits_nonzero_at_the_first_divergence(tiny_results, tmp_path, capsys):
    assert main(["validate", str(tiny_results), "--line", "2"]) == 0
    assert "1 record replays exactly" in capsys.readouterr().out
    lines = tiny_results.read_text().splitlines()
    bad = json.loads(lines[1])
    bad["rewards"][0] = 1.0
    tampered = tmp_path / "tampered.jsonl"
    tampered.write_text(lines[0] + "\n" + json.dumps(bad) + "\n")
    assert main(["validate", str(tampered)]) == 1
    out = capsys.readouterr().out
    assert "tampered.jsonl:2" in out and "step 1: reward: expected 1.0" in out, out


def test_a_record_that_ends_at_the_step_limit_replays_exactly():
    """The step that reaches the step limit submits implicitly (its reward carries the
    submit term): the replay is made with the limit the record shows (a bench line's
    budget, else its last episode's length where it ended submitted by another action
    than `submit()`), so it pays the same there and nowhere else."""
    from argus_env.bench.validate import step_limit
    from argus_env.envs.record import Recorder
    env = gym.make("Argus-GEMM-v0", measure="table", max_episode_steps=2)
    core = env.unwrapped
    rec = Recorder(env, "test", 0)
    _, info = env.reset(seed=0, options={"shape": "decode-16"})
    rec.start(info)
    for pair in (("tile_m", 128), ("warps", 8)):
        a = core.catalog.index(pair)
        _, reward, term, trunc, info = env.step(a)
        rec.step(a, reward, info)
    env.close()
    record = rec.rec
    assert term and trunc and info["implicit_submit"] and record.submitted
    assert step_limit(record) == 2 and step_limit(record, budget=2) == 2
    assert validate(record) == []
    # the same actions claimed without the submit term: an agent that stopped there under
    # a longer limit, which a record without its budget cannot rule out; a bench line's
    # budget (its runner's limit) says that step paid it
    unsubmitted = json.loads(record.to_json())
    unsubmitted["submitted"] = False
    unsubmitted["rewards"][-1] -= info["submit_reward"]
    unsubmitted["return"] -= info["submit_reward"]
    assert step_limit(R.record_of(unsubmitted)) == 3
    assert validate(unsubmitted) == []
    got = validate({**unsubmitted, "budget": 2})
    assert {d.field for d in got} == {"reward", "return", "submitted"}, got
    assert next(d for d in got if d.field == "reward").step == 2, got


BUDGET_BOARD = R.ROOT / "benchmarks/results/budget-h100/budget-h100.jsonl"


def _budget_line():
    """A short committed line of the budget board whose submitted program the H100 table
    priced (so the table's rows decide its replay)."""
    return next(ln for ln in R.read_lines(BUDGET_BOARD)
                if ln["env_id"] == "Argus-RMSNorm-v0" and ln["budget"] == 30
                and ln["final_measured_by"] == "table")


def test_a_committed_line_replays_against_the_tables_it_read():
    """The budget board's lines were played before the programs their episodes visited
    were timed on the GPU and appended to the tables: each replays against the rows the
    tables held then (`hashes.table_rows`); read against fewer rows, the replay differs."""
    line = _budget_line()
    snapshot = line["hashes"]["table_rows"]
    assert snapshot and "table_h100.csv:" in snapshot
    assert validate(line) == []
    emptier = copy.deepcopy(line)
    emptier["hashes"]["table_rows"] = ";".join(
        f"{part.rpartition(':')[0]}:0" for part in snapshot.split(";"))
    assert validate(emptier), "with no rows, the table-priced steps are model prices"


@pytest.mark.slow
def test_a_line_from_before_the_estimator_field_replays_with_the_analytic_model(tiny_config,
                                                                                tmp_path):
    """Lines written before `estimator` existed were priced by the analytic model: one
    without the field replays so (its record names the model it was replayed with), and
    a line priced by the corrected model does not pass for one of them."""
    from argus_env.bench import load_config
    from argus_env.bench.config import Episode
    from argus_env.bench.runner import Runner
    ep = Episode("random", "Argus-GEMM-v0", "train", "decode-16", 0)
    # no table rows: every step is a model price (`BenchConfig.tables`), so the walk's
    # prices cannot all come from rows the tables have gained since this was written
    none = {"Argus-GEMM-v0": "table_h200.csv:0"}
    old = Runner(load_config(tiny_config, estimator="analytic", tables=none), tmp_path).play(ep)
    assert old["estimator"] == "analytic"
    assert old["hashes"]["table_rows"] == "table_h200.csv:0"
    del old["estimator"]
    assert validate(old) == []
    new = Runner(load_config(tiny_config, estimator="corrected", tables=none), tmp_path).play(ep)
    assert new["rewards"] != old["rewards"], "the two models should price this walk apart"
    del new["estimator"]
    assert validate(new), "a corrected-model line replayed as an analytic one"


def test_step_times_are_recorded_checked_as_data_and_never_carried_to_a_board(lines):
    """A played line times each env step (`step_seconds`: one non-decreasing time per env
    step); a replay cannot confirm them, so a line whose times were edited still replays,
    while its board line carries no times; times that do not fit the steps are refused as
    data."""
    from argus_env.bench.schema import check_line
    line = lines[0]
    secs = line["step_seconds"]
    assert len(secs) == line["env_steps"] and secs == sorted(secs) and secs[-1] > 0
    forged = dict(line, step_seconds=[0.0] * line["env_steps"])
    out, board = Validator().check(forged)
    assert out == [] and "step_seconds" not in board
    assert [d.field for d in check_line(dict(line, step_seconds=secs[:-1]))] == ["step_seconds"]
    assert [d.field for d in check_line(dict(line, step_seconds=secs[::-1]))] == ["step_seconds"]
    assert check_line({k: v for k, v in line.items() if k != "step_seconds"}) == []
