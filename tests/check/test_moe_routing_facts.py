"""The routing facts the MoE checker assumes and realises: every real routing satisfies the
postconditions' instances (they are sound), and the realiser rebuilds a routing from the
values a counterexample fixes (and refuses values no routing has)."""

import random

import pytest
import torch
import z3

from argus_env.tasks.moe import routing
from argus_env.tasks.moe.postconditions import (STRONG, Routing, axioms_and_terms, fns,
                                                refinements, used_blocks)
from argus_env.tasks.moe.realize import Facts, arrays, realize, realize_or_core

SHAPES = [(40, 8, 2, 64), (24, 4, 2, 16), (13, 6, 3, 16), (33, 16, 4, 16), (8, 16, 2, 64),
          (70, 5, 2, 16)]


def _route(tokens, experts, topk, block, seed):
    gen = torch.Generator().manual_seed(seed)
    _, ids = routing.topk(routing.router_logits(tokens, experts, 1.5 * (seed % 2), gen), topk)
    rows = routing.padded_rows(tokens, experts, topk, block)
    sorted_ids, expert_ids = routing.align(ids, experts, block, rows)
    return ids, sorted_ids, expert_ids, Routing(block, tokens, topk, experts, rows)


class _Ck:
    """What the postconditions read of a checker."""

    def __init__(self, r: Routing):
        self.memo, self.ufs = {}, {}
        self.memo["routing"] = r

    def uf(self, name, rank):
        if name not in self.ufs:
            self.ufs[name] = z3.Function(f"data_{name}", *([z3.IntSort()] * rank), z3.IntSort())
        return self.ufs[name]


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_every_routing_satisfies_the_postconditions_the_checker_assumes(shape):
    """Instances of both tiers at random terms (pairs and triples of them included), with
    the functions pinned to a real routing's arrays: satisfiable, so no instance excludes a
    routing that exists."""
    for seed in range(4):
        ids, sid, bexp, r = _route(*shape, seed)
        ck = _Ck(r)
        f = fns(ck)
        rng = random.Random(seed)
        pinned = [f.sid(p) == int(v) for p, v in enumerate(sid.tolist())]
        pinned += [f.bexp(b) == int(v) for b, v in enumerate(bexp.tolist())]
        pinned += [f.tid(t, k) == int(ids[t, k]) for t in range(r.tokens) for k in range(r.topk)]
        pinned += [f.inv(int(q)) == p for p, q in enumerate(sid.tolist()) if q != r.pad]
        for _ in range(6):
            terms = [f.sid(z3.IntVal(rng.randrange(r.rows))) for _ in range(4)] + \
                [f.bexp(z3.IntVal(rng.randrange(r.blocks))) for _ in range(4)] + \
                [f.tid(rng.randrange(r.tokens), rng.randrange(r.topk)) for _ in range(3)]
            query = [z3.And(*[t >= -(10 ** 9) for t in terms])]
            inst = axioms_and_terms(ck, query)[0] + refinements(ck, query)  # both tiers
            assert any(c.eq(STRONG) for c in inst)
            s = z3.Solver()
            s.add(*pinned, *inst)
            assert s.check() == z3.sat, (shape, seed)


def test_used_blocks_are_the_fewest_and_most_any_routing_fills():
    for tokens, experts, topk, block in SHAPES:
        rows = routing.padded_rows(tokens, experts, topk, block)
        lo, hi = used_blocks(tokens, topk, experts, block, rows // block)
        seen = set()
        for seed in range(30):
            _, _, bexp, _ = _route(tokens, experts, topk, block, seed)
            seen.add(int((bexp >= 0).sum()))
        assert lo <= min(seen) and max(seen) <= hi <= rows // block, (lo, hi, seen)


def _facts(ids, sid, bexp, r, positions):
    f = Facts()
    for p in positions:
        f.sid[p] = int(sid[p])
        f.bexp[p // r.block] = int(bexp[p // r.block])
        q = int(sid[p])
        if q != r.pad:
            f.tid[(q // r.topk, q % r.topk)] = int(ids[q // r.topk, q % r.topk])
            f.inv[q] = p
    return f


@pytest.mark.parametrize("shape", SHAPES + [(8192, 8, 2, 64), (256, 128, 8, 32)],
                         ids=lambda s: "x".join(map(str, s)))
def test_values_of_a_real_routing_are_realised(shape):
    for seed in range(4):
        ids, sid, bexp, r = _route(*shape, seed)
        rng = random.Random(seed)
        facts = _facts(ids, sid, bexp, r, [rng.randrange(r.rows) for _ in range(4)])
        spec = realize(facts, r)
        assert spec is not None, (shape, seed, facts)
        ids2, sid2, bexp2 = arrays(spec, r)
        routing.check_postconditions(ids2, sid2, bexp2, r.experts, r.block)
        assert all(int(sid2[p]) == v for p, v in facts.sid.items())
        assert all(int(bexp2[b]) == v for b, v in facts.bexp.items())
        assert all(int(ids2[t, k]) == v for (t, k), v in facts.tid.items())


def test_values_no_routing_has_are_refused_with_a_core():
    r = Routing(64, 40, 2, 8, routing.padded_rows(40, 8, 2, 64))
    lo, hi = r.used_blocks()
    # an expert id of -1 at a block every routing fills
    assert realize(Facts(bexp={0: -1}), r) is None
    # padding first in a used block
    assert realize(Facts(sid={128: r.pad}, bexp={2: 3}), r) is None
    # a pair of token 2 at offset 5 of its block: five earlier tokens on its expert
    assert realize(Facts(sid={5: 4}, bexp={0: 1}, tid={(2, 0): 1}), r) is None
    # a block past the most any routing fills
    assert realize(Facts(bexp={hi: 0}), r) is None
    # experts 1 and 2 two blocks apart, where an expert fills one block at most (T < BM):
    # the core names the facts that cannot hold together, and only those
    spec, core = realize_or_core(Facts(sid={11: 78, 1: 3}, bexp={0: 1, 2: 2},
                                       tid={(39, 0): 1}, inv={78: 11}), r)
    assert spec is None and core.bexp == {0: 1, 2: 2} and not core.tid, core
    # and what a routing can have is realised
    assert realize(Facts(sid={1: r.pad}, bexp={0: 0, hi - 1: 7}), r) is not None
