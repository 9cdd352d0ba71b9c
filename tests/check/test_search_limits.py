"""The checker's work limits: the radix form settles a MoE scatter's exactly-once query
(`RADIX_RLIMIT`) without the default solver, and a counterexample search's first pass cut
short by its work limit (`SEARCH_RLIMIT`) changes no verdict: its `unknown` is asked again
with the whole budget, never taken for an answer."""

import pytest

from argus_env.check import check_program
from argus_env.check import isolated
from argus_env.check.symbolic import checker
from argus_env.dsl.program import Program
from argus_env.task import get_task
from argus_env.tasks.moe.space import MoEConfig, render

from corpus_moe import CORPUS

TASK = get_task("moe")
MIXTRAL = next(s.sizes for s in TASK.shapes if s.name == "mixtral-prefill-8192-balanced")
#: grouped down projections whose rows are scattered through the routing map, met on
#: env_speed's random walks: their exactly-once query of `ys` took the default solver
#: from 0.7 s to past its 5 s timeout (then asked again: 5 to 6 s a check)
SCATTERS = {
    "persistent-group8": MoEConfig(16, 128, 64, 8, 2, fuse_swiglu=True, fuse_scatter=True,
                                   inverse_scatter=True, persistent=True, tma=True,
                                   group_m=8, down_n=64),
    "group16": MoEConfig(32, 64, 64, 8, 3, fuse_gather=True, fuse_scatter=True,
                         inverse_scatter=True, tma=True, group_m=16, down_n=128),
    "group16-wide-down": MoEConfig(64, 64, 32, 4, 3, fuse_gather=True, fuse_scatter=True,
                                   inverse_scatter=True, group_m=16, down_n=256),
}


@pytest.mark.parametrize("name", list(SCATTERS))
def test_a_grouped_scatter_through_the_routing_is_proven_without_the_default_solver(
        name, monkeypatch):
    real = isolated.Scope.solver

    def no_default(self, simple=False):
        assert simple, "a query reached the default solver"
        return real(self, simple)

    monkeypatch.setattr(isolated.Scope, "solver", no_default)
    program = TASK.bind(Program.from_text(render(SCATTERS[name])), MIXTRAL)
    report = check_program(program, MIXTRAL, TASK)
    assert report.status == "proven", report.render()
    assert any("ys: each element written once" in p for p in report.proven), report.proven


def test_the_first_pass_cases_are_in_the_corpus():
    assert set(FIRST_PASS) <= {m.name for m in CORPUS}


def _verdict(report):
    return report.status, sorted(report.kinds()), [(o.what, o.line) for o in report.undecided]


#: seeded bugs whose counterexample search asks the default solver in its first pass
FIRST_PASS = ("scatter-not-exactly-once", "expert-store-not-atomic", "down-stride-one-too-few",
              "down-stride-one-too-many")


@pytest.mark.parametrize("mutation", [m for m in CORPUS if m.name in FIRST_PASS],
                         ids=lambda m: m.name)
def test_a_first_pass_cut_short_changes_no_verdict(mutation, monkeypatch):
    """With no work at all allowed to the first pass's default solver (every such query
    `unknown`), each seeded bug is still caught, and nothing is left undecided: the
    second pass asks those queries again as before."""
    kw = {"num_sms": mutation.num_sms} if mutation.num_sms else {}
    before = _verdict(check_program(mutation.program(), mutation.sizes, TASK, **kw))
    monkeypatch.setattr(checker, "SEARCH_RLIMIT", 1)
    after = check_program(mutation.program(), mutation.sizes, TASK, **kw)
    assert mutation.expect <= after.kinds(), after.render()
    assert _verdict(after) == before
