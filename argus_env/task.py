"""The Task protocol: everything the core needs to know about a kernel task.

A task lives in `tasks/<name>/` (installed as `argus_env.tasks.<name>`), is named by one
line of the registry (`argus_env/registry.py`), and registers its `Task` instance with
`register_task` when its package is imported; the core reaches it only through `get_task`.
The protocol, all declared on `Task` below and checked at registration
(`definition_errors`):

* **what it computes**: `signature` (tensors, dims, dtypes), `reference` (PyTorch, fp32),
  `make_inputs`, `tolerance`, `flops` and `min_bytes` (throughput and roofline);
* **where**: `shapes` (train and held-out test splits), `cpu_shapes`, `reduced_shapes` /
  `env_check_shape` (interpreter numerics), `check_sizes`, `flags`, `extra_sizes`;
* **programs**: `programs` (DSL files, a `baseline` first), `bind` (problem constants),
  `program_sizes` (sizes a host step derives, e.g. padded routing rows);
* **its invariants**: `store_coverage` / `store_coverage_for`, and `invariants`, its pack
  of invariant classes and checker rules (`argus_env.check.pack.InvariantPack`);
* **its space and observation**: `space` (transformations over its configuration),
  `config_fields` / `config_dim` / `encode_config` (the configuration part of the
  observation);
* **its prices**: `anchor` (the library call to beat), `anchors_file` / `anchor_dims`
  (measured library throughput), `cost_model` (when the generic model does not fit).
"""

from __future__ import annotations

import dataclasses
import difflib
import importlib
import math
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Mapping

import numpy as np

from .dsl.program import Program
from .registry import packages

Sizes = Mapping[str, int]


class TaskInterfaceError(ValueError):
    """A program does not take the tensors its task passes."""


class TaskDefinitionError(TypeError):
    """A task does not supply what the core needs of it (see `Task`)."""


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
    #: sizes a shape names that no tensor has (problem constants such as top-k)
    extra_sizes: tuple[str, ...] = ()
    #: sizes the checker may prove a program for all values of at once (the others fixed
    #: as the shape has them), so that one proof serves every shape that differs in them
    #: (`argus_env.check.check_for_all_sizes`); () when the task's programs depend on its
    #: sizes otherwise than through index arithmetic (MoE's routing arrays)
    for_all_sizes: tuple[str, ...] = ()

    def check_sizes(self, sizes: Sizes) -> None:
        """Raise `ValueError` for a custom shape the task cannot take (beyond each size
        being a positive 32-bit integer, which the environment checks). By default any."""

    def store_coverage_for(self, consts: dict) -> dict:
        """The required store coverage for a program with these constants (a causal
        attention row covers fewer keys): by default `store_coverage`. Bounds are DSL-like
        expressions over sizes, `min(a, b)` and `pos(DIM)`, the destination's index on DIM."""
        return self.store_coverage

    def numerics_class(self, config_key: str) -> str | None:
        """The part of a configuration (its features' `key()`) that decides how the
        program rounds, where the task knows one, else None. The cost model cannot see
        numerics, so a class the GPU found numerically wrong at one shape is not priced at
        a shape the tables lack whose output has at least as many elements
        (`measure.analytic.TableBackend`): such errors are rare per element (a rounding
        chain's tail), so a larger output only meets more of them. With None only the
        recorded program itself inherits its verdict."""
        return None

    def output_elements(self, sizes: Sizes) -> int:
        """Elements the task's outputs hold at `sizes` (those `store_coverage` names)."""
        return sum(math.prod(int(sizes[d]) for d in self.signature[name][0])
                   for name in self.store_coverage if name in self.signature)

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

    # ------------------------------------------------------------ observation encoding
    def config_fields(self, space=None) -> tuple[str, ...]:
        """The fields of the task's configuration (its space's dataclass), in order; for an
        older catalog (`space`: `self.space.at(version)`), those its transformations set."""
        space = space if space is not None else self.space
        if space is None:
            return ()
        hidden = space.hidden_fields() if hasattr(space, "hidden_fields") else frozenset()
        return tuple(f.name for f in dataclasses.fields(space.baseline()) if f.name not in hidden)

    def size_names(self) -> tuple[str, ...]:
        """The size names of the task's shapes, in the suite's order."""
        return tuple(self.shapes[0].sizes) if self.shapes else ()

    @property
    def config_dim(self) -> int:
        """Length of `encode_config`'s vector: one float per configuration field, the
        program's measured structure (`FEATURE_FIELDS`), a hand-written-program flag, and
        one per size name."""
        return self.config_dim_of(None)

    def config_dim_of(self, space=None) -> int:
        """`config_dim` for the catalog of `space` (None: the task's own, the newest)."""
        return len(self.config_fields(space)) + len(FEATURE_FIELDS) + 1 + len(self.size_names())

    def encode_config(self, config, features, sizes: Sizes, space=None) -> np.ndarray:
        """The configuration part of the observation: floats in [0, 1].

        * the task's configuration, field by field (`config_fields`): a flag as 0/1, an
          integer as log2(1 + v) / 12, a choice (a string) as a fixed code in (0, 1), None
          as 0; all zeros for a program given as text (it has no configuration), with the
          flag after the features block set to 1;
        * the program's structure as feature extraction reads it (`FEATURE_FIELDS`: tile
          sizes, warps, stages, grid, flags), the same for every task, zeros when the
          program could not be analysed;
        * the shape: log2(1 + size) / 32 per size name (`size_names`).
        Override it to encode choices the configuration does not hold. `space`: the
        catalog the env plays (`config_fields(space)`), None for the newest."""
        fields = self.config_fields(space)
        vec = np.zeros(self.config_dim_of(space), dtype=np.float64)
        if config is not None:
            vec[:len(fields)] = [_field_code(getattr(config, f, None)) for f in fields]
        at = len(fields)
        if features is not None:
            vec[at:at + len(FEATURE_FIELDS)] = [_feature_code(features, f) for f in FEATURE_FIELDS]
        at += len(FEATURE_FIELDS)
        vec[at] = float(config is None)
        at += 1
        names = self.size_names()
        vec[at:at + len(names)] = [math.log2(1 + max(int(sizes.get(n, 0)), 0)) / 32 for n in names]
        return np.clip(np.nan_to_num(vec, nan=0.0), 0.0, 1.0).astype(np.float32)


#: the program-structure block of every task's configuration observation: feature name ->
#: scale (log2 of the value over the scale for sizes, the value over it for the rest)
FEATURE_FIELDS = {"block_m": 8, "block_n": 8, "block_k": 8, "num_warps": 16, "stages": 8,
                  "group_m": 4, "split_k": 4, "persistent": 1, "tma_loads": 1, "tma_store": 1,
                  "warp_specialize": 1, "kmajor_b": 1, "atomic_output": 1, "grid_programs": 24,
                  "tiles": 24}
_LOG_FEATURES = {"block_m", "block_n", "block_k", "group_m", "split_k", "grid_programs", "tiles"}


def _field_code(value) -> float:
    if value is None:
        return 0.0
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, int):
        return math.log2(1 + max(value, 0)) / 12
    if isinstance(value, float):
        return min(max(value, 0.0), 1.0)
    # a choice: a code fixed by its text (the same in every process), never 0 (None's)
    return (zlib.crc32(str(value).encode()) % 997 + 1) / 998


def _feature_code(features, name: str) -> float:
    value = getattr(features, name, 0) or 0
    try:
        value = float(value)
    except (TypeError, ValueError):
        return 0.0
    if name in _LOG_FEATURES:
        return math.log2(value) / FEATURE_FIELDS[name] if value > 1 else 0.0
    return value / FEATURE_FIELDS[name]


_REGISTRY: dict[str, Task] = {}
#: task name -> its package, from the registry (`argus_env/registry.py`)
KNOWN_TASKS = packages()


#: what every task must define: attribute -> what it is
REQUIRED_ATTRIBUTES = {"name": "its registry name", "programs": "program name -> DSL file, "
                       "with a 'baseline'", "shapes": "its shape suite (ShapeCase, ...)",
                       "signature": "tensor -> (dims, dtype)", "space": "its transformation "
                       "space (argus_env.space.TaskSpace)"}
#: the hooks every task must implement (the base class's raise NotImplementedError)
REQUIRED_HOOKS = ("make_inputs", "reference", "flops", "min_bytes", "anchor")


def definition_errors(task: Task) -> list[str]:
    """What `task` lacks of the protocol, one line each; empty when it is complete."""
    errors = [f"`{attr}`: {what}" for attr, what in REQUIRED_ATTRIBUTES.items()
              if not getattr(task, attr, None)]
    if getattr(task, "programs", None) and "baseline" not in task.programs:
        errors.append("`programs` has no 'baseline' (the program every episode starts from)")
    missing = [p for p in (getattr(task, "programs", None) or {}).values() if not Path(p).is_file()]
    errors += [f"program file {p} does not exist" for p in missing]
    errors += [f"`{hook}()` is not implemented" for hook in REQUIRED_HOOKS
               if getattr(type(task), hook, None) is getattr(Task, hook)]
    shapes = getattr(task, "shapes", None) or ()
    known = {d for dims, _ in (getattr(task, "signature", None) or {}).values() for d in dims}
    for case in shapes:
        unknown = sorted(set(case.sizes) - known - set(task.flags) - set(task.extra_sizes))
        if unknown:
            errors.append(f"shape {case.name!r} names sizes {unknown} that no tensor of the "
                          "signature has (declare them in `flags` or `extra_sizes`)")
            break
    if len({tuple(c.sizes) for c in shapes}) > 1:
        errors.append("the shapes do not all name the same sizes in the same order")
    return errors


def register_task(task: Task) -> Task:
    """Make `task` known under its name; raises `TaskDefinitionError` listing everything the
    task lacks of the protocol (rather than failing on first use inside an env)."""
    errors = definition_errors(task)
    if errors:
        raise TaskDefinitionError(f"task {getattr(task, 'name', '') or type(task).__name__!r} "
                                  "is incomplete:\n  " + "\n  ".join(errors))
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
