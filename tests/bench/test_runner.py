"""The bench runner: suites from YAML, one JSON line per episode with its provenance,
exact reproducibility in table mode, resumable runs."""

import json
import re

import pytest

from argus_env.bench import load_config
from argus_env.bench import results as R
from argus_env.bench.runner import Runner
from argus_env.dsl.program import Program


def test_default_suite_is_small_and_reproducible():
    cfg = load_config("default")
    eps = cfg.episodes()
    assert cfg.measure == "table" and cfg.budget == 30 and cfg.seeds == [0, 1, 2], cfg
    assert {e.agent for e in eps} == {"random", "greedy", "evolutionary"}
    for track in ("train", "test"):
        assert len(cfg.track_shapes("Argus-GEMM-v0", track)) == 3, track
    assert len(eps) == 3 * 6 * 3, len(eps)
    assert len({e.key for e in eps}) == len(eps), "every episode has its own key"


def test_suite_overrides_and_shape_choice(tiny_config):
    cfg = load_config(tiny_config, agents=["greedy"], seeds=[4], budget=3)
    assert [(e.agent, e.track, e.shape, e.seed) for e in cfg.episodes()] == [
        ("greedy", "train", "decode-16", 4), ("greedy", "test", "square-2048", 4)]
    cfg.shapes = {}                       # unnamed shapes: evenly spaced over the split
    cfg.shapes_per_track = 2
    assert cfg.track_shapes("Argus-GEMM-v0", "test") == ["decode-64", "llama-qkv"]


def test_agent_args_come_from_the_suite_and_the_bench(tiny_config):
    cfg = load_config(tiny_config)
    cfg.agents["greedy"] = {"perturb": 3}
    args = cfg.agent_args("greedy", seed=2, shape="decode-16")
    assert (args.perturb, args.seed, args.shape, args.budget) == (3, 2, "decode-16", 6), args
    cfg.agents["greedy"] = {"pertrub": 3}
    with pytest.raises(ValueError, match="pertrub"):
        cfg.agent_args("greedy", seed=0, shape="decode-16")
    cfg.agents["greedy"] = {"budget": 99}
    with pytest.raises(ValueError, match="come from the bench"):
        cfg.agent_args("greedy", seed=0, shape="decode-16")


def test_unknown_names_suggest_the_closest(tiny_config):
    cfg = load_config(tiny_config, envs=["Argus-GEMM-v1"])
    with pytest.raises(KeyError, match="did you mean 'Argus-GEMM-v0'"):
        cfg.episodes()
    with pytest.raises(FileNotFoundError, match="known: .*default"):
        load_config("defualt")


@pytest.mark.slow
def test_each_line_is_a_record_with_its_provenance(tiny_results):
    lines = R.read_lines(tiny_results)
    assert len(lines) == 8
    assert {(ln["agent"], ln["track"], ln["shape"]) for ln in lines} == {
        (a, t, s) for a in ("random", "greedy") for t, s in (("train", "decode-16"), ("test", "square-2048"))}
    for ln in lines:
        rec = R.record_of(ln)
        assert rec.env_id == "Argus-GEMM-v0" and rec.measure == "table" and rec.hardware == "h200"
        assert ln["task_uri"] == f"argus://gemm/v0/{ln['shape']}"
        assert set(ln["hashes"]) >= {"dsl", "check", "lower", "table", "reward"}, ln["hashes"]
        assert all(len(ln["hashes"][k]) == 64 for k in ("dsl", "check", "lower", "table", "reward"))
        assert ln["hashes"]["table_file"] == "tasks/gemm/table_h200.csv"
        assert ln["hardware_profile"]["name"] == "h200" and ln["hardware_profile"]["sms"] == 132
        assert ln["env_steps"] <= ln["budget"] == 6 and ln["versions"]["z3"]
        assert len(ln["step_tflops"]) == len(ln["step_invariants"]) == len(ln["actions"]) == ln["steps"]
        assert ln["submitted"] and ln["submitted_program_hash"] == Program.from_text(ln["final_program"]).hash
        assert ln["agent_args"]["seed"] == ln["seed"] and ln["agent_args"]["shape"] == ln["shape"]


@pytest.mark.slow
def test_two_runs_give_the_same_lines_but_for_timings(tiny_results, tiny_config, tmp_path):
    """The reproducibility claim: `argus bench` in a subprocess, then the runner in this
    process, give the same episodes line by line once `created`/`seconds`/`step_seconds`
    are dropped."""
    summary = Runner(load_config(tiny_config), tmp_path).run()
    assert (summary.ran, summary.skipped) == (8, 0)
    first, second = R.read_lines(tiny_results), R.read_lines(summary.path)
    assert [R.strip_timings(x) for x in first] == [R.strip_timings(x) for x in second]
    timings = re.compile(r'"(created|seconds)": ("[^"]*"|[0-9.e+-]+)|"step_seconds": \[[^\]]*\]')
    raw = [timings.sub("", p.read_text()) for p in (tiny_results, summary.path)]
    assert raw[0] == raw[1], "the files are byte-identical once the timings are cut out"


@pytest.mark.slow
def test_resume_skips_done_episodes_and_cuts_a_torn_line(tiny_results, tiny_config, tmp_path):
    path = tmp_path / "tiny.jsonl"
    lines = tiny_results.read_text().splitlines(keepends=True)
    path.write_text("".join(lines[:-1]) + lines[-1][: len(lines[-1]) // 2])   # died mid-line
    runner = Runner(load_config(tiny_config), tmp_path)
    todo, done = runner.pending()
    assert done == 7 and [e.key for e in todo] == [R.line_key(json.loads(lines[-1]))]
    summary = runner.run()
    assert (summary.ran, summary.skipped) == (1, 7)
    assert [R.strip_timings(x) for x in R.read_lines(path)] == \
        [R.strip_timings(x) for x in R.read_lines(tiny_results)]
    again = Runner(load_config(tiny_config), tmp_path).run()
    assert (again.ran, again.skipped) == (0, 8)
    assert len(path.read_text().splitlines()) == 8


def test_resume_refuses_a_file_of_other_settings(tmp_path, tiny_config):
    line = {"agent": "greedy", "env_id": "Argus-GEMM-v0", "shape": "decode-16", "seed": 0,
            "budget": 50, "measure": "table", "hardware": "h200", "mode": "discrete",
            "reward": "default"}
    R.append_line(tmp_path / "tiny.jsonl", line)
    with pytest.raises(ValueError, match="budget"):
        Runner(load_config(tiny_config), tmp_path).pending()


def test_lines_are_appended_whole_and_read_back(tmp_path):
    path = tmp_path / "r.jsonl"
    for i in range(3):
        R.append_line(path, {"i": i})
    assert path.read_text() == "".join(json.dumps({"i": i}) + "\n" for i in range(3))
    with path.open("a") as f:
        f.write('{"i": 3')                  # torn
    assert [x["i"] for x in R.read_lines(path)] == [0, 1, 2]
    assert R.repair(path) and R.read_lines(path) == [{"i": 0}, {"i": 1}, {"i": 2}]
    assert path.read_text().endswith("\n") and not R.repair(path)


def test_a_budget_axis_plays_every_episode_at_each_budget(tiny_config, tmp_path):
    """`budgets: [3, 5]`: one line per episode and budget, each played under its own step
    limit and named by it; a resumed run skips both; one `--budget` override replaces the
    axis (and then refuses the file holding both); a file of another axis, or an axis that
    is not positive whole numbers, is refused."""
    import yaml
    data = yaml.safe_load(tiny_config.read_text())
    data.update(budgets=[5, 3], agents={"random": {}}, tracks=["train"], seeds=[0])
    path = tmp_path / "axis.yaml"
    path.write_text(yaml.safe_dump(data))
    cfg = load_config(path)
    assert cfg.budget_axis() == [3, 5]
    eps = cfg.episodes()
    assert [e.budget for e in eps] == [3, 5] and len({e.key for e in eps}) == 2
    runner = Runner(cfg, tmp_path / "out")
    summary = runner.run()
    lines = R.read_lines(summary.path)
    assert summary.ran == 2 and sorted(ln["budget"] for ln in lines) == [3, 5]
    for ln in lines:
        assert ln["env_steps"] <= ln["budget"] and ln["agent_args"]["budget"] == ln["budget"]
    assert Runner(load_config(path), tmp_path / "out").run().ran == 0
    one = load_config(path, budget=5)
    assert one.budgets == [] and one.budget_axis() == [5]
    with pytest.raises(ValueError, match="budget"):   # the file holds the 3-step line too
        Runner(one, tmp_path / "out").pending()
    assert [e.budget for e in Runner(one, tmp_path / "one").pending()[0]] == [5]
    other = dict(data, budgets=[3, 7])
    path.write_text(yaml.safe_dump(other))
    with pytest.raises(ValueError, match="budget"):
        Runner(load_config(path), tmp_path / "out").pending()
    for bad in ([0, 3], [2.5], "30"):
        path.write_text(yaml.safe_dump(dict(data, budgets=bad)))
        with pytest.raises(ValueError, match="budgets"):
            load_config(path)


def test_a_suite_pins_the_table_rows_it_reads(tmp_path):
    """`tables:` names the rows a table-mode suite reads per env (what a committed board
    was played against); it is refused on an env the suite does not play, on a suite not
    priced from tables, and as anything but a table snapshot."""
    import yaml

    from argus_env.bench import load_config
    base = {"name": "pin", "envs": ["Argus-GEMM-v0"], "measure": "table",
            "agents": {"random": {}}}
    path = tmp_path / "pin.yaml"
    path.write_text(yaml.safe_dump({**base, "tables": {"Argus-GEMM-v0": "table_h200.csv:7"}}))
    cfg = load_config(path)
    assert cfg.tables_for("Argus-GEMM-v0") == "table_h200.csv:7"
    env = Runner(cfg, tmp_path).make_env("Argus-GEMM-v0", "train")
    try:
        backend = env.unwrapped.evaluator.backend
        assert backend.snapshot_of(env.unwrapped.task) == "table_h200.csv:7"
    finally:
        env.close()
    assert load_config(path, tables={}).tables_for("Argus-GEMM-v0") is None
    with pytest.raises(KeyError, match="does not play"):
        load_config(path, tables={"Argus-MoE-v0": "table_h200.csv:1"}).tables_for("Argus-GEMM-v0")
    with pytest.raises(ValueError, match="measure is 'model'"):
        load_config(path, measure="model").tables_for("Argus-GEMM-v0")
    with pytest.raises(ValueError, match="not name:rows"):
        load_config(path, tables={"Argus-GEMM-v0": "everything"}).tables_for("Argus-GEMM-v0")


def test_a_pinned_suite_does_not_resume_over_lines_of_other_table_rows(tmp_path):
    """Lines in a results file that read other table rows than the suite pins are another
    run's: the suite refuses to add to them, as it does for another measure or budget."""
    import yaml

    from argus_env.bench import load_config
    path = tmp_path / "pin.yaml"
    path.write_text(yaml.safe_dump({"name": "pin", "envs": ["Argus-GEMM-v0"], "measure": "table",
                                    "agents": {"random": {}},
                                    "tables": {"Argus-GEMM-v0": "table_h200.csv:7"}}))
    cfg = load_config(path)
    runner = Runner(cfg, tmp_path)
    want = cfg.fingerprint("Argus-GEMM-v0")
    assert want["table_rows"] == "table_h200.csv:7"
    line = {"agent": "random", "env_id": "Argus-GEMM-v0", "shape": "decode-16", "seed": 0,
            "budget": cfg.budget, **{k: v for k, v in want.items() if k != "table_rows"},
            "hashes": {"table_rows": "table_h200.csv:7"}}
    runner.path.write_text(json.dumps(line) + "\n")
    runner.pending()   # the pinned rows: resumes
    runner.path.write_text(json.dumps({**line, "hashes": {"table_rows": "table_h200.csv:9"}}) + "\n")
    with pytest.raises(ValueError, match="table_rows"):
        runner.pending()
