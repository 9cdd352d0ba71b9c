"""Routing arrays that realise a counterexample: a top-k choice whose `routing.align`
agrees with what a counterexample's model says of the routing arrays.

A violation's model fixes a few values of the routing functions (`Facts`: `sorted_ids` at
some positions, `expert_ids` at some blocks, `topk_ids` at some pairs). `realize` finds a
top-k choice (T x TOPK distinct experts per token) with exactly those values, in two steps:

1. counts: how many pairs each expert gets, and the rank in its run of every pair the
   facts place (a small integer problem, solved by z3): the facts' blocks lie in their
   experts' runs, their padding past the runs' pairs, a pair at rank r has r earlier tokens
   on its expert and the rest later;
2. tokens (`fill.py`): each expert's run is split at its placed pairs into segments of
   tokens with a known number of members; tokens are filled in order, stretches between
   placed tokens at once (column by column, so no token takes an expert twice), the
   experts with the least slack first.

The result is checked, not trusted: it must be a top-k choice (TOPK distinct experts per
token) whose `routing.align` agrees with every fact. The choice is kept as a small `spec`
(counts, placed pairs), from which `arrays` rebuilds it deterministically: a violation
carries the spec, and the replay (`replay.py`) runs the program on the arrays.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from . import routing
from .fill import build
from .postconditions import Routing

try:
    import z3
except ImportError:  # pragma: no cover - a machine that only measures
    z3 = None
else:
    from argus_env.check.isolated import Scope, back
    from argus_env.check.symbolic.values import (And, If, Implies, Or, Sum, add, eq, ge, gt,
                                                 int_val, int_var, le, lt, mul, ne, sub)


@dataclass
class Facts:
    """Values of the routing arrays a counterexample fixes."""

    sid: dict = field(default_factory=dict)    # position -> pair or PAD
    bexp: dict = field(default_factory=dict)   # block -> expert or -1
    tid: dict = field(default_factory=dict)    # (token, slot) -> expert
    inv: dict = field(default_factory=dict)    # pair -> position

    def key(self) -> tuple:
        return tuple(tuple(sorted(d.items())) for d in (self.sid, self.bexp, self.tid, self.inv))


#: counts tried when the greedy fill finds no tokens for them
COUNT_TRIES = 3


class Unrealisable(Exception):
    """No top-k choice has these values (or none was found); `core`: facts that already
    have none, where the counts problem found them (else None: all of them)."""

    def __init__(self, message: str, core: "Facts | None" = None):
        super().__init__(message)
        self.core = core


def realize(facts: Facts, r: Routing, scope=None) -> dict | None:
    """A spec (`arrays` rebuilds the routing from it) whose arrays agree with `facts`, or
    None when none was found."""
    return realize_or_core(facts, r, scope)[0]


def realize_or_core(facts: Facts, r: Routing, scope=None) -> tuple[dict | None, Facts]:
    """(spec, None), or (None, facts no top-k choice was found for: a core of `facts`
    where the counts problem proved it has none, else `facts`). `scope`: the z3 context
    the counts problems are solved in (`isolated.Scope`; a check passes its own, whose
    queries come in the same order in every process), else one of their own."""
    # in the order of their keys: the counts problem's constraints follow the facts'
    # order, and its model (of several that may exist) follows the constraints', while
    # the facts come in the order a z3 model lists its entries, which is no fixed one
    facts = Facts(*[dict(sorted(d.items())) for d in (facts.sid, facts.bexp, facts.tid,
                                                        facts.inv)])
    tried = []
    try:
        placed, sid = _placed(facts, r)
        for _ in range(COUNT_TRIES):  # the fill is greedy: other counts may fill
            spec = _counts(facts, sid, placed, r, tried, scope)
            ids = build(spec, r)
            if ids is not None and agrees(ids, facts, r):
                return spec, None
            tried.append(spec)
    except Unrealisable as e:
        if not tried:
            return None, e.core if e.core is not None and _any(e.core) else facts
    return None, facts


def _any(f: Facts) -> bool:
    return bool(f.sid or f.bexp or f.tid or f.inv)


def arrays(spec: dict, r: Routing):
    """(topk_ids, sorted_ids, expert_ids) as torch tensors, from a spec of `realize`."""
    import torch
    ids = build(spec, r)
    if ids is None:
        raise ValueError("this routing spec builds no top-k choice")
    tids = torch.tensor(ids, dtype=torch.int32)
    sorted_ids, expert_ids = routing.align(tids, r.experts, r.block, r.rows)
    return tids, sorted_ids, expert_ids


def agrees(ids, facts: Facts, r: Routing) -> bool:
    """The arrays of top-k choice `ids` (a numpy array) have every value of `facts` (they
    are the routing step's own arrays: `routing.align` builds them, here by its numpy twin
    `routing.align_numpy`, which `tests/tasks/test_moe_task.py` holds equal to it; so they
    meet its postconditions, which that test checks of it)."""
    if ids.shape != (r.tokens, r.topk) or (ids < 0).any() or (ids >= r.experts).any() or \
            any(len(set(row)) != r.topk for row in ids.tolist()):
        return False
    sid, bexp = routing.align_numpy(ids, r.experts, r.block, r.rows)
    return all(int(sid[p]) == v for p, v in facts.sid.items()) and \
        all(int(bexp[b]) == v for b, v in facts.bexp.items()) and \
        all(int(ids[t][k]) == v for (t, k), v in facts.tid.items()) and \
        all(0 <= p < len(sid) and int(sid[p]) == q for q, p in facts.inv.items())


# ---------------------------------------------------------------- step 1: counts
def _placed(facts: Facts, r: Routing) -> tuple[dict, dict]:
    """{(token, slot): (position, expert or None)} for every pair the facts place, and the
    positions' values with the inverse's facts folded in."""
    sid = dict(facts.sid)
    for q, p in facts.inv.items():
        if sid.get(p, q) != q or not 0 <= q < r.pad or not 0 <= p < r.rows:
            raise Unrealisable(f"inverse of pair {q} at {p}")
        sid[p] = q
    seen = {}
    for p, q in sid.items():
        if not 0 <= q <= r.pad or (q != r.pad and seen.setdefault(q, p) != p):
            raise Unrealisable(f"position {p} holds {q}")
    for b, e in facts.bexp.items():
        if not -1 <= e < r.experts:
            raise Unrealisable(f"block {b} of expert {e}")
    per_token: dict = {}
    for (t, k), e in facts.tid.items():
        if not 0 <= e < r.experts or per_token.setdefault(t, {}).setdefault(e, k) != k:
            raise Unrealisable(f"token {t} takes expert {e} twice")
    placed = {}
    for p, q in sid.items():
        if q == r.pad:
            continue
        t, k = divmod(q, r.topk)
        e, e2 = facts.bexp.get(p // r.block), facts.tid.get((t, k))
        if e is not None and e2 is not None and e != e2 or e == -1:
            raise Unrealisable(f"pair {q} at {p}: experts {e} and {e2}")
        placed[(t, k)] = (p, e if e is not None else e2)
    return placed, sid


def _counts(facts: Facts, sid: dict, placed: dict, r: Routing, tried=(), scope=None) -> dict:
    """Counts per expert and the ranks of the placed pairs, from a small z3 problem over
    the experts the facts name; the experts between two named ones are one group (their
    blocks and pairs: any pair total between the least that fills the blocks and the most
    they hold is reached by some counts, `_spread`). Every constraint is tracked by the
    facts it comes from: when there are no counts, `Unrealisable.core` is the facts of an
    unsatisfiable core (what the checker then excludes)."""
    T, BM = r.tokens, r.block
    named = sorted({e for e in facts.bexp.values() if e >= 0} |
                   {e for _, e in placed.values()} | set(facts.tid.values()))
    if any(e is None for e in named):
        raise Unrealisable("a placed pair of no known expert")
    # tokens whose TOPK experts the facts all name are closed to every other expert
    rows: dict = {}
    for (t, k), (_, e) in placed.items():
        rows.setdefault(t, set()).add(e)
    for (t, k), e in facts.tid.items():
        rows.setdefault(t, set()).add(e)
    full = sorted(t for t, es in rows.items() if len(es) >= r.topk)
    track = _Track(facts, placed, sid, r)
    closed = track.tokens(full)  # the facts that close those tokens

    def open_to(e, lo, hi):  # tokens in [lo, hi) that expert e may take
        return (hi - lo) - sum(1 for t in full if lo <= t < hi and e not in rows[t])
    c = {e: int_var(f"count{e}") for e in named}
    nb = {e: int_var(f"blocks{e}") for e in named}    # ceil(c / BM), without a division
    for e in named:
        track.plain(ge(c[e], 0), ge(nb[e], 0), le(nb[e], r.run_blocks),
                    le(c[e], mul(nb[e], BM)), gt(c[e], mul(sub(nb[e], 1), BM)))
        track.add(le(c[e], open_to(e, 0, T)), closed)
    rest = Routing(BM, T - len(full), r.topk, r.experts, r.rows)  # an expert no fact names
    groups, start, acc, pairs = [], {}, int_val(0), []
    for lo, hi in zip([-1] + named, named + [r.experts]):
        n = hi - lo - 1
        if n > 0:  # the experts strictly between two named ones
            g, q = int_var(f"group_blocks{lo}"), int_var(f"group_pairs{lo}")
            track.add(And(ge(g, 0), le(g, n * rest.run_blocks), ge(q, _least(g, n, rest)),
                          le(q, _most(g, n, rest))), closed)
            groups.append((lo + 1, n, g, q))
            acc, pairs = add(acc, g), pairs + [q]
        if hi < r.experts:
            start[hi] = acc
            acc, pairs = add(acc, nb[hi]), pairs + [c[hi]]
    used = acc
    track.plain(eq(Sum(pairs), r.pad), le(used, r.blocks))
    for b, e in facts.bexp.items():
        track.add(le(used, b) if e < 0 else And(le(start[e], b), gt(add(start[e], nb[e]), b)),
                  [("bexp", b)])
    ranks = {}
    for (t, k), (p, e) in placed.items():
        rank = sub(int_val(p), mul(start[e], BM))
        ranks[(t, k)] = rank
        track.add(And(ge(rank, 0), lt(rank, c[e])), [("pair", (t, k))])
        track.add(And(le(rank, open_to(e, 0, t)),
                      le(sub(sub(c[e], 1), rank), open_to(e, t + 1, T))),
                  [("pair", (t, k))] + closed)
    for p, q in sid.items():
        if q != r.pad:
            continue
        e = facts.bexp.get(p // BM)
        if e is None:
            raise Unrealisable(f"padding at {p} in a block of no known expert")
        if e >= 0:
            track.add(ge(sub(int_val(p), mul(start[e], BM)), c[e]),
                      [("sid", p), ("bexp", p // BM)])
    keys = sorted(placed)
    for i, a in enumerate(keys):
        for b in keys[i + 1:]:
            if placed[a][1] != placed[b][1]:
                continue
            if a[0] == b[0]:
                raise Unrealisable(f"token {a[0]} takes expert {placed[a][1]} twice",
                                   track.facts_of([("pair", a), ("pair", b)]))
            lo, hi = (a, b) if a[0] < b[0] else (b, a)
            apart = sub(ranks[hi], ranks[lo])
            track.add(And(ge(apart, 1), le(apart, hi[0] - lo[0])), [("pair", a), ("pair", b)])
    _forced_fit(track, facts, placed, ranks, c, r, open_to, closed)
    _windows(track, facts, placed, ranks, c, groups, r, rows, open_to)
    for spec in tried:  # counts and ranks the fill found no tokens for
        track.plain(Or(*[ne(c[e], spec["counts"][e]) for e in named],
                       *[ne(ranks[(t, k)], rank) for t, k, _, rank in spec["anchors"]]))
    m = track.check(scope)

    def val(x):
        return m.eval(x, model_completion=True).as_long()
    counts = [0] * r.experts
    for e in named:
        counts[e] = val(c[e])
    for first, n, g, q in groups:
        counts[first:first + n] = _spread(val(g), val(q), n, rest)
    anchors = [[t, k, placed[(t, k)][1], val(ranks[(t, k)])] for t, k in keys]
    slots = [[t, k, e] for (t, k), e in sorted(facts.tid.items()) if (t, k) not in placed
             and 0 <= t < T and 0 <= k < r.topk]
    return {"counts": counts, "anchors": anchors, "slots": slots}


#: the counts problem's budget (ms), and the longer one of a second try after `unknown`
TIMEOUT_MS, RETRY_TIMEOUT_MS = 2000, 10000


class _Track:
    """The counts problem, its constraints labelled by the facts they come from. It is
    solved with fixed seeds in a z3 context apart from the process's (`check`): its own,
    or the check's that asks it (which makes the same terms, in the same order, in every
    process), so that its answer does not depend on what the process solved before."""

    def __init__(self, facts: Facts, placed: dict, sid: dict, r: Routing):
        self.constraints: list = []
        self.facts, self.placed, self.sid, self.r = facts, placed, sid, r
        self.labels: dict = {}   # label name -> (fact key, Bool)
        self._names: dict = {}   # fact key -> its label's name
        self._assumed: dict = {}  # facts' keys -> the conjunction of their labels

    def label(self, key) -> z3.BoolRef:
        name = self._names.get(key)
        if name is None:
            name = self._names[key] = f"fact{len(self.labels)}"
            self.labels[name] = (key, z3.Bool(name))
        return self.labels[name][1]

    def plain(self, *constraints) -> None:
        """Constraints of no fact (the problem's own)."""
        self.constraints.extend(constraints)

    def add(self, constraint, keys) -> None:
        """A constraint that holds where the facts `keys` are assumed."""
        keys = tuple(dict.fromkeys(keys))
        if not keys:
            self.constraints.append(constraint)
            return
        assumed = self._assumed.get(keys)
        if assumed is None:
            assumed = self._assumed[keys] = And(*[self.label(k) for k in keys])
        self.constraints.append(Implies(assumed, constraint))

    def tokens(self, full) -> list:
        """The facts naming the experts of tokens `full`."""
        out = [("pair", tk) for tk in self.placed if tk[0] in full]
        return out + [("tid", tk) for tk in self.facts.tid
                      if tk[0] in full and tk not in self.placed]

    def check(self, scope=None):
        """A model of the counts problem (of the global context's terms); raises
        `Unrealisable` with the facts of an unsatisfiable core, or without a core (None)
        when z3 did not decide it. `scope`: the context to solve it in (a fresh solver
        there), else a context of its own (making one costs a few milliseconds)."""
        scope = scope if scope is not None else Scope()  # its terms translated there
        solver = scope.solver()
        solver.set("timeout", TIMEOUT_MS)
        # Ctrl-C is left to Python (raised as the query returns): with assumptions z3 names
        # a timeout and an interruption alike ("canceled"), and neither is an answer
        solver.set("ctrl_c", False)
        solver.add(scope.into(self.constraints))
        # the labels in the scope's context: the constants the translation makes of them
        assumptions = [z3.Bool(name, scope.ctx) for name in self.labels]
        answer = solver.check(*assumptions)
        if answer == z3.unknown:   # out of time on a loaded machine, not unrealisable:
            solver.set("timeout", RETRY_TIMEOUT_MS)   # once more, with longer
            answer = solver.check(*assumptions)
        if answer == z3.sat:
            return back(solver.model())
        if answer == z3.unknown:   # undecided: no core, the facts are not shown to have none
            raise Unrealisable(f"the counts problem is undecided ({solver.reason_unknown()})")
        core = {str(b) for b in solver.unsat_core()} if assumptions else set()
        raise Unrealisable("no counts place the facts",
                           self.facts_of([k for n, (k, _) in self.labels.items() if n in core]))

    def facts_of(self, keys) -> "Facts":
        """The facts behind labels `keys` (a pair brings its position, block and expert)."""
        f, r = Facts(), self.r
        for kind, key in keys:
            if kind == "bexp":
                f.bexp[key] = self.facts.bexp[key]
            elif kind == "sid":
                f.sid[key] = self.sid[key]
            elif kind == "tid":
                f.tid[key] = self.facts.tid[key]
            else:
                p, _ = self.placed[key]
                f.sid[p] = key[0] * r.topk + key[1]
                if p // r.block in self.facts.bexp:
                    f.bexp[p // r.block] = self.facts.bexp[p // r.block]
                if key in self.facts.tid:
                    f.tid[key] = self.facts.tid[key]
        return f


def _windows(track, facts: Facts, placed: dict, ranks: dict, c, groups, r: Routing, rows,
             open_to) -> None:
    """Every window of tokens between the facts' tokens has TOPK slots per token for the
    members the experts must put there: those between two of an expert's placed pairs
    exactly, the rest at least what the tokens outside cannot take."""
    T = r.tokens
    points = sorted({0, T} | {x for t in rows for x in (t, t + 1)})
    pins: dict = {}
    for (t, k), (_, e) in placed.items():
        pins.setdefault(e, {0: int_val(0), T: c[e]})
        pins[e][t], pins[e][t + 1] = ranks[(t, k)], add(ranks[(t, k)], 1)
    keys = [("pair", tk) for tk in placed] + [("tid", tk) for tk in facts.tid if tk not in placed]
    for i, a in enumerate(points):
        for b in points[i + 1:]:
            need = []
            for e, ce in c.items():
                fixed = sum(1 for t in rows if a <= t < b and e in rows[t])
                pa, pb = pins.get(e, {}).get(a), pins.get(e, {}).get(b)
                if pa is not None and pb is not None:
                    need.append(sub(pb, pa))
                    continue
                low = sub(sub(ce, open_to(e, 0, a)), open_to(e, b, T))
                need.append(If(gt(low, fixed), low, int_val(fixed)))
            outside = T - (b - a)
            for _, n, _, q in groups:
                low = sub(q, n * outside)
                need.append(If(gt(low, 0), low, int_val(0)))
            track.add(le(Sum(need), (b - a) * r.topk), keys)


def _least(g, n: int, r: Routing):
    """The fewest pairs that fill g blocks of n experts (one on each of the first n
    blocks, a whole block more for each further one)."""
    return If(le(g, n), g, add(int_val(n), mul(sub(g, n), r.block)))


def _most(g, n: int, r: Routing):
    """The most pairs g blocks of n experts hold (an expert at most T: its first K - 1
    blocks BM each, its K-th the rest)."""
    k, last = r.run_blocks, r.tokens - (r.run_blocks - 1) * r.block
    full = If(le(g, n * (k - 1)), g, int_val(n * (k - 1)))
    over = sub(g, n * (k - 1))
    extra = If(le(over, 0), int_val(0), If(ge(over, n), int_val(n), over))
    return add(mul(int_val(r.block), full), mul(int_val(last), extra))


def _spread(blocks: int, pairs: int, n: int, r: Routing) -> list[int]:
    """Counts of n experts with `blocks` blocks and `pairs` pairs: blocks round-robin
    (which reaches both the least and the most pairs), then each expert from its least
    count up towards its most."""
    ks = [blocks // n + (i < blocks % n) for i in range(n)]
    lo = [0 if k == 0 else (k - 1) * r.block + 1 for k in ks]
    hi = [min(k * r.block, r.tokens) for k in ks]
    out, left = list(lo), pairs - sum(lo)
    for i in range(n):
        add = min(hi[i] - lo[i], left)
        out[i] += add
        left -= add
    if left or sum(lo) > pairs:
        raise Unrealisable(f"{pairs} pairs do not fill {blocks} blocks of {n} experts")
    return out


def _forced_fit(track, facts: Facts, placed: dict, ranks: dict, c, r: Routing, open_to,
                closed) -> None:
    """Tokens the facts put on an expert without a position fit the members its run has
    between the placed ones, and those members fit the tokens open to it there."""
    by: dict = {}
    for (t, k), e in facts.tid.items():
        if (t, k) not in placed and 0 <= t < r.tokens:
            by.setdefault(e, []).append((t, k))
    for e in set(by) | {e for _, e in placed.values()}:
        tokens = by.get(e, [])
        mine = sorted((t, ranks[(t, k)], (t, k)) for (t, k) in placed if placed[(t, k)][1] == e)
        keys = [("tid", tk) for tk in tokens] + [("pair", m[2]) for m in mine]
        track.add(ge(c[e], len(tokens) + len(mine)), keys)
        bounds = [(-1, int_val(-1), None)] + mine + [(r.tokens, c[e], None)]
        for (t0, r0, _), (t1, r1, _) in zip(bounds, bounds[1:]):
            inside = sum(1 for t, _ in tokens if t0 < t < t1)
            gap = sub(sub(r1, r0), 1)
            if inside:
                track.add(ge(gap, inside), keys)
            track.add(le(gap, open_to(e, t0 + 1, t1)), keys + closed)
