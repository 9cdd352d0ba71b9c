"""Float facts in the concrete interpreter: the rules of `symbolic/floats.py`, per element.

A `Facts` holds, for every element of a tile, whether it is exactly zero, the bound L of a
-inf-like (`low`, 0 where unknown) or +inf-like (`high`) value, and whether it may lie
beyond the data bound below or above (`maylow`, `mayhigh`). A `Val` without facts is data:
bounded, not known to be zero. A reduction's lanes are read exactly here (a row maximum
doubts below only where every lane does), where the symbolic checker uses the first lane
as a witness; loops run iteration by iteration. `junk` (a bool per element, on `Val`)
marks an element that a reduction lane of no data added to (SEMANTICS.md, "Float facts").
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..magnitudes import (BOUND, EXP_ZERO, F16_MAG, KEEP, LOW_FILL, MAG_LIMIT, exp_mag,
                          grow, plus)


@dataclass
class Facts:
    zero: np.ndarray     # bool
    low: np.ndarray      # float64: L where the element is at most -L, else 0
    high: np.ndarray     # float64: L where at least L, else 0
    maylow: np.ndarray   # bool
    mayhigh: np.ndarray  # bool
    mag: float = 0.0     # the tile's magnitude (symbolic/floats.py), one number

    def __post_init__(self) -> None:
        if self.mag >= MAG_LIMIT:  # may lie beyond the bound, both ways
            yes = np.ones(np.shape(self.maylow), dtype=bool)
            self.maylow, self.mayhigh = yes, yes.copy()

    def map(self, fn) -> "Facts":
        return Facts(fn(self.zero), fn(self.low), fn(self.high), fn(self.maylow),
                     fn(self.mayhigh), self.mag)


def of(v, shape=None) -> Facts:
    """`v`'s facts broadcast to `shape` (its own by default); data where it has none."""
    shape = tuple(v.shape if shape is None else shape)
    f = v.ff
    if f is None:
        no = np.zeros(shape, dtype=bool)
        z = np.zeros(shape)
        return Facts(no, z, z, no, no)
    return f.map(lambda a: np.broadcast_to(a, shape))


def junk_of(v, shape=None) -> np.ndarray:
    shape = tuple(v.shape if shape is None else shape)
    return np.zeros(shape, dtype=bool) if v.junk is None else np.broadcast_to(v.junk, shape)


def constant(c: float, shape=()) -> Facts:
    shape = tuple(shape)
    full = lambda x, dt=None: np.full(shape, x, dtype=dt)  # noqa: E731
    big = not (abs(c) < BOUND)
    return Facts(full(c == 0), full(-c if c <= -LOW_FILL else 0.0),
                 full(c if c >= LOW_FILL else 0.0), full(big and not c > 0),
                 full(big and not c < 0),
                 0.0 if big or c == 0 else max(0.0, math.log2(abs(c))))


def unknown(shape) -> Facts:
    yes = np.ones(tuple(shape), dtype=bool)
    return Facts(~yes, np.zeros(shape), np.zeros(shape), yes, yes)


def data(zero: np.ndarray) -> Facts:
    no = np.zeros(zero.shape, dtype=bool)
    return Facts(np.asarray(zero, dtype=bool), np.zeros(zero.shape), np.zeros(zero.shape),
                 no, no)


def _keep(L: np.ndarray) -> np.ndarray:
    return np.where(L >= KEEP, L, 0.0)


def add(x: Facts, y: Facts, negate_y: bool) -> Facts:
    ylow, yhigh = (y.high, y.low) if negate_y else (y.low, y.high)
    ymaylow, ymayhigh = (y.mayhigh, y.maylow) if negate_y else (y.maylow, y.mayhigh)
    low = np.maximum(np.where(~ymayhigh, _keep(x.low - BOUND), 0.0),
                     np.where(~x.mayhigh, _keep(ylow - BOUND), 0.0))
    high = np.maximum(np.where(~ymaylow, _keep(x.high - BOUND), 0.0),
                      np.where(~x.maylow, _keep(yhigh - BOUND), 0.0))
    return Facts(x.zero & y.zero, low, high, x.maylow | ymaylow, x.mayhigh | ymayhigh,
                 plus(x.mag, y.mag))


def mul(x: Facts, y: Facts, fx: float | None, fy: float | None) -> Facts:
    zero = (x.zero & ~(y.maylow | y.mayhigh)) | (y.zero & ~(x.maylow | x.mayhigh))
    for v, c in ((x, fy), (y, fx)):
        if c is not None and math.isfinite(c) and c != 0:
            if c > 0:
                low, high, maylow, mayhigh = _keep(v.low * c), _keep(v.high * c), v.maylow, \
                    v.mayhigh
            else:
                low, high, maylow, mayhigh = _keep(v.high * -c), _keep(v.low * -c), \
                    v.mayhigh, v.maylow
            if abs(c) > 1:
                either = maylow | mayhigh | (abs(c) >= 2 ** 16)
                maylow = mayhigh = either
            return Facts(zero, low, high, np.asarray(maylow), np.asarray(mayhigh),
                         max(0.0, v.mag + math.log2(abs(c))))
    doubt = x.maylow | x.mayhigh | y.maylow | y.mayhigh
    z = np.zeros(zero.shape)
    return Facts(zero, z, z, doubt, doubt, x.mag + y.mag)


def div(x: Facts, y: Facts, fy: float | None) -> Facts:
    if fy is not None and math.isfinite(fy) and fy != 0:
        return mul(x, y, None, 1.0 / fy)
    return unknown(np.broadcast_shapes(x.zero.shape, y.zero.shape))


def neg(x: Facts) -> Facts:
    return Facts(x.zero, x.high, x.low, x.mayhigh, x.maylow, x.mag)


def minmax(fn: str, x: Facts, y: Facts) -> Facts:
    mag = max(x.mag, y.mag)
    if fn == "maximum":
        return Facts(x.zero & y.zero, np.minimum(x.low, y.low), np.maximum(x.high, y.high),
                     x.maylow & y.maylow, x.mayhigh | y.mayhigh, mag)
    return Facts(x.zero & y.zero, np.maximum(x.low, y.low), np.minimum(x.high, y.high),
                 x.maylow | y.maylow, x.mayhigh & y.mayhigh, mag)


def math_call(fn: str, x: Facts) -> Facts:
    shape = x.zero.shape
    no, z = np.zeros(shape, dtype=bool), np.zeros(shape)
    nan = x.maylow & x.mayhigh  # a NaN stays NaN
    if fn in ("exp", "exp2"):
        return Facts(x.low >= EXP_ZERO, z, z, nan, x.mayhigh.copy(),
                     exp_mag(x.mag, fn == "exp2"))
    if fn == "sigmoid":
        return Facts(no, z, z, nan, nan.copy())
    if fn == "sqrt":  # of a negative number: NaN
        doubt = x.mayhigh | x.maylow | ~x.zero
        return Facts(x.zero, z, z, doubt, doubt.copy(), x.mag / 2)
    if fn == "abs":
        return Facts(x.zero, z, np.maximum(x.low, x.high), nan, x.maylow | x.mayhigh, x.mag)
    return unknown(shape)


def select(cond: np.ndarray, x: Facts, y: Facts) -> Facts:
    return Facts(*(np.where(cond, a, b) for a, b in
                   ((x.zero, y.zero), (np.where(cond, x.low, 0.0), np.where(cond, 0.0, y.low)),
                    (np.where(cond, x.high, 0.0), np.where(cond, 0.0, y.high)),
                    (x.maylow, y.maylow), (x.mayhigh, y.mayhigh))), mag=max(x.mag, y.mag))


def reduced(fn: str, x: Facts, ax: int) -> Facts:
    """`A.max` / `A.min` / `A.sum` over axis `ax`, lanes read exactly."""
    shape = x.zero.shape[:ax] + x.zero.shape[ax + 1:]
    no, z = np.zeros(shape, dtype=bool), np.zeros(shape)
    if fn == "max":
        return Facts(no, z, x.high.max(axis=ax), x.maylow.all(axis=ax), x.mayhigh.any(axis=ax),
                     x.mag)
    if fn == "min":
        return Facts(no, x.low.max(axis=ax), z, x.maylow.any(axis=ax), x.mayhigh.all(axis=ax),
                     x.mag)
    doubt = (x.maylow | x.mayhigh).any(axis=ax)
    return Facts(no, z, z, doubt, doubt, grow(x.mag, x.zero.shape[ax]))


def contracted(a: Facts, b: Facts, shape, k: int = 1, acc: Facts | None = None) -> Facts:
    doubt = bool(a.maylow.any() or a.mayhigh.any() or b.maylow.any() or b.mayhigh.any())
    no = np.zeros(shape, dtype=bool)
    mag = grow(a.mag + b.mag, k)
    low, high = no | doubt, no | doubt
    if acc is not None:  # the accumulator's doubts go on
        low = low | acc.maylow | acc.mayhigh
        high = low.copy()
        mag = plus(mag, acc.mag)
    return Facts(no, np.zeros(shape), np.zeros(shape), low, high, mag)


def cast(x: Facts, dtype: str) -> Facts:
    """A cast to f16 of a magnitude past `F16_MAG` may overflow."""
    if dtype == "f16" and x.mag > F16_MAG:
        yes = np.ones(x.zero.shape, dtype=bool)
        return Facts(x.zero, x.low, x.high, yes, yes.copy(), x.mag)
    return x


def written(x: Facts) -> bool:
    """Whether a stored value brings doubts back to a later launch's load."""
    return bool(x.maylow.any() or x.mayhigh.any() or x.mag > 0)


def compare(op: str, x: Facts, fy: float | None) -> np.ndarray | None:
    """`x <op> c` where every element of `x` is known beyond `c` (True), else None."""
    if fy is None:
        return None
    bound = x.high if op in (">", ">=") else x.low if op in ("<", "<=") else None
    if bound is None or not np.all(bound > abs(fy)):
        return None
    return np.ones(x.zero.shape, dtype=bool)


__all__ = ["Facts", "of", "junk_of", "constant", "unknown", "data", "add", "mul", "div", "neg",
           "minmax", "math_call", "select", "reduced", "contracted", "cast", "written", "compare"]
