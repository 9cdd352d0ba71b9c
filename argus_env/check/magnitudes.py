"""The numbers and scalar rules the float facts of both interpreters share
(`symbolic/floats.py`, `concrete/floats.py`; SEMANTICS.md, "Float facts"): one definition,
so that the prover and its cross-check cannot drift apart."""

from __future__ import annotations

import math

#: the magnitude data stays within (loaded values, sums and products of them)
BOUND = 2.0 ** 64
#: a constant at most -LOW_FILL is a "minus infinity" fill (-1e30, -inf)
LOW_FILL = 2.0 ** 70
#: a -inf-like bound that falls below this (after additions and scales) is no longer one
KEEP = LOW_FILL / 2
#: `exp` / `exp2` of a value at most -EXP_ZERO is exactly 0 in every float precision
EXP_ZERO = 1100.0
#: a value whose magnitude (log2 of what constants multiplied data by) reaches this may
#: lie beyond the bound (the 2^16 of a large factor)
MAG_LIMIT = 16.0
#: f16's largest finite value is 65504 (about 2^16): a cast there of a value of
#: magnitude past this may overflow to inf
F16_MAG = 15.0


def grow(m: float, n: int) -> float:
    """The magnitude of a sum of `n` values of magnitude `m` (data stays data: the bound's
    assumption covers sums of data)."""
    return m + math.log2(n) if m > 0 and n > 1 else m


def plus(a: float, b: float) -> float:
    """The magnitude of a sum of two values of magnitudes `a` and `b`."""
    return max(a, b) + (1.0 if min(a, b) > 0 else 0.0)


def exp_mag(m: float, base2: bool) -> float:
    """The magnitude of `exp` / `exp2` of a value of magnitude `m`: of data, data (the
    assumption); else at most 2^(2^m) (times log2(e))."""
    if m <= 0:
        return 0.0
    if m > 30:
        return math.inf
    return 2.0 ** m * (1.0 if base2 else math.log2(math.e))


__all__ = ["BOUND", "LOW_FILL", "KEEP", "EXP_ZERO", "MAG_LIMIT", "F16_MAG", "grow", "plus",
           "exp_mag"]
