"""The scripted knowledge-guided planner (`kb`): the same episode for the same seed, every
step legal and within the budget, a violation repaired from the checker's report, each
ablation changing what it does, and on GEMM in table mode a better program than random
search finds with the same steps."""

import gymnasium as gym
import numpy as np
import pytest

import argus_env  # noqa: F401
from argus_env.agents import load_agent
from argus_env.agents.knowledge import Entry, Plan, load_entries
from argus_env.agents.llm import scripted
from argus_env.agents.llm.memory import Memory



class MaskGuard(gym.Wrapper):
    """Fails a test at the first action the env's mask did not allow when it was sent;
    counts the steps that reach the env."""

    def __init__(self, env):
        super().__init__(env)
        self.steps, self.mask = 0, None

    def reset(self, **kwargs):
        obs, info = self.env.reset(**kwargs)
        self.mask = obs["action_mask"]
        return obs, info

    def step(self, action):
        label = self.env.unwrapped.catalog[int(action)]
        assert self.mask[int(action)], f"masked action {label} sent at step {self.steps + 1}"
        self.steps += 1
        obs, reward, term, trunc, info = self.env.step(action)
        self.mask = obs["action_mask"]
        return obs, reward, term, trunc, info


def all_actions(rec) -> list:
    return [a for ep in [*rec.earlier_actions, rec.actions] for a in ep]


def table_env(split="train"):
    return gym.make("Argus-GEMM-v0", measure="table", correctness="none", split=split,
                    max_episode_steps=1000)


def names(rec, env) -> list[str]:
    """Every action of the record, over its resets, as calls."""
    out = []
    for a in all_actions(rec):
        name, value = env.unwrapped.catalog[a]
        out.append(f"{name}()" if value is None else f"{name}({value!r})")
    return out


def test_registered_and_run_through_the_agent_registry():
    module = load_agent("kb")
    assert module is scripted and {"knowledge", "report", "memory"} <= set(vars(module.Args()))


@pytest.mark.parametrize("budget", [7, 25])
def test_same_seed_same_episode_every_step_legal_and_within_the_budget(budget):
    env = MaskGuard(table_env())
    runs = [scripted.play(env, scripted.Args(budget=budget, seed=s, shape="decode-16"))
            for s in (3, 3)]
    assert all_actions(runs[0]) == all_actions(runs[1]), [r.action_labels for r in runs]
    assert runs[0].transcript == runs[1].transcript
    for rec in runs:
        assert rec.env_steps <= budget and rec.submitted, (rec.env_steps, rec.action_labels)
        assert rec.invalid_actions == 0 and rec.action_labels[-1] == "submit()"
    assert env.steps == sum(r.env_steps for r in runs)
    env.close()


def splitk_first() -> tuple[Entry, ...]:
    """The shipped entries, with one entry whose plan is split_k(4) alone, ranked first:
    the planner meets the split-K violation at its first step on any shape."""
    seeded = Entry("test-split", "split first", "split", "", ("gemm",),
                   plans=(Plan(("split_k(4)",), "1", "100"),))
    return (seeded,) + load_entries()


def test_a_split_k_violation_is_repaired_with_the_combine_the_report_asks_for():
    env = table_env()
    planner = scripted.ScriptedPlanner(env, scripted.Args(budget=12, seed=0, shape="decode-16"),
                                       entries=splitk_first())
    rec = planner.run()
    steps = names(rec, env)
    assert steps[:2] == ["split_k(4)", "combine('atomic')"], steps
    assert set(rec.violations_met) == {"coverage", "exactly_once"}, rec.violations_met
    repair = [t for t in rec.transcript if str(t.get("why", "")).startswith("repair")]
    assert repair and repair[0]["action"] == "combine('atomic')", rec.transcript
    assert repair[0]["frac"] > 0, "the repaired program is clean and measured"
    assert planner.transcript[-1]["move"] != "test-split#0" or len(planner.transcript) == 1
    env.close()


def test_without_the_report_the_violation_is_undone_not_repaired():
    env = table_env()
    planner = scripted.ScriptedPlanner(
        env, scripted.Args(budget=12, seed=0, shape="decode-16", report=False), entries=splitk_first())
    rec = planner.run()
    steps = names(rec, env)
    assert steps[:2] == ["split_k(4)", "undo()"], steps[:4]
    assert "combine('atomic')" not in steps
    assert not any(str(t.get("why", "")).startswith("repair") for t in rec.transcript)
    env.close()


class Programs(gym.Wrapper):
    """Notes the program each step reaches (its hash) and whether the checker refuted it,
    leaving out steps that walk a path from the baseline walked before (a return to a kept
    program replays its path, refuted programs on it included: a transit, not a choice)."""

    def __init__(self, env):
        super().__init__(env)
        self.met: list[tuple[str, bool]] = []
        self.path: list[int] = []
        self.walked: set[tuple] = set()

    def reset(self, **kwargs):
        self.path = []
        return self.env.reset(**kwargs)

    def step(self, action):
        out = self.env.step(action)
        info = out[4]
        name = self.env.unwrapped.catalog[int(action)][0]
        if name == "undo":
            self.path = self.path[:-1]
        elif name != "submit":
            self.path.append(int(action))
            if tuple(self.path) not in self.walked:
                self.met.append((info["report"]["program_hash"], bool(info["report"]["violations"])))
            self.walked.add(tuple(self.path))
        return out


@pytest.mark.parametrize("report", [True, False])
def test_a_refuted_program_is_never_played_again(report):
    env = Programs(table_env())
    planner = scripted.ScriptedPlanner(
        env, scripted.Args(budget=30, seed=0, shape="decode-16", report=report), entries=splitk_first())
    planner.run()
    refuted = [h for h, bad in env.met if bad]
    assert refuted, "split_k(4) alone should have been refuted"
    assert len(set(refuted)) == len(refuted), env.met
    env.close()


def test_without_knowledge_the_plans_come_in_a_seeded_order_not_by_expected_gain():
    env = table_env()
    firsts = {}
    for knowledge in (True, False):
        for seed in (0, 1, 2):
            planner = scripted.ScriptedPlanner(env, scripted.Args(budget=12, seed=seed, shape="square-4096",
                                                                  knowledge=knowledge, memory=False))
            planner.run()
            first = planner.transcript[0]
            firsts[knowledge, seed] = first["move"]
            assert (first["expected"] > 0) == knowledge, first
    # with knowledge the compute-bound recipe is the largest expected gain, whatever the seed
    assert {firsts[True, s] for s in (0, 1, 2)} == {"large-gemm-recipe#0"}, firsts
    assert len({firsts[False, s] for s in (0, 1, 2)}) > 1, firsts
    env.close()


def test_memory_carries_a_plans_outcome_into_the_next_episode():
    env = table_env()
    memory = Memory(None)
    first = scripted.ScriptedPlanner(env, scripted.Args(budget=20, seed=0, shape="square-4096"), memory)
    first.run()
    assert memory.outcomes, "the first episode should leave plan outcomes"
    again = scripted.ScriptedPlanner(env, scripted.Args(budget=20, seed=0, shape="square-4096"), memory)
    again.run()
    bare = scripted.ScriptedPlanner(env, scripted.Args(budget=20, seed=0, shape="square-4096",
                                                       memory=False), memory)
    bare.run()
    # the second episode knows the best path on this shape and what the plans gained
    assert again.transcript[0]["move"] == "memory" or again.transcript[0]["memory"][1] > 0, again.transcript[0]
    assert bare.transcript[0]["memory"] == [0.0, 0.0] and bare.transcript[0]["move"] != "memory"
    assert again.transcript != bare.transcript
    env.close()


def test_beats_random_search_at_30_steps_on_a_train_shape():
    env = table_env()
    kb, rnd = [], []
    for seed in (0, 1, 2):
        kb.append(scripted.play(env, scripted.Args(budget=30, seed=seed, shape="ragged-1000",
                                                   memory=False)).best_frac_anchor)
        module = load_agent("random")
        rnd.append(module.run(env, module.Args(budget=30, seed=seed, shape="ragged-1000")).best_frac_anchor)
    assert np.mean(kb) > np.mean(rnd) and min(kb) > min(rnd), (kb, rnd)
    env.close()


def test_on_causal_attention_the_recipe_comes_first_and_skips_the_masked_blocks():
    """The attention entries' plans (`attention-hopper-recipe`): on a causal train shape the
    planner's first move is the causal recipe, block skipping is in the program it keeps,
    and at 30 steps it finds a faster program than random search on every seed."""
    env = gym.make("Argus-Attention-v0", measure="table", correctness="none", split="train",
                   max_episode_steps=1000)
    kb, rnd = [], []
    for seed in (0, 1):
        rec = scripted.play(env, scripted.Args(budget=30, seed=seed,
                                               shape="b4-h32-s4096-d128-causal", memory=False))
        moves = [t["move"] for t in rec.transcript if "move" in t]
        assert moves[0].startswith("attention-hopper-recipe#"), moves[:3]
        assert "skip_blocks(True)" in rec.action_labels, rec.action_labels
        kb.append(rec.best_frac_anchor)
        module = load_agent("random")
        rnd.append(module.run(env, module.Args(budget=30, seed=seed,
                                               shape="b4-h32-s4096-d128-causal")).best_frac_anchor)
    assert min(kb) > max(rnd), (kb, rnd)
    env.close()


def test_a_kick_spends_the_budget_the_plain_planner_leaves_and_never_loses_its_best():
    """With `kick`, the planner does not submit where no untried move is left: from its
    best program it takes random legal moves and climbs again, every step legal and within
    the budget. Up to that point it plays as without (the same seeded choices), and the
    walker keeps the best program seen, so its best is never below the plain planner's."""
    env = MaskGuard(table_env())
    budget = 60
    plain = scripted.play(env, scripted.Args(budget=budget, seed=1, shape="square-8192"))
    kicked = scripted.play(env, scripted.Args(budget=budget, seed=1, shape="square-8192", kick=2))
    assert plain.env_steps < budget - 4, "the plain planner should stop early here"
    n = len(all_actions(plain)) - 1   # its steps before returning to the best and submitting
    assert all_actions(kicked)[:n - 2] == all_actions(plain)[:n - 2]
    assert any(str(t.get("why", "")).startswith("kick") for t in kicked.transcript)
    assert kicked.env_steps > plain.env_steps and kicked.env_steps <= budget
    assert kicked.submitted and kicked.invalid_actions == 0
    assert kicked.best_frac_anchor >= plain.best_frac_anchor
    again = scripted.play(env, scripted.Args(budget=budget, seed=1, shape="square-8192", kick=2))
    assert all_actions(again) == all_actions(kicked), "the kicks are seeded"
    env.close()
