"""What the checker may assume of the routing arrays: the routing step's postconditions as
quantifier-free instances at the terms a solver query mentions.

A routed program reads `sorted_ids[p]` (the pair `token * TOPK + slot` at sorted position p,
or the padding sentinel PAD = T*TOPK), `expert_ids[b]` (the expert of block b of BM
positions, or -1) and `topk_ids[t, k]`. The checker does not know their contents: a load of
integer data is an uninterpreted function of its coordinates (`sid`, `bexp`, `tid`), and
`inv` is the inverse of `sid` on pairs. `routing.align` builds the arrays from any top-k
choice (TOPK distinct experts per token); everything below holds of every array it can
build, so a proof under these facts holds of every routing, and the facts are strong
enough that a counterexample is one the routing can produce (`realize.py` builds it):

- per position p: `sid(p) = PAD`, or `sid(p)` is a pair q with `inv(q) = p` and
  `tid(q) = bexp(p // BM)`; a block without expert holds only padding; a block with one
  starts with a pair (padding ends each expert's run, fewer than BM rows of it); a pair at
  offset i of its block b has at least i earlier tokens on its expert (`i <= q // TOPK`),
  and there are pairs enough to fill blocks 0..b up to it (one per run of at most E runs,
  BM per other block, plus i);
- per pair q: `0 <= inv(q) < P`, `sid(inv(q)) = q`;
- per block b: `-1 <= bexp(b) < E`; the first `lo` blocks have an expert and the blocks
  from `hi` on have none, where lo and hi are the fewest and most blocks any top-k choice
  fills (`used_blocks`); an expert's run is at most ceil(T / BM) blocks;
- per token: its top-k ids are distinct experts in [0, E);
- per two terms of one query: blocks are in expert order, with the empty blocks last, and
  blocks b1 < b2 of experts e1 <= e2 are at most (e2 - e1 + 1) runs apart; in
  one expert's run the pairs come first (in pair order, tokens increasing, ranks apart by at
  most the tokens apart) and padding last, and padding sits only in a run's last block;
  pairs at offsets i1, i2 of blocks b1 < b2 need `b2 + i1 + i2 + 1` pairs in all; an
  expert some pair takes has a block: not after the blocks of later experts or empty
  ones, not before those of earlier experts, and between two blocks of experts on either
  side of it.

The first tier (`axioms`, every query) is what the task's programs' proofs rest on; the
second (`refinements`: a pair's rank against its offset and token, room for the pairs
before it, run lengths, and the facts over two or three terms) is added to a query when a
counterexample of the first tier is no routing's (`witness.exclude`).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from .terms import walked

try:  # the rules run inside the checker, which needs z3; the task also runs without it
    import z3

    from argus_env.check.symbolic.values import (And, If, Implies, Or, add, call, div, eq,
                                                 ge, gt, int_val, le, lt, mod, mul, ne, sub)
except ImportError:  # pragma: no cover - a machine that only measures
    z3 = None

#: most terms of one kind a query instantiates the two-term facts for (their number grows
#: with the square); beyond it the query is asked with the per-term facts only (weaker
#: assumptions: a proof stays a proof, a counterexample is still checked by `realize`)
PAIRWISE_TERMS = 10


@dataclass(frozen=True)
class Routing:
    """The routing step's arrays and sizes (`routing_of`)."""

    block: int                    # rows per block of the aligned layout (the program's BM)
    tokens: int                   # T
    topk: int                     # TOPK
    experts: int                  # E
    rows: int                     # P, positions of the aligned layout
    sorted_ids: str = "sorted_ids"
    expert_ids: str = "expert_ids"
    topk_ids: str = "topk_ids"
    output: str = "out"           # the task's output in token order
    pos: str = "P"                # dim names: sorted position, token, slot, expert
    token: str = "T"
    slot: str = "TOPK"
    expert: str = "E"

    @property
    def pad(self) -> int:
        return self.tokens * self.topk

    @property
    def blocks(self) -> int:
        return self.rows // self.block

    @property
    def run_blocks(self) -> int:
        """Most blocks one expert's run fills: it holds at most T pairs."""
        return -(-self.tokens // self.block)

    def used_blocks(self) -> tuple[int, int]:
        return used_blocks(self.tokens, self.topk, self.experts, self.block, self.blocks)


@lru_cache(maxsize=256)
def used_blocks(tokens: int, topk: int, experts: int, block: int, blocks: int) -> tuple[int, int]:
    """(lo, hi): the fewest and the most blocks with an expert over every top-k choice.

    An expert holds at most T pairs (one per token), so at most K = ceil(T / BM) blocks;
    its first K - 1 blocks hold BM pairs each and its K-th the rest of T. The fewest blocks
    that hold all T*TOPK pairs take the largest capacities first; the most blocks spend
    one pair on each of up to E experts and BM more on every further block."""
    pairs, k = tokens * topk, -(-tokens // block)
    last = tokens - (k - 1) * block

    def cap(m: int) -> int:
        full = min(m, experts * (k - 1))
        return block * full + last * max(0, min(m - experts * (k - 1), experts))

    def least(m: int) -> int:
        return m if m <= experts else experts + (m - experts) * block
    top = min(blocks, experts * k)
    lo = next((m for m in range(top + 1) if cap(m) >= pairs), top)
    hi = max((m for m in range(top + 1) if least(m) <= pairs), default=0)
    return lo, max(lo, hi)


def routing_of(consts: dict, sizes) -> Routing:
    """What the checker may assume of the routing arrays of a program with `consts` at
    `sizes` (the shape's plus P, the program's padded rows)."""
    return Routing(block=int(consts.get("BM", 64)), tokens=sizes["T"], topk=sizes["TOPK"],
                   experts=sizes["E"], rows=sizes["P"])


def spec(ck) -> Routing:
    """The routing of the program being checked (kept for the whole check)."""
    if "routing" not in ck.memo:
        ck.memo["routing"] = routing_of(ck.kernel.consts, ck.sizes)
    return ck.memo["routing"]


class Fns:
    """The uninterpreted functions of one checker's routing arrays."""

    def __init__(self, ck, r: Routing):
        self.sid = ck.uf(r.sorted_ids, 1)
        self.bexp = ck.uf(r.expert_ids, 1)
        self.tid = ck.uf(r.topk_ids, 2)
        self.inv = z3.Function(f"inverse_{r.sorted_ids}", z3.IntSort(), z3.IntSort())
        self._kinds = None

    def kinds(self) -> dict:
        if self._kinds is None:  # asked at every query (`axioms`): made once
            self._kinds = {self.sid.name(): "sid", self.bexp.name(): "bexp",
                           self.tid.name(): "tid", self.inv.name(): "inv"}
        return self._kinds


def fns(ck) -> Fns:
    if "routing_fns" not in ck.memo:
        ck.memo["routing_fns"] = Fns(ck, spec(ck))
    return ck.memo["routing_fns"]


# ---------------------------------------------------------------- instances
def axioms(ck, constraints) -> list:
    """The pack's `axioms` hook: the facts every query gets, instances of the first tier
    of the postconditions at every routing term of `constraints` (and at the terms the
    instances introduce, to a fixed depth). The second tier (`refinements`) is added when
    a counterexample of the first is no routing's (`witness.exclude`)."""
    return axioms_and_terms(ck, constraints)[0]


def axioms_and_terms(ck, constraints, depth: int = 3) -> tuple[list, list]:
    """The first tier's instances, and every (kind, term) they were instantiated at, to
    `depth` rounds: the terms of `constraints`, then those their instances introduce, and
    so on."""
    r, f = spec(ck), fns(ck)
    names = f.kinds()
    memo = _memo(r, "inst")  # term id -> (term, instance)
    out, seen, todo, found = [], set(), list(constraints), []
    for _ in range(depth):
        terms: dict = {}  # app id -> (kind, app): `apps`, with the ids the walk read
        for _, got in walked(todo, names):
            terms.update(got)
        todo = []
        for key, (kind, t) in terms.items():
            if key in seen:
                continue
            seen.add(key)
            found.append((kind, t))
            hit = memo.get(key)
            if hit is None:  # the term is kept, so its id is not reused
                hit = memo[key] = (t, _instance(r, f, kind, t))
            out.append(hit[1])
            todo.append(hit[1])
        if not todo:
            break
    return out, found


def refinements(ck, constraints) -> list:
    """The second tier at the terms of `constraints` (with the first tier's instances):
    per term, a pair's rank against its offset and token and the pairs the blocks before it
    need, an expert's blocks before `(e + 1) * K`; per two or three terms, the order of
    blocks, runs, padding and tokens (`_pairwise`). They cost every query some time and
    decide no proof of the task's programs; they make a counterexample one the routing
    produces, so they are asked for when one is not (`witness.exclude`)."""
    r, f = spec(ck), fns(ck)
    inst, found = axioms_and_terms(ck, constraints)
    memo = _memo(r, "refine")
    out = [STRONG]
    for kind, t in found:
        if kind in ("sid", "bexp"):
            if t.get_id() not in memo:
                memo[t.get_id()] = (t, _refinement(r, f, kind, t))
            out.append(memo[t.get_id()][1])
    return out + _pairwise(ck, r, f, found)


#: marks a query that has the second tier already
STRONG = z3.Bool("routing_postconditions_refined") if z3 is not None else None


def refined(constraints) -> bool:
    return any(c.eq(STRONG) for c in constraints)


#: instances made, per routing: a term's instance is the same in every check of every
#: program at those sizes (the checker's variables are named alike from check to check, and
#: z3 makes equal terms one term), so they are kept across checks; each entry keeps its
#: terms alive (their ids are not reused meanwhile); bounded
_MEMO: dict = {}
MEMO_ENTRIES = 200_000


def _memo(r: Routing, kind: str) -> dict:
    if sum(len(d) for d in _MEMO.values()) > MEMO_ENTRIES:
        _MEMO.clear()
    return _MEMO.setdefault((r, kind), {})


def _instance(r: Routing, f: Fns, kind: str, t):
    """The first tier at one term (made by the checker's term constructors: the terms z3's
    operators make, `tests/check/test_fast_terms.py`)."""
    a = t.arg(0)
    if kind == "sid":
        q, e = t, call(f.bexp, div(a, r.block))
        pair = And(ge(q, 0), lt(q, r.pad), eq(call(f.inv, q), a),
                   eq(call(f.tid, div(q, r.topk), mod(q, r.topk)), e))
        return Implies(And(ge(a, 0), lt(a, r.rows)), And(
            Or(eq(q, r.pad), pair),
            Implies(lt(e, 0), eq(q, r.pad)),                 # an empty block: padding
            Implies(And(ge(e, 0), eq(mod(a, r.block), 0)), ne(q, r.pad))))  # a run's block
    if kind == "inv":
        return Implies(And(ge(a, 0), lt(a, r.pad)),
                       And(ge(t, 0), lt(t, r.rows), eq(call(f.sid, t), a)))
    if kind == "bexp":
        lo, hi = r.used_blocks()
        return Implies(And(ge(a, 0), lt(a, r.blocks)), And(
            ge(t, -1), lt(t, r.experts), Implies(lt(a, lo), ge(t, 0)),
            Implies(ge(a, hi), eq(t, -1))))
    b = t.arg(1)
    return Implies(And(ge(a, 0), lt(a, r.tokens), ge(b, 0), lt(b, r.topk)),
                   And(ge(t, 0), lt(t, r.experts)))


def _refinement(r: Routing, f: Fns, kind: str, t):
    """The second tier at one term."""
    a = t.arg(0)
    if kind == "bexp":
        return Implies(And(ge(a, 0), lt(a, r.blocks), ge(t, 0)),
                       lt(a, mul(add(t, 1), r.run_blocks)))
    q, b = t, div(a, r.block)
    runs = If(le(add(b, 1), r.experts), add(b, 1), int_val(r.experts))
    return Implies(And(ge(a, 0), lt(a, r.rows), ge(q, 0), lt(q, r.pad)), And(
        le(mod(a, r.block), div(q, r.topk)),                 # rank >= offset, <= token
        # the pairs blocks 0..b hold at least: one per run (at most E runs), BM for every
        # other block, and those before it in block b
        le(add(add(mul(int_val(r.block), sub(add(b, 1), runs)), runs), mod(a, r.block)),
           r.pad)))


def _pairwise(ck, r: Routing, f: Fns, found: list) -> list:
    """The two-term facts over the terms of one query (memoised per pair)."""
    memo = _memo(r, "pairs")  # (kind, term ids) -> (terms, instance)
    by = {"sid": [], "bexp": [], "tid": []}
    for kind, t in found:
        if kind in by:
            by[kind].append(t)
    out = []
    for kind, ts in by.items():
        if len(ts) > PAIRWISE_TERMS:
            continue
        for i, t1 in enumerate(ts):
            for t2 in ts[i + 1:]:
                key = (kind, t1.get_id(), t2.get_id())
                if key not in memo:
                    memo[key] = (t1, t2, _pair(r, f, kind, t1, t2))
                out.append(memo[key][2])
    if len(by["sid"]) <= PAIRWISE_TERMS and len(by["bexp"]) <= PAIRWISE_TERMS:
        for s in by["sid"]:
            for b in by["bexp"]:
                key = ("next", s.get_id(), b.get_id())
                if key not in memo:
                    memo[key] = (s, b, _last_block(r, f, s, b))
                out.append(memo[key][2])
    if len(by["tid"]) <= PAIRWISE_TERMS and len(by["bexp"]) <= PAIRWISE_TERMS:
        for v in by["tid"]:
            for i, b1 in enumerate(by["bexp"]):
                for b2 in [None] + by["bexp"]:
                    if b2 is b1:
                        continue
                    key = ("used", v.get_id(), b1.get_id(), None if b2 is None else b2.get_id())
                    if key not in memo:
                        memo[key] = (v, b1, b2, _expert_has_a_block(r, v, b1, b2))
                    out.append(memo[key][3])
    return out


def _expert_has_a_block(r: Routing, v, b1, b2):
    """An expert some pair takes (`v = tid(t, k)`) has a block: before a block of a later
    expert or an empty one, after a block of an earlier expert, and between two blocks
    whose experts lie on either side of it."""
    t, k, a1 = v.arg(0), v.arg(1), b1.arg(0)
    live = And(ge(t, 0), lt(t, r.tokens), ge(k, 0), lt(k, r.topk), ge(a1, 0), lt(a1, r.blocks))
    later = Or(lt(b1, 0), lt(v, b1))   # v's block comes before a1
    one = And(Implies(later, ge(a1, 1)),
              Implies(And(ge(b1, 0), gt(v, b1)), lt(add(a1, 1), r.blocks)))
    if b2 is None:
        return Implies(live, one)
    a2 = b2.arg(0)
    between = And(lt(a1, a2), lt(a2, r.blocks), ge(b1, 0), lt(b1, v), Or(lt(b2, 0), lt(v, b2)))
    return Implies(live, Implies(between, ge(sub(a2, a1), 2)))


def _pair(r: Routing, f: Fns, kind: str, t1, t2):
    a1, a2 = t1.arg(0), t2.arg(0)
    if kind == "tid":
        k1, k2 = t1.arg(1), t2.arg(1)
        live = And(ge(a1, 0), lt(a1, r.tokens), ge(k1, 0), lt(k1, r.topk), ge(k2, 0),
                   lt(k2, r.topk))
        return Implies(And(live, eq(a1, a2), ne(k1, k2)), ne(t1, t2))  # distinct experts
    if kind == "bexp":
        return And(_blocks_in_order(r, a1, t1, a2, t2), _blocks_in_order(r, a2, t2, a1, t1))
    return And(_run_order(r, f, a1, t1, a2, t2), _run_order(r, f, a2, t2, a1, t1),
               _room(r, a1, t1, a2, t2), _room(r, a2, t2, a1, t1))


def _blocks_in_order(r: Routing, b1, e1, b2, e2):
    """Block b1 before block b2: experts in order, empty blocks last, and the blocks from
    b1 to b2 belong to experts e1..e2, each at most a run of K = ceil(T / BM) blocks."""
    return Implies(And(ge(b1, 0), lt(b1, b2), lt(b2, r.blocks)), And(
        Implies(lt(e1, 0), lt(e2, 0)),
        Implies(And(ge(e1, 0), ge(e2, 0)), And(
            le(e1, e2),
            le(sub(b2, b1), sub(mul(add(sub(e2, e1), 1), r.run_blocks), 1))))))


def _run_order(r: Routing, f: Fns, a1, q1, a2, q2):
    """Position a1 before a2 in one expert's run: pairs first, in order, then padding."""
    e1, e2 = call(f.bexp, div(a1, r.block)), call(f.bexp, div(a2, r.block))
    t1, t2 = div(q1, r.topk), div(q2, r.topk)
    same = And(ge(a1, 0), lt(a1, a2), lt(a2, r.rows), ge(e1, 0), eq(e1, e2))
    return Implies(same, And(
        Implies(eq(q1, r.pad), eq(q2, r.pad)),
        Implies(ne(q2, r.pad), And(lt(t1, t2), le(sub(a2, a1), sub(t2, t1))))))


def _room(r: Routing, a1, q1, a2, q2):
    """Pairs a1 and a2 in blocks b1 < b2: every block up to b2 holds a pair, and the blocks
    of a1 and a2 hold theirs and those before them in the block (a run's pairs come first):
    b2 + (a1 % BM) + (a2 % BM) + 1 pairs at least."""
    b1, b2 = div(a1, r.block), div(a2, r.block)
    both = And(ge(a1, 0), lt(a2, r.rows), lt(b1, b2), ne(q1, r.pad), ne(q2, r.pad))
    return Implies(both, le(add(add(add(b2, mod(a1, r.block)), mod(a2, r.block)), 1), r.pad))


def _last_block(r: Routing, f: Fns, s, b):
    """Padding sits in the last block of its run: the next block has another expert."""
    a = s.arg(0)
    e = call(f.bexp, div(a, r.block))
    nxt = b.arg(0)
    return Implies(And(ge(a, 0), lt(a, r.rows), eq(nxt, add(div(a, r.block), 1)),
                       lt(nxt, r.blocks), eq(s, r.pad), ge(e, 0)), ne(b, e))
