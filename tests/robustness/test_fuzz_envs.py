"""Property tests: no action or reset option, however malformed or hostile, breaks an
Argus environment.

Over every registered id, in both modes: random discrete actions (legal, masked, out of
range, numpy-typed, of odd types) and random text actions (calls, task programs and
mutations of them, hostile programs, signature breakers, oversized, deeply nested and
odd-character text, programs that loop 10^12 times), with random reset options. For
every step: nothing raises, it ends within `STEP_BOUND` seconds, the observation is in
the observation space, a bad action is answered with a message and a negative reward, and
an unmeasured program earns no positive reward. The long run of the same generators is
`benchmarks/fuzz_envs.py`.

CI keeps this short: derandomized, about 200 actions per environment id with the cheap
`correctness="none"` plus a few dozen with the default interpreter correctness.
"""

from __future__ import annotations

import math
import random
import time

import gymnasium as gym
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import argus_env  # noqa: F401  (registers the ids)
import fuzz_actions as fz
from argus_env.envs import ENV_IDS

STEP_BOUND = 30.0        # seconds: generous; a slower step is reported with its action
ACTIONS_PER_EXAMPLE = 10
FAST = settings(deadline=None, derandomize=True, max_examples=10, database=None,
                suppress_health_check=list(HealthCheck))
_ENVS: dict[tuple, gym.Env] = {}


def env_for(env_id: str, mode: str, correctness: str = "none") -> gym.Env:
    """One environment per (id, mode, correctness) for the whole module: construction
    and the first reset are the expensive part, and reuse is what agents do too."""
    key = (env_id, mode, correctness)
    if key not in _ENVS:
        _ENVS[key] = gym.make(env_id, mode=mode, correctness=correctness,
                              correctness_timeout=5.0, max_episode_steps=1000)
    return _ENVS[key]


@pytest.fixture(scope="module", autouse=True)
def _close_envs():
    yield
    for env in _ENVS.values():
        env.close()
    _ENVS.clear()


def checked_step(env: gym.Env, fuzzed: fz.Fuzzed):
    """`env.step(fuzzed.action)` with every per-step property asserted."""
    what = fuzzed.describe()
    t0 = time.perf_counter()
    try:
        obs, reward, term, trunc, info = env.step(fuzzed.action)
    except Exception as e:  # noqa: BLE001 - reported with the action that caused it
        raise AssertionError(f"step raised {type(e).__name__}: {e}\n  action: {what}") from e
    dt = time.perf_counter() - t0
    assert dt < STEP_BOUND, f"step took {dt:.1f} s (bound {STEP_BOUND} s)\n  action: {what}"
    assert env.observation_space.contains(obs), f"observation outside the space\n  action: {what}"
    assert math.isfinite(reward), f"reward {reward}\n  action: {what}"
    error = info["error"]
    assert error is None or (isinstance(error, str) and error.strip()), \
        f"error {error!r} is neither None nor a message\n  action: {what}"
    if fuzzed.must_fail:
        assert error, f"a bad action was accepted (reward {reward})\n  action: {what}"
    if error:
        assert reward < 0, f"refused ({error[:200]}) but reward {reward}\n  action: {what}"
        assert not term, f"a refused action ended the episode\n  action: {what}"
    measured = bool(info["measurement"]) and info["measurement"]["ok"] \
        and info["failure"] is None
    if error is None and not measured and info["action"] != "undo()":
        assert reward <= 0, (f"unmeasured program ({info['failure']}: "
                             f"{info['failure_message'][:200]}) earned {reward}\n  action: {what}")
    return obs, reward, term, trunc, info


def run_actions(env: gym.Env, rng: random.Random, n: int) -> None:
    core = env.unwrapped
    for _ in range(n):
        obs, reward, term, trunc, info = checked_step(env, fz.action(rng, core))
        if term or trunc:
            env.reset(seed=rng.randrange(2**16))


@pytest.mark.parametrize("mode", ["discrete", "text"])
@pytest.mark.parametrize("env_id", sorted(ENV_IDS))
@FAST
@given(rng=st.randoms(use_true_random=False), seed=st.integers(0, 2**16))
def test_fuzzed_actions_are_contained(env_id, mode, rng, seed):
    env = env_for(env_id, mode)
    env.reset(seed=seed)
    run_actions(env, rng, ACTIONS_PER_EXAMPLE)


@pytest.mark.parametrize("env_id", sorted(ENV_IDS))
@settings(FAST, max_examples=3)
@given(rng=st.randoms(use_true_random=False))
def test_fuzzed_text_with_interpreter_correctness(env_id, rng):
    """The default environment: programs that pass the checker run in the worker."""
    env = env_for(env_id, "text", "interpreter")
    env.reset(seed=rng.randrange(2**16))
    run_actions(env, rng, ACTIONS_PER_EXAMPLE)


@pytest.mark.parametrize("env_id", sorted(ENV_IDS))
@settings(FAST, max_examples=25)
@given(rng=st.randoms(use_true_random=False))
def test_fuzzed_reset_options(env_id, rng):
    """`reset` accepts every valid option and refuses the rest with a ValueError naming
    the problem; never another exception."""
    env = env_for(env_id, "discrete")
    options, must_raise = fz.reset_options(rng, env.unwrapped)
    try:
        obs, info = env.reset(seed=rng.randrange(2**16), options=options)
    except ValueError as e:
        assert must_raise is not False, f"reset refused valid options {options!r}: {e}"
        assert str(e), f"empty ValueError for {options!r}"
        return
    except Exception as e:  # noqa: BLE001
        raise AssertionError(f"reset raised {type(e).__name__}: {e}\n  options: "
                             f"{repr(options)[:300]}") from e
    assert must_raise is not True, f"reset accepted bad options {repr(options)[:300]}"
    assert env.observation_space.contains(obs), f"observation outside the space: {options!r}"
    checked_step(env, fz.Fuzzed(env.unwrapped.catalog.index(("submit", None)), "submit", False))


@pytest.mark.parametrize("env_id", sorted(ENV_IDS))
def test_every_kind_of_bad_discrete_action_is_refused(env_id):
    env = env_for(env_id, "discrete")
    env.reset(seed=0)
    n = len(env.unwrapped.catalog)
    for value in fz.ODD_VALUES + [-1, n, 2**63, 10**30]:
        if fz.taken_as_index(env.unwrapped, value):  # what the space contains is an action
            continue
        checked_step(env, fz.Fuzzed(value, "odd", True))
    undo = env.unwrapped.catalog.index(("undo", None))
    _, _, _, _, info = checked_step(env, fz.Fuzzed(undo, "undo-without-history", True))
    assert "no earlier program" in info["error"], info["error"]


@pytest.mark.parametrize("env_id", sorted(ENV_IDS))
def test_every_hostile_and_malformed_program_is_refused(env_id):
    env = env_for(env_id, "text")
    env.reset(seed=0)
    base = env.unwrapped.task.program("baseline").text
    cases = fz.hostile_programs(base) + fz.signature_breakers(base, env.unwrapped.task.signature)
    for name, text in cases:
        _, _, _, _, info = checked_step(env, fz.Fuzzed(text, name, True))
        assert not info["internal_error"], f"{name}: {info['error']}"


def test_strings_that_break_pythons_own_parser_are_refused():
    """Texts on which `ast.parse` itself fails with MemoryError, ValueError or
    UnicodeEncodeError (a lone surrogate) are refused like any malformed call."""
    env = env_for(sorted(ENV_IDS)[0], "text")
    env.reset(seed=0)
    base = env.unwrapped.task.program("baseline").text
    for text in ["tile_m(" + "-" * 100_000 + "1)", "tile_m(\ud800)", base + "\n# \ud800",
                 "tile_m(" + "9" * 5000 + ")", "x" * 300_000, "tile_m(64.0)", "tma(1)"]:
        _, _, _, _, info = checked_step(env, fz.Fuzzed(text, "parser-breaker", True))
        assert not info["internal_error"], info["error"]


def test_a_checker_crash_is_refused_and_the_env_continues():
    """Found by fuzzing: `A.covers` outside `A.assert_tags` made the checker raise
    NotImplementedError out of `step`. Whatever the checker does with it now, the step
    answers (refused as an internal error, or reported), and the env goes on."""
    env = env_for("Argus-GEMM-v0", "text")
    _, start = env.reset(seed=0, options={"shape": "ragged-1000"})
    base = env.unwrapped.task.program("baseline").text
    text = base.replace("A.cast(acc, A.bf16), mask=(rows < M",
                        "A.cast(A.tag(acc * 0.0, K=A.covers(0, K)), A.bf16), mask=(rows < M")
    assert text != base
    _, reward, _, _, info = checked_step(env, fz.Fuzzed(text, "checker-crash", False))
    if info["internal_error"]:
        assert "internal error in the invariant checker" in info["error"], info["error"]
        assert reward < 0 and info["program"] == start["program"], "the state must be kept"
    _, _, _, _, info = checked_step(env, fz.Fuzzed(base, "baseline", False))
    assert info["error"] is None, info["error"]


def test_a_report_the_encoder_fails_on_still_gives_an_observation():
    """Found by fuzzing Argus-Attention-v0: a violation whose element holds None made
    `InvariantReport.encode` raise from inside `step`, after the state had changed."""
    import numpy as np

    from argus_env.check.report import SLOT, InvariantReport, Violation
    from argus_env.envs.kernel_env import REPORT_DIM, _report_vector
    report = InvariantReport("k", "h", [Violation("coverage", "store", 7, "m", element=(None, 3))])
    vec = _report_vector(report)
    assert vec.shape == (REPORT_DIM,) and vec.dtype == np.float32 and np.isfinite(vec).all()
    assert vec[SLOT["count:coverage"]] > 0 and vec[SLOT["first_line"]] == 7, vec
    assert vec[SLOT["element_0"]] == vec[SLOT["element_1"]] == 0, vec


def test_long_fuzz_shards_merge_into_one_figure_per_env():
    """`benchmarks/fuzz_envs.py --jobs N` merges its shards: counts add up, a problem in
    any shard makes the env's figure not ok, worst step times survive."""
    import importlib.util
    from pathlib import Path
    path = Path(__file__).resolve().parents[2] / "benchmarks" / "fuzz_envs.py"
    spec = importlib.util.spec_from_file_location("fuzz_envs_script", path)
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)

    def shard(seed, actions, problems, worst):
        return {"env_id": "Argus-GEMM-v0", "actions": actions, "resets": 3, "ok": not problems,
                "problems": problems, "uncaught_exceptions": problems.get("uncaught-exception-step", 0),
                "hangs": 0, "errors_without_message": 0, "internal_errors_contained": 0,
                "categories": {"index-legal": actions}, "outcomes": {"refused": actions},
                "step_seconds": {"median": 0.001, "p99": 0.5, "max": worst, "total": 2.0},
                "slowest": [{"seconds": worst, "action": f"a{seed}"}], "examples": {},
                "settings": {"seed": seed, "modes": "discrete"}, "wall_seconds": 10.0,
                "provenance": {}}
    good = script.merge([shard(0, 100, {}, 1.5), shard(1, 50, {}, 2.5)])
    assert good["ok"] and good["actions"] == 150 and good["categories"]["index-legal"] == 150
    assert good["step_seconds"]["max"] == 2.5 and good["slowest"][0]["action"] == "a1"
    assert good["settings"]["seed"] == [0, 1]
    bad = script.merge([shard(0, 100, {}, 1.5), shard(1, 50, {"uncaught-exception-step": 2}, 1.0)])
    assert not bad["ok"] and bad["uncaught_exceptions"] == 2
    with pytest.raises(SystemExit):
        script.merge([shard(0, 1, {}, 1.0), {**shard(1, 1, {}, 1.0), "env_id": "Argus-MoE-v0"}])
