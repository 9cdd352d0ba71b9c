"""Generic traversal and rewriting of IR trees, used by the checker and by transformations."""

from __future__ import annotations

import dataclasses
import difflib
import hashlib
from typing import Callable, Iterator

from . import nodes as ir
from .ops import KERNEL_OPTIONS


def children(node) -> Iterator:
    """The IR nodes directly below `node` (expressions, statements, params)."""
    for f in dataclasses.fields(node):
        if f.name == "loc":
            continue
        value = getattr(node, f.name)
        yield from _nodes_in(value)


def _nodes_in(value) -> Iterator:
    if dataclasses.is_dataclass(value) and not isinstance(value, (ir.Loc, type)):
        yield value
    elif isinstance(value, tuple):
        for v in value:
            yield from _nodes_in(v)


def walk(node) -> Iterator:
    """Every node below and including `node`, parents before children."""
    stack = [node]
    while stack:
        n = stack.pop()
        yield n
        stack.extend(reversed(list(children(n))))


def transform(node, fn: Callable):
    """Rebuild `node` bottom-up, applying `fn` to every rebuilt node.

    `fn(node)` returns a replacement or the node itself. Locations are kept.
    """
    updates = {}
    for f in dataclasses.fields(node):
        if f.name == "loc":
            continue
        value = getattr(node, f.name)
        new = _transform_value(value, fn)
        if new is not value:
            updates[f.name] = new
    rebuilt = dataclasses.replace(node, **updates) if updates else node
    return fn(rebuilt)


def _transform_value(value, fn):
    if dataclasses.is_dataclass(value) and not isinstance(value, (ir.Loc, type)):
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
