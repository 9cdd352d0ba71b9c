"""The H200 recorder's selection on the CPU (benchmarks/record_programs.py): sources
(the board's episodes replayed to their submitted programs, seeded legal walks),
deduplication, what the tables already hold, and chunked, resumable measuring with a
stand-in for the GPU."""

import csv
import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

import record_programs as RP  # noqa: E402

from argus_env.bench import leaderboard as L  # noqa: E402
from argus_env.bench import results as R  # noqa: E402


def board(env_id=None) -> list[dict]:
    return [ln for ln in RP.board_lines() if env_id in (None, ln["env_id"])]


def first_per_env() -> list[dict]:
    seen, out = set(), []
    for ln in board():
        if ln["env_id"] not in seen:
            seen.add(ln["env_id"])
            out.append(ln)
    return out


def test_board_episodes_replay_to_their_submitted_programs():
    lines = first_per_env()
    shapes = {(ln["env_id"], ln["shape"]) for ln in lines}
    items, verdicts = RP.episode_items(lines, "board", shapes)
    assert set(verdicts.values()) == {"replayed"}
    by_key = {i.key: i for i in items}
    for ln in lines:
        key = RP.item_key(ln["task"], ln["sizes"], ln["submitted_program_hash"])
        it = by_key[key]
        assert "board" in it.sources and it.priority == 0 and it.population
        from argus_env.dsl.program import Program
        assert Program.from_text(it.program).hash == ln["submitted_program_hash"]
        mine = [i for i in items if (i.env_id, i.shape) == (ln["env_id"], ln["shape"])]
        measured_steps = sum(t is not None for t in ln["step_tflops"])
        assert len(mine) <= measured_steps + 3     # the steps, the baseline, best and final
    # a record whose actions do not lead to its final program: no step is trusted, only
    # its submitted and best programs are taken
    ln = next(x for x in lines if x["actions"] and x["steps"] > 1)
    altered = dict(ln, actions=[])
    items, verdicts = RP.episode_items([altered], "board", shapes)
    from argus_env.task import get_task
    task = get_task(ln["task"])
    baseline = task.bind(task.space.program(task.space.baseline()), ln["sizes"])
    if baseline.hash != ln["submitted_program_hash"]:
        assert verdicts[0] == "replay differs"
        from argus_env.dsl.program import Program
        assert {i.program_hash for i in items} == {ln["submitted_program_hash"],
                                                   Program.from_text(ln["best_program"]).hash}


def test_the_replay_refuses_masked_actions_as_the_env_does():
    from argus_env.target import load_target
    from argus_env.task import get_task
    ln = board("Argus-GEMM-v0")[0]
    task = get_task("gemm")
    configs = RP.replay_configs(ln, task, load_target("h200"))
    assert len(configs) == len(ln["actions"])
    # the replayed final configuration's program is the submitted program
    from argus_env.dsl.program import Program
    final = task.bind(Program.from_text(task.space.render(configs[-1])), ln["sizes"])
    assert final.hash == ln["submitted_program_hash"]
    assert RP.replay_configs(dict(ln, mode="text"), task, load_target("h200")) is None


def test_walks_are_seeded_legal_and_priced():
    a = RP.walk_items(["Argus-RMSNorm-v0"], 4, 3, seed=0)
    assert a.refused == []     # every action taken was legal: the env refused none
    b = RP.walk_items(["Argus-RMSNorm-v0"], 4, 3, seed=0)
    c = RP.walk_items(["Argus-RMSNorm-v0"], 4, 3, seed=1)
    keys = [i.key for i in a]
    assert len(keys) == 4 and keys == [i.key for i in b]
    assert keys != [i.key for i in c]
    from argus_env.task import get_task
    names = {x.name for x in get_task("rmsnorm").shape_cases("all")}
    assert {i.shape for i in a} <= names and all(i.sources == ["walk"] for i in a)
    assert all(i.summary and i.config.startswith("RMSNormConfig(") for i in a)


def test_one_program_met_twice_is_one_item_with_both_sources():
    items = RP.Items()
    base = dict(task="gemm", env_id="Argus-GEMM-v0", shape="decode-16",
                sizes={"M": 16, "N": 4096, "K": 4096}, program_hash="abc", program="text")
    items.add(RP.Item(**base, sources=["walk"]))
    items.add(RP.Item(**base, sources=["board"], population=True, config="cfg"))
    items.add(RP.Item(**dict(base, shape="other-name"), sources=["episode"]))  # same sizes
    (only,) = list(items)
    assert only.sources == ["walk", "board", "episode"] and only.population
    assert only.config == "cfg" and only.priority == 0


def test_held_programs_are_those_the_table_backend_prices_from_its_table():
    from argus_env.measure.analytic import TableBackend
    from argus_env.task import get_task
    backend = TableBackend("h200")
    rows = RP.held_keys(["gemm", "attention", "moe", "rmsnorm"])
    items, verdicts = [], []
    for name in ("gemm", "attention", "moe", "rmsnorm"):
        task = get_task(name)
        for case in task.shape_cases("all")[:2]:
            for which in ("baseline", "expert"):
                program = task.bind(task.program(which), case.sizes)
                items.append(RP.Item(name, "", case.name, case.sizes, program.hash, program.text))
                m = backend.measure(program, case.sizes, task)
                verdicts.append(not m.details.get("table_miss"))
    assert RP.mark_held(items) == sum(verdicts) > 0
    assert [i.held for i in items] == verdicts
    assert all(i.held for i in items if i.key in rows)   # a row of its own: priced from it
    assert RP.held_keys([], items) == {i.key for i in items if i.held}


def _item(key_hash, board=False, heldout=False, task="gemm"):
    return RP.Item(task, "Argus-GEMM-v0", "decode-16", {"M": 16, "N": 4096, "K": 4096}, key_hash,
                   "text", sources=["board" if board else "walk"], heldout=heldout)


def test_selection_measures_what_the_tables_lack_and_every_board_program():
    new, held_walk, held_board = _item("n1"), _item("h1"), _item("h2", board=True)
    heldout, done_ok, flaky, flaky_twice = (_item("x1", heldout=True), _item("d1"), _item("t1"),
                                            _item("t2"))
    held = {held_walk.key, held_board.key}
    done = {done_ok.key: {"key": done_ok.key, "transient": False},
            flaky.key: {"key": flaky.key, "transient": True, "attempts": 1},
            flaky_twice.key: {"key": flaky_twice.key, "transient": True, "attempts": 2}}
    got = RP.select([new, held_walk, held_board, heldout, done_ok, flaky, flaky_twice], held, done)
    assert [i.program_hash for i in got] == ["h2", "n1", "t1"]   # board first


def test_heldout_walks_are_timed_only_when_asked_and_after_the_board_shapes_walks():
    walk_board, heldout, walk = _item("wb"), _item("x1", heldout=True), _item("w1")
    walk_board.sources, heldout.sources = ["walk-board"], ["heldout"]
    held_heldout = _item("x2", heldout=True)
    held_heldout.sources = ["heldout"]
    items = [walk, heldout, held_heldout, walk_board]
    assert [i.program_hash for i in RP.select(items, {held_heldout.key}, {})] == ["wb", "w1"]
    got = RP.select(items, {held_heldout.key}, {}, heldout=True)
    assert [i.program_hash for i in got] == ["wb", "x1", "w1"]   # a held one is not timed


def test_heldout_figures_never_enter_the_tables_and_evaluate_the_estimates(rmsnorm_plan):
    out, lines = rmsnorm_plan
    plan = RP.read_plan(out / "plan.jsonl")
    shapes = {(ln["env_id"], ln["shape"]) for ln in lines}
    per_env = {"Argus-RMSNorm-v0": sorted({s for _, s in shapes})}
    extra = RP.walk_items(["Argus-RMSNorm-v0"], 4, 3, seed=7, shapes=per_env, tag="heldout",
                          board_shapes=shapes)
    RP.mark_held(extra)
    items = RP.Items()
    for it in list(plan["items"]) + list(extra):
        items.add(it)
    plan["items"] = list(items)
    RP.write_plan(plan, out / "plan.jsonl")
    fresh = [i for i in items if i.heldout and not i.held]
    assert fresh, "the walks found no program the tables lack"
    clock, calls = [0.0], []

    def measure(item):
        calls.append(item)
        clock[0] += 1.0
        return _answer(item, 2 + len(calls))    # all ok, slower and slower
    RP.run_chunk(out, measure, {"protocol": "test"}, max_seconds=RP.END_MARGIN + 100,
                 clock=lambda: clock[0], log=lambda *a: None, heldout=True)
    timed = {i.key for i in calls}
    assert {i.key for i in fresh} <= timed
    with (out / "table_rmsnorm_h200.csv").open() as f:
        in_table = {r["program_hash"] for r in csv.DictReader(f)}
    assert not {i.program_hash for i in fresh} & in_table       # kept out of the tables
    assert in_table                                             # the board's programs went in
    ev = RP.evaluate_heldout(RP.read_plan(out / "plan.jsonl"),
                             RP.read_results(out / "results.jsonl"), log=lambda *a: None)
    t = ev["tasks"]["rmsnorm"]
    met = [i for i in items if "heldout" in i.sources and i.population]
    assert t["programs"] == len(met)
    assert t["priced_from_tables"] == sum(i.held for i in met)
    assert t["model_priced_with_live"] == len(fresh)
    assert t["priced_then_failed_on_gpu"] == 0
    rows = {r["program_hash"]: r for r in ev["rows"]}
    for i in fresh:   # the stand-in's figure, against the model's own price
        assert rows[i.program_hash]["live_tflops"] is not None
        assert rows[i.program_hash]["backend"] != "table"
    json.dumps(ev, allow_nan=False)


def test_coverage_counts_distinct_programs_at_board_shapes_before_and_after():
    a, b, c = _item("a"), _item("b"), _item("c")
    for i in (a, b, c):
        i.population = True
    far = _item("d")                     # not at a board shape: not counted
    rows = RP.coverage([a, b, c, far], held={a.key}, measured={b.key})
    walks = next(r for r in rows if (r["group"], r["task"]) == ("walks", "all"))
    assert walks == {"group": "walks", "task": "all", "programs": 3, "before": 1, "after": 2}


def _answer(item, n):
    if n == 1:   # the second program fails to compile
        return {"ok": False, "status": "compile", "message": "OutOfResources: shared memory"}
    ms = 0.01 * (n + 1)
    return {"ok": True, "status": "ok", "ms": ms, "anchor_ms": 0.02, "tflops": 1.0 / ms,
            "anchor_tflops": 50.0, "ratio": 0.02 / ms, "max_rel_err": 0.01,
            "provenance": {"gpu": "NVIDIA H200", "driver": "580", "torch": "2.11",
                           "triton": "3.6", "cuda": "13.0"}}


@pytest.fixture()
def rmsnorm_plan(tmp_path):
    lines = board("Argus-RMSNorm-v0")[:6]
    shapes = {(ln["env_id"], ln["shape"]) for ln in lines}
    items, _ = RP.episode_items(lines, "board", shapes)
    RP.mark_held(items)
    plan = {"header": {"kind": "plan", "commit": "c0ffee", "lines": [RP.line_view(ln)
                                                                     for ln in lines]},
            "items": list(items)}
    RP.write_plan(plan, tmp_path / "plan.jsonl")
    return tmp_path, lines


def test_chunks_resume_where_the_last_one_stopped(rmsnorm_plan):
    out, lines = rmsnorm_plan
    plan = RP.read_plan(out / "plan.jsonl")
    held = RP.held_keys(["rmsnorm"], plan["items"])
    todo = RP.select(plan["items"], held, {})
    assert len(todo) >= 4
    clock, calls = [0.0], []

    def measure(item):
        calls.append(item.key)
        clock[0] += 1.0
        return _answer(item, len(calls) - 1)
    prov = {"gpu": "NVIDIA H200", "protocol": "test", "commit": "c0ffee"}
    log = []
    chunks = 0
    while True:
        state = RP.run_chunk(out, measure, prov, max_seconds=RP.END_MARGIN + 3.5,
                             clock=lambda: clock[0], log=log.append)
        chunks += 1
        if state["pending"] == 0:
            break
        assert chunks < 50
    assert len(calls) == len(set(calls)) == len(todo)      # each program once
    assert len(state["chunks"]) == chunks > 1
    assert chunks == -(-len(todo) // 3)                   # 3 programs fit in each run
    # the CSV: the table's columns, then provenance; only programs the table lacks
    header = RP.table_header("rmsnorm")
    with (out / "table_rmsnorm_h200.csv").open() as f:
        reader = csv.DictReader(f)
        assert reader.fieldnames == header + list(RP.PROVENANCE_COLUMNS)
        rows = list(reader)
    assert {r["program_hash"] for r in rows} == {i.program_hash for i in todo if i.key not in held}
    failed = [r for r in rows if r["ok"] == "False"]
    assert len(failed) <= 1 and all(r["error"].startswith("compile: OutOfResources") for r in failed)
    assert all(r["gpu"] == "NVIDIA H200" and r["protocol"] == "test" and r["date"] for r in rows)
    assert all(r["anchor_mode"] in ("eager", "compile") for r in rows)
    # the live figures join the board: every line verified, the failure counted as 0
    live = R.read_live(out / "live_h200.json")
    (b, *_) = L.build(lines, live=live)
    assert all(e.is_verified for e in b.entries)
    first = calls[1]
    failing = [ln for ln in lines if RP.item_key("rmsnorm", ln["sizes"],
                                                 ln["submitted_program_hash"]) == first]
    for ln in failing:
        assert live.of(ln)["ok"] is False and live.of(ln)["status"] == "compile"
    assert any("coverage" in str(x) for x in log)


def test_a_transient_fault_is_measured_again(rmsnorm_plan):
    out, _ = rmsnorm_plan
    plan = RP.read_plan(out / "plan.jsonl")
    todo = RP.select(plan["items"], RP.held_keys(["rmsnorm"], plan["items"]), {})
    clock = [0.0]

    def flaky(item):
        clock[0] += 1.0
        return {"ok": False, "status": "fault", "transient": True, "message": "stopped"}
    RP.run_chunk(out, flaky, {}, max_seconds=RP.END_MARGIN + 1.5, clock=lambda: clock[0],
                 log=lambda *a: None)
    done = RP.read_results(out / "results.jsonl")
    assert len(done) == 1 and not RP.is_verdict(next(iter(done.values())))
    again = RP.select(plan["items"], RP.held_keys(["rmsnorm"], plan["items"]), done)
    assert [i.key for i in again] == [i.key for i in todo]
    with (out / "table_rmsnorm_h200.csv").open() as f:
        assert list(csv.DictReader(f)) == []          # no row for a non-verdict


def test_dry_run_lists_and_counts_on_the_cpu(rmsnorm_plan, capsys):
    out, _ = rmsnorm_plan
    assert RP.main(["measure", "--out", str(out), "--dry-run"]) == 0
    text = capsys.readouterr().out
    assert "programs to measure" in text and "coverage" in text and "rmsnorm" in text
    assert not (out / "results.jsonl").exists()


def test_measure_refuses_a_folder_without_a_plan(tmp_path):
    with pytest.raises(SystemExit, match="no plan"):
        RP.main(["measure", "--out", str(tmp_path), "--dry-run"])
    with pytest.raises(SystemExit):
        RP.main(["measure", "--out", str(tmp_path), "--max-seconds", "900"])


def rmsnorm_tables_and_recording(tmp_path):
    """A copy of the RMSNorm H200 table under tmp_path/tasks, its rows and header, and
    an empty recording folder: (tables root, rows, header, folder)."""
    src = ROOT / "tasks" / "rmsnorm" / "table_h200.csv"
    tables = tmp_path / "tasks"
    (tables / "rmsnorm").mkdir(parents=True)
    (tables / "rmsnorm" / "table_h200.csv").write_bytes(src.read_bytes())
    with src.open(newline="") as f:
        old = list(csv.DictReader(f))
    out = tmp_path / "rec"
    out.mkdir()
    return tables, old, RP.table_header("rmsnorm"), out


def test_append_grows_a_table_by_the_rows_it_lacks(tmp_path):
    tables, old, header, out = rmsnorm_tables_and_recording(tmp_path)
    new = dict(old[0], program_hash="f" * 16, gpu="NVIDIA H200", date="2026-12-04")
    dup = dict(old[1], gpu="NVIDIA H200")
    with (out / "table_rmsnorm_h200.csv").open("w", newline="") as f:
        w = csv.DictWriter(f, header + list(RP.PROVENANCE_COLUMNS))
        w.writeheader()
        w.writerows([new, dup])
    assert RP.append_tables(out, tables, log=lambda *a: None) == {"rmsnorm": 1}
    with (tables / "rmsnorm" / "table_h200.csv").open(newline="") as f:
        reader = csv.DictReader(f)
        rows = list(reader)
    assert reader.fieldnames == header + list(RP.PROVENANCE_COLUMNS)
    assert [{k: r[k] for k in header} for r in rows[:-1]] == [{k: r[k] for k in header} for r in old]
    assert [r[c] for r in rows[:-1] for c in RP.PROVENANCE_COLUMNS] == \
        [r.get(c) or "" for r in old for c in RP.PROVENANCE_COLUMNS]   # earlier rows' provenance kept
    assert rows[-1]["program_hash"] == "f" * 16 and rows[-1]["gpu"] == "NVIDIA H200"
    assert RP.append_tables(out, tables, log=lambda *a: None) == {"rmsnorm": 0}


def test_the_live_figures_go_beside_the_board_the_plan_was_made_for(tmp_path):
    """A plan made for another board (the H100 board) sends its live figures beside that
    board, not beside the default one; a folder without a plan falls back to the default."""
    out = tmp_path / "rec"
    out.mkdir()
    assert RP.plan_board(out) == RP.BOARD
    board = "benchmarks/results/leaderboard-h100/leaderboard-h100.jsonl"
    (out / "plan.jsonl").write_text(json.dumps({"kind": "plan", "board": board}) + "\n")
    assert RP.plan_board(out) == ROOT / board
    (out / "plan.jsonl").write_text(json.dumps({"kind": "plan", "board": str(tmp_path / "b.jsonl")}) + "\n")
    assert RP.plan_board(out) == tmp_path / "b.jsonl"


def test_a_compile_failure_is_recorded_as_such():
    it = _item("zz")
    rec = RP.result_record(it, {"ok": False, "status": "compile",
                                "message": "OutOfResources: out of resource: shared memory"}, 1.0)
    assert (rec["ok"], rec["status"], rec["frac_anchor"]) == (False, "compile", None)
    assert rec["error"].startswith("compile: OutOfResources")
    odd = RP.result_record(it, {"ok": False, "status": "weird", "message": "?"}, 1.0)
    assert odd["status"] in R.LIVE_STATUSES


def test_another_gpu_records_its_own_tables_and_live_figures(rmsnorm_plan, monkeypatch):
    """A run of an H200 plan on another GPU (an A100, which has no table): nothing counts
    as held (the plan's marks are the H200 tables'), its rows go to table_<task>_a100.csv
    and a new tasks/<task>/table_a100.csv, its live figures are that GPU's and join no
    H200 line, and the folder refuses to mix in another GPU's answers."""
    out, lines = rmsnorm_plan
    monkeypatch.setattr(RP, "HARDWARE", "a100")
    plan = RP.read_plan(out / "plan.jsonl")
    assert not any(i.held for i in plan["items"])
    held = RP.held_keys(["rmsnorm"], plan["items"])
    assert held == set()                        # no A100 table
    todo = RP.select(plan["items"], held, {})
    assert {i.key for i in todo} == {i.key for i in plan["items"] if not i.heldout}
    clock, calls = [0.0], []

    def measure(item):
        calls.append(item.key)
        clock[0] += 1.0
        return _answer(item, len(calls) - 1)
    prov = {"gpu": "NVIDIA A100-SXM4-80GB", "protocol": "test", "commit": "c0ffee"}
    while RP.run_chunk(out, measure, prov, max_seconds=RP.END_MARGIN + 50,
                       clock=lambda: clock[0], log=lambda *a: None)["pending"]:
        pass
    assert RP.folder_hardware(out) == "a100"
    assert not (out / "table_rmsnorm_h200.csv").exists() and not (out / "live_h200.json").exists()
    live = R.read_live(out / "live_a100.json")
    assert len(live) and all(live.of(ln) is None for ln in lines)   # the lines are H200's
    other = [dict(ln, hardware="a100") for ln in lines]
    assert all(live.of(ln) is not None for ln in other)
    tables = out.parent / "tasks"
    (tables / "rmsnorm").mkdir(parents=True)
    assert RP.append_tables(out, tables, log=lambda *a: None)["rmsnorm"] == len(todo) > 0
    with (tables / "rmsnorm" / "table_a100.csv").open(newline="") as f:
        rows = list(csv.DictReader(f))
    assert sorted(r["program_hash"] for r in rows) == sorted(i.program_hash for i in todo)
    assert all(r["protocol"] == "test" and r["date"] for r in rows)
    # the folder now holds A100 answers: an H200 run there is refused
    monkeypatch.setattr(RP, "HARDWARE", "h200")
    assert RP.main(["measure", "--out", str(out), "--hardware", "h200", "--dry-run"]) == 3


def test_a_named_configuration_set_is_planned_where_the_mask_allows_it(monkeypatch):
    """`plan --configs small-shapes`: each swap-AB / stream-K configuration at every suite
    shape where the mask allows it and the checker proves it, priced as its own
    configuration (the table's feature key names it)."""
    import argus_env.tasks.gemm.space as S
    picked = {n: S.SMALL_SHAPES[n] for n in ("swap-16x64x128-plain", "sk-128x128x64")}
    monkeypatch.setattr(S, "SMALL_SHAPES", picked)
    monkeypatch.setattr(RP, "CONFIG_SETS", {"small-shapes": ("gemm", "SMALL_SHAPES")})
    from argus_env.task import get_task
    gemm = get_task("gemm")
    shapes = tuple(c for c in gemm.shapes if c.name in ("decode-16", "square-8192"))
    monkeypatch.setattr(gemm, "shapes", shapes)
    items = list(RP.config_items(["small-shapes"]))
    got = {(i.shape, "stream_k=True" in i.config, "swap_ab=True" in i.config) for i in items}
    # stream-K is masked past its waves of tiles at square-8192
    assert got == {("decode-16", False, True), ("square-8192", False, True),
                   ("decode-16", True, False)}, got
    assert all(i.sources == ["configs"] and i.env_id == "Argus-GEMM-v0" for i in items)


def test_a_set_of_one_configuration_is_planned_at_every_shape_it_is_legal(monkeypatch):
    """`plan --configs gemm-expert`: the GEMM expert's configuration (a single one, not a
    list) at the suite shapes, as the program the space renders for it."""
    from argus_env.task import get_task
    import argus_env.tasks.gemm.space as S
    gemm = get_task("gemm")
    shapes = tuple(c for c in gemm.shapes if c.name in ("decode-16", "square-8192"))
    monkeypatch.setattr(gemm, "shapes", shapes)
    items = list(RP.config_items(["gemm-expert"]))
    want = {c.name: gemm.bind(gemm.space.program(S.EXPERT), c.sizes).hash for c in shapes}
    assert {i.shape: i.program_hash for i in items} == want


@pytest.mark.parametrize("name,task_name", [("attention-expert", "attention"),
                                             ("moe-expert", "moe"),
                                             ("rmsnorm-expert", "rmsnorm")])
def test_each_tasks_expert_set_is_its_expert_at_its_shapes(monkeypatch, name, task_name):
    """`plan --configs attention-expert` (and MoE's, RMSNorm's): the task's own expert
    configuration, as the program its space renders, at the task's shapes (candidates
    for the best known where the tables have no row)."""
    import importlib
    from argus_env.task import get_task
    task = get_task(task_name)
    expert = importlib.import_module(type(task.space).__module__).EXPERT
    shapes = task.shapes[:2]
    monkeypatch.setattr(task, "shapes", shapes)
    items = list(RP.config_items([name]))
    want = {c.name: task.bind(task.space.program(expert), c.sizes).hash for c in shapes}
    assert {i.shape: i.program_hash for i in items} == want
    assert all(i.task == task_name and i.sources == ["configs"] for i in items)


def test_the_sample_set_draws_distinct_legal_combined_configurations():
    """`plan --configs sample`: the same seed draws the same configurations, all distinct,
    each allowed by the mask at some suite shape, none a split left uncombined or a combine
    with nothing to combine; another seed draws others."""
    from argus_env.target import load_target
    from argus_env.task import get_task
    gemm, h200 = get_task("gemm"), load_target("h200")
    a = RP.sampled_configurations(gemm, h200, 12, seed=3)
    assert a == RP.sampled_configurations(gemm, h200, 12, seed=3)
    assert len(a) == len(set(a)) == 12
    assert a != RP.sampled_configurations(gemm, h200, 12, seed=4)
    for c in a:
        assert (c.split_k > 1) == (c.combine is not None), c
        assert any(gemm.space.config_reason(c, {"sizes": s.sizes, "target": h200}) is None
                   for s in gemm.shapes), c


def test_the_model_top_set_plans_the_fastest_estimates_the_tables_lack(monkeypatch):
    """`plan --configs model-top`: at each named GEMM shape, the corrected model's fastest
    configurations among a random draw, none the tables already price, each proven."""
    from argus_env.measure.analytic import TableBackend
    from argus_env.task import get_task
    monkeypatch.setattr(RP, "TOP_SHAPES", ("ragged-1000",))
    monkeypatch.setattr(RP, "TOP_POOL", 40)
    monkeypatch.setattr(RP, "TOP_N", 4)
    task = get_task("gemm")
    items = RP.model_top_items(task, set(), seed=3)
    assert 1 <= len(items) <= 4 and {it.shape for it in items} == {"ragged-1000"}
    table = TableBackend(RP.TOP_HARDWARE)
    from argus_env.dsl.program import Program
    priced = [table.measure(Program.from_text(it.program), it.sizes, task) for it in items]
    assert all(m.ok and m.backend != "table" for m in priced)
    ms = [m.ms for m in priced]
    assert ms == sorted(ms), "kept fastest first"
    assert len({it.program_hash for it in items}) == len(items)


def test_the_best_known_of_each_board_shape_is_the_tables_fastest_correct_row():
    """`append` writes, beside the live figures, each board shape's best known: the
    fastest row of the GPU's tables that ran correctly there (what the board measures
    regret against), with what identifies the row."""
    import csv as _csv
    from argus_env.task import get_task
    lines = [RP.line_view(ln) for ln in first_per_env()]
    known = RP.best_known_of(lines + lines)          # one entry per (env, shape)
    assert len({(k["env_id"], k["shape"]) for k in known}) == len(known)
    assert known, "the committed H200 tables measured the board's shapes"
    for k in known:
        ln = next(x for x in lines if (x["env_id"], x["shape"]) == (k["env_id"], k["shape"]))
        task = get_task(ln["task"])
        dims = task.anchor_dims
        rows = []
        from argus_env.measure.recorded import table_paths
        for path in table_paths(task, "h200"):
            with path.open() as f:
                rows += [r for r in _csv.DictReader(f) if r.get("ok") == "True"
                         and all(int(r[d]) == int(ln["sizes"][d]) for d in dims)]
        best = max(rows, key=lambda r: float(r["ratio"]))
        assert k["frac_anchor"] == pytest.approx(float(best["ratio"]))
        assert k["program_hash"] == best["program_hash"]
        assert all(float(r["ratio"]) <= k["frac_anchor"] for r in rows)


def test_the_best_known_carries_its_figure_from_the_live_run_where_it_was_timed():
    """A best known program that the live recording timed at that shape gets that figure
    (`live_frac_anchor`, the median of its timings there); one timed only at another
    shape, or that failed, does not."""
    lines = [RP.line_view(ln) for ln in first_per_env()]
    known = RP.best_known_of(lines)
    k = known[0]
    ln = next(x for x in lines if (x["env_id"], x["shape"]) == (k["env_id"], k["shape"]))
    at = {"env_id": ln["env_id"], "shape": ln["shape"], "program_hash": k["program_hash"],
          "status": "ok"}
    timed = [dict(at, frac_anchor=0.5), dict(at, frac_anchor=0.7), dict(at, frac_anchor=0.6),
             dict(at, frac_anchor=0.1, status="failed"),
             dict(at, shape="elsewhere", frac_anchor=0.2)]
    again = RP.best_known_of(lines, timed)
    assert again[0]["live_frac_anchor"] == pytest.approx(0.6)
    assert again[0]["frac_anchor"] == k["frac_anchor"]
    assert all("live_frac_anchor" not in x for x in again[1:])
    assert "live_frac_anchor" not in RP.best_known_of(lines, timed[3:])[0]


def test_a_retimed_program_gets_a_new_row_once_and_others_are_still_left_out(tmp_path):
    """`plan --retime`: the recording's row of a program the tables hold is appended when
    the plan timed it again (once: the same row twice is not), while a held program the
    plan did not retime is still left out."""
    tables, old, header, out = rmsnorm_tables_and_recording(tmp_path)
    again = dict(old[0], ratio="0.5", timestamp="1800000000.0", gpu="NVIDIA H200")
    held = dict(old[1], timestamp="1800000001.0", gpu="NVIDIA H200")
    with (out / "table_rmsnorm_h200.csv").open("w", newline="") as f:
        w = csv.DictWriter(f, header + list(RP.PROVENANCE_COLUMNS))
        w.writeheader()
        w.writerows([again, held])
    sizes = {d: int(again[d]) for d in ("T", "H")}
    item = RP.Item("rmsnorm", "Argus-RMSNorm-v0", again["shape"], sizes,
                   again["program_hash"], "", sources=["retime"])
    assert item.retime and item.key == f"rmsnorm|{again['T']}x{again['H']}|{again['program_hash']}"
    RP.write_plan({"header": {"kind": "plan"}, "items": [item]}, out / "plan.jsonl")
    assert RP.append_tables(out, tables, log=lambda *a: None) == {"rmsnorm": 1}
    with (tables / "rmsnorm" / "table_h200.csv").open(newline="") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == len(old) + 1 and rows[-1]["ratio"] == "0.5"
    assert rows[-1]["program_hash"] == old[0]["program_hash"]
    assert RP.append_tables(out, tables, log=lambda *a: None) == {"rmsnorm": 0}
    assert RP.select([item], {item.key}, {}) == [item], "held, but timed again"


def test_each_board_shapes_best_known_is_planned_with_the_boards_kernels():
    """The plan times every board shape's best known program with the board's kernels
    (its row recovered as the program, confirmed by hash), so `append` can give the live
    file its same-run figure; such an item is measured though the tables hold it."""
    lines = first_per_env()
    items = RP.known_items(lines)
    known = {(k["env_id"], k["shape"]): k for k in RP.best_known_of(
        [RP.line_view(ln) for ln in lines])}
    assert items and len(items) == len(known)
    for it in items:
        assert it.known and it.program_hash == known[(it.env_id, it.shape)]["program_hash"]
        assert RP.select([it], {it.key}, {}) == [it]


def test_neighbours_are_one_legal_action_from_the_tables_best_and_proven(monkeypatch):
    """`plan --neighbours`: at a shape, every item is the tables' fastest correct program
    with one legal catalog action applied (never the program itself, never an action the
    mask refuses there), and a plan made with `--board none` has no board lines."""
    from argus_env.measure.analytic import TableBackend
    from argus_env.measure.recorded import ConfigRecovery
    from argus_env.target import load_target
    from argus_env.task import get_task
    monkeypatch.setattr(RP, "HARDWARE", "h100")
    task, target = get_task("rmsnorm"), load_target("h100")
    shape = "llama70b-decode-256"
    case = next(c for c in task.shapes if c.name == shape)
    rows = [r for r in TableBackend("h100").table(task)["rows"].values()
            if r["shape"] == shape and r["ok"] == "True"]
    best = max(rows, key=lambda r: float(r["ratio"]))
    config = ConfigRecovery(task)(best)
    ctx = {"sizes": dict(case.sizes), "target": target}
    legal = task.space.legal(config, ctx)
    allowed = {task.bind(task.space.program(task.space.apply(config, n, v, ctx)),
                         case.sizes).hash for n, v in legal}
    items = RP.neighbour_items("rmsnorm", 1, [shape])
    assert items and all(i.shape == shape and i.sources == ["neighbours"] for i in items)
    hashes = [i.program_hash for i in items]
    assert len(set(hashes)) == len(hashes) and best["program_hash"] not in hashes
    assert set(hashes) <= allowed, "only what one legal action reaches"
    plan = RP.make_plan(Path("none"), 0, 0, 10, 0, [], log=lambda *a: None,
                        neighbours=["rmsnorm"], neighbour_shapes=[shape])
    assert plan["header"]["lines"] == [] and plan["header"]["neighbours"] == ["rmsnorm"]
    assert {i.program_hash for i in plan["items"]} == set(hashes)



def test_known_keeps_a_same_run_figure_only_for_the_same_program(tmp_path, monkeypatch):
    """`record_programs.py known --live FILE`: rewriting a live file's best knowns from the
    tables as they are now keeps an entry's figure from the live run
    (`live_frac_anchor`) while the best known is still that program, and drops it where
    the tables now name another program."""
    root = ROOT / "benchmarks/results/leaderboard-h100"
    board = root / "leaderboard-h100.jsonl"
    doc = json.loads((root / "live_h100.json").read_text())
    monkeypatch.setattr(RP, "HARDWARE", doc["hardware"])
    lines = [RP.line_view(ln) for ln in RP.board_lines(board)]
    now = RP.best_known_of(lines, doc["figures"])
    keep, change = now[0], now[1]
    doc["best_known"] = [dict(keep, live_frac_anchor=0.5),
                         dict(change, program_hash="0" * 16, live_frac_anchor=0.25)]
    live = tmp_path / "live_h100.json"
    live.write_text(json.dumps(doc))
    assert RP.main(["known", "--live", str(live), "--board", str(board)]) == 0
    got = {(k["env_id"], k["shape"]): k for k in json.loads(live.read_text())["best_known"]}
    assert got[(keep["env_id"], keep["shape"])]["live_frac_anchor"] == 0.5
    assert got[(change["env_id"], change["shape"])]["program_hash"] == change["program_hash"]
    assert got[(change["env_id"], change["shape"])].get("live_frac_anchor") != 0.25


@pytest.mark.slow
def test_the_verdict_leaves_out_programs_that_would_not_compile(monkeypatch):
    """`plan --verdict`: a neighbour program that needs more shared memory than the H100
    has (timed on the GPU, where it failed to compile) is left out; the same program as a
    board kernel is kept (a board's kernels are timed whatever the verdict says), and a
    program that compiles is kept."""
    import gzip
    monkeypatch.setattr(RP, "HARDWARE", "h100")
    path = ROOT / "benchmarks/results/neighbours_h100/plan.jsonl.gz"
    with gzip.open(path, "rt") as f:
        rows = [json.loads(line) for line in f][1:]
    results = {json.loads(x)["program_hash"]: json.loads(x)
               for x in (ROOT / "benchmarks/results/neighbours_h100/results.jsonl")
               .read_text().splitlines()}
    def item(row, sources):
        return RP.Item(row["task"], row["env_id"], row["shape"], row["sizes"],
                       row["program_hash"], row["program"], row["config"], row["summary"],
                       sources)
    moe = [r for r in rows if r["task"] == "moe" and r["shape"] == "mixtral-decode-16-skewed"
           and r["program_hash"] in results]
    bad = next(r for r in moe if "shared memory" in results[r["program_hash"]]["error"])
    good = next(r for r in moe if results[r["program_hash"]]["ok"])
    kept = RP.refused_by_verdict([item(bad, ["neighbours"]), item(bad, ["board"]),
                                  item(good, ["neighbours"])])
    assert [(i.program_hash, i.sources) for i in kept] == [
        (bad["program_hash"], ["board"]), (good["program_hash"], ["neighbours"])]


def test_a_plan_without_a_board_refuses_what_needs_board_shapes(monkeypatch):
    """`--board none` has no board shapes: held-out walks and board-shape walks are
    refused rather than spread over every shape; a misspelt neighbour shape is named."""
    monkeypatch.setattr(RP, "HARDWARE", "h100")
    with pytest.raises(SystemExit, match="no board shapes"):
        RP.make_plan(Path("none"), 0, 5, 10, 0, [], log=lambda *a: None)
    with pytest.raises(SystemExit, match="llama70b-decode-25: not a suite shape"):
        RP.make_plan(Path("none"), 0, 0, 10, 0, [], log=lambda *a: None,
                     neighbours=["rmsnorm"], neighbour_shapes=["llama70b-decode-25"])
