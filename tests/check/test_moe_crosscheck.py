"""MoE's invariants cross-checked: the symbolic checker (z3, every routing the routing step
can produce, assumed through its postconditions) against the concrete enumerator (every
program instance run on one real routing, `tasks/moe/concrete.py`), on every program of
the MoE corpus (`corpus_moe.py`: seeded bugs, correct rewrites) and the task's programs.

- a bug reported symbolically with class C at line L is found concretely with class C at
  line L on the routing realised from its counterexample (`realize.arrays` of the
  violation's witness), and the concrete run finds no class the symbolic report lacks;
- a program proven symbolically has no concrete violation on any routing tried: seeded
  router logits (balanced, skewed), every token on experts 0..TOPK-1, pairs dealt round
  robin over every expert (`concrete.sample_routings`). At the corpus sizes no T is a
  multiple of the blocks (BM = 64), so every routing leaves partial blocks;
- a concrete counterexample names an instance, an element and a line, and the concrete
  replay of that instance reads the values it claims.

What only the symbolic side states is said in `test_what_only_the_symbolic_side_assumes`.
The full sweep (all routings on every program and size) is marked slow.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from argus_env.check import check_program
from argus_env.check.concrete import replay
from argus_env.check.concrete.interp import stmt_text
from argus_env.check.symbolic.checker import DEFAULT_NUM_SMS
from argus_env.ir import nodes as ir
from argus_env.ir.rewrite import walk
from argus_env.task import get_task
from argus_env.tasks.moe import routing
from argus_env.tasks.moe.concrete import routing_inputs, sample_routings
from argus_env.tasks.moe.postconditions import routing_of
from argus_env.tasks.moe.realize import arrays

from corpus_moe import CLEAN, CORPUS, SIZES, Mutation

TASK = get_task("moe")
ROUTED = ("expert", "scatter", "padding", "combine")
#: the routings a proven program is run on in the fast tests (the slow sweep runs all)
FAST_ROUTINGS = {"task": ("seed0-skewed", "one-expert", "round-robin"),
                 "rewrite": ("seed0-skewed", "round-robin"), "clean": ("round-robin",)}


@dataclasses.dataclass
class Case:
    """One program at one size and SM count, with its symbolic report."""

    name: str
    program: object
    sizes: dict          # the shape's sizes (what the symbolic check takes)
    full: dict           # with P and NB (what the concrete check takes)
    num_sms: int
    symbolic: object
    _concrete: dict = dataclasses.field(default_factory=dict)

    @property
    def routing(self):
        return routing_of(self.program.kernel.consts, self.full)

    def concrete(self, ids):
        """The concrete report on top-k choice `ids` (one run per distinct choice); the
        routing's arrays are checked against the postconditions the symbolic side assumes."""
        r = self.routing
        inputs = routing_inputs(ids, r)
        key = inputs["topk_ids"].numpy().tobytes()   # one run per distinct routing
        if key not in self._concrete:
            routing.check_postconditions(inputs["topk_ids"], inputs["sorted_ids"],
                                         inputs["expert_ids"], r.experts, r.block)
            self._concrete[key] = check_program(self.program, self.full, TASK,
                                                method="concrete", num_sms=self.num_sms,
                                                inputs=inputs)
        return self._concrete[key]

    def witness(self, i: int):
        """The concrete report on the routing realised from symbolic violation i."""
        v = self.symbolic.violations[i]
        return self.concrete(arrays(v.witness["routing"], self.routing)[0])


_CASES: dict = {}


def case(m: Mutation, sizes: dict | None = None, num_sms: int | None = None) -> Case:
    sizes = dict(m.sizes if sizes is None else sizes)
    num_sms = num_sms or m.num_sms or DEFAULT_NUM_SMS
    key = (m.name, m.base, tuple(sorted(sizes.items())), num_sms)
    if key not in _CASES:
        program = m.program() if sizes == m.sizes else \
            dataclasses.replace(m, sizes=sizes).program()
        sym = check_program(program, sizes, TASK, num_sms=num_sms)
        if sym.undecided:   # a solver budget may have run out (a loaded machine): again
            sym = check_program(program, sizes, TASK, num_sms=num_sms)
        _CASES[key] = Case(m.name, program, sizes, TASK.program_sizes(program, sizes),
                           num_sms, sym)
    return _CASES[key]


def _clean(name, base, edits, sizes=SIZES) -> Mutation:
    return Mutation(name, base, tuple(edits), frozenset(), dict(sizes))


#: programs the symbolic checker proves: the task's own, the corpus's correct rewrites, and
#: seeded bugs at the sizes (and SM counts) where no routing breaks them
TASK_PROGRAMS = [(_clean(w, w, ()), DEFAULT_NUM_SMS) for w in ("baseline", "expert")]
REWRITES = [(_clean(*c), n) for c in CLEAN for n in (3, DEFAULT_NUM_SMS)]
CLEAN_SIZES = [(dataclasses.replace(m, sizes=dict(s), num_sms=None), n or DEFAULT_NUM_SMS)
               for m in CORPUS for s, n in m.clean]
PROVEN = TASK_PROGRAMS + REWRITES + CLEAN_SIZES
#: the SM count a rewrite is checked with in the fast tier (persistent loops: few SMs, so
#: each instance walks several tiles)
FAST_SMS = {"down-loops-over-usable-blocks": 3, "down-no-empty-block-guard": 3}
#: the fast tier: the task's programs, each rewrite at one SM count (the other in the
#: sweep), each seeded bug where no routing breaks it
FAST_PROVEN = [("task", c) for c in TASK_PROGRAMS] + \
    [("rewrite", c) for c in REWRITES if c[1] == FAST_SMS.get(c[0].name, DEFAULT_NUM_SMS)] + \
    [("clean", c) for c in CLEAN_SIZES]
SWEEP_SHAPES = [(_clean(w, w, (), s), 3) for w in ("baseline", "expert") for s in TASK.cpu_shapes]


def _ids(c):
    m, n = c
    return f"{m.name}-T{m.sizes['T']}-{n or DEFAULT_NUM_SMS}sms"


def _found(report) -> set:
    return {(v.invariant, v.line) for v in report.violations}


def _decided(con, sym) -> set:
    """The classes `con` (concrete) reports at lines where the symbolic report `sym`
    decided every obligation: an undecided obligation is neither proven nor refuted (a
    solver's budget run out on a loaded machine), so what the concrete run finds there
    contradicts nothing."""
    open_lines = {o.line for o in sym.undecided}
    return {v.invariant for v in con.violations if v.line not in open_lines}


# ---------------------------------------------------------------- bugs
@pytest.mark.parametrize("mutation", CORPUS, ids=lambda m: m.name)
def test_symbolic_counterexamples_are_found_concretely(mutation):
    """Each symbolic violation's realised routing, run concretely, reports its class at
    its line; no concrete class is one the symbolic report lacks."""
    c = case(mutation)
    sym = c.symbolic
    assert sym.violations and mutation.expect <= sym.kinds(), sym.render()
    for i, v in enumerate(sym.violations):
        assert v.witness.get("routing"), v.render()
        con = c.witness(i)
        assert (v.invariant, v.line) in _found(con), \
            f"symbolic:\n{v.render()}\nconcrete on its routing:\n{con.render()}"
        assert _decided(con, sym) <= sym.kinds(), \
            f"concrete finds {sorted(con.kinds() - sym.kinds())} the symbolic checker " \
            f"does not report:\n{con.render()}\n{sym.render()}"


def _naming(v, program) -> None:
    """The violation names a statement of the program: its line holds one, and the source
    it quotes is that statement's."""
    stmts = {n.loc.line: n for n in walk(program.kernel)
             if isinstance(n, (ir.Assign, ir.For, ir.If, ir.ExprStmt))}
    assert v.line in stmts and v.source == stmt_text(stmts[v.line]), v.render()


@pytest.mark.parametrize("mutation", [m for m in CORPUS if m.expect & set(ROUTED)],
                         ids=lambda m: m.name)
def test_concrete_counterexample_names_instance_element_and_line(mutation):
    """A concrete expert / scatter / padding / combine violation names the instance, the
    element and the line; replaying that instance reads the tags it claims, checked
    against the routing's arrays."""
    c = case(mutation)
    i = next(i for i, v in enumerate(c.symbolic.violations) if v.invariant in ROUTED)
    con = c.witness(i)
    r = c.routing
    inputs = routing_inputs(arrays(c.symbolic.violations[i].witness["routing"], r)[0], r)
    sid, tid = (inputs[k].numpy().reshape(-1) for k in ("sorted_ids", "topk_ids"))
    checked = 0
    for v in con.violations:
        if v.invariant not in ROUTED:
            continue
        _naming(v, c.program)
        assert v.program_id and v.element and v.expected and v.actual, v.render()
        rp = replay(c.program, v, task=TASK, inputs=inputs, num_sms=c.num_sms)
        assert rp["program_id"] == tuple(v.program_id) and rp["names"] == v.names, rp
        if v.op == "dot":                          # expert: the product's row and weights
            tags = rp["product"]["tags"]
            p, e = tags[r.pos], tags[r.expert]
            assert sid[p] != r.pad and tid[sid[p]] == v.expected[r.expert] != e, (v.render(), rp)
        elif v.op not in ("store", "atomic_add"):  # combine: two slots meet elementwise
            got = [o["tags"].get(r.slot) for o in rp["operands"]]
            assert v.invariant == "combine" and got[0] != got[1], (v.render(), rp)
            assert {v.expected[r.slot], v.actual[r.slot]} == set(got), (v.render(), rp)
        else:                                      # a row leaving the sorted layout
            tags = rp["value"]["tags"]
            assert rp["mask"] and tuple(rp["coords"]) == v.coords, (v.render(), rp)
            q = int(sid[tags[r.pos]]) if r.pos in tags else None
            want = {r.token: None if q is None else q // r.topk,
                    r.slot: None if q is None else q % r.topk}
            if v.invariant == "padding":
                assert q == r.pad, (v.render(), rp)
            elif v.invariant == "scatter":
                (dim, got), = v.actual.items()
                dims = c.program.kernel.param(v.tensor).dims
                assert rp["coords"][dims.index(dim)] == got != want[dim] == v.expected[dim]
            elif v.actual == {r.slot: None}:       # combine: no weight at all
                assert r.slot not in tags, (v.render(), rp)
            else:                                  # combine: another pair's weight
                (dim, got), = v.actual.items()
                assert tags[dim] == got != want[dim] == v.expected[dim], (v.render(), rp)
        checked += 1
    assert checked, con.render()


@pytest.mark.parametrize("mutation", [m for m in CORPUS if m.expect == {"coverage"}
                                      and m.num_sms], ids=lambda m: m.name)
def test_fused_combine_counterexample_names_the_output_element(mutation):
    """The fused combine's coverage: the concrete counterexample names the output element
    whose slot is missing or doubled, and that slot's pair is really that token's."""
    c = case(mutation)
    con = c.witness(0)
    r = c.routing
    inputs = routing_inputs(arrays(c.symbolic.violations[0].witness["routing"], r)[0], r)
    sid = inputs["sorted_ids"].numpy()
    v = next(v for v in con.violations if v.invariant == "coverage" and v.tensor == r.output)
    _naming(v, c.program)
    t, d = v.coords
    assert 0 <= t < r.tokens and 0 <= d < c.full["D"], v.render()
    (key, k), = v.actual.items()
    p, q = v.other["position"], v.other["pair"]
    assert sid[p] == q and q // r.topk == t, v.render()
    if key == f"missing {r.slot}":              # a slot never added
        assert q % r.topk == k, v.render()
    else:                                       # a slot added twice: both instances named
        assert key == f"times {r.slot}={q % r.topk}" and k == 2, v.render()
        assert v.program_id and v.element and v.other["program_id"] is not None, v.render()


# ---------------------------------------------------------------- proven programs
@pytest.mark.parametrize("kind,c", FAST_PROVEN, ids=lambda x: x if isinstance(x, str) else _ids(x))
def test_proven_programs_have_no_concrete_violation(kind, c):
    m, n = c
    cs = case(m, num_sms=n)
    assert cs.symbolic.ok and cs.symbolic.status == "proven", cs.symbolic.render()
    ids = sample_routings(cs.routing)
    for name in FAST_ROUTINGS[kind]:
        con = cs.concrete(ids[name])
        assert con.ok, f"{name}:\n{con.render()}"
        proven = " ".join(con.proven)
        assert "expert" in proven and "scatter" in proven and "padding" in proven, proven


# ---------------------------------------------------------------- what does not cross
def test_what_only_the_symbolic_side_assumes():
    """The routing step's postconditions (`postconditions.py`) are assumptions of the
    symbolic checker only: it proves a program for every array that meets them, while the
    concrete checker evaluates the array it is given. On arrays no top-k choice produces
    (a pair moved into another expert's block) the concrete checker reports what the
    symbolic proof excludes by assumption, so the cross-check runs only on arrays the
    routing step built (each is checked with `routing.check_postconditions`)."""
    c = case(_clean("expert", "expert", ()))
    assert c.symbolic.ok, c.symbolic.render()
    r = c.routing
    inputs = routing_inputs(sample_routings(r)["round-robin"], r)
    sid = inputs["sorted_ids"].clone()
    eid = inputs["expert_ids"]
    a = 0                                              # a pair of block 0's expert ...
    b = next(p for p in range(r.rows) if int(eid[p // r.block]) not in (-1, int(eid[0]))
             and int(sid[p]) != r.pad)                 # ... swapped with another expert's
    sid[a], sid[b] = sid[b].clone(), sid[a].clone()
    with pytest.raises(AssertionError):
        routing.check_postconditions(inputs["topk_ids"], sid, eid, r.experts, r.block)
    con = check_program(c.program, c.full, TASK, method="concrete", num_sms=c.num_sms,
                        inputs={**inputs, "sorted_ids": sid})
    assert "expert" in con.kinds(), con.render()


# ---------------------------------------------------------------- the full sweep
@pytest.mark.slow
@pytest.mark.sweep   # every program on every routing: `python -m pytest -m sweep`
@pytest.mark.parametrize("c", [(m, None) for m in CORPUS] + PROVEN + SWEEP_SHAPES, ids=_ids)
def test_every_routing_agrees(c):
    """Every program on every sample routing (two seeds, balanced and skewed, one expert,
    round robin) and every witness: the classes found concretely over all of them are
    the symbolic report's (beside what it leaves undecided), and a proven program has none
    on any."""
    m, n = c
    cs = case(m, num_sms=n)
    sym = cs.symbolic
    found, decided = set(), set()
    for name, ids in sample_routings(cs.routing, seeds=(0, 1)).items():
        con = cs.concrete(ids)
        found, decided = found | con.kinds(), decided | _decided(con, sym)
        if sym.ok:
            assert con.ok, f"{name}:\n{con.render()}"
    for i in range(len(sym.violations)):
        con = cs.witness(i)
        found, decided = found | con.kinds(), decided | _decided(con, sym)
    assert sym.kinds() <= found and decided <= sym.kinds(), \
        f"concrete {sorted(found)} vs symbolic {sorted(sym.kinds())}\n{sym.render()}"


def test_sample_routings_are_the_adversarial_ones():
    """The routings named are what they say: one expert takes every token's first slot,
    round robin uses every expert, and no routing fills whole blocks only."""
    r = case(_clean("expert", "expert", ())).routing
    rs = sample_routings(r, seeds=(0, 1))
    assert len(rs) == 6
    for name, ids in rs.items():
        ids = np.asarray(ids)
        assert ids.shape == (r.tokens, r.topk) and all(len(set(row)) == r.topk for row in ids)
        counts = np.bincount(ids.reshape(-1), minlength=r.experts)
        assert (counts[counts > 0] % r.block).any(), name   # a partial block
    assert (np.asarray(rs["one-expert"])[:, 0] == 0).all()
    assert set(np.asarray(rs["round-robin"]).reshape(-1)) == set(range(r.experts))
