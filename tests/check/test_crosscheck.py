"""Soundness cross-check: the symbolic prover and the concrete enumerator agree on every
program of the corpus, and every symbolic counterexample replays concretely."""

import re
from collections import Counter

import pytest

from argus_env.check import check_program
from argus_env.check.concrete import replay
from argus_env.task import get_task

from corpus import CORPUS

TASK = get_task("gemm")
CLEAN = [(w, s) for w in TASK.programs
         for s in ({"M": 100, "N": 72, "K": 80}, {"M": 130, "N": 264, "K": 72})]


def _sms(mutation) -> dict:
    """The concrete run's `A.num_sms()`, where the mutation names one (stream-K: the
    symbolic checker's count, so that both share the programs' work alike)."""
    return {"num_sms": mutation.num_sms} if mutation.num_sms else {}


@pytest.mark.parametrize("mutation", CORPUS, ids=lambda m: m.name)
def test_verdicts_agree_on_seeded_bugs(mutation):
    prog = mutation.program()
    sym = check_program(prog, mutation.sizes, TASK)
    con = check_program(prog, mutation.sizes, TASK, method="concrete", **_sms(mutation))
    assert sym.kinds() == con.kinds(), \
        f"symbolic {sorted(sym.kinds())} vs concrete {sorted(con.kinds())}\n{sym.render()}\n{con.render()}"


@pytest.mark.parametrize("which,sizes", CLEAN, ids=lambda x: x if isinstance(x, str) else
                         "x".join(map(str, x.values())))
def test_verdicts_agree_on_correct_programs(which, sizes):
    prog = TASK.program(which)
    for method in ("symbolic", "concrete"):
        report = check_program(prog, sizes, TASK, method=method)
        assert report.ok, f"{method}: {report.render()}"


def _multiset(text: str) -> Counter:
    """ "[0, 32) x2 + [64, 96)" -> Counter of indices."""
    out: Counter = Counter()
    for lo, hi, times in re.findall(r"\[(-?\d+), (-?\d+)\)(?: x(\d+))?", text or ""):
        for k in range(int(lo), int(hi)):
            out[k] += int(times or 1)
    return out


REPLAYED = ("ownership", "assertion", "contraction", "pipeline", "bounds", "coverage")


@pytest.mark.parametrize("mutation", CORPUS, ids=lambda m: m.name)
def test_symbolic_counterexamples_replay_concretely(mutation):
    prog = mutation.program()
    report = check_program(prog, mutation.sizes, TASK)
    checked = 0
    for v in report.violations:
        if v.invariant not in REPLAYED or not v.program_id:
            continue
        rp = replay(prog, v, task=TASK, **_sms(mutation))
        if v.invariant in ("ownership", "assertion"):
            for name, got in v.actual.items():
                assert rp["value"]["tags"].get(name) == got, (v.render(), rp["value"])
        elif v.invariant in ("contraction", "pipeline"):
            for name in v.actual:
                assert rp["a"]["tags"][name] == v.expected[name], (v.render(), rp["a"])
                assert rp["b"]["tags"][name] == v.actual[name], (v.render(), rp["b"])
        elif v.invariant == "bounds":
            assert rp["mask"], (v.render(), rp)
            assert tuple(rp["coords"]) == tuple(v.coords), (v.render(), rp["coords"])
        elif v.invariant == "coverage" and "value" in rp:
            for key, got in v.actual.items():
                if key.startswith("missing "):
                    cov = _multiset(rp["value"]["coverage"].get(key.split()[1], ""))
                    assert cov[got] == 0, (v.render(), rp["value"])
                elif key.startswith("times ") and v.op != "atomic_add":  # one instance's sum
                    name, index = key.split()[1].split("=")
                    cov = _multiset(rp["value"]["coverage"].get(name, ""))
                    assert cov[int(index)] == got, (v.render(), rp["value"])
        checked += 1
    if mutation.expect & set(REPLAYED) - {"bounds", "coverage"}:
        assert checked, f"no counterexample of {mutation.name} was replayed: {report.render()}"
