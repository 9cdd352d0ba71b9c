"""GEMM programs lowered to Triton and run under the interpreter, against torch."""

import ast

import pytest
import torch

from argus_env import lower
from argus_env.dsl.program import Program
from argus_env.lower.runtime import LaunchError
from argus_env.measure import oracle
from argus_env.task import get_task

TASK = get_task("gemm")


@pytest.mark.parametrize("which", list(TASK.programs))
@pytest.mark.parametrize("sizes", TASK.cpu_shapes, ids=lambda s: "x".join(map(str, s.values())))
def test_program_matches_torch(which, sizes):
    prog = TASK.program(which)
    verdict = oracle.check(prog, TASK, sizes, lower.load(prog, interpret=True), seed=7)
    assert verdict.ok, f"{which} at {sizes}: {verdict.message}"
    assert verdict.max_rel_err < 0.05, f"{which} error {verdict.max_rel_err} is suspiciously large"


def test_cpu_shapes_are_ragged():
    """The reduced shapes must exercise masks: some dim not a multiple of the tiles."""
    consts = TASK.program("baseline").kernel.consts
    ragged = [s for s in TASK.cpu_shapes if s["M"] % consts["BM"] or s["N"] % consts["BN"]
              or s["K"] % consts["BK"]]
    assert len(ragged) >= 2, f"only {len(ragged)} ragged CPU shapes"


def _mutate(text: str, old: str, new: str) -> Program:
    assert old in text, f"{old!r} not in program"
    return Program.from_text(text.replace(old, new))


def test_oracle_catches_wrong_indexing():
    base = TASK.program("baseline")
    bad = _mutate(base.text, "cols = pid_n * BN + A.arange(BN)",
                  "cols = pid_n * BN + A.arange(BN) + 1")
    verdict = oracle.check(bad, TASK, {"M": 64, "N": 128, "K": 64},
                           lower.load(bad, interpret=True))
    assert not verdict.ok, "a shifted column index must be caught"
    assert "differs from the reference" in verdict.message, verdict.message


def test_oracle_catches_unwritten_output():
    """Output is poisoned with NaN: a kernel that skips the last row block fails."""
    base = TASK.program("baseline")
    bad = _mutate(base.text, "mask=(rows < M, cols < N)", "mask=(rows < M - 1, cols < N)")
    verdict = oracle.check(bad, TASK, {"M": 64, "N": 64, "K": 32}, lower.load(bad, interpret=True))
    assert not verdict.ok and verdict.first_mismatch[0] == 63, verdict


def test_launcher_rejects_bad_arguments():
    launch = lower.load(TASK.program("baseline"), interpret=True)
    a = torch.randn(32, 16, dtype=torch.bfloat16)
    with pytest.raises(LaunchError, match=r"`b` must have shape \(16, 8\)"):
        launch(a, torch.randn(17, 8, dtype=torch.bfloat16))
    with pytest.raises(LaunchError, match="must be torch.bfloat16"):
        launch(a, torch.randn(16, 8))
    with pytest.raises(LaunchError, match="must have 2 dims"):
        launch(a, torch.randn(16, dtype=torch.bfloat16))


def test_launcher_allocates_and_returns_output():
    launch = lower.load(TASK.program("baseline"), interpret=True)
    a, b = torch.randn(40, 24, dtype=torch.bfloat16), torch.randn(24, 72, dtype=torch.bfloat16)
    c = launch(a, b)
    assert c.shape == (40, 72) and c.dtype == torch.bfloat16, c.shape
    torch.testing.assert_close(c.float(), a.float() @ b.float(), rtol=2e-2, atol=5e-2)


def test_expert_source_reads_like_hand_written_triton():
    src = lower.source(TASK.program("expert"))
    tree = ast.parse(src)  # valid Python
    funcs = {f.name: f for f in tree.body if isinstance(f, ast.FunctionDef)}
    assert set(funcs) == {"gemm_kernel", "gemm"}, set(funcs)
    assert ast.get_docstring(funcs["gemm_kernel"]), "the kernel keeps the program's docstring"
    for needle in ("a_desc.load([pid_m * BM, k])", "b_desc.load([pid_n * BN, k]).T",
                   "c_desc.store([pid_m * BM, pid_n * BN]", "tl.range(0, K, BK, num_stages=3)",
                   "warp_specialize=True", "TensorDescriptor.from_tensor(b.t(), [BN, BK])",
                   "# tag assertion (checked by `argus check`, not by this code)"):
        assert needle in src, f"expected {needle!r} in the generated source"
    assert "_ptr" not in src, "TMA-only tensors need no pointer arithmetic"
    longest = max(len(line) for line in src.splitlines())
    assert longest < 140, f"a generated line is {longest} characters long"


def test_source_is_cached_by_program_hash():
    prog = TASK.program("baseline")
    path = lower.module_path(prog)
    assert prog.hash in path.read_text(), "the module names its program hash"
    again = TASK.program("baseline")
    assert lower.module_path(again) == path
    other = Program.from_text(prog.text.replace("BK: A.const = 32", "BK: A.const = 64"))
    assert lower.module_path(other) != path, "a different program gets a different module"


@pytest.mark.slow
def test_programs_compile_for_hopper_without_a_gpu():
    """The real compiler (not the lenient interpreter) accepts both programs for sm_90, and
    the expert uses what it claims: wgmma and TMA bulk copies within shared memory."""
    from argus_env.lower.aot import compile_hopper
    base = compile_hopper(TASK.program("baseline"))
    assert base.ok, base.error
    expert = compile_hopper(TASK.program("expert"))
    assert expert.ok, expert.error
    assert expert.wgmma > 0 and expert.tma_loads > 0, expert
    assert base.tma_loads == 0, "the baseline uses plain loads"
    assert expert.shared_bytes <= 232448, f"over the H200's shared memory: {expert.shared_bytes}"


# ---------------------------------------------------- swap-AB, stream-K, reduction pass
#: the reduced shapes, and one whose k steps split tiles between the interpreter's
#: programs into many segments (K ragged for every BK)
SPLIT = {"M": 200, "N": 200, "K": 1000}
FAST = ("swap-16x128x128", "sk-128x128x64", "swap-sk-64x128x64", "swap-red4-16x128x128")


def _stream_k_tiles(config, sizes: dict, sms: int) -> tuple[int, int]:
    """(tiles whole in one program, tiles split between programs) of a stream-K launch."""
    iters = -(-sizes["K"] // config.block_k)
    tiles = -(-sizes["M"] // config.block_m) * -(-sizes["N"] // config.block_n)
    total = tiles * iters
    per = -(-total // min(sms, total))
    owners = [{p for p in range(min(sms, total)) if p * per < (t + 1) * iters and
               min(p * per + per, total) > t * iters} for t in range(tiles)]
    return sum(len(o) == 1 for o in owners), sum(len(o) > 1 for o in owners)


def _small(name: str):
    from argus_env.tasks.gemm.space import SMALL_SHAPES
    return SMALL_SHAPES[name]


def _names(fast: bool) -> list:
    from argus_env.tasks.gemm.space import SMALL_SHAPES
    return [n for n in SMALL_SHAPES if (n in FAST) == fast]


@pytest.mark.parametrize("sizes", [*TASK.cpu_shapes, SPLIT], ids=lambda s: "x".join(map(str, s.values())))
@pytest.mark.parametrize("name", [*_names(True), *(pytest.param(n, marks=pytest.mark.slow)
                                                    for n in _names(False))])
def test_swap_ab_and_stream_k_configurations_match_torch(name, sizes):
    """Under the interpreter (3 SMs: stream-K's programs each walk several tiles) at the
    reduced shapes, ragged in M, N and K."""
    prog = TASK.bind(TASK.space.program(_small(name)), sizes)
    verdict = oracle.check(prog, TASK, sizes, lower.load(prog, interpret=True), seed=7)
    assert verdict.ok, f"{name} at {sizes}: {verdict.message}"
    assert verdict.max_rel_err < 0.05, f"{name} error {verdict.max_rel_err} is suspiciously large"


def test_the_reduced_shapes_exercise_both_stream_k_paths():
    """Some tile is stored whole and some is fixed up by atomic adds at the shapes above,
    with the interpreter's SM count."""
    from argus_env.lower.runtime import INTERPRETER_NUM_SMS
    for name in ("sk-128x128x64", "swap-sk-64x128x64"):
        counts = [_stream_k_tiles(_small(name), s, INTERPRETER_NUM_SMS)
                  for s in [*TASK.cpu_shapes, SPLIT]]
        assert any(whole for whole, _ in counts) and any(split for _, split in counts), \
            (name, counts)


def test_oracle_catches_a_stream_k_fixup_bug_and_an_untransposed_swap():
    """A whole tile added on top of its store (stream-K) and an accumulator stored as
    computed (swap-AB, square tiles) give wrong numbers the oracle names."""
    sizes = {"M": 130, "N": 136, "K": 96}
    sk = TASK.program("streamk")
    bad = _mutate(sk.text, "        else:\n            A.atomic_add", "        A.atomic_add")
    verdict = oracle.check(bad, TASK, sizes, lower.load(bad, interpret=True))
    assert not verdict.ok and "differs from the reference" in verdict.message, verdict
    sw = TASK.program("swapab").text.replace("BM: A.const = 16", "BM: A.const = 64")
    bad = _mutate(sw, "A.cast(A.trans(acc), A.bf16)", "A.cast(acc, A.bf16)")
    verdict = oracle.check(bad, TASK, sizes, lower.load(bad, interpret=True))
    assert not verdict.ok and "differs from the reference" in verdict.message, verdict


def test_oracle_catches_a_reduction_pass_that_drops_a_split():
    """Split-K through a float32 workspace: the reduction pass summing one split too few
    leaves every output short of that split's partial sums."""
    from argus_env.tasks.gemm.space import SPLITK_REDUCE
    sizes = {"M": 100, "N": 72, "K": 80}
    good = TASK.bind(TASK.space.program(SPLITK_REDUCE), sizes)
    assert oracle.check(good, TASK, sizes, lower.load(good, interpret=True), seed=7).ok
    bad = _mutate(good.text, "splits = A.arange(SPLIT_K)", "splits = A.arange(SPLIT_K // 2)")
    verdict = oracle.check(bad, TASK, sizes, lower.load(bad, interpret=True))
    assert not verdict.ok and "differs from the reference" in verdict.message, verdict
