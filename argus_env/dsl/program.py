"""`Program`: a checked DSL kernel together with its text, the unit everything else handles."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path

from ..ir import nodes as ir
from ..ir.printer import print_kernel
from ..ir.rewrite import structural_hash
from .errors import DSLError
from .frontend import DEFAULT_LIMITS, Limits, parse_program
from .semantic import KernelInfo, Typer, infer


@dataclass(frozen=True)
class Program:
    """A type-checked kernel. Equal programs (ignoring source positions) compare equal."""

    kernel: ir.Kernel

    def __post_init__(self) -> None:
        self.info  # type-check now, so a Program in hand is always well-typed

    @functools.cached_property
    def info(self) -> KernelInfo:
        typer = Typer(self.kernel, types={})
        info = infer(self.kernel, typer)
        self.__dict__["typer"] = typer  # the one type check, kept for later walks
        return info

    @functools.cached_property
    def typer(self) -> Typer:
        """The typer of the program's type check, answering from the types it recorded
        (a copy from another process, whose expressions are new objects, has a fresh one)."""
        self.info
        return self.__dict__.get("typer") or Typer(self.kernel)

    def __getstate__(self) -> dict:
        state = dict(self.__dict__)
        state.pop("typer", None)  # its record is keyed by this process's objects
        return state

    @property
    def name(self) -> str:
        return self.kernel.name

    @functools.cached_property
    def text(self) -> str:
        """The program as DSL text; parses back to an equal program."""
        return print_kernel(self.kernel)

    @functools.cached_property
    def hash(self) -> str:
        return structural_hash(self.kernel)

    @classmethod
    def from_text(cls, text: str, filename: str = "<program>", line_offset: int = 0,
                  limits: Limits = DEFAULT_LIMITS) -> "Program":
        """Parse (never execute) DSL text and type-check it; errors name `filename`."""
        kernel = parse_program(text, filename, line_offset, limits)
        try:
            return cls(kernel)
        except DSLError as e:  # the type checker sees IR, which does not record the file
            raise e.with_filename(filename) from None

    @classmethod
    def from_file(cls, path: str | Path) -> "Program":
        path = Path(path)
        return cls.from_text(path.read_text(), filename=str(path))

    def with_kernel(self, kernel: ir.Kernel) -> "Program":
        return Program(kernel)

    def __eq__(self, other) -> bool:
        return isinstance(other, Program) and self.kernel == other.kernel

    def __hash__(self) -> int:
        return hash(self.kernel)
