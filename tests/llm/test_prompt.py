"""Prompt pieces: nothing in a prompt may vary between identical runs."""

from argus_env.agents.llm.prompt import perf_line, report_lines


def test_the_checkers_wall_time_stays_out_of_the_prompt():
    a = report_lines("gemm: all invariants hold (14 checks proven, 349 ms)")
    b = report_lines("gemm: all invariants hold (14 checks proven, 1203.5 ms)")
    assert a == b == ["gemm: all invariants hold (14 checks proven)"], (a, b)
    lines = report_lines("moe: 3 violation(s)\n- [scatter] one\n- [padding] two\n- [combine] three")
    assert lines == ["moe: 3 violation(s)", "- [scatter] one", "- [padding] two", "- ... 1 more"]


def test_performance_names_no_particular_library():
    assert "cuBLAS" not in perf_line([0, 0, 0.5, 0.7], True)
    assert perf_line([0, 0, 0.5, 0.7], True) == "Performance: 0.50x the library; best so far 0.70x"


# ------------------------------------------------------------ the planner's ablations
import gymnasium as gym  # noqa: E402
import pytest  # noqa: E402

import argus_env  # noqa: E402,F401
from argus_env.agents.knowledge.retrieve import Retriever  # noqa: E402
from argus_env.agents.llm import planner  # noqa: E402
from argus_env.agents.llm.backends import ScriptedBackend  # noqa: E402
from argus_env.agents.llm.memory import Lesson, Memory  # noqa: E402


def second_prompt(**ablation) -> str:
    """The user message the planner builds after `split_k(4)` on decode-16 (the checker
    reports coverage and exactly_once), with one lesson in memory, under `ablation`."""
    env = gym.make("Argus-GEMM-v0", mode="text", measure="table", correctness="none")
    memory = Memory(None)
    lesson = Lesson("decode-16", ["tile_k(64)"], 1.3)
    memory.lessons[lesson.key] = lesson
    stub = ScriptedBackend(["split_k(4)"], default="tile_k(64)")
    args = planner.Args(budget=6, seed=0, shape="decode-16", mode="free", prompt_tokens=4000,
                        retrieval="bm25", memory_path="none", **ablation)
    planner.run(env, args, backend=stub, retriever=Retriever(method="bm25") if args.knowledge else None,
                memory=memory if args.memory else None)
    env.close()
    assert len(stub.prompts) >= 2, stub.prompts
    return stub.prompts[1][1]["content"]


@pytest.fixture(scope="module")
def full_prompt():
    return second_prompt()


def test_the_full_prompt_has_report_knowledge_and_memory(full_prompt):
    assert "Checker: gemm: 2 violation(s)" in full_prompt and "[coverage]" in full_prompt, full_prompt
    assert "Knowledge:" in full_prompt and "combine('atomic')" in full_prompt.split("Knowledge:")[1]
    assert "Memory of earlier episodes:" in full_prompt and "tile_k(64)" in full_prompt


@pytest.mark.parametrize("ablation, gone, kept", [
    ({"report": False}, ["Checker:", "[coverage]", "[exactly_once]", "pid_k="],
     ["Knowledge:", "Memory of earlier episodes:"]),
    ({"knowledge": False}, ["Knowledge:"], ["Checker:", "Memory of earlier episodes:"]),
    ({"memory": False}, ["Memory of earlier episodes:"], ["Checker:", "Knowledge:"]),
])
def test_each_ablation_removes_its_section_and_only_that(full_prompt, ablation, gone, kept):
    text = second_prompt(**ablation)
    for piece in gone:
        assert piece in full_prompt and piece not in text, (piece, text)
    for piece in kept:
        assert piece in text, (piece, text)
