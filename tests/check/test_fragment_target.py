"""The thread a counterexample names follows the target's MMA rule (one owner,
`Target.default_mma`), not a rule of the checker's own."""

from __future__ import annotations

from argus_env.check.fragments import mma_policy
from argus_env.check.symbolic.state import owner
from argus_env.dsl.program import Program
from argus_env.target import load_target
from argus_env.task import get_task


def test_the_policy_is_the_targets_default():
    h200, a100 = load_target("h200"), load_target("a100")
    for warps, block_m in ((4, 64), (8, 128), (4, 32), (2, 64), (8, 16)):
        assert mma_policy(h200, warps, block_m) == h200.default_mma(warps, block_m)
        assert mma_policy(a100, warps, block_m) == a100.default_mma(warps, block_m)
    # where the two rules part: 4 warps over 32 rows cannot be a wgmma on the H200
    assert mma_policy(None, 4, 32) == "wgmma"
    assert mma_policy(h200, 4, 32) == "mma_v2"
    assert mma_policy(a100, 8, 128) == "mma_v2"


def test_the_owner_of_an_element_follows_the_target():
    kernel = Program.from_file(get_task("gemm").programs["baseline"]).kernel
    warps = kernel.option("num_warps", 4)
    shape, element = (64, 64), (0, 9)
    on_h200 = owner("mma", shape, kernel, element, load_target("h200"))
    on_a100 = owner("mma", shape, kernel, element, load_target("a100"))
    assert on_h200 == owner("wgmma", shape, kernel, element)
    assert on_a100 == owner("mma_v2", shape, kernel, element)
    assert warps % 4 == 0 and on_h200 != on_a100
