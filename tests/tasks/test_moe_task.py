"""The MoE task: routing postconditions on real arrays, the reference against a naive loop,
and both programs under the Triton interpreter with balanced and skewed routing."""

import pytest
import torch

from argus_env import lower
from argus_env.measure import oracle
from argus_env.task import get_task
from argus_env.tasks.moe import routing
from argus_env.tasks.moe.pipeline import torch_pipeline

TASK = get_task("moe")


@pytest.mark.parametrize("skew", [0.0, 1.5])
@pytest.mark.parametrize("block", [16, 64])
def test_routing_meets_its_postconditions(skew, block):
    gen = torch.Generator().manual_seed(3)
    logits = routing.router_logits(50, 8, skew, gen)
    weights, ids = routing.topk(logits, 2)
    sorted_ids, expert_ids = routing.align(ids, 8, block)
    routing.check_postconditions(ids, sorted_ids, expert_ids, 8, block)
    assert sorted_ids.numel() == routing.padded_rows(50, 8, 2, block)
    assert torch.allclose(weights.sum(-1), torch.ones(50))


@pytest.mark.parametrize("skew", [0.0, 1.5])
def test_the_numpy_align_is_align(skew):
    """`align_numpy` (the checker's realiser's) makes `align`'s arrays: routings of every
    skew, block, top-k and size, the padded rows given or not, experts left empty."""
    gen = torch.Generator().manual_seed(5)
    for tokens, experts, k, block in [(1, 1, 1, 16), (7, 4, 2, 16), (40, 8, 2, 64),
                                      (33, 16, 4, 64), (13, 6, 3, 32), (200, 8, 2, 16),
                                      (64, 64, 8, 128)]:
        _, ids = routing.topk(routing.router_logits(tokens, experts, skew, gen), k)
        for rows in (None, routing.padded_rows(tokens, experts, k, block) + 2 * block):
            want = routing.align(ids, experts, block, rows)
            got = routing.align_numpy(ids.numpy().astype("int64"), experts, block, rows)
            for w, g in zip(want, got):
                assert g.dtype == w.numpy().dtype and (g == w.numpy()).all(), (tokens, k)


def test_skewed_routing_leaves_experts_empty():
    gen = torch.Generator().manual_seed(0)
    _, ids = routing.topk(routing.router_logits(40, 8, 1.5, gen), 2)
    counts = torch.bincount(ids.flatten().long(), minlength=8)
    assert (counts == 0).any() and counts.max() > 20, counts


def test_postcondition_check_rejects_broken_arrays():
    gen = torch.Generator().manual_seed(1)
    _, ids = routing.topk(routing.router_logits(20, 4, 0.0, gen), 2)
    sorted_ids, expert_ids = routing.align(ids, 4, 16)
    bad = expert_ids.clone()
    bad[0] = (bad[0] + 1) % 4
    with pytest.raises(AssertionError, match="another expert"):
        routing.check_postconditions(ids, sorted_ids, bad, 4, 16)
    dup = sorted_ids.clone()
    dup[1] = dup[0]
    with pytest.raises(AssertionError, match="permutation"):
        routing.check_postconditions(ids, dup, expert_ids, 4, 16)


def test_reference_and_library_pipeline_agree_with_a_naive_loop():
    sizes = {"T": 9, "D": 32, "F": 24, "E": 5, "TOPK": 2, "SKEW": 1}
    gen = torch.Generator().manual_seed(2)
    inputs = TASK.make_inputs(TASK.program("baseline"), sizes, "cpu", gen)
    ref = TASK.reference(inputs, sizes)["out"]
    x = inputs["x"].float()
    naive = torch.zeros_like(x)
    for t in range(9):
        for k in range(2):
            e = int(inputs["topk_ids"][t, k])
            h = torch.nn.functional.silu(x[t] @ inputs["w_gate"][e].float()) * \
                (x[t] @ inputs["w_up"][e].float())
            naive[t] += inputs["topk_weights"][t, k] * (h @ inputs["w_down"][e].float())
    assert torch.allclose(ref, naive, atol=1e-4, rtol=1e-4)
    lib = torch_pipeline(inputs).float()
    assert torch.allclose(lib, ref, atol=5e-2 * ref.abs().max().item())


CASES = [("baseline", TASK.cpu_shapes[0]), ("baseline", TASK.cpu_shapes[1]),
         ("expert", TASK.cpu_shapes[1]), ("expert", TASK.cpu_shapes[2]),
         ("expert", TASK.cpu_shapes[3])]


@pytest.mark.parametrize("which,sizes", CASES, ids=lambda x: x if isinstance(x, str) else
                         "x".join(map(str, x.values())))
def test_programs_match_the_reference_under_the_interpreter(which, sizes):
    program = TASK.bind(TASK.program(which), sizes)
    launch = lower.load(program, interpret=True)
    verdict = oracle.check(program, TASK, sizes, launch, seed=5)
    assert verdict.ok, verdict.message


def test_skewed_check_shapes_include_an_expert_without_tokens():
    """The interpreter shapes exercise experts that receive no token (their blocks are
    absent, and no program may touch their weights' rows as if they had some)."""
    sizes = TASK.cpu_shapes[1]
    program = TASK.bind(TASK.program("expert"), sizes)
    gen = torch.Generator().manual_seed(5)
    inputs = TASK.make_inputs(program, TASK.program_sizes(program, sizes), "cpu", gen)
    counts = torch.bincount(inputs["topk_ids"].flatten().long(), minlength=sizes["E"])
    assert (counts == 0).any(), counts
    assert (inputs["expert_ids"] == -1).any()


def test_a_wrong_program_fails_the_oracle():
    from argus_env.dsl.program import Program
    sizes = TASK.cpu_shapes[0]
    text = TASK.program("expert").text.replace("A.cast(acc * wt, A.bf16)", "A.cast(acc, A.bf16)")
    program = TASK.bind(Program.from_text(text), sizes)
    verdict = oracle.check(program, TASK, sizes, lower.load(program, interpret=True), seed=5)
    assert not verdict.ok


def test_the_model_backend_answers_a_configuration_that_cannot_run_as_not_measured():
    """Tiles whose pipeline outgrows shared memory: the task's cost model finds them
    illegal, and the backend says so (not an infinite time that the evaluator would treat
    as an internal error)."""
    import dataclasses

    from argus_env.measure.backends import ModelBackend
    task = get_task("moe")
    space = task.space
    cfg = dataclasses.replace(space.baseline(), block_m=256, block_n=256, block_k=256, stages=6)
    sizes = dict(task.shape_cases("train")[0].sizes)
    program = task.bind(space.program(cfg), sizes)
    m = ModelBackend().measure(program, sizes, task)
    assert not m.ok and "shared memory" in m.error, (m.ok, m.error)
    ok = ModelBackend().measure(task.bind(space.program(space.baseline()), sizes), sizes, task)
    assert ok.ok and ok.error == "" and 0 < ok.ms < float("inf"), ok


def test_a_workspace_in_a_size_the_task_does_not_give_is_refused_by_the_signature():
    """Workspaces are the program's own, but their dims must be sizes the task gives (a
    mutated `"P"` once reached the checker as an internal error)."""
    from argus_env.dsl.program import Program
    from argus_env.task import TaskInterfaceError
    parse = Program.from_text
    text = TASK.program("baseline").text
    assert 'xs: A.Tensor[A.bf16, "P", "D"]' in text
    bad = parse(text.replace('xs: A.Tensor[A.bf16, "P", "D"]', 'xs: A.Tensor[A.bf16, "b", "D"]'))
    with pytest.raises(TaskInterfaceError, match="problem size `b`"):
        TASK.check_program(bad)
    TASK.check_program(parse(text))  # the original passes
