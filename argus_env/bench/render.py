"""The leaderboard as Markdown and as one self-contained HTML page (inline CSS, plots as
base64 PNG): the same tables in both, the figures only in the page."""

from __future__ import annotations

import html as _html
from pathlib import Path

from .leaderboard import FLOOR, REACH, REACH_HIGH, Board, Entry, counted

HOW = ("Score: geometric mean over the track's shapes of the fraction of the task's library "
       "anchor (cuBLAS, cuDNN, ...) reached by the kernel the agent submitted, each shape's fraction the "
       f"mean over seeds (an episode that submits nothing measurable scores 0, counted as {FLOOR} "
       "in the geometric mean); spread: min-max and std over seeds of the per-seed geometric "
       f"means. Best found: the same over the best kernel measured at any step. Best known: "
       "the fastest correct program of the GPU's tables at the shape (a GPU measurement): "
       "the board's live file's, where one is joined, else the tables' own when the board "
       "was written; only where the tables never measured the shape, the best any episode "
       "reached there. "
       f"Steps to {REACH:.0%} / {REACH_HIGH:.0%}: median env step at which an episode's "
       f"best-so-far first reached that share of the best known (episodes that did / all). "
       f"Seconds to {REACH_HIGH:.0%}: the median wall-clock time from the agent's start to "
       "that step, agent and environment together on the machine that played it, over the "
       "episodes that reached it and timed their steps (episodes played by this board's own "
       "runner; a submitted line's times cannot be replayed and are not shown). Times "
       "depend on what that machine had cached: a suite shares its evaluations across "
       "episodes, so an episode meeting programs an earlier one measured runs faster; "
       "compare seconds only among episodes played alike. "
       "Live / best known: the live score over the best known, where both are GPU "
       "measurements (the best known as timed again in the live run, where a submitted "
       "kernel is that program). Invalid: "
       "invalid actions per env step. Violations: invariant violations the checker reported "
       "per episode. From table: submitted kernels whose figure was recorded on the GPU; the "
       "others are the cost model's estimates for programs the table lacks. Live: the same "
       "score over the submitted kernels timed again on the GPU against the library in the "
       "same run (a kernel that fails there, at compile time or in its numbers, counts as 0); "
       "the recorded score is the one the episodes were played with. Verified: episodes with "
       "a live figure; an agent with any episode lacking one is unverified and ranked after "
       "the verified agents, by its recorded score.")
COLUMNS = ("rank", "agent", "live score", "live / best known", "recorded score",
           "recorded seeds min-max (std)", "best found", f"steps to {REACH:.0%}",
           f"steps to {REACH_HIGH:.0%}", f"seconds to {REACH_HIGH:.0%}", "invalid / step",
           "violations / episode", "from table", "verified", "episodes")


def _live_cell(e: Entry) -> str:
    if not e.is_verified:
        return "unverified"
    failed = f" ({e.live_failures} failed)" if e.live_failures else ""
    return f"{e.live_score:.3f}{failed}"


def _row(e: Entry) -> list[str]:
    lo, hi = e.spread
    steps = f"{e.steps_to_reach:g}" if e.steps_to_reach is not None else "-"
    high = f"{e.steps_to_high:g}" if e.steps_to_high is not None else "-"
    secs = f"{e.seconds_to_high:.1f} ({e.timed_high}/{e.episodes})" \
        if e.seconds_to_high is not None else "-"
    regret = f"{e.live_regret:.3f}" if e.live_regret is not None else "-"
    return [str(e.rank), e.agent, _live_cell(e), regret, f"{e.score:.3f}",
            f"{lo:.3f}-{hi:.3f} ({e.std:.3f})",
            f"{e.best_found:.3f}", f"{steps} ({e.reached}/{e.episodes})",
            f"{high} ({e.reached_high}/{e.episodes})", secs,
            f"{e.invalid_rate:.3f}", f"{e.violations_per_episode:.1f}",
            f"{e.from_table}/{e.episodes}", f"{e.verified}/{e.episodes}",
            str(e.episodes) + (f" ({e.missing} missing, counted 0)" if e.missing else "")]


def _ranking(b: Board) -> str:
    """Which figure the board ranks by, in a sentence."""
    if b.ranked_by != "live":
        return ("Ranked by the recorded score: no live GPU figure joins this board's episodes, "
                "so every agent is unverified.")
    where = "; ".join(f"{s['file']} ({_measured_on(s)})" for s in b.live_sources)
    return (f"Ranked by the live score: the submitted kernels timed on the GPU ({where}); the "
            "recorded score beside it. Unverified agents are ranked after the verified ones, "
            "by their recorded score.")


def _measured_on(source: dict) -> str:
    prov = source.get("provenance") or {}
    parts = [prov.get("gpu") or source.get("hardware"), prov.get("date", "")[:10],
             f"commit {prov['commit'][:10]}" if prov.get("commit") else ""]
    return ", ".join(p for p in parts if p)


def _episode_rows(b: Board) -> tuple[list[str], list[list[str]]]:
    head = ["agent", "shape", "seed", "recorded", "live", "live status"]
    rows = []
    for e in b.entries:
        for shape, seed, recorded, fig in sorted(e.episode_rows, key=lambda r: (r[0], r[1])):
            if fig is None:
                live, status = "-", "unverified"
            else:
                live = f"{fig['frac_anchor']:.3f}" if fig["ok"] else "0"
                status = fig["status"] if fig["ok"] else f"failed: {fig['status']}"
            rows.append([e.agent, shape, str(seed), f"{recorded:.3f}", live, status])
    return head, rows


def _shape_rows(b: Board, live: bool = False) -> tuple[list[str], list[list[str]]]:
    """Recorded fractions per shape (with `live`: the live ones, "-" where unverified)."""
    head = ["agent"] + b.shapes
    rows = []
    for e in b.entries:
        cells = [e.agent]
        for s in b.shapes:
            v = (e.live_per_shape if live else e.per_shape).get(s)
            if live and v is not None and len(v) < len(e.per_shape.get(s, [])):
                v = None   # some of this shape's episodes have no live figure
            cells.append(f"{sum(v) / len(v):.3f} [{min(v):.3f}, {max(v):.3f}]" if v else "-")
        rows.append(cells)
    if not live:
        rows.append(["best known"] + [_known_cell(b, s) for s in b.shapes])
    return head, rows


def _known_cell(b: Board, shape: str) -> str:
    known = b.known_from.get(shape)
    if not known:
        return f"{b.best_known[shape]:.3f} (best episode)"
    what = ", ".join(str(x) for x in (known.get("table"), (known.get("recorded") or "")[:10],
                                       (known.get("program_hash") or "")[:12]) if x)
    again = known.get("live_frac_anchor")
    again = f"; {float(again):.3f} timed again in the live run" if again else ""
    return f"{b.best_known[shape]:.3f} (GPU: {what}{again})"


def _title(b: Board) -> str:
    return b.title


def _setting(b: Board) -> str:
    estimates = f" ({b.estimator} model estimates where the table lacks a program)" \
        if b.estimator and b.measure == "table" else \
        (f" ({b.estimator} model estimates)" if b.estimator else "")
    return (f"measure={b.measure} on {b.hardware}{estimates}, "
            f"budget {counted(b.budget, 'env step')}, "
            f"seeds {', '.join(map(str, b.seeds))}, shapes {', '.join(b.shapes)}")


def _provenance(boards: list[Board]) -> list[tuple[str, str]]:
    if not boards:
        return []
    src = boards[0].sources
    hashes = src.get("hashes") or {}
    digest = lambda v: isinstance(v, str) and len(v) == 64   # noqa: E731
    out = [(f"{k} sha256" if digest(v) else k.replace("_", " "), v[:16] if digest(v) else str(v))
           for k, v in hashes.items()]
    versions = src.get("versions") or {}
    out.append(("versions", ", ".join(f"{k} {v}" for k, v in versions.items())))
    for s in boards[0].live_sources:
        prov = s.get("provenance") or {}
        keys = ("gpu", "driver", "torch", "triton", "cuda", "date", "commit", "protocol")
        out.append((f"live figures {s['file']}",
                    "; ".join(f"{k} {prov[k]}" for k in keys if prov.get(k))))
    return out


def _md_table(head: list[str], rows: list[list[str]]) -> list[str]:
    return ["| " + " | ".join(head) + " |", "| " + " | ".join("---" for _ in head) + " |"] + \
        ["| " + " | ".join(r) + " |" for r in rows]


def markdown(boards: list[Board], sources: list[str]) -> str:
    out = ["# Argus leaderboard", ""]
    if sources:
        out += [f"Results: {', '.join(f'`{s}`' for s in sources)}. Each line replays with "
                "`argus validate`.", ""]
    out += [HOW, ""]
    for b in boards:
        out += [f"## {_title(b)}", "", _setting(b) + ".", "", _ranking(b), ""]
        out += _md_table(list(COLUMNS), [_row(e) for e in b.entries]) + [""]
        head, rows = _shape_rows(b)
        out += ["Submitted kernel / library per shape, recorded, mean over seeds [min, max]:", ""]
        out += _md_table(head, rows) + [""]
        if b.ranked_by == "live":
            head, rows = _shape_rows(b, live=True)
            out += ["Submitted kernel / library per shape, live, mean over seeds [min, max]:", ""]
            out += _md_table(head, rows) + [""]
        head, rows = _episode_rows(b)
        out += ["Episodes: the submitted kernel's figure, recorded and live:", ""]
        out += _md_table(head, rows) + [""]
    prov = _provenance(boards)
    if prov:
        out += ["## Provenance", ""] + [f"- {k}: `{v}`" for k, v in prov] + [""]
    return "\n".join(out)


CSS = """
body { font-family: system-ui, -apple-system, "Segoe UI", sans-serif; margin: 2em auto;
       max-width: 1100px; color: #222; line-height: 1.45; padding: 0 1em; }
table { border-collapse: collapse; margin: 0.8em 0 1.4em; font-size: 0.92em; }
th, td { border: 1px solid #ccc; padding: 0.3em 0.6em; text-align: right; }
th { background: #f1f3f5; }
table.ranking td:nth-child(2), table.ranking th:nth-child(2) { text-align: left; }
table.shapes td:first-child, table.shapes th:first-child { text-align: left; }
tr.first td { font-weight: 600; background: #f4fbf4; }
.note { color: #555; font-size: 0.9em; } .plots { display: flex; flex-wrap: wrap; gap: 1em; }
img.plot { width: 520px; max-width: 100%; border: 1px solid #ddd; }
code { background: #f4f4f4; padding: 0 0.25em; }
"""


def _html_table(head, rows, cls: str = "", first: bool = False) -> str:
    e = _html.escape
    h = "".join(f"<th>{e(c)}</th>" for c in head)
    body = "".join(f"<tr{' class=first' if first and i == 0 else ''}>" +
                   "".join(f"<td>{e(c)}</td>" for c in r) + "</tr>" for i, r in enumerate(rows))
    return f"<table class='{cls}'><thead><tr>{h}</tr></thead><tbody>{body}</tbody></table>"


def html(boards: list[Board], sources: list[str]) -> str:
    from .plots import data_uri, learning_curves, shape_bars, wall_clock_curves
    e = _html.escape
    parts = ["<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>",
             "<title>Argus leaderboard</title>", f"<style>{CSS}</style></head><body>",
             "<h1>Argus leaderboard</h1>"]
    if sources:
        parts.append("<p>Results: " + ", ".join(f"<code>{e(s)}</code>" for s in sources) +
                     ". Each line replays with <code>argus validate</code>.</p>")
    parts.append(f"<p class='note'>{e(HOW)}</p>")
    for i, b in enumerate(boards):
        parts += [f"<h2 id='board-{i}'>{e(_title(b))}</h2>", f"<p>{e(_setting(b))}.</p>",
                  f"<p><strong>{e(_ranking(b))}</strong></p>",
                  _html_table(COLUMNS, [_row(x) for x in b.entries], "ranking", first=True)]
        head, rows = _shape_rows(b)
        parts += ["<p>Submitted kernel / library per shape, recorded, mean over seeds "
                  "[min, max]:</p>", _html_table(head, rows, "shapes")]
        if b.ranked_by == "live":
            head, rows = _shape_rows(b, live=True)
            parts += ["<p>Submitted kernel / library per shape, live, mean over seeds "
                      "[min, max]:</p>", _html_table(head, rows, "shapes")]
        head, rows = _episode_rows(b)
        parts += ["<details><summary>Episodes: the submitted kernel's figure, recorded and "
                  "live</summary>", _html_table(head, rows, "shapes"), "</details>"]
        parts += ["<div class='plots'>",
                  f"<img class='plot' alt='learning curves, {e(_title(b))}' "
                  f"src='{data_uri(learning_curves(b))}'>",
                  f"<img class='plot' alt='per-shape results, {e(_title(b))}' "
                  f"src='{data_uri(shape_bars(b))}'>"]
        timed = wall_clock_curves(b)
        if timed is not None:
            parts.append(f"<img class='plot' alt='best so far against wall-clock time, "
                         f"{e(_title(b))}' src='{data_uri(timed)}'>")
        parts.append("</div>")
    prov = _provenance(boards)
    if prov:
        parts.append("<h2>Provenance</h2><ul>" + "".join(
            f"<li>{e(k)}: <code>{e(v)}</code></li>" for k, v in prov) + "</ul>")
    parts.append("</body></html>\n")
    return "\n".join(parts)


def write(boards: list[Board], out_dir: str | Path, sources: list[str] | None = None) -> dict:
    """Write `leaderboard.md` and `leaderboard.html` into `out_dir`; their paths."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    md, page = out / "leaderboard.md", out / "leaderboard.html"
    md.write_text(markdown(boards, sources or []))
    page.write_text(html(boards, sources or []))
    return {"markdown": md, "html": page}
