"""The leaderboard's figures as PNG bytes (matplotlib's Agg canvas, no pyplot state).

- `learning_curves`: best fraction of the library so far against env steps, per agent:
  the mean over seeds of the mean over shapes, shaded between the seeds' min and max.
- `shape_bars`: per shape, the submitted kernel's fraction of the library per agent, the
  mean over seeds with min-max whiskers; the library is the line at 1.
"""

from __future__ import annotations

import base64
import io

from .leaderboard import counted

COLORS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2",
          "#7f7f7f", "#bcbd22", "#17becf")


def _figure(width: float, height: float):
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError as e:
        raise ImportError("the leaderboard's plots need matplotlib: pip install -e '.[plot]'") from e
    fig = Figure(figsize=(width, height), dpi=100)
    FigureCanvasAgg(fig)
    return fig


def _png(fig) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", metadata={"Software": None}, bbox_inches="tight")
    return buf.getvalue()


def _colors(board) -> dict:
    """One color per agent, the same on every board with the same agents."""
    return {a: COLORS[i % len(COLORS)] for i, a in enumerate(sorted(e.agent for e in board.entries))}


def _budget(board) -> str:
    """", budget N env steps" for a board that shares its env and track with other budgets."""
    return f", budget {counted(board.budget, 'env step')}" if board.several_budgets else ""


def data_uri(png: bytes) -> str:
    return "data:image/png;base64," + base64.b64encode(png).decode()


def learning_curves(board) -> bytes:
    fig = _figure(7.5, 3.8)
    ax = fig.add_subplot()
    colors = _colors(board)
    for e in board.entries:
        curves = list(e.curves.values())
        if not curves:
            continue
        steps = list(range(1, len(curves[0]) + 1))
        cols = list(zip(*curves))
        mean = [sum(c) / len(c) for c in cols]
        color = colors[e.agent]
        ax.fill_between(steps, [min(c) for c in cols], [max(c) for c in cols], color=color,
                        alpha=0.18, linewidth=0)
        ax.plot(steps, mean, color=color, linewidth=2,
                label=f"{e.agent} ({counted(len(curves), 'seed')})")
    ax.axhline(1.0, color="black", linewidth=0.8, linestyle="--")
    ax.set_xlabel("environment steps")
    ax.set_ylabel("best fraction of library so far")
    ax.set_title(f"{board.env_id}, {board.track} track{_budget(board)}: mean over "
                 f"{counted(len(board.shapes), 'shape')} (band: min-max over seeds)", fontsize=10)
    ax.set_xlim(1, max(board.budget, 2))
    ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)
    ax.legend(loc="lower right", fontsize=9)
    return _png(fig)


def wall_clock_curves(board) -> bytes | None:
    """Best fraction so far against wall-clock seconds, one thin line per timed episode
    (agent and environment on the machine that played it), or None when no episode of the
    board timed its steps."""
    if not any(e.timed_traces for e in board.entries):
        return None
    fig = _figure(7.5, 3.8)
    ax = fig.add_subplot()
    colors = _colors(board)
    for e in board.entries:
        for i, (secs, fracs) in enumerate(e.timed_traces):
            ax.step(secs, fracs, where="post", color=colors[e.agent], linewidth=1.2, alpha=0.7,
                    label=f"{e.agent} ({counted(len(e.timed_traces), 'episode')})"
                    if i == 0 else None)
    ax.axhline(1.0, color="black", linewidth=0.8, linestyle="--")
    ax.set_xlabel("wall-clock seconds (agent and environment)")
    ax.set_ylabel("best fraction of library so far")
    ax.set_title(f"{board.env_id}, {board.track} track{_budget(board)}: each timed episode",
                 fontsize=10)
    ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)
    ax.legend(loc="lower right", fontsize=9)
    return _png(fig)


def shape_bars(board) -> bytes:
    fig = _figure(7.5, 3.8)
    ax = fig.add_subplot()
    n = max(len(board.entries), 1)
    width = 0.8 / n
    colors = _colors(board)
    for i, e in enumerate(board.entries):
        xs, means, lo, hi = [], [], [], []
        for j, shape in enumerate(board.shapes):
            vals = e.per_shape.get(shape)
            if not vals:
                continue
            m = sum(vals) / len(vals)
            xs.append(j - 0.4 + width * (i + 0.5))
            means.append(m)
            # identical values need not average to themselves in floating point
            lo.append(max(0.0, m - min(vals)))
            hi.append(max(0.0, max(vals) - m))
        ax.bar(xs, means, width=width * 0.95, color=colors[e.agent], label=e.agent,
               yerr=[lo, hi], capsize=3, error_kw={"linewidth": 1})
    ax.axhline(1.0, color="black", linewidth=0.8, linestyle="--")
    ax.set_xticks(range(len(board.shapes)))
    ax.set_xticklabels(board.shapes, fontsize=9)
    ax.set_ylabel("submitted kernel / library")
    ax.set_title(f"{board.env_id}, {board.track} track{_budget(board)}: per shape, mean over seeds "
                 f"(whiskers: min-max)", fontsize=10)
    ax.set_ylim(bottom=0)
    ax.grid(axis="y", alpha=0.3)
    ax.legend(fontsize=9, ncol=min(n, 4))
    return _png(fig)
