"""Generic traversal and rewriting of IR trees, used by the checker and by transformations."""

from __future__ import annotations

import dataclasses
import difflib
import hashlib
from typing import Callable, Iterator

from . import nodes as ir
from .ops import KERNEL_OPTIONS


#: per node class, the names of its fields that may hold nodes (all but `loc`)
_FIELDS: dict[type, tuple[str, ...]] = {}
#: per class of a field's value, whether a value of it is an IR node
_IS_NODE: dict[type, bool] = {}


def _field_names(cls) -> tuple[str, ...]:
    names = _FIELDS.get(cls)
    if names is None:
        names = _FIELDS[cls] = tuple(f.name for f in dataclasses.fields(cls) if f.name != "loc")
    return names


def _is_node(value) -> bool:
    cls = type(value)
    known = _IS_NODE.get(cls)
    if known is None:   # a dataclass instance that is no location (a class is no node)
        known = _IS_NODE[cls] = dataclasses.is_dataclass(cls) and not issubclass(cls, ir.Loc) \
            and not issubclass(cls, type)
    return known


def _collect(value, out: list) -> None:
    if _is_node(value):
        out.append(value)
    elif isinstance(value, tuple):
        for v in value:
            _collect(v, out)


def _child_list(node) -> list:
    out: list = []
    for name in _field_names(type(node)):
        _collect(getattr(node, name), out)
    return out


def children(node) -> Iterator:
    """The IR nodes directly below `node` (expressions, statements, params)."""
    return iter(_child_list(node))


def _nodes_in(value) -> Iterator:
    out: list = []
    _collect(value, out)
    return iter(out)


def walk(node) -> Iterator:
    """Every node below and including `node`, parents before children."""
    stack = [node]
    while stack:
        n = stack.pop()
        yield n
        kids = _child_list(n)
        kids.reverse()
        stack.extend(kids)


def assigned(stmts) -> set[str]:
    """Names assigned anywhere in a block of statements (loop variables included),
    nested blocks included."""
    out: set[str] = set()
    for s in stmts:
        for n in walk(s):
            if isinstance(n, ir.Assign):
                out.update(n.targets)
            elif isinstance(n, ir.For):
                out.add(n.var)
    return out


def transform(node, fn: Callable):
    """Rebuild `node` bottom-up, applying `fn` to every rebuilt node.

    `fn(node)` returns a replacement or the node itself. Locations are kept.
    """
    updates = {}
    for name in _field_names(type(node)):
        value = getattr(node, name)
        new = _transform_value(value, fn)
        if new is not value:
            updates[name] = new
    rebuilt = dataclasses.replace(node, **updates) if updates else node
    return fn(rebuilt)


def _transform_value(value, fn):
    if _is_node(value):
        return transform(value, fn)
    if isinstance(value, tuple):
        items = tuple(_transform_value(v, fn) for v in value)
        return value if all(a is b for a, b in zip(items, value)) else items
    return value


def structural_hash(node) -> str:
    """A stable hex digest of the structure of `node` (locations excluded).

    The dataclass repr is a faithful, deterministic serialisation of the tree (locations
    are declared `repr=False`), so two programs hash alike exactly when they are equal.
    """
    return hashlib.sha256(repr(node).encode()).hexdigest()[:16]


def with_const(kernel: ir.Kernel, name: str, value) -> ir.Kernel:
    """The kernel with compile-time constant `name` set to `value`."""
    if kernel.param(name) is None or kernel.param(name).kind != "const":
        known = [p.name for p in kernel.params if p.kind == "const"]
        raise KeyError(f"kernel {kernel.name} has no constant {name!r}; constants: {known}")
    params = tuple(dataclasses.replace(p, default=value) if p.name == name else p
                   for p in kernel.params)
    return dataclasses.replace(kernel, params=params)


def with_option(kernel: ir.Kernel, name: str, value) -> ir.Kernel:
    """The kernel with launch option `name` (`num_warps`, `num_stages`) set to `value`."""
    if name not in KERNEL_OPTIONS:
        close = difflib.get_close_matches(str(name), KERNEL_OPTIONS, n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise KeyError(f"unknown kernel option {name!r}{hint}; known: "
                       f"{', '.join(KERNEL_OPTIONS)}")
    opts = dict(kernel.options)
    opts[name] = value
    return dataclasses.replace(kernel, options=tuple(sorted(opts.items())))
