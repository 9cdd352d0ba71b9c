"""The tokens of a routing spec: which experts each token takes, given how many pairs each
expert gets and where the placed pairs rank (`realize.py`, step 2).

Each expert's run is split at its placed pairs into segments of tokens with a known number
of members; tokens are filled in order, the stretches between placed tokens at once (column
by column, so no token takes an expert twice), the experts with the least slack first. The
fill is greedy: it may find no tokens for counts that have some (`realize` then tries other
counts); what it builds is checked by `realize.agrees`.
"""

from __future__ import annotations

import bisect

from .postconditions import Routing


class Unfillable(Exception):
    """The greedy fill found no tokens for a spec."""


def build(spec: dict, r: Routing):
    """The T x TOPK top-k choice of a spec (a numpy array), or None when the greedy fill
    finds none. A spec of `{"ids": ...}` is the choice itself."""
    import numpy as np
    if "ids" in spec:
        return np.asarray(spec["ids"], dtype=np.int64)
    try:
        return _Fill(spec, r).run()
    except Unfillable:
        return None


class _Fill:
    """Tokens in order; each expert's members split into segments at its placed tokens."""

    def __init__(self, spec: dict, r: Routing):
        import numpy as np
        self.np, self.r = np, r
        T, E, K = r.tokens, r.experts, r.topk
        self.ids = np.full((T, K), -1, dtype=np.int64)
        self.member: dict = {}            # token -> {expert: slot}
        anchors: dict = {e: [] for e in range(E)}
        for t, k, e, rank in spec["anchors"]:
            anchors[e].append((t, rank))
            self._put(t, e, k)
        self.forced: dict = {e: [] for e in range(E)}  # tokens on e with no rank
        for t, k, e in spec["slots"]:
            self._put(t, e, k)
            self.forced[e].append(t)
        for e in range(E):
            anchors[e].sort()
            self.forced[e].sort()
        counts = spec["counts"]
        self.segments = []  # per expert: [(end token, demand)], the last ending at T
        for e in range(E):
            segs, prev = [], -1
            for t, rank in anchors[e]:
                segs.append((t, rank - prev - 1))
                prev = rank
            segs.append((T, counts[e] - prev - 1))
            self.segments.append(segs)
        self.seg = [0] * E
        self.full = sorted(t for t, row in self.member.items() if len(row) == K)
        self.full_with = {e: [t for t in self.full if e in self.member[t]] for e in range(E)}
        self.rem = np.array([s[0][1] for s in self.segments], dtype=np.int64)
        self.anchored = {(t, e) for e in range(E) for t, _ in anchors[e]}

    def _put(self, t: int, e: int, k: int) -> None:
        row = self.member.setdefault(t, {})
        if row.get(e, k) != k or k in [y for x, y in row.items() if x != e] or \
                not 0 <= k < self.r.topk:
            raise Unfillable(f"token {t}: slot {k} of expert {e}")
        row[e] = k

    def end(self, e: int) -> int:
        return self.segments[e][self.seg[e]][0]

    def closed(self, e: int, a: int, b: int) -> int:
        """Tokens in [a, b) whose experts the facts all name, none of them e."""
        f, w = self.full, self.full_with[e]
        return (bisect.bisect_left(f, b) - bisect.bisect_left(f, a)) - \
            (bisect.bisect_left(w, b) - bisect.bisect_left(w, a))

    def pending(self, e: int, a: int) -> int:
        """Forced tokens of expert e in [a, end of its segment)."""
        f = self.forced[e]
        return bisect.bisect_left(f, self.end(e)) - bisect.bisect_left(f, a)

    def run(self):
        T = self.r.tokens
        t = 0
        for v in sorted(self.member) + [T]:
            if v > t:
                self._stretch(t, v)
            if v >= T:
                break
            self._token(v)
            t = v + 1
        if (self.rem != 0).any():
            raise Unfillable("members left over")
        return self.ids

    def _choose(self, a: int, b: int, row: dict, need: int):
        """How many tokens of [a, b) take each expert besides those of `row` (forced on
        them), `need` in all: what each expert's segment still needs from here is due by
        its end; the experts with the least slack go first."""
        np, E, L = self.np, self.r.experts, b - a
        lo = np.zeros(E, dtype=np.int64)
        hi = np.zeros(E, dtype=np.int64)
        slack = np.zeros(E, dtype=np.int64)
        for e in range(E):
            if e in row:
                continue
            free = self.rem[e] - self.pending(e, b)
            if free < 0:
                raise Unfillable(f"expert {e} over its members")
            later = (self.end(e) - b) - self.pending(e, b) - self.closed(e, b, self.end(e))
            lo[e], hi[e] = max(0, free - later), min(free, L)
            slack[e] = later + L - free
        x = lo.copy()
        left = need - int(x.sum())
        if left < 0 or (hi < lo).any():
            raise Unfillable(f"tokens [{a}, {b}): no room for the members due")
        for e in np.lexsort((-hi, slack)):
            if left == 0:
                break
            add = min(int(hi[e] - x[e]), left)
            x[e] += add
            left -= add
        if left:
            raise Unfillable(f"tokens [{a}, {b}): too few members for the slots")
        return x

    def _stretch(self, a: int, b: int) -> None:
        np = self.np
        x = self._choose(a, b, {}, (b - a) * self.r.topk)
        seq = np.repeat(np.arange(self.r.experts), x)
        self.ids[a:b] = seq.reshape(self.r.topk, b - a).T
        self.rem -= x

    def _token(self, v: int) -> None:
        np = self.np
        row = self.member[v]
        for e in row:
            if (v, e) in self.anchored:
                if self.rem[e] != 0 or self.end(e) != v:
                    raise Unfillable(f"expert {e}: rank of token {v}")
                self.seg[e] += 1
                self.rem[e] = self.segments[e][self.seg[e]][1]
            else:
                if self.rem[e] <= 0:
                    raise Unfillable(f"expert {e} has no member left for token {v}")
                self.rem[e] -= 1
        x = self._choose(v, v + 1, row, self.r.topk - len(row))
        slots = [k for k in range(self.r.topk) if k not in row.values()]
        for e, k in row.items():
            self.ids[v, k] = e
        for e, k in zip(np.flatnonzero(x), slots):
            self.ids[v, k] = e
        self.rem -= x
