"""Transformation spaces: the actions a task offers and how they rewrite its programs.

A task's space holds a configuration (a frozen dataclass), renders it to DSL text, and
applies transformations to it. Transformations are data: a name, a parameter, the values
it may take, and the preconditions that make an application illegal. An illegal
application raises `TransformError` (which the environment turns into a masked action).
Some transformations are deliberately primitive: `split_k` alone leaves the partial
sums uncombined, and the invariant checker says so until `combine` is applied.

The toolkit every task space shares:

* `edit(field, reason)`: the precondition of a plain field edit, the configuration it
  would produce checked whole by `reason` (a space's `config_reason`);
* the configuration rules, in two kinds: `TaskSpace.structure_reason` (how the choices
  combine and what the problem allows) and `TaskSpace.hardware_reason` (what the `Target`
  allows: `resource_reason` over the `argus_env.resources` footprint, its MMA
  instructions, TMA, warp specialization); the cost models apply the same hardware rules,
  so a configuration the mask allows is one the model can price;
* `TaskSpace.configurations` / `legal_configurations`: configurations enumerated over
  the catalog's values, and those legal in a context;
* `kernel_header`: a program's header (decorator, tensors from `Task.signature`,
  constants, docstring).

The context `ctx` of a precondition holds `sizes` (the episode's shape) and `target` (a
`Target`; the default profile's when absent).
"""

from __future__ import annotations

import ast
import collections
import copy
import dataclasses
import difflib
import itertools
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Iterator

from .dsl.program import Program
from .resources import Footprint, limits
from .target import DEFAULT_HARDWARE, Target, load_target
from .task import get_task


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
    `since`: the catalog version that added it. A space only appends: a transformation of
    a later version comes after every one of an earlier version, so the discrete action
    indices of an older catalog keep their meaning but for `undo` and `submit`, which
    follow the transformations (`TaskSpace.at` gives an older catalog back).
    """

    name: str
    field: str
    values: tuple
    doc: str
    requires: Callable[[Any, Any, dict], str | None] | None = None
    primitive: bool = False  # leaves an invariant broken until another transform
    since: int = 1

    def actions(self) -> list[tuple[str, Any]]:
        return [(self.name, v) for v in self.values]


SPECIAL = ("undo", "submit")
#: configurations whose programs a space remembers (`TaskSpace.program`)
PROGRAMS_KEPT = 1024


# ---------------------------------------------------------------- toolkit
def target_of(ctx: dict) -> Target:
    """The context's target (the default profile's when the context names none)."""
    target = ctx.get("target")
    if target is None:
        return load_target(DEFAULT_HARDWARE)
    if not isinstance(target, Target):
        raise TypeError(f"ctx['target'] must be an argus_env.target.Target, got "
                        f"{type(target).__name__}")
    return target


def resource_reason(footprint: Footprint, ctx: dict) -> str | None:
    """Why a program with `footprint` does not fit the context's target, or None."""
    reasons = limits(footprint, target_of(ctx))
    return reasons[0] if reasons else None


def edit(field: str, reason: Callable[[Any, dict], str | None]
         ) -> Callable[[Any, Any, dict], str | None]:
    """The precondition of setting `field`: the configuration it would produce must pass
    `reason(config, ctx)` (None: legal)."""
    def check(config, value, ctx: dict) -> str | None:
        return reason(dataclasses.replace(config, **{field: value}), ctx)
    check.__name__ = f"edit_{field}"
    return check


def kernel_header(name: str, signature: dict, consts: dict, num_warps: int, doc: str,
                  orders: dict | None = None, workspaces: Iterable[tuple[str, tuple, str]] = ()
                  ) -> str:
    """The first lines of a program: the import, `@A.kernel(num_warps=...)`, the task's
    tensors (`signature`: name -> (dims, dtype), in order; `orders`: name -> storage
    order such as "col_major"), then `workspaces` (name, dims, dtype), then the constants
    (name -> value) and the docstring. Ends with a newline; the body follows."""
    orders = orders or {}
    unknown = sorted(set(orders) - set(signature))
    if unknown:
        raise ValueError(f"kernel_header: storage orders for tensors the signature lacks: {unknown}")

    def tensor(n, dims, dtype):
        order = f", A.{orders[n]}" if n in orders else ""
        names = ", ".join(f'"{d}"' for d in dims)
        return f"    {n}: A.Tensor[A.{dtype}, {names}{order}],"
    lines = ["from argus_env import dsl as A", "", "", f"@A.kernel(num_warps={num_warps})",
             f"def {name}("]
    lines += [tensor(n, dims, dtype) for n, (dims, dtype) in signature.items()]
    lines += [tensor(n, dims, dtype) for n, dims, dtype in workspaces]
    lines += [f"    {k}: A.const = {v!r}," for k, v in consts.items()]
    lines += ["):", f'    """{doc}"""']
    return "\n".join(lines) + "\n"


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
    """Base class: a task's configuration space and its transformation catalog.

    Its catalog has versions (`Transform.since`): `at(v)` is the space as catalog `v` had
    it, so that episodes recorded, and policies trained, before a transformation was added
    replay and play as they did (`KernelEnv(catalog=v)`)."""

    transforms: tuple[Transform, ...] = ()
    #: the registered task whose `signature` heads the programs (`signature`)
    task_name: str = ""

    def baseline(self):
        raise NotImplementedError

    # ------------------------------------------------------------ catalog versions
    @classmethod
    def latest_catalog(cls) -> int:
        """The newest catalog version: the largest `since` of its transformations."""
        return max((t.since for t in cls.transforms), default=1)

    @property
    def catalog_version(self) -> int:
        return getattr(self, "_catalog_version", None) or self.latest_catalog()

    def at(self, version: int | None) -> "TaskSpace":
        """This space with the catalog of `version` (None or the newest: this space)."""
        latest = self.latest_catalog()
        if version is None:
            return self
        if type(version) is not int or not 1 <= version <= latest:
            raise ValueError(f"catalog version of task {self.task_name!r} must be a whole "
                             f"number from 1 to {latest}, got {version!r}")
        if version == self.catalog_version:
            return self
        order = [t.since for t in type(self).transforms]
        if order != sorted(order):
            raise ValueError(f"{type(self).__name__}.transforms must append: a transformation "
                             f"of a later catalog version before one of an earlier one")
        view = copy.copy(self)
        view.transforms = tuple(t for t in type(self).transforms if t.since <= version)
        view._catalog_version = version
        return view

    def hidden_fields(self) -> frozenset:
        """Configuration fields that only transformations outside this catalog set: they
        stay at the baseline's value, and the observation leaves them out."""
        shown = {t.field for t in self.transforms}
        return frozenset({t.field for t in type(self).transforms} - shown)

    def render(self, config) -> str:
        raise NotImplementedError

    # ------------------------------------------------------------ configuration rules
    def structure_reason(self, config, ctx: dict) -> str | None:
        """Why `config` is not a configuration of this space for the problem in `ctx`
        (choices that do not combine, a problem the choice does not fit), or None."""
        return None

    def hardware_reason(self, config, ctx: dict) -> str | None:
        """Why `config` cannot run on the context's target (resources, instructions,
        TMA, warp specialization), or None. The task's cost model refuses exactly these."""
        return None

    def config_reason(self, config, ctx: dict) -> str | None:
        """Why `config` is illegal in `ctx`, or None: its structure, then its hardware."""
        return self.structure_reason(config, ctx) or self.hardware_reason(config, ctx)

    def configurations(self, names: Iterable[str] | None = None, base=None) -> Iterator:
        """Every configuration that sets the transformations `names` (all when None) to
        each combination of their values, the other fields as in `base` (the baseline)."""
        base = self.baseline() if base is None else base
        chosen = [self.transform(n) for n in (names if names is not None
                                              else [t.name for t in self.transforms])]
        for values in itertools.product(*(t.values for t in chosen)):
            yield dataclasses.replace(base, **{t.field: v for t, v in zip(chosen, values)})

    def field_values(self) -> list[tuple[str, tuple]]:
        """(field, values) per transformation: its catalog values, then the baseline's own
        where no transformation sets it (a baseline field such as attention's
        `stages=None`)."""
        base = self.baseline()
        return [(t.field, tuple(dict.fromkeys((*t.values, getattr(base, t.field)))))
                for t in self.transforms]

    def legal_configurations(self, configs: Iterable, ctx: dict) -> list:
        """`configs` without repeats and without those illegal in `ctx`, in order."""
        seen, legal = set(), []
        for c in configs:
            if c not in seen and self.config_reason(c, ctx) is None:
                seen.add(c)
                legal.append(c)
        return legal

    @property
    def signature(self) -> dict:
        """The tensors every program of the task takes (`Task.signature`)."""
        return get_task(self.task_name).signature

    # ------------------------------------------------------------ derived
    def program(self, config) -> Program:
        """The program of `config`, remembered for the `PROGRAMS_KEPT` configurations used
        last (configurations are hashable; the space owns the cache)."""
        cache = self.__dict__.get("_programs")
        if cache is None:
            cache = self.__dict__["_programs"] = collections.OrderedDict()
        program = cache.get(config)
        if program is None:
            program = Program.from_text(self.render(config), filename="<transformed>")
            cache[config] = program
            while len(cache) > PROGRAMS_KEPT:
                cache.popitem(last=False)
        else:
            cache.move_to_end(config)
        return program

    def catalog(self) -> list[tuple[str, Any]]:
        """Every discrete action: (transform, value) pairs, then undo and submit."""
        out = [a for t in self.transforms for a in t.actions()]
        return out + [(s, None) for s in SPECIAL]

    def transform(self, name: str) -> Transform:
        for t in self.transforms:
            if t.name == name:
                return t
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
