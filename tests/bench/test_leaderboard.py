"""Leaderboards from results files (Markdown and a self-contained HTML page, rendered in
headless Chromium), and submission folders checked by replaying their records."""

import base64
import io
import json
import math
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from argus_env.bench import leaderboard as L
from argus_env.bench import render
from argus_env.bench import results as R
from argus_env.bench.submission import PLACEHOLDER, check_submission, new_submission
from argus_env.cli import main

COMMITTED = Path(__file__).resolve().parents[2] / "benchmarks/results/leaderboard/leaderboard.jsonl"


def committed_lines(env_id: str = "Argus-GEMM-v0", track: str = "train") -> list[dict]:
    """Real results lines (the committed board's, read only) of one env and track."""
    return [ln for ln in R.read_lines(COMMITTED) if (ln["env_id"], ln["track"]) == (env_id, track)]


@pytest.fixture(scope="module")
def lines(tiny_results):
    return R.read_lines(tiny_results)


@pytest.fixture(scope="module")
def written(lines, tiny_results, tmp_path_factory):
    out = tmp_path_factory.mktemp("leaderboard")
    return render.write(L.build(lines), out, [str(tiny_results)])


def _png_pixels(png: bytes):
    from PIL import Image
    return Image.open(io.BytesIO(png)).convert("RGB")


@pytest.mark.slow
def test_boards_rank_agents_per_env_and_track(lines):
    boards = L.build(lines)
    assert [(b.env_id, b.track) for b in boards] == [("Argus-GEMM-v0", "train"),
                                                     ("Argus-GEMM-v0", "test")]
    for b in boards:
        assert {e.agent for e in b.entries} == {"random", "greedy"}
        assert [e.rank for e in b.entries] == [1, 2]
        assert b.entries[0].score >= b.entries[1].score
        assert (b.budget, b.measure, b.seeds) == (6, "table", [0, 1])
        for e in b.entries:
            mine = [ln for ln in lines if ln["agent"] == e.agent and ln["track"] == b.track]
            fracs = [L.submitted_frac(ln) for ln in mine]
            assert math.isclose(e.score, max(sum(fracs) / len(fracs), L.FLOOR)), (e, fracs)
            assert e.spread[0] <= e.score <= e.spread[1] + 1e-12
            assert e.episodes == 2 and len(e.curves) == 2 and len(e.curves[0]) == 6
            assert e.invalid_rate == 0.0 and 0 <= e.reached <= 2


def test_curve_holds_the_best_so_far():
    assert L.curve([[2, 0.5], [3, 0.7]], 5) == [0.5, 0.5, 0.7, 0.7, 0.7]
    assert L.first_reach([[1, 0.2], [4, 0.9]], 0.9) == 4
    assert L.geomean([0.5, 2.0]) == pytest.approx(1.0) and L.geomean([0.0, 1.0]) == pytest.approx(0.1)


def test_mixed_settings_and_duplicates_are_refused(lines):
    other = dict(lines[0], measure="model", seed=9)
    with pytest.raises(ValueError, match="mix"):
        L.build(lines + [other])
    with pytest.raises(ValueError, match="twice"):
        L.build(lines + [lines[0]])


@pytest.mark.slow
def test_markdown_and_a_self_contained_page(written):
    md = written["markdown"].read_text()
    for needle in ("## Argus-GEMM-v0: train track", "## Argus-GEMM-v0: test track",
                   "| 1 | ", "random", "greedy", "decode-16", "square-2048", "table sha256"):
        assert needle in md, needle
    page = written["html"].read_text()
    images = re.findall(r"src='data:image/png;base64,([A-Za-z0-9+/=]+)'", page)
    assert len(images) == 6, ("learning curves, per-shape bars and best-so-far against "
                              "wall-clock time for each of two boards")
    assert not re.search(r"(src|href)=['\"](https?:|//|file:)", page), "nothing fetched"
    for b64 in images:
        import numpy as np
        img = np.asarray(_png_pixels(base64.b64decode(b64)))
        colors = {tuple(c) for c in img.reshape(-1, 3)}
        assert img.shape[1] > 300 and len(colors) > 20, "a plot, not a blank image"


def _chromium() -> str:
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    if exe is None:
        pytest.fail("headless Chromium is needed to render the leaderboard page: install it "
                    "with `apt-get install -y chromium` (.ci/run does this on CI)")
    return exe


def _screenshot(exe: str, page: Path, png: Path, profile: Path) -> None:
    proc = subprocess.run([exe, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                           "--no-first-run", "--disable-background-networking",
                           "--disable-component-update", "--disable-sync",
                           f"--user-data-dir={profile}", f"--screenshot={png}",
                           "--window-size=1200,1600", page.resolve().as_uri()],
                          capture_output=True, text=True, timeout=120)
    assert png.exists(), f"chromium wrote no screenshot (exit {proc.returncode}): {proc.stderr[-1500:]}"


@pytest.mark.slow
def test_page_renders_in_headless_chromium_with_visible_plots(written, tmp_path):
    """Screenshot the page, and again with the plots hidden (same layout): the plots are
    where the two differ, and those regions hold a drawing, not a blank box."""
    import numpy as np
    exe = _chromium()
    page = written["html"]
    hidden = tmp_path / "hidden.html"
    hidden.write_text(page.read_text().replace("</style>", "img.plot { visibility: hidden; }</style>"))
    shots = []
    for i, p in enumerate((page, hidden)):
        png = tmp_path / f"shot{i}.png"
        _screenshot(exe, p, png, tmp_path / f"profile{i}")
        shots.append(np.asarray(_png_pixels(png.read_bytes()), dtype=np.int16))
    shutil.copy(tmp_path / "shot0.png", page.parent / "screenshot.png")
    full, blank = shots
    assert full.shape == blank.shape and full.shape[1] >= 1000, full.shape
    assert full.std() > 10, "the page is not blank"
    differs = np.abs(full - blank).sum(axis=2) > 30
    ys, xs = np.nonzero(differs)
    assert differs.sum() > 50_000, f"only {differs.sum()} pixels belong to plots"
    region = full[ys.min(): ys.max() + 1, xs.min(): xs.max() + 1]
    colors = {tuple(c) for c in region.reshape(-1, 3)[::7]}
    assert region.std() > 20 and len(colors) > 50, (region.std(), len(colors))
    assert xs.max() - xs.min() > 600, "two plots side by side"


def _submission(lines, root: Path, suite: Path, agent: str = "greedy") -> Path:
    folder = new_submission(root / agent)
    with (folder / "results.jsonl").open("w") as f:
        for ln in lines:
            if ln["agent"] == agent:
                f.write(json.dumps(ln) + "\n")
    meta = yaml.safe_load((folder / "agent.yaml").read_text())
    shutil.copy(suite, folder / "suite.yaml")           # a suite travels inside the folder
    meta.update(name=agent, description="greedy hill-climbing with restarts", authors=["Argus"],
                suite="suite.yaml", agent=agent)
    (folder / "agent.yaml").write_text(yaml.safe_dump(meta))
    readme = (folder / "README.md").read_text()
    (folder / "README.md").write_text(PLACEHOLDER.sub("filled in", readme))
    return folder


@pytest.mark.slow
def test_check_accepts_a_good_submission_and_rejects_a_tampered_one(lines, tiny_config, tmp_path):
    good = _submission(lines, tmp_path / "good", tiny_config)
    problems, records = check_submission(good)
    assert problems == [] and len(records) == 4, [str(p) for p in problems]

    bad = _submission(lines, tmp_path / "bad", tiny_config)
    rows = (bad / "results.jsonl").read_text().splitlines()
    line = json.loads(rows[2])
    line["rewards"][-1] += 1.0                         # a better submit bonus than earned
    rows[2] = json.dumps(line)
    (bad / "results.jsonl").write_text("\n".join(rows[:3]) + "\n")   # and an episode short
    (bad / "README.md").write_text((tmp_path / "good" / "greedy" / "README.md").read_text()
                                   + "\n<DESCRIBE THE AGENT>\n")
    problems, _ = check_submission(bad)
    text = [str(p) for p in problems]
    assert any(t.startswith("results.jsonl:3: replay diverges: step") and "reward" in t
               for t in text), text
    assert any("missing episode" in t for t in text), text
    assert any(t.startswith("README.md") and "placeholders" in t for t in text), text



@pytest.mark.slow
def test_argus_leaderboard_adds_an_accepted_submission(lines, tiny_config, tmp_path, capsys):
    random_only = tmp_path / "random.jsonl"
    random_only.write_text("".join(json.dumps(ln) + "\n" for ln in lines if ln["agent"] == "random"))
    good = _submission(lines, tmp_path / "sub", tiny_config)
    assert main(["leaderboard", str(random_only), "--check", str(good), "--out",
                 str(tmp_path / "lb")]) == 0, capsys.readouterr().out
    md = (tmp_path / "lb" / "leaderboard.md").read_text()
    assert "| random |" in md and "| greedy |" in md, md   # rows of the per-shape tables
    assert (tmp_path / "lb" / "leaderboard.html").exists()
    (good / "agent.yaml").write_text("name: greedy\n")          # description, authors, suite gone
    assert main(["leaderboard", "--check", str(good), "--out", str(tmp_path / "lb2")]) == 1
    out = capsys.readouterr().out
    assert "rejected" in out and "agent.yaml: missing 'description'" in out, out


def test_counts_agree_with_their_nouns(monkeypatch):
    """A board of one seed, one shape and a budget of one env step says so in the singular,
    in its Markdown and in its plots' legends and titles."""
    from matplotlib.axes import Axes

    from argus_env.bench import plots
    from argus_env.bench.render import counted, markdown
    assert [counted(n, "seed") for n in (0, 1, 2)] == ["0 seeds", "1 seed", "2 seeds"]
    lines = committed_lines()
    one = [dict(ln, budget=1) for ln in lines
           if ln["seed"] == 0 and ln["shape"] == lines[0]["shape"] and ln["agent"] in ("greedy", "random")]
    board, = L.build(one)
    texts: list = []
    for name in ("plot", "bar", "set_title"):
        real = getattr(Axes, name)
        monkeypatch.setattr(Axes, name, lambda self, *a, real=real, name=name, **k: texts.append(
            a[0] if name == "set_title" else k.get("label")) or real(self, *a, **k))
    plots.learning_curves(board)
    plots.shape_bars(board)
    assert {"greedy (1 seed)", "random (1 seed)"} <= set(texts), texts
    assert any("mean over 1 shape " in str(t) for t in texts), texts
    text = " ".join(map(str, texts)) + markdown([board], [])
    assert "budget 1 env step," in text, text
    assert not re.search(r"\b1 (seeds|shapes|steps|episodes|env steps)\b", text), text


def test_results_of_two_budgets_rank_on_a_board_each(tmp_path, capsys):
    """The same episodes at budgets 10 and 20, in two files: a board per env, track and
    budget, each ranking its own episodes; the same episode twice at one budget is still
    refused."""
    lines = committed_lines()
    longer = [dict(ln, budget=20) for ln in lines]
    a, b = tmp_path / "A.jsonl", tmp_path / "B.jsonl"
    a.write_text("".join(json.dumps(ln) + "\n" for ln in lines))
    b.write_text("".join(json.dumps(ln) + "\n" for ln in longer))
    assert main(["leaderboard", str(a), str(b), "--out-dir", str(tmp_path / "lb")]) == 0, \
        capsys.readouterr().err
    md = (tmp_path / "lb" / "leaderboard.md").read_text()
    for budget in (10, 20):
        assert f"## Argus-GEMM-v0: train track, budget {budget} env steps" in md, md[:2000]
    boards = L.build(longer + lines)
    assert [(x.track, x.budget) for x in boards] == [("train", 10), ("train", 20)]
    per_agent = {ag: sum(ln["agent"] == ag for ln in lines) for ag in {ln["agent"] for ln in lines}}
    for board in boards:
        assert {e.agent: e.episodes for e in board.entries} == per_agent, board.budget
    assert "budget" not in L.build(lines)[0].title, "one budget: the title is the env and track"
    with pytest.raises(ValueError, match="appears twice"):
        L.build(lines + longer + [longer[3]])
    assert main(["leaderboard", str(a), str(a), "--out-dir", str(tmp_path / "lb2")]) == 2
    assert "appears twice" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["leaderboard", "--help"])
    assert "make a board per budget" in " ".join(capsys.readouterr().out.split())


def test_shape_bars_of_an_agent_with_no_spread_over_seeds():
    """Three seeds that found the same kernel: their mean may come out a rounding error
    above each of them (0.1 + 0.1 + 0.1 > 0.3), which must not make a negative error bar."""
    from argus_env.bench import plots
    lines = committed_lines()
    shape = lines[0]["shape"]
    same = [ln for ln in lines if ln["shape"] == shape and ln["agent"] == "greedy"][:1]
    assert same, "a committed greedy line"
    three = [dict(same[0], seed=s, score=0.1, final_frac_anchor=0.1, best_frac_anchor=0.1) for s in (0, 1, 2)]
    board, = L.build(three)
    assert sum(board.entries[0].per_shape[shape]) / 3 > min(board.entries[0].per_shape[shape])
    assert plots.shape_bars(board).startswith(b"\x89PNG")


def test_an_agent_is_scored_on_every_episode_of_its_board():
    """Lines of an agent's best seed alone (or its best shapes: a submission's own suite may
    name any subset of the tracks' shapes and seeds) ranked first, over one episode against
    agents scored over every seed. An episode of the board that an agent has no line for
    counts as submitting nothing."""
    lines = committed_lines()
    honest = [ln for ln in lines if ln["agent"] == "random"]
    best = max(honest, key=L.submitted_frac)
    assert L.submitted_frac(best) > 0
    board, = L.build(lines + [dict(best, agent="cherry")])
    cherry = next(e for e in board.entries if e.agent == "cherry")
    random = next(e for e in board.entries if e.agent == "random")
    assert cherry.missing == len(board.seeds) * len(board.shapes) - 1 and random.missing == 0
    assert cherry.rank > random.rank, [(e.agent, e.score) for e in board.entries]
    assert math.isclose(cherry.score, max(L.submitted_frac(best) / len(board.seeds), L.FLOOR))
    assert "missing, counted 0" in render.markdown([board], [])


def test_seconds_to_the_best_known_come_from_timed_steps_only():
    """Wall-clock time to 95% of the best known: the time of the step whose best-so-far
    first reached it, median over the episodes that timed their steps; a board whose lines
    carry no times shows none, and the wall-clock plot appears only where some do."""
    from argus_env.bench import plots
    lines = [ln for ln in committed_lines() if ln["agent"] == "greedy"]
    # at shapes the tables never measured, so that the best episode is the best known and
    # some episode reaches 95% of it
    shapes = {s: i for i, s in enumerate(dict.fromkeys(ln["shape"] for ln in lines))}
    lines = [dict(ln, shape=f"unmeasured-{ln['shape']}",
                  sizes={"M": 1001 + 2 * shapes[ln["shape"]], "N": 1003, "K": 1005})
             for ln in lines]
    board, = L.build(lines)
    entry = board.entries[0]
    assert not any(board.known_from.values())
    assert entry.seconds_to_high is None and entry.timed_traces == []
    assert plots.wall_clock_curves(board) is None
    timed = [dict(ln, step_seconds=[0.5 * (i + 1) for i in range(ln["env_steps"])])
             for ln in lines]
    board, = L.build(timed)
    entry = board.entries[0]
    assert entry.reached_high > 0, "some greedy episode reached 95% of the best known"
    target = {s: L.REACH_HIGH * board.best_known[s] for s in board.shapes}
    want = sorted(0.5 * L.first_reach(ln["trace"], target[ln["shape"]]) for ln in timed
                  if L.first_reach(ln["trace"], target[ln["shape"]]) is not None)
    assert entry.timed_high == len(want) == entry.reached_high
    assert math.isclose(entry.seconds_to_high, want[len(want) // 2] if len(want) % 2 else
                        (want[len(want) // 2 - 1] + want[len(want) // 2]) / 2)
    assert len(entry.timed_traces) == len(timed)
    assert plots.wall_clock_curves(board).startswith(b"\x89PNG")
    md = render.markdown([board], [])
    assert "seconds to 95%" in md and f"{entry.seconds_to_high:.1f} ({entry.timed_high}/" in md
