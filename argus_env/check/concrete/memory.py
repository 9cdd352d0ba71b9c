"""Memory ops of the concrete tag interpreter: `load`, `store`, `atomic_add` and the record
of every write (SEMANTICS.md, "Op rules" and "Whole-program checks").

An access `t[i0, ..., in]` becomes one coordinate array per tensor dim, shaped like the
access: 1-D index tiles combine as an outer product (orthogonal indexing, one tile axis
each), higher-rank index tiles broadcast, scalars broadcast, exactly as
`argus_env.lower.emit` builds Triton pointers. Numpy never indexes out of range: coordinates
are clipped for reading, and an unmasked out-of-range element is a **bounds** violation.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ...ir import nodes as ir
from .bounds import bound
from . import floats
from .ops import merge_tags
from .values import (Cov, Tag, Val, bcast, bshape, cov_of, cov_sum, cov_text,
                     coverage_mismatch, expect_range, first, reshape, summary, widen)


@dataclass
class Ref:
    """The elements of tensor `param` an access names, as coordinate arrays."""

    param: ir.Param
    shape: tuple[int, ...]
    coords: list[np.ndarray]          # one int64 array per tensor dim, of the access shape
    axes: list[int | None]            # the access axis of each dim's 1-D index (orthogonal)
    index: list[Val]                  # the index values, placed onto the access shape
    extent: tuple[int, ...]           # the tensor's shape at these sizes

    def in_bounds(self) -> np.ndarray:
        ok = np.ones(self.shape, dtype=bool)
        for c, n in zip(self.coords, self.extent):
            ok &= (c >= 0) & (c < n)
        return ok

    def flat(self) -> np.ndarray:
        """Row-major flat offsets, coordinates clipped into the tensor."""
        clipped = [np.clip(c, 0, max(n - 1, 0)) for c, n in zip(self.coords, self.extent)]
        if not self.extent:
            return np.zeros(self.shape, dtype=np.int64)
        return np.ravel_multi_index(clipped, self.extent)

    def at(self, el: tuple[int, ...]) -> tuple[int, ...]:
        return tuple(int(c[el]) for c in self.coords)


def _place(v: Val, axis: int | None, shape: tuple[int, ...]) -> Val:
    """A 1-D index tile put on its own access axis; anything else broadcast."""
    if axis is None or not v.shape:
        return bcast(v, shape)
    unit = [1] * len(shape)
    unit[axis] = v.shape[0]
    return bcast(reshape(v, tuple(unit)), shape)


def reference(it, e: ir.Subscript) -> Ref:
    param = it.eval(e.base)
    idx = [it.val(i) for i in e.index]
    if max(len(v.shape) for v in idx) <= 1:   # orthogonal: one access axis per 1-D index
        shape = tuple(d for v in idx for d in v.shape)
        axes, ax = [], 0
        for v in idx:
            axes.append(ax if v.shape else None)
            ax += bool(v.shape)
    else:
        shape, axes = bshape(*(v.shape for v in idx)), [None] * len(idx)
    placed = [_place(v, a, shape) for v, a in zip(idx, axes)]
    coords = [np.asarray(it.known(p, f"index of `{param.name}`"), dtype=np.int64) for p in placed]
    extent = tuple(it.sh.kernel.extents(it.sizes)[d] for d in param.dims)
    return Ref(param, shape, coords, axes, placed, extent)


def access_mask(it, call: ir.Call, ref: Ref) -> np.ndarray:
    """The mask as a boolean array of the access shape; per-dim tuples combine as an outer
    AND, each entry placed like its dim's index."""
    m = call.arg("mask")
    out = np.ones(ref.shape, dtype=bool)
    if m is None or (isinstance(m, ir.Const) and m.value is None):
        return out
    parts = m.elts if isinstance(m, ir.TupleExpr) else (m,)
    axes = ref.axes if isinstance(m, ir.TupleExpr) else [None]
    for part, axis in zip(parts, axes):
        if isinstance(part, ir.Const) and part.value is None:
            continue
        out = out & it.known(_place(it.val(part), axis, ref.shape), "mask")
    return out


def _flag(call: ir.Call, name: str) -> bool:
    v = call.arg(name)
    return isinstance(v, ir.Const) and v.value is True


def _bounds(it, op: str, line: int, ref: Ref, active: np.ndarray, tile: Val) -> None:
    it.checked(op, line, "bounds")
    if not it.wants("bounds", line):
        return
    el = first(active & ~ref.in_bounds())
    if el is None:
        return
    coords = ref.at(el)
    dims = ref.param.dims
    bad = [d for d, (c, n) in enumerate(zip(coords, ref.extent)) if not 0 <= c < n]
    it.violate("bounds", op, line, f"{op} reaches {ref.param.name}{list(coords)} outside its "
               f"shape {list(ref.extent)}, and no mask excludes it", element=el, tile=tile,
               expected={dims[d]: f"[0, {ref.extent[d]})" for d in bad},
               actual={dims[d]: coords[d] for d in bad}, tensor=ref.param.name, coords=coords)


def load(it, e: ir.Call) -> Val:
    """Each element is tagged with its source coordinates (and its indices' own tags) where
    the mask holds; masked-off and TMA out-of-bounds elements are untagged fills."""
    ref, line = reference(it, e.arg("ref")), e.loc.line
    if _flag(e, "tma"):
        active = ref.in_bounds()
    else:
        active = access_mask(it, e, ref)
        _bounds(it, "load", line, ref, active, Val(ref.shape))
    parts = [Val(ref.shape, tags={d: Tag(c, active)}) for d, c in zip(ref.param.dims, ref.coords)]
    parts += [Val(ref.shape, tags={n: Tag(t.val, t.has & active) for n, t in v.tags.items()})
              for v in ref.index]
    out = Val(ref.shape, _loaded_value(it, e, ref, active), merge_tags(it, "load", line, parts))
    if out.value is None:  # a masked-off float element is the zero fill
        out.ff = floats.data(~np.asarray(active, dtype=bool))
    for tw in it.sh.memory.get(ref.param.name, ()):  # written by a finished launch
        for name, c in tw.read(ref.flat(), active & ref.in_bounds()).items():
            out.cov[name] = cov_sum([out.cov[name], c], ref.shape) if name in out.cov else c
        if tw.written_doubt is not None and out.ff is not None:  # its doubts come back
            yes = np.ones(ref.shape, dtype=bool)
            out.ff = floats.Facts(out.ff.zero, out.ff.low, out.ff.high, yes, yes.copy(),
                                  max(out.ff.mag, tw.written_doubt))
        if tw.written_junk is not None:
            junk = tw.written_junk[ref.flat()] & active & ref.in_bounds()
            out.junk = junk if out.junk is None else out.junk | junk
    v = it.probe_at("load", line)
    if v is not None:
        it.capture({"coords": list(ref.at(v.element)), "mask": bool(active[v.element]),
                    "in_bounds": bool(ref.in_bounds()[v.element]),
                    "value": summary(out, v.element)})
    return out


def _loaded_value(it, e: ir.Call, ref: Ref, active: np.ndarray) -> np.ndarray | None:
    """Integer data comes from `inputs`; masked-off elements read `other` (0 if none given,
    where Triton leaves them undefined). Floating-point data has no tracked value."""
    if ref.param.dtype not in ("i32", "i64", "i1"):
        return None
    data = it.tensor_data(ref.param).reshape(-1)
    fill = e.arg("other")
    fill = fill.value if isinstance(fill, ir.Const) and fill.value is not None else 0
    read = data[ref.flat()] if data.size else np.zeros(ref.shape, dtype=data.dtype)
    value = np.where(active & ref.in_bounds(), read, fill)
    return value != 0 if ref.param.dtype == "i1" else value


# ---------------------------------------------------------------- writes
@dataclass
class TensorWrites:
    """Every write of one tensor, per element: counts, first writer, atomic coverage."""

    extent: tuple[int, ...]
    stores: np.ndarray = None
    atomics: np.ndarray = None
    writer: np.ndarray = None                     # index into `records`, -1: unwritten
    records: list[dict] = field(default_factory=list)
    atomic_cov: dict[str, Cov] = field(default_factory=dict)   # counts shaped (numel, n)
    atomic_line: int = 0
    #: coverage of every write (store or atomic), summed per element: what a later launch
    #: reads back (kept for tensors a later launch reads)
    written_cov: dict[str, Cov] = field(default_factory=dict)
    #: elements written with junk (`floats`), read back with the coverage
    written_junk: np.ndarray | None = None
    #: a value that doubts (`floats.written`) was written: its magnitude (None: none was)
    written_doubt: float | None = None
    keep: bool = False
    #: the invariant pack's own record of this tensor's writes (its `concrete_write` hook
    #: fills it, its `concrete_outputs` hook reads it): numpy arrays and lists, copied with
    #: the writes when an instance's paths fork (`run.run_instance`)
    pack_records: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        n = int(np.prod(self.extent, dtype=np.int64))
        self.stores = np.zeros(n, dtype=np.int32)
        self.atomics = np.zeros(n, dtype=np.int32)
        self.writer = np.full(n, -1, dtype=np.int64)

    def add_coverage(self, name: str, idx: np.ndarray, c: Cov | None, into=None) -> None:
        """Add per-element coverage `c` (rows for the flat elements `idx`) to `into`
        (`atomic_cov` by default)."""
        if c is None:
            return
        into = self.atomic_cov if into is None else into
        old = into.get(name)
        lo = c.lo if old is None else min(old.lo, c.lo)
        hi = c.hi if old is None else max(old.hi, c.hi)
        total = np.zeros((self.stores.size, hi - lo), dtype=np.int32) if old is None \
            else widen(old, lo, hi)
        np.add.at(total, idx, widen(c, lo, hi))
        into[name] = Cov(lo, total)

    def copy(self) -> "TensorWrites":
        """An independent copy (a path of an instance starts from it)."""
        out = TensorWrites(self.extent, keep=self.keep)
        out.stores, out.atomics, out.writer = self.stores.copy(), self.atomics.copy(), \
            self.writer.copy()
        out.records = list(self.records)
        out.atomic_cov = {n: Cov(c.lo, c.counts.copy()) for n, c in self.atomic_cov.items()}
        out.written_cov = {n: Cov(c.lo, c.counts.copy()) for n, c in self.written_cov.items()}
        out.written_junk = None if self.written_junk is None else self.written_junk.copy()
        out.written_doubt = self.written_doubt
        out.atomic_line = self.atomic_line
        out.pack_records = {k: _copied(v) for k, v in self.pack_records.items()}
        return out

    def read(self, flat: np.ndarray, active: np.ndarray) -> dict[str, Cov]:
        """The coverage written to the elements `flat` (an access's shape), where `active`."""
        out = {}
        for name, c in self.written_cov.items():
            rows = c.counts[flat] * active[..., None]
            out[name] = Cov(c.lo, rows)
        return out


def _copied(v):
    """An independent copy of a pack's record entry (arrays, lists, dicts of them)."""
    if isinstance(v, np.ndarray):
        return v.copy()
    if isinstance(v, dict):
        return {k: _copied(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_copied(x) for x in v]
    if isinstance(v, set):
        return set(v)
    return v


def store(it, e: ir.Call) -> None:
    """`store` and `atomic_add`: bounds, ownership (tags equal the destination), the write
    record (exactly once) and the task's coverage of stored elements."""
    ref, line, op = reference(it, e.arg("ref")), e.loc.line, e.fn
    v = bcast(it.val(e.arg("value")), ref.shape)
    if _flag(e, "tma"):
        active = ref.in_bounds()   # the TMA unit drops out-of-bounds elements
    else:
        active = access_mask(it, e, ref)
        _bounds(it, op, line, ref, active, v)
    p = it.probe_at(op, line)
    if p is not None:
        it.capture({"coords": list(ref.at(p.element)), "mask": bool(active[p.element]),
                    "value": summary(v, p.element)})
    _ownership(it, op, line, ref, v, active)
    written = active & ref.in_bounds()
    idx = ref.flat()[written]
    tw = it.writes[ref.param.name]
    _record(it, op, line, ref, v, tw, written, idx)
    if tw.keep:  # a later launch reads this tensor: remember what each element covers
        for name, c in v.cov.items():
            tw.add_coverage(name, idx, Cov(c.lo, c.counts[written]), into=tw.written_cov)
        if v.value is None and floats.written(floats.of(v)):
            tw.written_doubt = max(tw.written_doubt or 0.0, floats.of(v).mag)
        if v.junk is not None and v.junk[written].any():
            if tw.written_junk is None:
                tw.written_junk = np.zeros(tw.stores.size, dtype=bool)
            tw.written_junk[idx[np.asarray(v.junk)[written]]] = True
    _no_junk(it, op, line, ref, v, written)
    for rule in it.sh.pack.concrete_write if it.sh.pack is not None else ():
        rule(it, op, line, ref, v, active)
    for name, (lo_text, hi_text) in it.task_cov.get(ref.param.name, {}).items():
        where = dict(zip(ref.param.dims, ref.coords))   # the bounds may name pos(DIM)
        lo, hi = (bound(t, it.sizes, where) for t in (lo_text, hi_text))
        if op == "atomic_add":
            tw.add_coverage(name, idx, None if cov_of(v, name) is None else
                            Cov(cov_of(v, name).lo, cov_of(v, name).counts[written]))
            tw.atomic_line = line
            continue
        it.checked(op, line, "coverage")
        el = None
        if it.wants("coverage", line):
            el = first(coverage_mismatch(v, name, lo, hi, written))
        if el is not None:
            got = cov_text(v, name, el)
            want = expect_range(int(np.broadcast_to(lo, ref.shape)[el]),
                                int(np.broadcast_to(hi, ref.shape)[el]))
            it.violate("coverage", op, line, f"{ref.param.name}{list(ref.at(el))} is stored "
                       f"with {name} coverage {got}; the task requires {want}, "
                       "each index once", element=el, tile=v, expected={name: want},
                       actual={name: got}, tensor=ref.param.name, coords=ref.at(el))


def _no_junk(it, op: str, line: int, ref: Ref, v: Val, written: np.ndarray) -> None:
    """No stored element holds a contribution of no data (`floats`, SEMANTICS.md)."""
    it.checked(op, line, "coverage")
    if v.junk is None or not it.wants("coverage", line):
        return
    el = first(np.broadcast_to(v.junk, ref.shape) & written)
    if el is None:
        return
    it.violate("coverage", op, line, f"{ref.param.name}{list(ref.at(el))} is stored with "
               "products of masked-off elements that are not zero: a reduction lane carrying "
               "none of the contracted indices adds its value", element=el, tile=v,
               expected={"contributions without an index": 0},
               actual={"contributions without an index": ">= 1"}, tensor=ref.param.name,
               coords=ref.at(el))


def _ownership(it, op: str, line: int, ref: Ref, v: Val, active: np.ndarray) -> None:
    it.checked(op, line, "ownership")
    carried = [(d, dim) for d, dim in enumerate(ref.param.dims) if dim in v.tags]
    if not carried or not it.wants("ownership", line):
        return
    bad = np.zeros(ref.shape, dtype=bool)
    for d, dim in carried:
        t = v.tags[dim]
        bad |= active & t.has & (t.val != ref.coords[d])
    el = first(bad)
    if el is None:
        return
    coords = ref.at(el)
    actual = {dim: int(v.tags[dim].val[el]) for _, dim in carried if v.tags[dim].has[el]}
    it.violate("ownership", op, line, f"{op} writes an element tagged "
               f"{', '.join(f'{k}={x}' for k, x in actual.items())} to {ref.param.name}"
               f"{list(coords)}", element=el, tile=v,
               expected={dim: coords[d] for d, dim in carried}, actual=actual,
               tensor=ref.param.name, coords=coords)


def _record(it, op: str, line: int, ref: Ref, v: Val, tw: TensorWrites,
            written: np.ndarray, idx: np.ndarray) -> None:
    """Count the writes; a second plain store of an element (another instance, another
    iteration, or twice in one access), or a store meeting an atomic_add, is **exactly_once**."""
    it.checked(op, line, "exactly_once")
    me = len(tw.records)
    tw.records.append({"program_id": list(it.pid), "names": it.names(), "line": line, "op": op})
    if op == "store":
        bad = (tw.stores[idx] > 0) | (tw.atomics[idx] > 0)
        dup = np.ones(idx.shape, dtype=bool)
        dup[np.unique(idx, return_index=True)[1]] = False
        bad |= dup
    else:
        bad = tw.stores[idx] > 0
    if bad.any() and it.wants("exactly_once", line):
        k = int(np.argmax(bad))
        el = tuple(int(i) for i in np.unravel_index(np.flatnonzero(written)[k], ref.shape))
        prev = tw.records[tw.writer[idx[k]]] if tw.writer[idx[k]] >= 0 else tw.records[me]
        writes = int(tw.stores[idx[k]] + tw.atomics[idx[k]] + np.sum(idx[:k + 1] == idx[k]))
        msg = (f"{ref.param.name}{list(ref.at(el))} is written again here after a "
               f"{prev['op']} by program {tuple(prev['program_id'])} at line {prev['line']}; "
               "only atomic_add may write an element twice")
        it.violate("exactly_once", op, line, msg, element=el, tile=v,
                   expected={"writes": 1}, actual={"writes": writes}, tensor=ref.param.name,
                   coords=ref.at(el), other=dict(prev))
    np.add.at(tw.stores if op == "store" else tw.atomics, idx, 1)
    w = tw.writer[idx]
    tw.writer[idx] = np.where(w < 0, me, w)
