"""Errors raised by the DSL front end and its semantic layer.

Every error carries the source line (and file) of the construct it is about, so an
agent or a person can go straight to it.
"""

from __future__ import annotations


class DSLError(Exception):
    """Base class: a DSL program was rejected. `line` is 1-based, or 0 when unknown."""

    kind = "dsl error"

    def __init__(self, message: str, line: int = 0, col: int = 0, filename: str = "<program>"):
        self.message = message
        self.line = line
        self.col = col
        self.filename = filename
        where = f"{filename}:{line}: " if line else ""
        super().__init__(f"{where}{message}")

    def with_filename(self, filename: str) -> "DSLError":
        """The same error, reported against `filename` (the semantic layer sees only IR,
        which records lines but not the file they came from)."""
        return type(self)(self.message, self.line, self.col, filename)

    def to_dict(self) -> dict:
        return {"kind": self.kind, "message": self.message, "line": self.line,
                "col": self.col, "file": self.filename}


class DSLSyntaxError(DSLError):
    """The text uses a construct outside the DSL's whitelist, or is not valid Python syntax."""

    kind = "syntax"


class DSLLimitError(DSLError):
    """The program exceeds a size limit (nodes, statements, nesting, unrolled trip counts)."""

    kind = "limit"


class DSLTypeError(DSLError):
    """An op got operands of the wrong shape or dtype, or an undefined name."""

    kind = "type"
