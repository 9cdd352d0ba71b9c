"""The model-based (`bo`) and tree (`mcts`) search agents: every env step within the budget,
only legal actions, the same episode for the same seed, a submitted program no slower
than the baseline, and on GEMM in table mode a better program than random search finds
with the same steps."""

import functools
import itertools

import gymnasium as gym
import numpy as np
import pytest

import argus_env  # noqa: F401
from argus_env.agents import load_agent
from argus_env.agents.search.configs import ConfigView
from argus_env.envs.record import EpisodeRecord

AGENTS = ("bo", "mcts")


class MaskGuard(gym.Wrapper):
    """Fails a test at the first action the env's mask did not allow when it was sent;
    counts the steps that reach the env and the resets."""

    def __init__(self, env):
        super().__init__(env)
        self.steps, self.resets, self.mask = 0, 0, None

    def reset(self, **kwargs):
        obs, info = self.env.reset(**kwargs)
        self.resets += 1
        self.mask = obs["action_mask"]
        return obs, info

    def step(self, action):
        label = self.env.unwrapped.catalog[int(action)]
        assert self.mask[int(action)], f"masked action {label} sent at step {self.steps + 1}"
        self.steps += 1
        obs, reward, term, trunc, info = self.env.step(action)
        self.mask = obs["action_mask"]
        return obs, reward, term, trunc, info


def table_env(env_id="Argus-GEMM-v0"):
    return gym.make(env_id, measure="table", correctness="none", max_episode_steps=1000)


def play(agent: str, env, **kw) -> EpisodeRecord:
    module = load_agent(agent)
    return module.run(env, module.Args(**kw))


def all_actions(rec: EpisodeRecord) -> list:
    return [a for ep in [*rec.earlier_actions, rec.actions] for a in ep]


@pytest.mark.parametrize("agent", AGENTS)
def test_every_step_within_the_budget_legal_and_submitted(agent):
    """Whatever the budget, the steps that reach the env (undo and submit included) are
    at most the budget, every one was legal when sent, the last is the submit, and the
    record counts exactly the steps the env saw."""
    env = MaskGuard(table_env())
    submit = env.unwrapped.catalog.index(("submit", None))
    for shape, budget, seed in itertools.product(("square-2048", "decode-16"), (1, 2, 5, 14), (0, 1)):
        before = env.steps
        rec = play(agent, env, budget=budget, seed=seed, shape=shape)
        where = (shape, budget, seed, rec.env_steps)
        assert env.steps - before == rec.env_steps <= budget, where
        assert len(rec.trace) == rec.env_steps == len(all_actions(rec)), where
        assert rec.invalid_actions == 0, where
        assert rec.submitted and rec.actions[-1] == submit, where
        assert rec.env_steps >= budget - 2, f"left steps unused: {where}"


@pytest.mark.parametrize("agent", AGENTS)
def test_same_seed_same_episode_other_seed_other_episode(agent):
    """Deterministic in table mode: fresh envs, one seed, the same actions and rewards;
    the seed does steer the search (past bo's warm start from the knowledge base's
    configurations, which are the same for every seed: 24 steps, not 16)."""
    runs = [play(agent, table_env(), budget=24, seed=seed, shape="small-m-512")
            for seed in (3, 3, 4)]
    assert all_actions(runs[0]) == all_actions(runs[1])
    assert runs[0].earlier_actions == runs[1].earlier_actions
    assert runs[0].rewards == runs[1].rewards and runs[0].trace == runs[1].trace
    assert all_actions(runs[0]) != all_actions(runs[2])


@pytest.mark.parametrize("agent", AGENTS)
@pytest.mark.parametrize("env_id,shape,better", [
    ("Argus-GEMM-v0", "ragged-1000", True),
    ("Argus-RMSNorm-v0", "llama70b-decode-64", True),
    # the six-launch baseline is the fastest program within a few steps here (1.51x the
    # pipeline in the table; every single transformation of it is slower)
    ("Argus-MoE-v0", "mixtral-decode-16-balanced", False)])
def test_submits_the_best_program_found_no_slower_than_the_baseline(agent, env_id, shape, better):
    rec = play(agent, table_env(env_id), budget=12, seed=0, shape=shape)
    assert rec.submitted and rec.final_tflops is not None, rec.action_labels
    assert rec.final_tflops >= rec.baseline_tflops
    assert rec.final_frac_anchor == pytest.approx(rec.best_frac_anchor)
    if better:
        assert rec.best_tflops > rec.baseline_tflops, "twelve steps found nothing faster"


@pytest.mark.parametrize("shape", ["decode-16", "ragged-1000"])
def test_beats_random_search_at_equal_steps_on_gemm(shape):
    """On train shapes of GEMM in table mode, 24 steps, mean over three seeds: the best
    program each agent finds is faster than the best random search finds."""
    found = {agent: mean_best(agent, shape) for agent in ("random", *AGENTS)}
    for agent in AGENTS:
        assert found[agent] > found["random"], found


@pytest.mark.parametrize("shape", ["decode-16", "ragged-1000"])
def test_the_knowledge_prior_is_what_beats_random_search_on_gemm(shape):
    """The ablation: without the knowledge base (a uniform prior over the mask, TPE alone)
    neither search agent beats random search at 24 steps on the 45-action GEMM catalog
    (measured in table mode, mean of 3 seeds: decode-16 random 0.655, bo 0.583, mcts 0.434;
    ragged-1000 random 0.611, bo 0.527, mcts 0.364); with it both do (the test above)."""
    found = {"random": mean_best("random", shape)}
    for agent in AGENTS:
        found[agent] = mean_best(agent, shape, prior="uniform")
        with_kb = mean_best(agent, shape)
        assert with_kb > found[agent], (agent, with_kb, found)
    assert all(found[a] < found["random"] for a in AGENTS), found


@functools.lru_cache(maxsize=None)
def mean_best(agent: str, shape: str, **kw) -> float:
    """The best fraction of cuBLAS `agent` finds in 24 table-mode steps at `shape`, mean
    over seeds 0-2 (kept for the process: both tests above compare the same episodes)."""
    env = table_env()
    return float(np.mean([play(agent, env, budget=24, seed=s, shape=shape, **kw)
                          .best_frac_anchor for s in range(3)]))


@pytest.mark.parametrize("agent", AGENTS)
def test_an_unknown_prior_is_refused(agent):
    with pytest.raises(ValueError, match="prior"):
        play(agent, table_env(), budget=4, seed=0, prior="oracle")


def test_the_knowledge_prior_names_swap_ab_for_a_decode_gemm_only():
    """At 16x4096x4096 from the baseline the knowledge base expects a gain from swap-AB with
    a 16-row tile (0.99 of cuBLAS measured on an H100; split-K x4 ranks above it, 1.1 on
    the H200), and scores the swap_ab action; at 8192^3 it names no swap-AB."""
    from argus_env.agents.knowledge.prior import ActionPrior
    env = table_env()
    prior = ActionPrior(env)
    view = ConfigView(env)
    swap = env.unwrapped.catalog.index(("swap_ab", True))
    for shape, want in (("decode-16", True), ("square-8192", False)):
        obs, info = env.reset(seed=0, options={"shape": shape})
        config = view.as_dict(view.decode(obs))
        targets = prior.targets(dict(info["sizes"]), config, obs["perf"])
        scores = prior.scores(dict(info["sizes"]), config, obs["perf"])
        swapped = [(g, t) for g, t in targets if t["swap_ab"] is True]
        if want:
            assert any(g > 0 and t["tile_m"] == 16 for g, t in swapped), targets
            assert scores.get(swap, 0) > 0 and targets[0][0] >= targets[-1][0]
        else:
            assert not swapped and swap not in scores, targets
