"""Boards joined with live GPU figures: verified agents ranked by the live score, the
recorded one beside it, unverified agents after, a kernel that failed on the GPU as 0."""

import json

import pytest

from argus_env.bench import leaderboard as L
from argus_env.bench import render
from argus_env.bench import results as R

COMMITTED = R.ROOT / "benchmarks/results/leaderboard/leaderboard.jsonl"


def board_lines(env_id="Argus-GEMM-v0", track="train") -> list[dict]:
    return [ln for ln in R.read_lines(COMMITTED) if (ln["env_id"], ln["track"]) == (env_id, track)]


def figure(line, frac=None, status="ok") -> dict:
    fig = {"env_id": line["env_id"], "shape": line["shape"],
           "program_hash": line["submitted_program_hash"], "ok": status == "ok", "status": status}
    if status == "ok":
        fig["frac_anchor"] = frac
    return fig


def live_of(tmp_path, figures, name="live_h200.json") -> R.LiveFigures:
    path = R.write_live(tmp_path / name, "h200", figures, {"gpu": "NVIDIA H200",
                                                         "date": "2026-12-04T05:00:00+00:00"})
    return R.read_live(path)


def test_without_live_figures_every_agent_is_unverified_and_ranked_by_the_recorded_score():
    (b,) = L.build(board_lines())
    assert b.ranked_by == "recorded"
    assert all(not e.is_verified and e.live_score is None for e in b.entries)
    scores = [e.score for e in b.entries]
    assert scores == sorted(scores, reverse=True)
    text = render.markdown([b], [])
    assert "Ranked by the recorded score" in text and "unverified" in text


def test_verified_agents_are_ranked_by_the_live_score_not_the_recorded_one(tmp_path):
    lines = board_lines()
    (recorded,) = L.build(lines)
    order = [e.agent for e in recorded.entries]
    # live figures that reverse the recorded order: the last agent gets the highest
    live_frac = {agent: 0.1 * (i + 1) for i, agent in enumerate(order)}
    programs = {}
    for ln in lines:
        key = (ln["shape"], ln["submitted_program_hash"])
        programs.setdefault(key, []).append(ln["agent"])
    # one figure per program: agents sharing a program share it; give it the first agent's
    figs = [figure(next(ln for ln in lines if (ln["shape"], ln["submitted_program_hash"]) == k),
                   live_frac[agents[0]]) for k, agents in programs.items()]
    (b,) = L.build(lines, live=live_of(tmp_path, figs))
    assert b.ranked_by == "live"
    assert all(e.is_verified for e in b.entries)
    live = [e.live_score for e in b.entries]
    assert live == sorted(live, reverse=True)
    expected = {}
    for ln in lines:
        fig = next(f for f in figs if (f["shape"], f["program_hash"]) ==
                   (ln["shape"], ln["submitted_program_hash"]))
        expected.setdefault(ln["agent"], []).append(fig["frac_anchor"])
    for e in b.entries:
        assert e.live_score == pytest.approx(L.geomean([sum(v) / len(v) for v in
                                                        [expected[e.agent]]]))
        assert e.score == next(x.score for x in recorded.entries if x.agent == e.agent)
    assert [e.agent for e in b.entries] != order, "the live figures reverse the ranking"


def test_an_unverified_agent_is_ranked_after_every_verified_one(tmp_path):
    lines = board_lines()
    (recorded,) = L.build(lines)
    top = recorded.entries[0].agent          # the best recorded score
    missing = next(ln for ln in lines if ln["agent"] == top)
    shared = {(ln["shape"], ln["submitted_program_hash"]) for ln in lines if ln is not missing
              and (ln["shape"], ln["submitted_program_hash"]) ==
              (missing["shape"], missing["submitted_program_hash"])}
    if shared:   # another agent submitted the very same program: use another board
        pytest.skip("the top agent's program is shared")
    figs, seen = [], set()
    for ln in lines:
        key = (ln["shape"], ln["submitted_program_hash"])
        if ln is missing or key in seen:
            continue
        seen.add(key)
        figs.append(figure(ln, 0.01))   # live figures far below the recorded ones
    (b,) = L.build(lines, live=live_of(tmp_path, figs))
    last = b.entries[-1]
    assert last.agent == top and not last.is_verified
    assert last.verified == last.episodes - 1
    assert all(e.is_verified for e in b.entries[:-1])
    row = next(r for r in render.markdown([b], []).splitlines() if f"| {top} |" in r
               and "unverified" in r)
    assert f"| {last.rank} | {top} | unverified | - | {last.score:.3f} |" in row


def test_a_kernel_that_fails_to_compile_on_the_gpu_counts_as_zero(tmp_path):
    lines = board_lines()
    figs, seen = [], set()
    for ln in lines:
        key = (ln["shape"], ln["submitted_program_hash"])
        if key not in seen:
            seen.add(key)
            figs.append(figure(ln, status="compile"))
    (b,) = L.build(lines, live=live_of(tmp_path, figs))
    for e in b.entries:
        assert e.is_verified and e.live_score == pytest.approx(L.FLOOR)
        assert e.live_failures == e.episodes
    text = render.markdown([b], [])
    assert f"{L.FLOOR:.3f} ({b.entries[0].live_failures} failed)" in text
    assert "failed: compile" in text


def test_the_recorded_score_is_shown_beside_the_live_one(tmp_path):
    lines = board_lines()
    figs, seen = [], set()
    for ln in lines:
        key = (ln["shape"], ln["submitted_program_hash"])
        if key not in seen:
            seen.add(key)
            figs.append(figure(ln, 0.5 * ln["final_frac_anchor"]))
    (b,) = L.build(lines, live=live_of(tmp_path, figs))
    text = render.markdown([b], [])
    page = render.html([b], [])
    assert "Ranked by the live score" in text and "live_h200.json" in text
    for e in b.entries:
        # the live file names no best known: the tables' own stands (a GPU figure)
        assert e.live_regret is not None
        cells = f"| {e.rank} | {e.agent} | {e.live_score:.3f} | {e.live_regret:.3f} | {e.score:.3f} |"
        assert cells in text, cells
        assert (f"<td>{e.live_score:.3f}</td><td>{e.live_regret:.3f}</td>"
                f"<td>{e.score:.3f}</td>") in page
    for ln in lines:   # every episode line: recorded and live side by side
        assert (f"| {ln['agent']} | {ln['shape']} | {ln['seed']} | "
                f"{ln['final_frac_anchor']:.3f} | {0.5 * ln['final_frac_anchor']:.3f} | ok |") in text


def test_live_figures_are_read_from_beside_the_results_file(tmp_path):
    lines = board_lines()
    results = tmp_path / "board.jsonl"
    results.write_text("".join(json.dumps(ln) + "\n" for ln in lines))
    assert len(R.live_beside([results])) == 0
    live_of(tmp_path, [figure(lines[0], 0.3)])
    live = R.live_beside([results])
    assert len(live) == 1 and live.of(lines[0])["frac_anchor"] == 0.3
    other = dict(lines[0], hardware="a100")   # another GPU's line does not join
    assert live.of(other) is None


@pytest.mark.parametrize("change, message", [
    ({"status": "exploded"}, "status"),
    ({"ok": False}, "status 'ok' with ok=False"),
    ({"frac_anchor": float("nan")}, "finite frac_anchor"),
    ({"program_hash": None}, "'program_hash' must be a string"),
])
def test_a_malformed_live_file_is_refused(tmp_path, change, message):
    fig = dict(figure(board_lines()[0], 0.4), **change)
    path = tmp_path / "live_h200.json"
    path.write_text(json.dumps({"hardware": "h200", "figures": [fig]}))
    with pytest.raises(ValueError, match=message):
        R.read_live(path)


def test_two_figures_for_one_program_are_refused(tmp_path):
    ln = board_lines()[0]
    path = tmp_path / "live_h200.json"
    path.write_text(json.dumps({"hardware": "h200", "figures": [figure(ln, 0.4), figure(ln, 0.5)]}))
    with pytest.raises(ValueError, match="two figures"):
        R.read_live(path)


def test_another_gpus_live_figures_neither_verify_nor_source_a_board(tmp_path):
    """Figures timed on an H100 for the very programs of an H200 board join none of its
    lines (the key holds the hardware) and are not named among its live sources."""
    lines = board_lines()
    figs = [figure(ln, 0.5) for ln in lines]
    other = R.write_live(tmp_path / "live_h100.json", "h100", figs, {"gpu": "NVIDIA H100"})
    live = R.read_live(other)
    (b,) = L.build(lines, live=live)
    assert b.ranked_by == "recorded" and b.live_sources == []
    assert all(not e.is_verified for e in b.entries)
    mine = live_of(tmp_path, figs)                 # the same figures as the H200's
    (b,) = L.build(lines, live=mine)
    assert b.ranked_by == "live" and [s["hardware"] for s in b.live_sources] == ["h200"]


def test_figures_declared_for_another_gpu_than_they_were_timed_on_are_refused(tmp_path):
    """An H100's figures written into a file that says h200 (the hardware field changed, or
    an H100 file renamed live_h200.json) would verify an H200 board's lines: the file's
    name and its provenance's GPU must agree with the hardware it declares."""
    figs = [figure(ln, 0.5) for ln in board_lines()]
    path = tmp_path / "live_h200.json"
    path.write_text(json.dumps({"hardware": "h200", "figures": figs,
                                "provenance": {"gpu": "NVIDIA H100 80GB HBM3"}}))
    with pytest.raises(ValueError, match="timed on"):
        R.read_live(path)
    renamed = tmp_path / "live_h200_copy.json"
    renamed.write_text(json.dumps({"hardware": "h100", "figures": figs}))
    with pytest.raises(ValueError, match="named for"):
        R.read_live(renamed)


def test_a_figure_timed_at_other_sizes_than_the_shape_is_refused(tmp_path):
    """A figure keyed by a board shape but timed at smaller sizes does not verify it."""
    ln = board_lines()[0]
    small = {k: max(1, v // 8) if isinstance(v, int) else v for k, v in ln["sizes"].items()}
    live = live_of(tmp_path, [dict(figure(ln, 0.9), sizes=small)])
    with pytest.raises(ValueError, match="timed at sizes"):
        L.build(board_lines(), live=live)
    same = live_of(tmp_path, [dict(figure(ln, 0.9), sizes=dict(ln["sizes"]))], "live_h200.json")
    assert same.of(ln)["frac_anchor"] == 0.9


def one_figure_per_kernel(lines: list[dict], frac: float) -> list[dict]:
    """A live figure of `frac` for each distinct (shape, submitted kernel) of `lines`."""
    figs, seen = [], set()
    for ln in lines:
        key = (ln["shape"], ln["submitted_program_hash"])
        if key not in seen:
            seen.add(key)
            figs.append(figure(ln, frac))
    return figs


def test_a_best_known_from_the_gpu_tables_replaces_the_best_episode(tmp_path):
    """A live file's best known (the fastest correct program of the GPU's tables) is what
    the board measures regret and steps to 90%/95% against, and the live score is set
    against it; without one the tables' own best known stands in (a GPU measurement), and
    only at a shape the tables never measured the best episode, the board saying which."""
    from argus_env.measure.optimum import best_known
    from argus_env.task import get_task
    lines = board_lines()
    (plain,) = L.build(lines)
    for s in plain.shapes:
        line = next(ln for ln in lines if ln["shape"] == s)
        table = best_known(get_task(line["task"]), line["sizes"], "h200")
        assert table and plain.known_from[s]["program_hash"] == table["program_hash"]
        assert plain.best_known[s] == table["frac_anchor"]
    assert "(best episode)" not in render.markdown([plain], [])
    assert "(GPU: table_h200.csv, 2026-12-0" in render.markdown([plain], [])
    # an agent that never leaves the baseline is not at 100% of the best known at step 1
    unmeasured = [{**ln, "shape": "unmeasured", "sizes": {"M": 1001, "N": 1003, "K": 1005}}
                  for ln in lines]
    (alone,) = L.build(unmeasured)
    assert not any(alone.known_from.values())
    assert "(best episode)" in render.markdown([alone], [])
    figs = one_figure_per_kernel(lines, 0.5)
    shapes = sorted({ln["shape"] for ln in lines})
    known = [{"env_id": lines[0]["env_id"], "shape": s, "frac_anchor": 2.0,
              "program_hash": "ab" * 8, "table": "table_h200.csv",
              "recorded": "2026-12-01T00:00:00"} for s in shapes]
    path = R.write_live(tmp_path / "live_h200.json", "h200", figs, {"gpu": "NVIDIA H200"},
                        best_known=known)
    (b,) = L.build(lines, live=R.read_live(path))
    assert b.known_measured and all(b.best_known[s] == 2.0 for s in shapes)
    for e in b.entries:
        assert e.is_verified and e.live_regret == pytest.approx(0.5 / 2.0)
        # 2.0 is above every recorded best: nobody reaches 90% of it
        assert e.reached == 0 and e.reached_high == 0
    text = render.markdown([b], [])
    assert "2.000 (GPU: table_h200.csv, 2026-12-01, abababababab)" in text
    assert f"| {b.entries[0].live_score:.3f} | 0.250 |" in text


def test_a_malformed_best_known_is_refused(tmp_path):
    lines = board_lines()
    fig = figure(lines[0], 0.5)
    for bad in ({"env_id": lines[0]["env_id"], "shape": lines[0]["shape"],
                 "program_hash": "x", "frac_anchor": float("nan")},
                {"env_id": lines[0]["env_id"], "shape": lines[0]["shape"], "frac_anchor": 1.0}):
        with pytest.raises(ValueError, match="best known"):
            R.write_live(tmp_path / "live_h200.json", "h200", [fig], {}, best_known=[bad])


def test_the_live_ratio_takes_the_best_known_as_timed_in_the_live_run(tmp_path):
    """Where the live run timed the best known program again (`live_frac_anchor`), the
    board's live / best known divides by that figure, so the GPU's drift between runs
    cancels; the best known's table figure still sets the steps to 90%/95%; a non-positive
    same-run figure is refused."""
    lines = board_lines()
    figs = one_figure_per_kernel(lines, 0.5)
    shapes = sorted({ln["shape"] for ln in lines})
    known = [{"env_id": lines[0]["env_id"], "shape": s, "frac_anchor": 2.0,
              "live_frac_anchor": 1.0, "program_hash": "ab" * 8, "table": "table_h200.csv",
              "recorded": "2026-12-01T00:00:00"} for s in shapes]
    path = R.write_live(tmp_path / "live_h200.json", "h200", figs, {"gpu": "NVIDIA H200"},
                        best_known=known)
    (b,) = L.build(lines, live=R.read_live(path))
    assert all(b.best_known[s] == 2.0 for s in shapes)
    for e in b.entries:
        assert e.live_regret == pytest.approx(0.5 / 1.0)
    assert "1.000 timed again in the live run" in render.markdown([b], [])
    with pytest.raises(ValueError, match="live_frac_anchor"):
        R.write_live(tmp_path / "live_h200.json", "h200", figs, {},
                     best_known=[dict(known[0], live_frac_anchor=0.0)])
