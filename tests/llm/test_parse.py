"""Untrusted model output: unparseable, empty, over-long or hostile answers become a
transcript error and a fallback action; never a crash, never executed."""

import os

import gymnasium as gym
import pytest

import argus_env  # noqa: F401
from argus_env.agents.knowledge.retrieve import Retriever
from argus_env.agents.llm import planner
from argus_env.agents.llm.backends import ScriptedBackend
from argus_env.agents.llm.parse import parse_answer
from argus_env.tasks.gemm.space import SPACE


LEGAL = ["tile_m(32)", "tile_m(128)", "split_k(4)", "combine('atomic')", "undo()", "submit()"]


@pytest.mark.parametrize("answer, action", [
    ("split_k(4)", "split_k(4)"),
    ("I would apply `split_k( 4 )` here.", "split_k(4)"),
    ("Reasoning: tile_m(64) is the current size.\ncombine(\"atomic\")", "combine('atomic')"),
    ("```\ntile_m(128)\n```", "tile_m(128)"),
])
def test_a_call_is_extracted_and_canonicalised(answer, action):
    res = parse_answer(answer, SPACE, LEGAL)
    assert (res.kind, res.action) == ("call", action), res


@pytest.mark.parametrize("answer, message", [
    ("", "empty answer"),
    ("   \n\t ", "empty answer"),
    ("x" * 30_000, "over-long answer"),
    ("The best choice is to optimise memory.", "no transformation call"),
    ("__import__('os').system('touch PWNED')", "unknown names: __import__"),
    ("tile_m(999)", "is not one of"),
    ("tile_m(256)", "not legal now"),
    ("split_k(n=4)", "write a call such as"),
    ("tile_m(__import__('os'))", "no transformation call"),
    ("tile_m('big')", "is not one of"),
    ("```python\nimport os\nos.system('touch PWNED')\n```", "rejected by the DSL front end"),
    ("```python\n@A.kernel(num_warps=4)\ndef gemm(a):\n    open('PWNED', 'w')\n```", "rejected by the DSL front end"),
    ("\x00\xff\ufffd" * 50, "no transformation call"),
    (None, "not text"),
])
def test_bad_answers_are_errors(answer, message):
    res = parse_answer(answer, SPACE, LEGAL)
    assert res.kind == "error" and message in res.error, res


HOSTILE = [
    "",
    "x" * 30_000,
    "I cannot decide.",
    "```python\nimport os\nos.system('touch PWNED')\n```",
    "__import__('os').system('touch PWNED')",
    "```python\n@A.kernel(num_warps=4)\ndef gemm(a: A.Tensor[A.bf16, 'M', 'K']):\n    open('PWNED', 'w')\n```",
    "exec(open('PWNED', 'w'))",
    "\x00\x1b[31m\xff" * 100,
    "tile_m(999)",
]


def test_hostile_answers_become_transcript_errors_and_fallbacks(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    env = gym.make("Argus-GEMM-v0", mode="text", max_episode_steps=100)
    stub = ScriptedBackend(HOSTILE)
    args = planner.Args(budget=2 * len(HOSTILE) + 4, seed=0, shape="decode-16", mode="free",
                        memory=False, auto_undo=False)
    rec = planner.run(env, args, backend=stub, retriever=Retriever(method="bm25"))
    assert rec.submitted and rec.steps <= args.budget, rec.action_labels
    model_steps = [t for t in rec.transcript if t["source"] != "policy"]
    assert len(model_steps) >= len(HOSTILE), [t["action"] for t in rec.transcript]
    for t, answer in zip(model_steps, HOSTILE):
        assert t["source"] == "fallback" and t["error"], t
        assert t["answer"] == answer
        assert t["env_error"] is None, t                 # the fallback is a legal call
        assert t["action"].endswith(")") and "\n" not in t["action"], t["action"]
    for sent in rec.actions:                             # nothing hostile reached the env
        assert sent in {f"{n}({v!r})" for n, v in env.unwrapped.catalog if v is not None} | \
            {"undo()", "submit()"}, sent
    assert not os.path.exists(tmp_path / "PWNED")
    assert len(stub.prompts) == len(model_steps)


def test_a_legal_program_answer_is_sent_as_a_program():
    from argus_env.tasks.gemm.space import BASELINE, render
    text = render(BASELINE).replace("BK: A.const = 32", "BK: A.const = 64")
    env = gym.make("Argus-GEMM-v0", mode="text", max_episode_steps=100)
    stub = ScriptedBackend([f"Here is a better kernel:\n```python\n{text}```"])
    rec = planner.run(env, planner.Args(budget=3, shape="ragged-1000", mode="free", memory=False,
                                        auto_undo=False), backend=stub, retriever=Retriever(method="bm25"))
    first = rec.transcript[0]
    assert first["source"] == "model" and first["action"] == "program(...)", first
    assert first["env_error"] is None and rec.submitted


def test_a_failing_backend_falls_back_without_crashing():
    class Broken:
        name = "broken"

        def score(self, messages, candidates):
            raise RuntimeError("out of memory")

    env = gym.make("Argus-GEMM-v0", mode="text", max_episode_steps=100)
    rec = planner.run(env, planner.Args(budget=3, shape="decode-16", memory=False),
                      backend=Broken(), retriever=None)
    assert rec.submitted
    assert rec.transcript[0]["source"] == "fallback"
    assert "backend failed: RuntimeError: out of memory" in rec.transcript[0]["error"]
