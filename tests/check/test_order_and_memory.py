"""Order invariants, coverage through memory, and counterexamples that name a wrong element.

The corpus cases of these classes (tests/check/corpus.py, corpus_attention.py) are caught
by `test_symbolic.py`, `test_attention_invariants.py` and cross-checked in
`test_crosscheck.py`; here: they are real bugs (the interpreter's output differs from the
reference), correct two-pass programs are proven, and every bijection counterexample names
an instance, a tile element, a line and an element nobody writes.
"""

from __future__ import annotations

import pytest
from test_crosscheck import _multiset

from argus_env import lower
from argus_env.check import check_program
from argus_env.check.concrete import replay
from argus_env.measure import oracle
from argus_env.task import get_task

import corpus
import corpus_attention

GEMM = get_task("gemm")
ATTENTION = get_task("attention")
BY_NAME = {m.name: m for m in corpus.CORPUS}
ATTN_BY_NAME = {m.name: m for m in corpus_attention.CORPUS}

#: sizes at which each new GEMM case's output differs from the reference under the
#: interpreter (rounding a running sum to bf16 shows over many K steps)
WRONG_AT = {
    "rounds-running-sum": {"M": 64, "N": 64, "K": 2048},
    "rounds-after-each-step": {"M": 64, "N": 64, "K": 2048},
    "prefetch-rounds-after-each-step": {"M": 64, "N": 64, "K": 2048},
    "splitk-rounds-running-sum": {"M": 64, "N": 64, "K": 2048},
    "reduce-drops-last-split": corpus.TWO_PASS,
    "reduce-reads-a-split-twice": corpus.TWO_PASS,
    "partials-short-range": corpus.TWO_PASS,
    "partials-overlap": corpus.TWO_PASS,
    "partials-grid-one-split-short": corpus.TWO_PASS,
}


@pytest.mark.parametrize("name", sorted(WRONG_AT))
def test_new_gemm_cases_are_wrong_under_the_interpreter(name):
    prog = BY_NAME[name].program()
    verdict = oracle.check(prog, GEMM, WRONG_AT[name], lower.load(prog, interpret=True), seed=3)
    assert not verdict.ok, f"{name}: the seeded bug does not change the output ({verdict})"


@pytest.mark.slow
@pytest.mark.parametrize("name", ["normalised-inside-key-loop", "expert-normalised-before-diagonal",
                                  "rounds-output-accumulator"])
def test_new_attention_cases_are_wrong_under_the_interpreter(name):
    m = ATTN_BY_NAME[name]
    # rounding the output accumulator shows over many key blocks
    keys = 1024 if name == "rounds-output-accumulator" else 130
    sizes = {**m.sizes, "SQ": 130 if keys == 130 else 64, "SK": keys, "B": 1, "H": 1, "KVH": 1}
    prog = ATTENTION.bind(m.program(), sizes)
    verdict = oracle.check(prog, ATTENTION, sizes, lower.load(prog, interpret=True), seed=3)
    assert not verdict.ok, f"{name}: the seeded bug does not change the output ({verdict})"


@pytest.mark.parametrize("sizes", [{"M": 100, "N": 72, "K": 200}, {"M": 37, "N": 130, "K": 72},
                                   {"M": 64, "N": 64, "K": 64}, {"M": 4096, "N": 4096, "K": 4096}],
                         ids=lambda s: "x".join(map(str, s.values())))
def test_two_pass_split_k_is_proven(sizes):
    """The partials' coverage travels through the workspace: the second launch's sum covers
    K exactly once (this was a false alarm: 'total is not a reduction over K')."""
    prog = GEMM.program("splitk_reduce")
    report = check_program(prog, sizes, GEMM)
    assert report.status == "proven", report.render()
    if sizes["M"] * sizes["N"] <= 20_000:
        assert check_program(prog, sizes, GEMM, method="concrete").ok


def test_memory_coverage_counts_every_writer():
    """A split read twice covers its K range twice, a split never written covers nothing:
    the symbolic and the concrete interpreter name the same missing index."""
    m = BY_NAME["partials-grid-one-split-short"]
    sym = check_program(m.program(), m.sizes, GEMM)
    con = check_program(m.program(), m.sizes, GEMM, method="concrete")
    assert sym.kinds() == con.kinds() == {"coverage"}
    missing = [v for v in sym.violations if "never includes" in v.message]
    assert missing, sym.render()
    rp = replay(m.program(), missing[0], task=GEMM)
    k = missing[0].actual["missing K"]
    covered = _multiset(rp["value"]["coverage"]["K"])
    assert covered[k] == 0 and sum(covered.values()) > 0, (k, rp["value"])


BIJECTION = [m for m in corpus.CORPUS if "bijection" in m.expect]


@pytest.mark.parametrize("mutation", BIJECTION, ids=lambda m: m.name)
def test_a_bijection_counterexample_names_instance_element_line_and_an_unwritten_element(mutation):
    prog = mutation.program()
    report = check_program(prog, mutation.sizes, GEMM)
    found = [v for v in report.violations if v.invariant == "bijection"]
    assert found, report.render()
    v = found[0]
    assert v.program_id and None not in v.program_id, v.render()
    assert v.element and None not in v.element, v.render()
    assert v.line and v.coords, v.render()
    shown = replay(prog, v.__class__(**{**v.to_dict(), "program_id": ()}), task=GEMM)
    assert shown["writes"] == 0, f"{v.render()}: the named element is written ({shown})"


@pytest.mark.parametrize("name", ["rows-overlap", "cols-from-pid-m"])
def test_the_first_counterexample_is_an_element_whose_value_is_wrong(name):
    """Two instances writing one element with that element's own data leave it right; the
    element nobody writes is wrong: it is the report's first counterexample."""
    m = BY_NAME[name]
    report = check_program(m.program(), m.sizes, GEMM)
    assert report.kinds() >= {"bijection", "exactly_once"}, report.render()
    assert report.violations[0].invariant == "bijection", report.render()


def test_a_persistent_grid_with_a_wrong_stride_is_decided():
    """Its tile map is not countable (the stride is not the grid): the tile origins its
    instances reach, enumerated on integers, prove every tile written, and the double write
    is found (was: the covering query ran into the solver's time limit, undecided)."""
    m = BY_NAME["persistent-stride-short"]
    report = check_program(m.program(), m.sizes, GEMM)
    assert not report.undecided, report.render()
    assert report.kinds() == {"exactly_once"}, report.render()
