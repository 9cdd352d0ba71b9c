"""Episodic memory: lessons distilled from trajectories reach the next episode's prompt;
the file is written atomically."""

import json
import os

import gymnasium as gym
import pytest

import argus_env  # noqa: F401
from argus_env.agents.llm import planner
from argus_env.agents.llm.backends import ScriptedBackend
from argus_env.agents.llm.memory import Memory, StepRecord, distil



def _episode(memory, answers):
    env = gym.make("Argus-GEMM-v0", mode="text", max_episode_steps=100)
    stub = ScriptedBackend(answers, default="tile_k(64)")
    args = planner.Args(budget=6, seed=0, shape="decode-16", mode="free", knowledge=False)
    rec = planner.run(env, args, backend=stub, retriever=None, memory=memory)
    return rec, stub


def test_memory_changes_the_next_episodes_prompt(tmp_path):
    path = tmp_path / "memory.json"
    rec, first = _episode(Memory(path), ["split_k(4)", "combine('atomic')"])
    assert [t["action"] for t in rec.transcript[:2]] == ["split_k(4)", "combine('atomic')"], rec.transcript
    assert "Memory of earlier episodes" not in first.prompts[0][1]["content"]
    saved = json.loads(path.read_text())
    assert saved["episodes"][0]["steps"][0]["action"] == "split_k(4)"
    assert saved["episodes"][0]["steps"][0]["kinds"] == ["coverage", "exactly_once"]
    texts = [Memory(path).lessons[k].text() for k in Memory(path).lessons]
    lesson = next(t for t in texts if "split_k(4) then combine('atomic')" in t)
    assert "fixed the coverage, exactly_once that split_k(4) left" in lesson, lesson

    _, second = _episode(Memory(path), ["tile_m(32)"])        # a new run reloads the file
    prompt = second.prompts[0][1]["content"]
    assert "Memory of earlier episodes" in prompt and lesson in prompt, prompt
    assert "best so far on decode-16" in prompt
    assert prompt != first.prompts[0][1]["content"]


def test_distil_credits_chains_and_unfixed_violations():
    steps = [StepRecord("s0", "split_k(4)", ["coverage"], -0.2, 0.0),
             StepRecord("s1", "undo()", [], 0.0, 0.4),
             StepRecord("s0", "tile_k(64)", [], 0.3, 0.6),
             StepRecord("s2", "tile_m(999)", [], -0.5, 0.0, error="illegal"),
             StepRecord("s2", "split_k(2)", ["coverage", "exactly_once"], -0.2, 0.0),
             StepRecord("s3", "combine('atomic')", [], 0.5, 0.9)]
    ep = {"shape": "decode-16", "baseline_frac": 0.4, "steps": [vars(s) for s in steps]}
    got = {(tuple(x.actions), x.undone): x for x in distil(ep)}
    assert got[(("split_k(4)",), True)].fixed == ["coverage"]
    assert got[(("tile_k(64)",), False)].gain == pytest.approx(1.5)
    chain = got[(("split_k(2)", "combine('atomic')"), False)]
    assert chain.gain == pytest.approx(1.5) and chain.fixed == ["coverage", "exactly_once"]


def test_lessons_aggregate_and_rank_by_relevance():
    m = Memory()
    for frac in (0.6, 0.9):
        m.begin("gemm", "decode-16", {"M": 16, "N": 4096, "K": 4096}, 0.4)
        m.note(StepRecord("s", "tile_k(64)", [], 0.1, frac))
        m.end(frac, ["tile_k(64)"])
    (lesson,) = m.lessons.values()
    assert lesson.count == 2 and lesson.gain == pytest.approx((1.5 * 2.25) ** 0.5)
    lines = m.relevant("decode-16", {"M": 16, "N": 4096, "K": 4096}, set(), {"tile_k(64)"})
    assert lines[0].startswith("best so far on decode-16: 0.90x library via tile_k(64)")
    assert "tile_k(64): 1.84x throughput, seen 2x" in lines[1]
    assert m.prior("decode-16", "tile_k(64)") > 0 and m.prior("decode-16", "warps(8)") == 0


def test_saving_is_atomic(tmp_path, monkeypatch):
    path = tmp_path / "m.json"
    m = Memory(path)
    m.begin("gemm", "decode-16", {"M": 16}, 0.4)
    m.end(0.4, [])
    before = path.read_text()
    m.begin("gemm", "decode-16", {"M": 16}, 0.4)

    def boom(*a, **k):
        raise OSError("disk full")
    monkeypatch.setattr(json, "dump", boom)
    with pytest.raises(OSError, match="disk full"):
        m.end(0.5, ["tile_k(64)"])
    assert path.read_text() == before                     # the old memory is intact
    assert os.listdir(tmp_path) == ["m.json"]             # no temp file left behind


def test_a_bad_memory_file_is_a_clear_error(tmp_path):
    path = tmp_path / "m.json"
    path.write_text("{not json")
    with pytest.raises(ValueError, match="unreadable"):
        Memory(path)
    path.write_text(json.dumps({"version": 99}))
    with pytest.raises(ValueError, match="version 99"):
        Memory(path)
