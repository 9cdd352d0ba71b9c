"""The step limit submits implicitly: the step that reaches `max_episode_steps` pays what
`submit()` of the episode's current program would have paid, so an agent below the
library cannot earn more by never submitting (before, truncation skipped the negative
submit term: at decode-16, where the baseline reaches about 0.22 of the library, never
submitting out-earned submitting by about 1.5)."""

import math

import gymnasium as gym
import pytest

import argus_env  # noqa: F401  (registers the ids)
from argus_env.envs import MAX_EPISODE_STEPS
from argus_env.envs.kernel_env import KernelEnv
from argus_env.envs.record import Recorder

SHAPE = "decode-16"   # the baseline is far below the library here
WALK = [("tile_m", 128), ("warps", 8)]   # two legal, measured transformations
BROKEN = [("tile_m", 128), ("split_k", 4)]   # split_k alone: coverage violated, unmeasured


def make(limit, **kw):
    return gym.make("Argus-GEMM-v0", correctness="none", max_episode_steps=limit, **kw)


def play(env, actions, submit=False):
    """Reset at SHAPE and take `actions` (catalog pairs), then `submit()` if asked: the
    per-step rewards, the reset's info and every step's (terminated, truncated, info)."""
    core = env.unwrapped
    _, info0 = env.reset(seed=0, options={"shape": SHAPE})
    rewards, steps = [], []
    for pair in list(actions) + ([("submit", None)] if submit else []):
        _, reward, term, trunc, info = env.step(core.catalog.index(pair))
        rewards.append(float(reward))
        steps.append((term, trunc, info))
    return rewards, info0, steps


def test_truncation_pays_what_submitting_would_below_library_parity():
    never, _, steps = play(make(len(WALK)), WALK)
    submitted, _, sub_steps = play(make(len(WALK) + 2), WALK, submit=True)
    # never submitting returns what submitting the same program at the end returns
    assert sum(never) == pytest.approx(sum(submitted), abs=1e-9), (never, submitted)
    term, trunc, info = steps[-1]
    assert trunc and term, "the step at the limit ends the episode"
    assert info["error"] is None and info["measurement"]["ok"], info["report_text"]
    frac = info["measurement"]["frac_anchor"]
    assert frac < 0.5, f"test setup: the program should be far below the library ({frac})"
    bonus = math.log(frac)
    assert info["submitted"] and info["implicit_submit"]
    assert info["submit_reward"] == pytest.approx(bonus)
    assert info["reward_terms"]["submit_bonus"] == pytest.approx(bonus)
    assert sum(info["reward_terms"].values()) == pytest.approx(never[-1])
    # the same walk followed by submit(): the same return, step for step up to the limit
    assert sub_steps[-1][0] and not sub_steps[-1][1] and sub_steps[-1][2]["submitted"]
    assert not sub_steps[-1][2]["implicit_submit"]
    assert never[:-1] == pytest.approx(submitted[:-2])
    assert never[-1] == pytest.approx(submitted[-2] + submitted[-1])
    assert sum(never) < sum(submitted[:-1]) - 1.0, "never submitting earned the negative bonus"


def test_submit_at_the_limit_is_paid_once():
    """`submit()` as the step that reaches the limit is an explicit submit: no implicit
    one on top (terminated by the submit, truncated by the limit)."""
    walk = WALK[:1]
    at_limit, _, steps = play(make(len(walk) + 1), walk, submit=True)
    later, _, _ = play(make(len(walk) + 5), walk, submit=True)
    term, trunc, info = steps[-1]
    assert term and trunc and info["submitted"] and not info["implicit_submit"]
    assert at_limit == pytest.approx(later), (at_limit, later)
    assert at_limit[-1] == pytest.approx(math.log(info["measurement"]["frac_anchor"]))


def test_truncation_of_an_unmeasured_program_pays_the_unmeasured_penalty():
    never, info0, steps = play(make(len(BROKEN)), BROKEN)
    submitted, _, _ = play(make(len(BROKEN) + 2), BROKEN, submit=True)
    assert sum(never) == pytest.approx(sum(submitted), abs=1e-9), (never, submitted)
    term, trunc, info = steps[-1]
    assert term and trunc and info["implicit_submit"]
    assert info["report"]["violations"] and not info["measurement"], info["report_text"]
    start = math.log(info0["measurement"]["frac_anchor"])   # the baseline's bonus, below 0
    assert start < 0
    penalty = -1.0 + start   # `unmeasured` (1.0) below what submitting the start earns
    assert info["reward_terms"]["submit_bonus"] == pytest.approx(penalty)
    assert info["submit_reward"] == pytest.approx(penalty)
    assert never[-1] == pytest.approx(submitted[-2] + submitted[-1])


def test_a_refused_action_at_the_limit_still_submits():
    env = make(2)
    core = env.unwrapped
    env.reset(seed=0, options={"shape": SHAPE})
    env.step(core.catalog.index(WALK[0]))
    frac = core.state.evaluation.measurement.frac_anchor
    _, reward, term, trunc, info = env.step(core.catalog.index(WALK[0]))   # masked now
    assert info["error"] and term and trunc and info["implicit_submit"], info["error"]
    assert reward == pytest.approx(-0.5 + math.log(frac))


def test_the_episode_ends_at_the_limit_and_is_recorded_as_submitted():
    env = make(len(WALK))
    rec = Recorder(env, "test", 0)
    core = env.unwrapped
    _, info = env.reset(seed=0, options={"shape": SHAPE})
    rec.start(info)
    for pair in WALK:
        a = core.catalog.index(pair)
        _, reward, term, trunc, info = env.step(a)
        rec.step(a, reward, info)
    assert rec.rec.submitted and rec.rec.final_program == info["program"]
    assert rec.rec.return_ == pytest.approx(sum(rec.rec.rewards))
    for pair in (("submit", None), ("tile_m", 64)):   # no second bonus, nothing changes
        _, again, term, _, info2 = env.step(core.catalog.index(pair))
        assert term and again < 0 and "step limit" in info2["error"], info2["error"]
        assert not info2["submitted"] and info2["program"] == info["program"]
    env.reset(seed=0, options={"shape": SHAPE})
    _, _, term, trunc, info3 = env.step(core.catalog.index(WALK[0]))
    assert info3["error"] is None and not (term or trunc), "reset starts a new episode"


def test_the_env_knows_the_limit_however_it_is_made():
    assert gym.make("Argus-GEMM-v0").unwrapped.max_episode_steps == MAX_EPISODE_STEPS
    assert gym.spec("Argus-GEMM-v0").max_episode_steps == MAX_EPISODE_STEPS
    env = make(7)
    assert env.spec.max_episode_steps == 7 and env.unwrapped.max_episode_steps == 7
    assert gym.make(env.spec).unwrapped.max_episode_steps == 7, "a spec remakes the limit"
    unlimited = gym.make("Argus-GEMM-v0", max_episode_steps=-1)
    assert unlimited.unwrapped.max_episode_steps is None
    own = make(9, env_config={"max_episode_steps": 4})
    assert own.unwrapped.max_episode_steps == 4, "the smaller of the two limits"
    bare = KernelEnv("gemm", correctness="none", max_episode_steps=1)
    bare.reset(seed=0, options={"shape": SHAPE})
    _, _, term, trunc, info = bare.step(bare.catalog.index(WALK[0]))
    assert term and trunc and info["implicit_submit"], "a bare KernelEnv keeps its own limit"
    with pytest.raises(ValueError, match="max_episode_steps"):
        KernelEnv("gemm", correctness="none", max_episode_steps=0)


def test_env_state_replays_the_limit():
    env = make(len(WALK))
    play(env, WALK)
    state = env.unwrapped.env_state()
    assert state["kwargs"]["max_episode_steps"] == len(WALK)
    again = KernelEnv.from_env_state(state)
    try:
        assert again.ended and again.max_episode_steps == len(WALK)
        assert again.state.program.text == env.unwrapped.state.program.text
    finally:
        again.close()
