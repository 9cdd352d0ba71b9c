"""Every figure a leaderboard shows for a submission comes from the replay, or the line is
rejected: each field a board reads, forged in a checked submission, leaves the board as
the honest submission gives it or gets the submission rejected; and a line that breaks
a rule is never replayed."""

import copy

import pytest

from argus_env.bench import leaderboard as L
from argus_env.bench import validate as V
from argus_env.bench.submission import check_submission

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("shared_evaluations")]


class Spy(dict):
    """A line that notes which of its fields are read."""

    def __init__(self, line: dict, seen: set):
        super().__init__(line)
        self.seen = seen

    def __getitem__(self, key):
        self.seen.add(key)
        return super().__getitem__(key)

    def get(self, key, default=None):
        self.seen.add(key)
        return super().get(key, default)


def read_by_board(line: dict) -> set:
    seen: set = set()
    L.build([Spy(line, seen)])
    return seen


OTHER = {"env_id": "Argus-Attention-v0", "shape": "ragged-3000", "track": "test",
         "split": "test", "measure": "model", "hardware": "h100", "agent": "someone-else"}


def forged(key: str, value):
    """A different value of the same type (for a name, another the project knows)."""
    if key in OTHER:
        return OTHER[key]
    if key == "final_measured_by":
        return "model" if value == "table" else "table"
    if isinstance(value, bool):
        return not value
    if isinstance(value, (int, float)):
        return value + 1
    if value is None:
        return 1.0
    if key == "trace":
        return [[s, v + 1.0] for s, v in value]
    if isinstance(value, dict):
        return {"coverage": 1} if not value else {k: forged(k, v) if not isinstance(v, str)
                                                  else v + "0" for k, v in value.items()}
    return value + "0" if isinstance(value, str) else value[:-1]


def coherent_forgeries(line: dict) -> dict:
    """Forgeries that keep the line's own counts and lists consistent."""
    out = {}
    blank = copy.deepcopy(line)
    blank.update(final_program="", final_frac_anchor=3.0, final_tflops=1000.0)
    out["final program blanked, 3x the library"] = blank
    best = copy.deepcopy(line)
    best["best_frac_anchor"] = best["trace"][-1][1] = 3.0
    out["best found 3x the library, trace to match"] = best
    one = copy.deepcopy(line)
    one["env_steps"] = one["steps"]
    one["trace"] = [[i + 1, v] for i, (_, v) in enumerate(one["trace"][-one["steps"]:])]
    out["one episode claimed"] = one
    long = copy.deepcopy(line)
    for key in ("actions", "action_labels", "rewards", "step_invariants", "step_tflops"):
        long[key] = long[key] * 5
    long["steps"] = len(long["actions"])
    out["more actions than the budget, env_steps unchanged"] = long
    return out


@pytest.mark.parametrize("agent", ["random", "evolutionary"])
def test_every_figure_a_board_reads_is_the_replays(agent, probe_lines, submission):
    line = probe_lines[agent]
    problems, honest = check_submission(submission([line]))
    assert problems == [] and len(honest) == 1, [str(p) for p in problems]
    want = L.build(honest)
    keys = read_by_board(line)
    assert {"final_frac_anchor", "best_frac_anchor", "trace", "final_measured_by",
            "env_steps", "invalid_actions", "violations_met"} <= keys, keys
    cases = {f"{k} forged": {**copy.deepcopy(line), k: forged(k, line[k])} for k in sorted(keys)}
    cases.update(coherent_forgeries(line))
    accepted = []
    for name, bad in cases.items():
        problems, board = check_submission(submission([bad], name=line["agent"]))
        if not problems and L.build(board) != want:
            accepted.append(name)
    assert accepted == [], f"forged figures reached the board: {accepted}"


def test_a_forged_final_figure_is_named(probe_lines, submission):
    """The issue's case: a blanked program with a fraction of 3.0 is a divergence of the
    final figures, whatever the program."""
    bad = coherent_forgeries(probe_lines["random"])["final program blanked, 3x the library"]
    problems, board = check_submission(submission([bad]))
    assert board == [] and {"final_program", "final_frac_anchor"} <= {p.field for p in problems}, \
        [str(p) for p in problems]


def test_a_line_that_breaks_a_rule_is_not_replayed(probe_lines, submission, monkeypatch):
    replayed = []
    real = V.Validator.replay
    monkeypatch.setattr(V.Validator, "replay", lambda self, line: replayed.append(line) or
                        real(self, line))
    line = probe_lines["random"]
    cases = dict(coherent_forgeries(line))
    cases["over the budget"] = cases.pop("more actions than the budget, env_steps unchanged")
    cases["another agent's name"] = {**line, "agent": "someone-else"}
    cases["another measure"] = {**line, "measure": "model"}
    cases["not an episode of the suite"] = {**line, "seed": 7}
    cases["on the wrong track"] = {**line, "track": "test", "split": "test"}
    cases["another suite"] = {**line, "suite": "leaderboard"}
    for name in ("over the budget", "another agent's name", "another measure",
                 "not an episode of the suite", "on the wrong track", "another suite"):
        problems, board = check_submission(submission([cases[name]], name=line["agent"]))
        assert problems and board == [], name
        assert any(p.line == 1 for p in problems), name
    assert replayed == [], f"{len(replayed)} rule-breaking line(s) replayed"
    check_submission(submission([line]))
    assert len(replayed) == 1, "the honest line is replayed"


def test_a_line_of_several_episodes_replays_every_one(probe_lines, submission):
    """A record of an agent that resets carries every episode's actions: its board line is
    the replay of them all (env steps, trace and best found over every episode)."""
    line = probe_lines["evolutionary"]
    divergences, board = V.Validator().check(line)
    assert divergences == [], [str(d) for d in divergences]
    assert board["env_steps"] == line["env_steps"] > board["steps"] == len(line["actions"])
    for key in ("trace", "best_frac_anchor", "final_frac_anchor", "invalid_actions",
                "violations_met", "earlier_actions"):
        assert board[key] == line[key], key
    low = copy.deepcopy(line)            # a lower best found, the trace to match
    low["best_frac_anchor"] = low["trace"][-1][1] = board["best_frac_anchor"] / 2
    for pair in low["trace"]:
        pair[1] = min(pair[1], low["best_frac_anchor"])
    fields = {d.field for d in V.Validator().validate(low)}
    assert {"best_frac_anchor", "trace"} <= fields, fields


def test_a_line_of_several_episodes_without_their_actions_is_refused(probe_lines, submission):
    """A record of several episodes that carries only the last one's actions (as written
    before `earlier_actions`): `argus validate` bounds its spanning figures by the last
    episode's replay, and a submission is refused before any replay."""
    line = {k: v for k, v in probe_lines["evolutionary"].items() if k != "earlier_actions"}
    divergences, board = V.Validator().check(line)
    assert divergences == [] and board["env_steps"] == board["steps"] == len(line["actions"])
    assert board["best_frac_anchor"] <= line["best_frac_anchor"]
    problems, board = check_submission(submission([line]))
    assert board == [] and any(p.field == "earlier_actions" and p.line == 1 for p in problems), \
        [str(p) for p in problems]


def test_the_budget_binds_the_recorded_actions(probe_lines, submission):
    """An episode of 12 actions is over the probe's budget of 8, whatever `env_steps` it
    states (the replay plays every recorded action)."""
    line = copy.deepcopy(probe_lines["long"])
    line["budget"] = 8
    problems, board = check_submission(submission([line]))
    assert board == [] and any(p.field == "actions" and "over the budget of 8" in p.message
                               for p in problems), [str(p) for p in problems]
    line["env_steps"], line["trace"] = 8, line["trace"][:8]
    problems, board = check_submission(submission([line]))
    assert board == [] and problems, "relabelled as 8 env steps"


def test_a_submission_cannot_choose_the_tables_it_is_priced_by(probe_lines, submission,
                                                               tmp_path, monkeypatch,
                                                               probe_suite):
    """A replay reads the tables a line names (`hashes.table_rows`), so a line played
    against no rows at all (every program priced by the cost model, the model an agent
    can game) replays without a divergence. As a submission it is refused before any
    replay, and so is a line that names no tables; the honest line is accepted."""
    import gymnasium as gym

    from argus_env.bench import load_config
    from argus_env.bench.config import Episode
    from argus_env.bench.runner import Runner

    class NoRows(Runner):
        def make_env(self, env_id, track, budget=None):
            c = self.config
            return gym.make(env_id, mode=c.mode, measure=c.measure, hardware=c.hardware,
                            reward=c.reward, split=track, max_episode_steps=budget or c.budget,
                            estimator=c.estimator, table_snapshot="table_h200.csv:0")
    path = tmp_path / "probe.yaml"
    path.write_text(probe_suite)
    cfg = load_config(path)
    forged = NoRows(cfg, tmp_path).play(Episode("random", "Argus-GEMM-v0", "train", "decode-16", 0))
    assert forged["hashes"]["table_rows"] == "table_h200.csv:0", forged["hashes"]
    assert forged["hashes"]["table_rows"] != probe_lines["random"]["hashes"]["table_rows"]
    assert V.Validator().validate(forged) == [], "the zero-row line should replay as played"

    replayed = []
    real = V.Validator.replay
    monkeypatch.setattr(V.Validator, "replay", lambda self, line: replayed.append(line) or
                        real(self, line))
    nameless = {**probe_lines["random"],
                "hashes": {**probe_lines["random"]["hashes"], "table_rows": None}}
    for line in (forged, nameless):
        problems, board = check_submission(submission([line]))
        assert board == [] and [p.field for p in problems] == ["hashes"], \
            [str(p) for p in problems]
        assert "play it again" in problems[0].message
    assert replayed == [], f"{len(replayed)} line(s) with chosen tables replayed"
    problems, board = check_submission(submission([probe_lines["random"]]))
    assert problems == [] and len(board) == 1, [str(p) for p in problems]


def test_a_submitted_suite_cannot_pin_the_tables(probe_lines, submission, probe_suite,
                                                 tmp_path, monkeypatch):
    """Only the project's own suites may pin the table rows their boards read
    (`BenchConfig.tables`): a submission's own suite that pins them, even to the rows its
    line names, is refused before any replay, as a way to choose its prices."""
    import yaml

    from argus_env.bench import load_config
    from argus_env.bench.config import Episode
    from argus_env.bench.runner import Runner
    pinned = {**yaml.safe_load(probe_suite), "tables": {"Argus-GEMM-v0": "table_h200.csv:0"}}
    path = tmp_path / "pinned.yaml"
    path.write_text(yaml.safe_dump(pinned))
    forged = Runner(load_config(path), tmp_path).play(
        Episode("random", "Argus-GEMM-v0", "train", "decode-16", 0))
    assert forged["hashes"]["table_rows"] == "table_h200.csv:0"   # the pin was played
    replayed = []
    real = V.Validator.replay
    monkeypatch.setattr(V.Validator, "replay", lambda self, line: replayed.append(line) or
                        real(self, line))
    folder = submission([forged])
    (folder / "suite.yaml").write_text(yaml.safe_dump(pinned))
    problems, board = check_submission(folder)
    assert board == [] and any(p.field == "suite" and "pins the GPU tables" in p.message
                               for p in problems), [str(p) for p in problems]
    assert replayed == []


def test_a_submitted_suite_cannot_price_against_the_roofline(probe_lines, submission,
                                                             probe_suite, tmp_path,
                                                             monkeypatch):
    """0.9 x the roofline as the library's figure (`model_anchor: roofline`) puts every
    bandwidth-bound program at the roofline at 1.111 of the library: a submission's own
    suite that chooses it, with lines played so, is refused before any replay. A line
    that claims the roofline's anchor in a suite that plays the measured one is refused
    as differing from its suite."""
    import yaml

    from argus_env.bench import load_config
    from argus_env.bench.config import Episode
    from argus_env.bench.runner import Runner
    roofline = {**yaml.safe_load(probe_suite), "model_anchor": "roofline"}
    path = tmp_path / "roofline.yaml"
    path.write_text(yaml.safe_dump(roofline))
    played = Runner(load_config(path), tmp_path).play(
        Episode("random", "Argus-GEMM-v0", "train", "decode-16", 0))
    assert played["model_anchor"] == "roofline"   # the choice was played
    replayed = []
    real = V.Validator.replay
    monkeypatch.setattr(V.Validator, "replay", lambda self, line: replayed.append(line) or
                        real(self, line))
    folder = submission([played])
    (folder / "suite.yaml").write_text(yaml.safe_dump(roofline))
    problems, board = check_submission(folder)
    assert board == [] and any(p.field == "suite" and "model_anchor: roofline" in p.message
                               for p in problems), [str(p) for p in problems]
    assert replayed == []
    problems, board = check_submission(submission([played]))   # the probe's own suite
    assert board == [] and any(p.field == "model_anchor" for p in problems), \
        [str(p) for p in problems]


def test_a_suite_with_a_budget_axis_takes_a_line_per_budget(probe_lines, submission,
                                                            probe_suite):
    """A suite with `budgets` wants the episode at each budget: a line at a budget the axis
    lacks is refused before any replay, and the episode at the other budget is missing."""
    import yaml

    line = probe_lines["random"]                          # played at the probe's budget, 8
    folder = submission([line])
    (folder / "suite.yaml").write_text(yaml.safe_dump({**yaml.safe_load(probe_suite),
                                                       "budgets": [4, 8]}))
    problems, board = check_submission(folder)
    assert len(board) == 1 and [p.message for p in problems] == [
        "missing episode: Argus-GEMM-v0 train track, shape decode-16, seed 0, budget 4"]
    (folder / "suite.yaml").write_text(yaml.safe_dump({**yaml.safe_load(probe_suite),
                                                       "budgets": [4, 12]}))
    problems, board = check_submission(folder)
    assert board == [] and "budget" in {p.field for p in problems}, [str(p) for p in problems]


def test_a_submission_cannot_choose_the_correction_fit_it_is_priced_by(probe_lines, submission):
    """A replay prices with the correction fit a line names (`hashes.correction`), so a
    submission naming an older fit (kept for the committed boards) or none is refused
    before any replay; the current fit is what the honest line names."""
    from argus_env.measure import correction as C
    from argus_env.task import get_task
    line = probe_lines["random"]
    now = line["hashes"]["correction"]
    assert now == C.fit_id(C.correction_path(get_task("gemm"), "h200"))
    kept = sorted(p.stem.rsplit("_", 1)[1] for p in
                  C.archive_path(get_task("gemm"), "h200", now).parent.glob("correction_h200_*"))
    older = next(f for f in kept if f != now)
    hashes = {k: v for k, v in line["hashes"].items() if k != "correction"}
    for bad in ({**line, "hashes": {**hashes, "correction": older}}, {**line, "hashes": hashes}):
        problems, board = check_submission(submission([bad]))
        assert board == [] and [p.field for p in problems] == ["hashes"], \
            [str(p) for p in problems]
        assert "correction" in problems[0].message


def test_a_line_of_another_catalog_is_refused_before_any_replay(probe_lines, submission,
                                                                monkeypatch):
    """The suite's fingerprint for a line holds the catalog it plays that env with; a line
    that names another one (its actions would be other transformations) is refused."""
    replayed = []
    real = V.Validator.replay
    monkeypatch.setattr(V.Validator, "replay", lambda self, line: replayed.append(line) or
                        real(self, line))
    line = probe_lines["random"]
    other = {**line, "catalog": int(line.get("catalog", 1)) + 1}
    problems, board = check_submission(submission([other]))
    assert board == [] and "catalog" in {p.field for p in problems}, [str(p) for p in problems]
    assert replayed == []


def test_in_a_pinned_project_suite_a_line_is_held_to_the_pinned_rows():
    """A line submitted to one of the project's suites that pins its table rows (the
    committed leaderboard's) must name those rows: one that names none, or fewer (every
    program a model price), is refused, whatever the tables hold now."""
    from argus_env.bench import load_config
    from argus_env.bench.submission import stale_tables
    pinned = load_config("leaderboard").tables_for("Argus-GEMM-v0")
    assert pinned
    line = {"task": "gemm", "hardware": "h200", "measure": "table", "env_id": "Argus-GEMM-v0",
            "hashes": {"table_rows": pinned}}
    assert stale_tables(line, {}, pinned) is None
    for forged in ("table_h200.csv:0", None):
        why = stale_tables({**line, "hashes": {"table_rows": forged}}, {}, pinned)
        assert why and "play it again" in why, why
