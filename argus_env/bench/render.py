"""The leaderboard as Markdown and as one self-contained HTML page (inline CSS, plots as
base64 PNG): the same tables in both, the figures only in the page."""

from __future__ import annotations

import html as _html
from pathlib import Path

from .leaderboard import FLOOR, REACH, Board, Entry, counted

HOW = ("Score: geometric mean over the track's shapes of the fraction of the task's library "
       "anchor (cuBLAS, cuDNN, ...) reached by the kernel the agent submitted, each shape's fraction the "
       f"mean over seeds (an episode that submits nothing measurable scores 0, counted as {FLOOR} "
       "in the geometric mean); spread: min-max and std over seeds of the per-seed geometric "
       f"means. Best found: the same over the best kernel measured at any step. Steps to "
       f"{REACH:.0%}: median env step at which an episode's best-so-far first reached {REACH:.0%} "
       "of the best any episode reached on that shape (episodes that did / all). Invalid: "
       "invalid actions per env step. Violations: invariant violations the checker reported "
       "per episode. From table: submitted kernels whose figure was recorded on the GPU; the "
       "others are the cost model's estimates for programs the table lacks.")
COLUMNS = ("rank", "agent", "score", "seeds min-max (std)", "best found",
           f"steps to {REACH:.0%}", "invalid / step", "violations / episode", "from table",
           "episodes")


def _row(e: Entry) -> list[str]:
    lo, hi = e.spread
    steps = f"{e.steps_to_reach:g}" if e.steps_to_reach is not None else "-"
    return [str(e.rank), e.agent, f"{e.score:.3f}", f"{lo:.3f}-{hi:.3f} ({e.std:.3f})",
            f"{e.best_found:.3f}", f"{steps} ({e.reached}/{e.episodes})",
            f"{e.invalid_rate:.3f}", f"{e.violations_per_episode:.1f}",
            f"{e.from_table}/{e.episodes}", str(e.episodes)]


def _shape_rows(b: Board) -> tuple[list[str], list[list[str]]]:
    head = ["agent"] + b.shapes
    rows = []
    for e in b.entries:
        cells = [e.agent]
        for s in b.shapes:
            v = e.per_shape.get(s)
            cells.append(f"{sum(v) / len(v):.3f} [{min(v):.3f}, {max(v):.3f}]" if v else "-")
        rows.append(cells)
    rows.append(["best known"] + [f"{b.best_known[s]:.3f}" for s in b.shapes])
    return head, rows


def _title(b: Board) -> str:
    return b.title


def _setting(b: Board) -> str:
    return (f"measure={b.measure} on {b.hardware}, budget {counted(b.budget, 'env step')}, "
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
        out += [f"## {_title(b)}", "", _setting(b) + ".", ""]
        out += _md_table(list(COLUMNS), [_row(e) for e in b.entries]) + [""]
        head, rows = _shape_rows(b)
        out += ["Submitted kernel / library per shape, mean over seeds [min, max]:", ""]
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
    from .plots import data_uri, learning_curves, shape_bars
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
                  _html_table(COLUMNS, [_row(x) for x in b.entries], "ranking", first=True)]
        head, rows = _shape_rows(b)
        parts += ["<p>Submitted kernel / library per shape, mean over seeds [min, max]:</p>",
                  _html_table(head, rows, "shapes"), "<div class='plots'>",
                  f"<img class='plot' alt='learning curves, {e(_title(b))}' "
                  f"src='{data_uri(learning_curves(b))}'>",
                  f"<img class='plot' alt='per-shape results, {e(_title(b))}' "
                  f"src='{data_uri(shape_bars(b))}'>", "</div>"]
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
