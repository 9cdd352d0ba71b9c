"""Transformation spaces: the actions a task offers and how they rewrite its programs.

A task's space holds a configuration (a frozen dataclass), renders it to DSL text, and
applies transformations to it. Transformations are data: a name, a parameter, the values
it may take, and the preconditions that make an application illegal. An illegal
application raises `TransformError` (which the environment turns into a masked action).
Some transformations are deliberately primitive: `split_k` alone leaves the partial
sums uncombined, and the invariant checker says so until `combine` is applied.
"""

from __future__ import annotations

import ast
import dataclasses
from dataclasses import dataclass
from typing import Any, Callable

from .dsl.program import Program


class TransformError(ValueError):
    """A transformation cannot be applied to the current program."""

    def __init__(self, action: str, reason: str, legal: list[str] | None = None):
        self.action = action
        self.reason = reason
        self.legal = legal or []
        hint = f"; legal now: {', '.join(self.legal)}" if self.legal else ""
        super().__init__(f"{action}: {reason}{hint}")


@dataclass(frozen=True)
class Transform:
    """One transformation of the catalog: sets config field `field` to one of `values`.

    `requires(config, value, ctx)` returns the reason the application is illegal, or None.
    """

    name: str
    field: str
    values: tuple
    doc: str
    requires: Callable[[Any, Any, dict], str | None] | None = None
    primitive: bool = False  # leaves an invariant broken until another transform

    def actions(self) -> list[tuple[str, Any]]:
        return [(self.name, v) for v in self.values]


SPECIAL = ("undo", "submit")


@dataclass(frozen=True)
class Action:
    """A parsed action: a transformation with its value, `undo`, `submit`, or a program."""

    kind: str                 # "transform", "undo", "submit", "program"
    name: str = ""
    value: Any = None
    program: Program | None = None

    def label(self) -> str:
        if self.kind == "transform":
            return f"{self.name}({self.value!r})"
        if self.kind == "program":
            return "program(...)"
        return f"{self.kind}()"


class TaskSpace:
    """Base class: a task's configuration space and its transformation catalog."""

    transforms: tuple[Transform, ...] = ()

    def baseline(self):
        raise NotImplementedError

    def render(self, config) -> str:
        raise NotImplementedError

    # ------------------------------------------------------------ derived
    def program(self, config) -> Program:
        """The program of `config` (memoised: configurations are hashable)."""
        cache = self.__dict__.setdefault("_programs", {})
        if config not in cache:
            cache[config] = Program.from_text(self.render(config), filename="<transformed>")
        return cache[config]

    def catalog(self) -> list[tuple[str, Any]]:
        """Every discrete action: (transform, value) pairs, then undo and submit."""
        out = [a for t in self.transforms for a in t.actions()]
        return out + [(s, None) for s in SPECIAL]

    def transform(self, name: str) -> Transform:
        for t in self.transforms:
            if t.name == name:
                return t
        import difflib
        close = difflib.get_close_matches(name, [t.name for t in self.transforms] + list(SPECIAL), 1)
        hint = f"; did you mean {close[0]}?" if close else ""
        raise TransformError(name, f"no such transformation{hint}")

    def why_illegal(self, config, name: str, value, ctx: dict) -> str | None:
        """The reason applying `name(value)` is illegal now, or None if it is legal."""
        if config is None:
            return "the program was written as text; transformations apply to the " \
                   "task's own programs (use undo, or reset)"
        t = self.transform(name)
        if value not in t.values:
            return f"value {value!r} is not one of {list(t.values)}"
        if getattr(config, t.field) == value:
            return f"{t.field} is already {value!r}"
        return t.requires(config, value, ctx) if t.requires else None

    def legal(self, config, ctx: dict, skip=()) -> list[tuple[str, Any]]:
        """The transformations legal now (not `undo`/`submit`, nor those named in `skip`)."""
        return [(n, v) for n, v in self.catalog() if n not in SPECIAL and n not in skip
                and self.why_illegal(config, n, v, ctx) is None]

    def apply(self, config, name: str, value, ctx: dict):
        reason = self.why_illegal(config, name, value, ctx)
        if reason is not None:
            raise TransformError(f"{name}({value!r})", reason)
        new = dataclasses.replace(config, **{self.transform(name).field: value})
        return self.after(new, name)

    def after(self, config, name: str):
        """Hook: keep dependent fields consistent after a transformation."""
        return config

    def parse_call(self, text: str) -> Action:
        """`split_k(4)`, `tma(True)`, `undo()`, `submit()`: parsed, never evaluated."""
        try:
            tree = ast.parse(text.strip(), mode="eval")
        except SyntaxError as e:
            raise TransformError(text.strip()[:40], f"not a transformation call: {e.msg}") from None
        call = tree.body
        if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Name)) or call.keywords:
            raise TransformError(text.strip()[:40], "write a call such as split_k(4) or undo()")
        name = call.func.id
        if name in SPECIAL:
            if call.args:
                raise TransformError(name, "takes no arguments")
            return Action(name)
        self.transform(name)
        if len(call.args) != 1 or not isinstance(call.args[0], ast.Constant):
            raise TransformError(name, "takes one literal argument, e.g. "
                                 f"{name}({self.transform(name).values[0]!r})")
        return Action("transform", name, call.args[0].value)
