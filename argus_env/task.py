"""The task interface and registry: what the core needs to know about a kernel task.

A task (GEMM, attention, MoE) lives in `tasks/<name>/` and registers itself here; the core
never imports a task by name except through `get_task`, which imports the task package on
first use. A task supplies its DSL programs, its torch reference, its shape suite, input
generation, tolerances and the FLOP/byte formula used to turn a time into throughput.
"""

from __future__ import annotations

import difflib
import importlib
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Mapping

from .dsl.program import Program
from .registry import packages

Sizes = Mapping[str, int]


class TaskInterfaceError(ValueError):
    """A program does not take the tensors its task passes."""


@dataclass(frozen=True)
class ShapeCase:
    """One problem shape of a task's suite, with the split it belongs to."""

    name: str
    sizes: dict[str, int]
    split: str = "train"  # "train" or "test" (held out)

    def label(self) -> str:
        return self.name or "x".join(str(v) for v in self.sizes.values())


@dataclass(frozen=True)
class Tolerance:
    """Elementwise closeness: |out - ref| <= atol * rms(ref) + rtol * |ref|, the rms taken
    over the whole output, or over its last `row_dims` dims when rows have different
    scales (a causal attention row averages over as many keys as its position)."""

    rtol: float
    atol: float
    row_dims: int = 0


class Task:
    """Base class of kernel tasks. Subclasses fill in the class attributes and methods."""

    name: str = ""
    description: str = ""
    programs: dict[str, Path] = {}
    shapes: tuple[ShapeCase, ...] = ()
    cpu_shapes: tuple[dict[str, int], ...] = ()  # small, ragged: correctness on the interpreter
    tolerance: Tolerance = Tolerance(2e-2, 2e-2)
    #: tensors every program of the task must take: name -> (dims, dtype)
    signature: dict[str, tuple[tuple[str, ...], str]] = {}
    #: coverage every element of an output must end with, whatever the program says:
    #: tensor -> {tag name: (lo, hi)}, bounds as DSL expressions over size names
    store_coverage: dict[str, dict[str, tuple[str, str]]] = {}
    #: the reduced shape at which environments check numerics under the interpreter
    env_check_shape: dict[str, int] = {}
    #: measured library throughput per shape (JSON with a "tflops" mapping), and the dims
    #: that name a shape in it
    anchors_file = None
    anchor_dims: tuple[str, ...] = ()
    #: the transformation space (`argus_env.space.TaskSpace`), if the task has one
    space = None
    #: `cost_model(program, sizes, profile) -> {"ms", "tflops", ...}` when the generic
    #: GEMM-shaped analytic model does not fit the task (attention), else None
    cost_model = None
    #: the task's invariant pack (`argus_env.check.pack.InvariantPack`): its own invariant
    #: classes and the checker rules for them; None when the core invariants say it all
    invariants = None

    def check_program(self, program: Program) -> None:
        """Raise `TaskInterfaceError` unless `program` has the task's tensor signature."""
        got = {p.name: (p.dims, p.dtype) for p in program.kernel.tensors}
        for name, (dims, dtype) in self.signature.items():
            if name not in got:
                raise TaskInterfaceError(f"{self.name}: the program must take tensor `{name}` "
                                         f"with dims {list(dims)} ({dtype})")
            if got[name] != (dims, dtype):
                raise TaskInterfaceError(
                    f"{self.name}: tensor `{name}` must be A.Tensor[A.{dtype}, "
                    f"{', '.join(repr(d) for d in dims)}], got dims {list(got[name][0])} "
                    f"({got[name][1]})")
        # tensors a launch writes for a later launch (workspaces) are the program's own
        extra = sorted(set(got) - set(self.signature) - set(program.info.workspaces))
        if extra:
            raise TaskInterfaceError(f"{self.name}: unexpected tensor parameter `{extra[0]}`; "
                                     f"the task passes {', '.join(self.signature)}")
        # a workspace may take any shape, but only in the sizes the task gives
        known = {d for dims, _ in self.signature.values() for d in dims}
        unknown = [s for s in program.kernel.sizes if s not in known]
        if unknown:
            raise TaskInterfaceError(f"{self.name}: the program names a problem size "
                                     f"`{unknown[0]}` the task does not give; its sizes are "
                                     f"{', '.join(sorted(known))}")

    #: sizes that are switches or levels (attention's CAUSAL, MoE's SKEW): 0 is allowed
    flags: tuple[str, ...] = ()

    def check_sizes(self, sizes: Sizes) -> None:
        """Raise `ValueError` for a custom shape the task cannot take (beyond each size
        being a positive 32-bit integer, which the environment checks). By default any."""

    def store_coverage_for(self, consts: dict) -> dict:
        """The required store coverage for a program with these constants (a causal
        attention row covers fewer keys): by default `store_coverage`. Bounds are DSL-like
        expressions over sizes, `min(a, b)` and `pos(DIM)`, the destination's index on DIM."""
        return self.store_coverage

    def program_sizes(self, program: Program, sizes: Sizes) -> dict:
        """The sizes `program` runs at: the shape's, plus any the task derives from the
        program's constants (MoE: the routing step pads the sorted rows to the program's
        block size, so their count depends on it). By default the shape's sizes."""
        return dict(sizes)

    #: small shapes with the problem constants of `sizes`, for numerical checks under the
    #: interpreter, or None: the environment then uses `env_check_shape` and `cpu_shapes`
    reduced_shapes = None

    def bind(self, program: Program, sizes: Sizes) -> Program:
        """The program with the problem's own constants set from the shape (for attention:
        causal flag, GQA group, head dim, softmax scale). Programs cannot change them."""
        return program

    def program(self, which: str = "baseline") -> Program:
        if which not in self.programs:
            raise KeyError(_unknown(f"{self.name} program", which, self.programs))
        return Program.from_file(self.programs[which])

    def shape_cases(self, split: str | None = None) -> list[ShapeCase]:
        return [s for s in self.shapes if split in (None, "all", s.split)]

    def make_inputs(self, program: Program, sizes: Sizes, device, generator) -> dict:
        """Fresh random inputs for every tensor the program reads (never zeros)."""
        raise NotImplementedError

    def reference(self, inputs: dict, sizes: Sizes) -> dict:
        """The outputs in float32, computed by PyTorch."""
        raise NotImplementedError

    def flops(self, sizes: Sizes) -> float:
        raise NotImplementedError

    def min_bytes(self, sizes: Sizes) -> float:
        """The fewest bytes a kernel must move: inputs read once, outputs written once."""
        raise NotImplementedError

    def anchor(self, inputs: dict, sizes: Sizes) -> Callable[[], object]:
        """The library call a kernel is compared against (cuBLAS, cuDNN, ...)."""
        raise NotImplementedError


_REGISTRY: dict[str, Task] = {}
#: task name -> its package, from the registry (`argus_env/registry.py`)
KNOWN_TASKS = packages()


def register_task(task: Task) -> Task:
    _REGISTRY[task.name] = task
    return task


def get_task(name: str) -> Task:
    """The registered task `name`, importing its package on first use."""
    if name not in _REGISTRY and name in KNOWN_TASKS:
        try:
            importlib.import_module(KNOWN_TASKS[name])
        except ModuleNotFoundError as e:
            raise KeyError(f"task {name!r} is not available: {e}") from None
    if name not in _REGISTRY:
        raise KeyError(_unknown("task", name, list(_REGISTRY) + list(KNOWN_TASKS)))
    return _REGISTRY[name]


def _unknown(what: str, name: str, known) -> str:
    close = difflib.get_close_matches(name, list(known), n=1)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    return f"unknown {what} {name!r}{hint} (known: {', '.join(sorted(set(known)))})"
