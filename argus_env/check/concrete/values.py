"""Values of the concrete tag interpreter: numpy arrays of integer values, tags and coverage.

A `Val` is one scalar or tile of one program instance. Every per-element quantity is an
array of the tile's shape (a 0-d array for scalars), so one DSL op is a handful of numpy
ops, whatever the tile size:

- `value`: the integer or boolean value of every element, or None for floating-point data
  (untracked, SEMANTICS.md "Values");
- `tags[name]`: a `Tag`: `has` says which elements carry the tag, `val` its value. `val` is
  defined at *every* element, also where `has` is False: there it holds the value the tag
  would have had (a masked-off load keeps its index). Rules use it only to decide whether a
  name *varies* along an axis (`dot`, reductions), which must not depend on how many lanes a
  mask happens to keep: a ragged last `k` step with a single in-bounds lane still contracts
  `K`, as the symbolic checker sees it;
- `cov[name]` / `cset[name]`: a `Cov`, dense counts over a window `[lo, lo + n)` of the
  index range, shaped `shape + (n,)`: multisets for sums and dots, 0/1 sets for max/min.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np

from . import floats


@dataclass
class Tag:
    """One tag name over a tile: its value (defined everywhere) and where it is carried."""

    val: np.ndarray   # int64
    has: np.ndarray   # bool


@dataclass
class Cov:
    """Coverage of one name: `counts[..., r]` is how often index `lo + r` was covered."""

    lo: int
    counts: np.ndarray

    @property
    def hi(self) -> int:
        return self.lo + self.counts.shape[-1]


@dataclass
class Val:
    """A scalar or tile of one instance (see the module docstring)."""

    shape: tuple[int, ...]
    value: np.ndarray | None = None
    tags: dict[str, Tag] = field(default_factory=dict)
    cov: dict[str, Cov] = field(default_factory=dict)
    cset: dict[str, Cov] = field(default_factory=dict)
    layout: str | None = None      # fragment policy of a dot result ("wgmma", "mma_v2")
    carried: bool = False          # held by a loop-carried name at an iteration's start
    fval: float | None = None      # a compile-time float scalar's value (softmax scales)
    #: what is known of float elements (`floats.Facts`; None: bounded data, not zero) and
    #: where a reduction lane of no data was added in (`floats`, SEMANTICS.md)
    ff: object = None
    junk: np.ndarray | None = None

    @property
    def is_scalar(self) -> bool:
        return self.shape == ()

    def moved(self, **changes) -> "Val":
        """A copy with some fields replaced (used by ops that only move or relabel data)."""
        return replace(self, **changes)


def scalar(value) -> Val:
    """An untagged scalar; floats (and None) have no tracked value."""
    if isinstance(value, bool):
        return Val((), np.array(value))
    if isinstance(value, (int, np.integer)):
        return Val((), np.array(int(value), dtype=np.int64))
    if isinstance(value, float):
        return Val((), fval=value, ff=floats.constant(value))
    return Val(())


def untagged(shape: tuple[int, ...], value: np.ndarray | None) -> Val:
    return Val(tuple(shape), value)


# ---------------------------------------------------------------- broadcasting
def bshape(*shapes: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(np.broadcast_shapes(*shapes))


def cov_to(c: Cov, shape: tuple[int, ...]) -> Cov:
    """Coverage broadcast to a tile shape (counts keep their trailing index axis)."""
    return Cov(c.lo, np.broadcast_to(c.counts, tuple(shape) + c.counts.shape[-1:]))


def bcast(v: Val, shape: tuple[int, ...]) -> Val:
    """`v` broadcast to `shape`, as read-only views."""
    shape = tuple(shape)
    if v.shape == shape:
        return v
    to = lambda a: np.broadcast_to(a, shape)  # noqa: E731
    return replace(v, shape=shape, value=None if v.value is None else to(v.value),
                   tags={n: Tag(to(t.val), to(t.has)) for n, t in v.tags.items()},
                   cov={n: cov_to(c, shape) for n, c in v.cov.items()},
                   cset={n: cov_to(c, shape) for n, c in v.cset.items()},
                   ff=None if v.ff is None else v.ff.map(to),
                   junk=None if v.junk is None else to(v.junk))


def reshape(v: Val, shape: tuple[int, ...]) -> Val:
    """Same elements, new shape (`x[:, None]` only inserts unit axes)."""
    def rc(c: Cov) -> Cov:
        return Cov(c.lo, c.counts.reshape(tuple(shape) + c.counts.shape[-1:]))
    to = lambda a: a.reshape(shape)  # noqa: E731
    return replace(v, shape=tuple(shape),
                   value=None if v.value is None else v.value.reshape(shape),
                   tags={n: Tag(t.val.reshape(shape), t.has.reshape(shape))
                         for n, t in v.tags.items()},
                   cov={n: rc(c) for n, c in v.cov.items()},
                   cset={n: rc(c) for n, c in v.cset.items()},
                   ff=None if v.ff is None else v.ff.map(to),
                   junk=None if v.junk is None else to(v.junk))


def tagged(v: Val) -> np.ndarray:
    """Elements that are not untagged: they carry a tag or some coverage."""
    out = np.zeros(v.shape, dtype=bool)
    for t in v.tags.values():
        out |= t.has
    for c in (*v.cov.values(), *v.cset.values()):
        out |= c.counts.any(axis=-1)
    return out


# ---------------------------------------------------------------- coverage algebra
def widen(c: Cov, lo: int, hi: int) -> np.ndarray:
    """`c`'s counts re-based onto the window `[lo, hi)`, which must contain `c`'s window."""
    if c.lo == lo and c.hi == hi:
        return c.counts
    out = np.zeros(c.counts.shape[:-1] + (hi - lo,), dtype=np.int32)
    out[..., c.lo - lo:c.hi - lo] = c.counts
    return out


def cov_sum(covs: list[Cov], shape: tuple[int, ...]) -> Cov:
    """The multiset sum of several coverages of one name."""
    if len(covs) == 1:
        return cov_to(covs[0], shape)
    lo, hi = min(c.lo for c in covs), max(c.hi for c in covs)
    out = np.zeros(tuple(shape) + (hi - lo,), dtype=np.int32)
    out[..., covs[0].lo - lo:covs[0].hi - lo] = covs[0].counts
    for c in covs[1:]:
        out[..., c.lo - lo:c.hi - lo] += c.counts
    return Cov(lo, out)


def cov_union(covs: list[Cov], shape: tuple[int, ...]) -> Cov:
    """The set union of several coverages (max/min reductions are idempotent)."""
    total = cov_sum(covs, shape)
    return Cov(total.lo, (total.counts > 0).astype(np.int32))


def cov_select(cond: np.ndarray, a: Cov | None, b: Cov | None, shape) -> Cov:
    """`a` where `cond` holds, `b` elsewhere (an absent side is empty)."""
    present = [c for c in (a, b) if c is not None]
    lo, hi = min(c.lo for c in present), max(c.hi for c in present)
    zero = np.zeros(tuple(shape) + (hi - lo,), dtype=np.int32)
    ca = zero if a is None else widen(cov_to(a, shape), lo, hi)
    cb = zero if b is None else widen(cov_to(b, shape), lo, hi)
    return Cov(lo, np.where(cond[..., None], ca, cb))


def range_counts(lo: int, hi: int, win_lo: int, win_hi: int) -> np.ndarray:
    """Counts over `[win_lo, win_hi)` of the integers `lo <= k < hi`, each once."""
    idx = np.arange(win_lo, win_hi)
    return ((idx >= lo) & (idx < hi)).astype(np.int32)


def onehot(vals: np.ndarray, weight: np.ndarray, lo: int, n: int) -> np.ndarray:
    """`out[..., r] = weight` where `vals == lo + r` (float32, for summing with matmul)."""
    r = np.clip(vals - lo, 0, n - 1)
    out = np.zeros(vals.shape + (n,), dtype=np.float32)
    np.put_along_axis(out, r[..., None], weight[..., None].astype(np.float32), axis=-1)
    return out


def describe(counts: np.ndarray, lo: int) -> str:
    """Counts over one index window as text: runs `[a, b)`, `x2` when covered twice.

    `describe([1,1,1,0,2], 0) == "[0, 3) + [4, 5) x2"`; nothing covered is "{}". Violations
    and `replay` both use this spelling, so a replay can be compared with a report.
    """
    runs, start = [], None
    counts = np.asarray(counts)
    for r in range(len(counts) + 1):
        c = int(counts[r]) if r < len(counts) else 0
        if start is not None and c != int(counts[start]):
            times = int(counts[start])
            runs.append(f"[{lo + start}, {lo + r})" + (f" x{times}" if times != 1 else ""))
            start = None
        if start is None and c != 0:
            start = r
    return " + ".join(runs) if runs else "{}"


def expect_range(lo: int, hi: int) -> str:
    return describe(np.ones(max(hi - lo, 0), dtype=np.int32), lo)


def summary(v: Val, element: tuple[int, ...]) -> dict:
    """Tags and coverage of one element, in the vocabulary of `Violation.actual`."""
    el = tuple(int(i) for i in element)
    return {"tags": {n: int(t.val[el]) for n, t in v.tags.items() if t.has[el]},
            "coverage": {n: describe(c.counts[el], c.lo) for n, c in v.cov.items()
                         if c.counts[el].any()},
            "sets": {n: describe(c.counts[el], c.lo) for n, c in v.cset.items()
                     if c.counts[el].any()},
            "value": None if v.value is None else v.value[el].item()}


def first(mask: np.ndarray) -> tuple[int, ...] | None:
    """Coordinates of the first True element of `mask` (C order), or None."""
    if not mask.any():
        return None
    return tuple(int(i) for i in np.unravel_index(int(np.argmax(mask)), mask.shape))


def cov_of(v: Val, name: str) -> Cov | None:
    """The coverage of `name` an assertion compares: the multiset, else the set."""
    return v.cov.get(name) or v.cset.get(name)


def coverage_mismatch(v: Val, name: str, lo, hi, where: np.ndarray) -> np.ndarray:
    """Elements (among `where`) whose coverage of `name` is not `lo <= k < hi`, each once;
    `lo` and `hi` are integers or arrays of the elements' own bounds (a causal row's keys)."""
    c = cov_of(v, name)
    if c is None:
        return where & (np.asarray(hi) > np.asarray(lo))
    w_lo, w_hi = min(c.lo, int(np.min(lo))), max(c.hi, int(np.max(hi)))
    idx = np.arange(w_lo, w_hi)
    want = ((idx >= np.asarray(lo)[..., None]) & (idx < np.asarray(hi)[..., None])).astype(np.int32)
    return where & (widen(c, w_lo, w_hi) != want).any(axis=-1)


def cov_text(v: Val, name: str, element: tuple[int, ...]) -> str:
    c = cov_of(v, name)
    return "{}" if c is None else describe(c.counts[element], c.lo)
