"""The planner with the real local model (SmolLM2-135M, scoring mode, tiny budgets) on
every registered environment. Slow: loads the model once per session (conftest)."""

import math

import gymnasium as gym
import pytest

import argus_env  # noqa: F401
from argus_env.agents import load_agent
from argus_env.agents.knowledge.retrieve import Retriever
from argus_env.agents.llm import planner
from argus_env.agents.llm.memory import Memory
from argus_env.envs import ENV_IDS
from argus_env.envs.record import EpisodeRecord

pytestmark = pytest.mark.slow


def test_batched_scores_equal_one_candidate_at_a_time(smol):
    msgs = [{"role": "user", "content": "Split-K needs its combine. Answer with one call."}]
    cands = ["combine('atomic')", "tile_m(32)"]
    together = smol.score(msgs, cands)
    alone = [smol.score(msgs, [c])[0] for c in cands]
    assert together == pytest.approx(alone, abs=1e-3)


# every registered env in text mode; the discrete mode (what `argus run` builds) on GEMM
CASES = [(env_id, "text") for env_id in sorted(ENV_IDS)] + [("Argus-GEMM-v0", "discrete")]


@pytest.mark.parametrize("env_id, mode", CASES)
def test_planner_completes_an_episode_with_the_local_model(env_id, mode, smol, tmp_path):
    env = gym.make(env_id, mode=mode, max_episode_steps=100)
    smallest = min(env.unwrapped.cases, key=lambda c: math.prod(c.sizes.values())).name
    module = load_agent("llm")
    args = module.Args(budget=3, seed=0, shape=smallest,
                       prompt_tokens=384, contrast=0.5 if mode == "text" else 0.0,
                       memory_path=str(tmp_path / "memory.json"))
    rec = module.run(env, args, backend=smol, retriever=Retriever(method="bm25"))
    assert rec.agent == "llm" and rec.submitted and rec.steps <= 3, rec.action_labels
    assert rec.invalid_actions == 0, rec.transcript
    chosen = [t for t in rec.transcript if t["source"] == "model"]
    assert chosen, rec.transcript
    for t in chosen:
        assert t["mode"] == "scoring" and t["scores"] and t["scores"][0][0] == t["action"]
        assert "Legal actions now" in t["prompt"][1]["content"] or "legal" in t["prompt_info"]["dropped"]
    again = EpisodeRecord.from_json(rec.to_json())
    assert again.transcript == rec.transcript
    assert (tmp_path / "memory.json").exists()
