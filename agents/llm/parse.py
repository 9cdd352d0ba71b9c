"""Reading a model's answer: one transformation call or one fenced DSL program, or an error.

The answer is untrusted text. Nothing in it is evaluated: calls are found with a regular
expression over known transformation names and parsed by the task space's `parse_call`
(an AST read that accepts one literal argument), programs by the DSL's whitelisting front
end (`Program.from_text`, which parses and never executes). Anything else becomes a
`ParseResult` with an `error` that the planner writes to the transcript before acting
with a fallback.
"""

from __future__ import annotations

import re
import string
from dataclasses import dataclass

MAX_ANSWER_CHARS = 20_000
_PRINTABLE = frozenset(string.printable)
_FENCE = re.compile(r"```[ \t]*([A-Za-z0-9_+-]*)[ \t]*\n(.*?)(?:```|\Z)", re.S)
_CALL = re.compile(r"(?<![A-Za-z0-9_.])([a-z_][a-z0-9_]*)\s*\(([^()\n]{0,40})\)")


@dataclass
class ParseResult:
    """`kind` is "call" (then `action` is the canonical call, e.g. "split_k(4)"),
    "program" (then `action` is the DSL text), or "error" (then `error` says why)."""

    kind: str
    action: str | None = None
    error: str | None = None


def parse_answer(answer, space, legal: list[str], allow_programs: bool = True) -> ParseResult:
    """The action an answer names, checked against the legal calls of this state."""
    if not isinstance(answer, str):
        return ParseResult("error", error=f"the answer is a {type(answer).__name__}, not text")
    if not answer.strip():
        return ParseResult("error", error="empty answer")
    if len(answer) > MAX_ANSWER_CHARS:
        return ParseResult("error", error=f"over-long answer ({len(answer)} characters, "
                                          f"limit {MAX_ANSWER_CHARS}); not read")
    program = _fenced_program(answer)
    if program is not None:
        if not allow_programs:
            return ParseResult("error", error="the answer is a program, but programs are off "
                                              "(discrete environment or allow_programs=False)")
        return _check_program(program)
    return _find_call(answer, space, legal)


def _fenced_program(answer: str) -> str | None:
    """The first fenced block that looks like a DSL kernel (or any code block with `def`)."""
    for m in _FENCE.finditer(answer):
        body = m.group(2)
        if "@A.kernel" in body or re.search(r"^\s*(def|import|from|class)\s", body, re.M):
            return body.strip("\n")
    return None


def _check_program(text: str) -> ParseResult:
    from argus_env.dsl.errors import DSLError
    from argus_env.dsl.program import Program
    bad = sorted({repr(ch) for ch in text if ch not in _PRINTABLE})
    if bad:
        return ParseResult("error", error=f"the program holds non-printable characters {', '.join(bad[:5])}")
    try:
        Program.from_text(text, filename="<model answer>")
    except DSLError as e:
        return ParseResult("error", error=f"the fenced program is rejected by the DSL front end: "
                                          f"{str(e).splitlines()[0][:300]}")
    except (SyntaxError, ValueError, RecursionError, MemoryError) as e:
        return ParseResult("error", error=f"the fenced program does not parse: {type(e).__name__}: "
                                          f"{str(e)[:200]}")
    return ParseResult("program", action=text)


def _names(space) -> set[str]:
    return {t.name for t in space.transforms} | {"undo", "submit"}


def _find_call(answer: str, space, legal: list[str]) -> ParseResult:
    """A line that is just a call wins; else the first known call anywhere."""
    from argus_env.space import TransformError
    names = _names(space)
    lines = [ln.strip().strip("`").strip() for ln in answer.splitlines()]
    whole = [ln for ln in lines if _CALL.fullmatch(ln)]
    found = [m for ln in whole for m in _CALL.finditer(ln)] + list(_CALL.finditer(answer))
    known = [m for m in found if m.group(1) in names]
    if not known:
        unknown = sorted({m.group(1) for m in found})[:4]
        hint = f" (unknown names: {', '.join(unknown)})" if unknown else ""
        return ParseResult("error", error="no transformation call in the answer" + hint +
                                          f": {_excerpt(answer)}")
    first_error = None
    legal_set = set(legal)
    for m in known:
        try:
            act = space.parse_call(m.group(0))
        except TransformError as e:
            first_error = first_error or f"{m.group(0)[:60]}: {e.reason}"
            continue
        label = act.label()
        if label in legal_set:
            return ParseResult("call", action=label)
        if act.kind == "transform" and act.value not in space.transform(act.name).values:
            why = f"{label}: value {act.value!r} is not one of {list(space.transform(act.name).values)}"
        else:
            why = f"{label} is not legal now (legal: {', '.join(legal[:8])}{', ...' if len(legal) > 8 else ''})"
        first_error = first_error or why
    return ParseResult("error", error=first_error or "no legal call in the answer")


def _excerpt(answer: str, n: int = 80) -> str:
    flat = " ".join(answer.split())
    flat = "".join(ch if ch in _PRINTABLE else "?" for ch in flat)
    return repr(flat[:n] + ("..." if len(flat) > n else ""))
