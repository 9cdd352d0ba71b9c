"""The planner's prompt: the observation as text, under a token budget.

Sections, in the order they are kept when the budget is short: the task card and shape,
the current program (its one-line summary, or the whole DSL text), the checker's report,
performance, the last step, retrieved knowledge, episodic memory, the legal actions, and
(for generation) the transformation list with its docs. Each section is a few lines; a
section that does not fit is dropped whole, and the transcript records which were.
"""

from __future__ import annotations

import re

SYSTEM = ("You optimize a GPU kernel written in a tile DSL. Each step you "
          "apply one transformation. The checker proves data-flow invariants or reports a "
          "violation with a counterexample; fix violations before anything else. Answer with "
          "exactly one legal call, such as tile_m(128), and nothing else.")
SYSTEM_FREE = SYSTEM + (" You may instead answer with a whole new program in a ```python fenced "
                        "block, written in the same DSL.")


def summary_line(program: str) -> str:
    """The program's docstring line ("GEMM: 64x64x32 tiles, 4 warps.") or its header."""
    m = re.search(r'"""(.*?)"""', program, re.S)
    if m:
        return " ".join(m.group(1).split())
    return " ".join(program.strip().splitlines()[:1])[:200]


def shape_words(sizes: dict) -> str:
    """Words that steer retrieval and the model: decode / ragged / large."""
    vals = list(sizes.values())
    words = []
    if sizes.get("M", 1 << 30) <= 64:
        words.append("decode, small M, memory bound")
    if any(v > 64 and v % 64 for v in vals):
        words.append("ragged (sizes not multiples of 64)")
    if min(vals) >= 2048:
        words.append("large, compute bound")
    return ", ".join(words)


def report_lines(report_text: str, limit: int = 2, width: int = 260) -> list[str]:
    # the checker's wall time ("14 checks proven, 349 ms") says nothing about the program
    # and would make the prompt, hence the model's scores, differ between identical runs
    lines = [re.sub(r",\s*\d+(\.\d+)?\s*ms\)", ")", ln) for ln in report_text.strip().splitlines()]
    if len(lines) <= 1:
        return lines
    body = [ln[:width] + ("..." if len(ln) > width else "") for ln in lines[1:1 + limit]]
    more = len(lines) - 1 - limit
    return [lines[0]] + body + ([f"- ... {more} more"] if more > 0 else [])


def perf_line(perf, measured: bool) -> str:
    frac, best = float(perf[2]), float(perf[3])
    if not measured:
        return f"Performance: not measured (the program has violations or failed); best so far {best:.2f}x library"
    return f"Performance: {frac:.2f}x the library; best so far {best:.2f}x"


def build_messages(sections: list[tuple[str, str, int]], count, budget: int,
                   system: str) -> tuple[list[dict], dict]:
    """Chat messages holding the sections that fit in `budget` tokens (by `count`).

    `sections` are (name, text, priority) in reading order; they are admitted by
    priority (0 first, always kept) and shown in reading order."""
    used = count(system)
    keep: set[int] = set()
    dropped = []
    for i in sorted(range(len(sections)), key=lambda j: sections[j][2]):
        name, text, prio = sections[i]
        n = count(text) + 1
        if prio == 0 or used + n <= budget:
            keep.add(i)
            used += n
        else:
            dropped.append(name)
    kept = [sections[i] for i in range(len(sections)) if i in keep]
    user = "\n".join(text for _, text, _ in kept)
    info = {"sections": [n for n, _, _ in kept], "dropped": dropped, "tokens": used}
    return [{"role": "system", "content": system}, {"role": "user", "content": user}], info
