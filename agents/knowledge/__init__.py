"""A curated knowledge base of GPU optimization techniques, for the LLM planner's prompts.

Each entry is a Markdown file in `entries/` with YAML front matter:

    ---
    id: split-k
    title: Split-K (splitting the reduction over K across programs)
    tasks: [gemm]
    transforms: [split_k, combine]       # names from the task's catalog (may be empty)
    invariants: [coverage, exactly_once]  # names from argus_env.check.report.INVARIANTS
    keywords: [decode, partial sums]
    hint: "split_k(n) alone leaves the partial sums uncombined: apply combine('atomic') next."
    ---
    ## When it helps ... ## What it costs ... ## Invariants ... ## In Argus ...

`hint` is the one line a small model sees; the body is what retrieval indexes and what a
larger model may read. Two optional keys make an entry actionable for a policy without a
model (the scripted planner, `agents/llm/scripted.py`):

    plans:                                  # what to do, when, and what it should reach
      - tasks: [gemm]                       # the tasks it is written for (default: the entry's)
        when: "M <= 64"                     # a condition (knowledge/conditions.py)
        actions: ["tile_m(32)", "split_k(4)"]   # catalog calls, in an order that keeps each legal
        expect: "min(1.1, frac * sms / (cdiv(M, tile_m) * cdiv(N, tile_n)))"
                                            # fraction of the library expected after the plan
    repairs:                                # what fixes a violation the checker reports
      - invariant: exactly_once
        match: "without an atomic add"      # a phrase of the violation's message (optional)
        actions: ["combine('atomic')"]
 `load_entries()` reads and validates them; `retrieve.Retriever`
ranks them for an observation.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

import yaml

ENTRIES_DIR = Path(__file__).parent / "entries"


@dataclass(frozen=True)
class Plan:
    """A sequence of catalog calls the entry recommends, when `when` holds, expected to reach
    the fraction of the library `expect` evaluates to (both expressions over the situation:
    `knowledge/conditions.py`)."""

    actions: tuple[str, ...]
    when: str = "1"
    expect: str = "frac"
    tasks: tuple[str, ...] = ()    # the tasks it is written for (default: the entry's)


@dataclass(frozen=True)
class Repair:
    """Catalog calls that fix a violation of `invariant` whose message contains `match`."""

    invariant: str
    actions: tuple[str, ...]
    match: str = ""


@dataclass(frozen=True)
class Entry:
    """One technique: what it is for, what it costs, which invariants and actions it touches."""

    id: str
    title: str
    hint: str
    body: str
    tasks: tuple[str, ...] = ()
    transforms: tuple[str, ...] = ()
    invariants: tuple[str, ...] = ()
    keywords: tuple[str, ...] = field(default=())
    path: str = ""
    plans: tuple[Plan, ...] = ()
    repairs: tuple[Repair, ...] = ()

    def document(self) -> str:
        """The text retrieval indexes: title, keywords, invariants, actions, hint and body."""
        return "\n".join([self.title, "keywords: " + ", ".join(self.keywords),
                          "invariants: " + ", ".join(self.invariants),
                          "transformations: " + ", ".join(self.transforms), self.hint, self.body])

    def short(self) -> str:
        """One line for a prompt."""
        return f"{self.title}: {self.hint}"


def parse_entry(text: str, path: str = "<text>") -> Entry:
    """An entry from Markdown with front matter; a clear ValueError when malformed."""
    if not text.startswith("---\n") or "\n---\n" not in text[4:]:
        raise ValueError(f"{path}: an entry starts with '---' front matter closed by '---'")
    head, body = text[4:].split("\n---\n", 1)
    try:
        meta = yaml.safe_load(head) or {}
    except yaml.YAMLError as e:
        raise ValueError(f"{path}: front matter is not valid YAML: {e}") from None
    missing = [k for k in ("id", "title", "hint") if not meta.get(k)]
    if missing:
        raise ValueError(f"{path}: front matter lacks {', '.join(missing)}")
    as_tuple = lambda key: tuple(str(x) for x in (meta.get(key) or ()))  # noqa: E731
    return Entry(str(meta["id"]), str(meta["title"]), str(meta["hint"]).strip(), body.strip(),
                 as_tuple("tasks"), as_tuple("transforms"), as_tuple("invariants"),
                 as_tuple("keywords"), path, _plans(meta, path), _repairs(meta, path))


def _calls(item: dict, path: str, what: str) -> tuple[str, ...]:
    calls = item.get("actions")
    if not isinstance(calls, list) or not calls or not all(isinstance(c, str) for c in calls):
        raise ValueError(f"{path}: each of {what} needs `actions`, a non-empty list of calls")
    return tuple(calls)


def _plans(meta: dict, path: str) -> tuple[Plan, ...]:
    from .conditions import parse
    out = []
    for item in meta.get("plans") or ():
        if not isinstance(item, dict) or set(item) - {"when", "actions", "expect", "tasks"}:
            raise ValueError(f"{path}: a plan is a mapping of when, actions, expect and tasks")
        tasks = tuple(str(t) for t in (item.get("tasks") or meta.get("tasks") or ()))
        plan = Plan(_calls(item, path, "plans"), str(item.get("when", "1")),
                    str(item.get("expect", "frac")), tasks)
        for text in (plan.when, plan.expect):
            try:
                parse(text)
            except (ValueError, SyntaxError) as e:
                raise ValueError(f"{path}: plan expression {text!r}: {e}") from None
        out.append(plan)
    return tuple(out)


def _repairs(meta: dict, path: str) -> tuple[Repair, ...]:
    out = []
    for item in meta.get("repairs") or ():
        if not isinstance(item, dict) or not item.get("invariant") or \
                set(item) - {"invariant", "match", "actions"}:
            raise ValueError(f"{path}: a repair is a mapping of invariant, match and actions")
        out.append(Repair(str(item["invariant"]), _calls(item, path, "repairs"),
                          str(item.get("match") or "")))
    return tuple(out)


@lru_cache(maxsize=4)
def load_entries(folder: str | None = None) -> tuple[Entry, ...]:
    """Every entry in `folder` (default: the shipped knowledge base), sorted by id."""
    root = Path(folder) if folder else ENTRIES_DIR
    entries = [parse_entry(p.read_text(encoding="utf-8"), str(p)) for p in sorted(root.glob("*.md"))]
    ids = [e.id for e in entries]
    dupes = sorted({i for i in ids if ids.count(i) > 1})
    if dupes:
        raise ValueError(f"duplicate knowledge entry ids: {dupes}")
    return tuple(entries)


def get_entry(entry_id: str) -> Entry:
    for e in load_entries():
        if e.id == entry_id:
            return e
    import difflib
    close = difflib.get_close_matches(entry_id, [e.id for e in load_entries()], 1)
    raise KeyError(f"no knowledge entry {entry_id!r}" + (f"; did you mean {close[0]!r}?" if close else ""))
