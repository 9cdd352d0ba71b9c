"""Search agents run episodes through the env's public API and return episode records."""

import itertools
import json
import subprocess
import sys

import gymnasium as gym
import pytest

import argus_env  # noqa: F401
from argus_env.agents import load_agent
from argus_env.envs import ENV_IDS
from argus_env.envs.record import EpisodeRecord

#: a shape per env whose new programs check quickly under the interpreter
CHEAP = {"Argus-GEMM-v0": "decode-16", "Argus-Attention-v0": "b4-h32-s4096-d64",
         "Argus-MoE-v0": "mixtral-decode-16-balanced", "Argus-RMSNorm-v0": "llama70b-decode-64"}


@pytest.mark.parametrize("agent", ["random", "greedy", "evolutionary"])
@pytest.mark.parametrize("env_id", sorted(ENV_IDS))
def test_agent_runs_an_episode_and_submits(agent, env_id):
    module = load_agent(agent)
    env = gym.make(env_id, max_episode_steps=100)
    rec = module.run(env, module.Args(budget=12, seed=1, shape=CHEAP[env_id]))
    assert rec.steps <= 12 and rec.submitted, rec
    assert len(rec.actions) == len(rec.rewards) == rec.steps
    assert rec.best_tflops >= rec.baseline_tflops > 0
    again = EpisodeRecord.from_json(rec.to_json())
    assert again == rec


@pytest.mark.parametrize("env_id,shape", [("Argus-GEMM-v0", "square-2048"),
                                           ("Argus-GEMM-v0", "decode-16"),
                                           ("Argus-MoE-v0", CHEAP["Argus-MoE-v0"]),
                                           ("Argus-Attention-v0", CHEAP["Argus-Attention-v0"])])
def test_evolutionary_search_keeps_to_its_budget(env_id, shape):
    """Every evaluation, the final replay and the submit together: never more env steps
    than the budget (it took 11-12 of 10 on square-2048, 10 of 6 on MoE), however the
    genomes fall; and it still submits, at a budget of one step too."""
    module = load_agent("evolutionary")
    env = gym.make(env_id, measure="table", correctness="none", max_episode_steps=50)
    for seed, budget, (population, length) in itertools.product(
            range(3), (1, 6, 10, 13), ((8, 4), (3, 2), (4, 6))):
        rec = module.run(env, module.Args(budget=budget, seed=seed, shape=shape,
                                          population=population, genome_length=length))
        where = (seed, budget, population, length, rec.env_steps)
        assert rec.env_steps <= budget and len(rec.trace) == rec.env_steps, where
        assert rec.submitted and rec.actions[-1] == env.unwrapped.catalog.index(("submit", None)), where


def test_same_seed_same_episode():
    module = load_agent("greedy")
    a = module.run(gym.make("Argus-GEMM-v0"), module.Args(budget=10, seed=3))
    b = module.run(gym.make("Argus-GEMM-v0"), module.Args(budget=10, seed=3))
    assert a.actions == b.actions and a.rewards == b.rewards


def test_unknown_agent_suggests_a_name():
    with pytest.raises(KeyError, match="did you mean 'greedy'"):
        load_agent("gredy")


@pytest.mark.slow
def test_argus_run_command_writes_a_record(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "argus_env.cli", "run", "--task", "gemm",
                           "--agent", "random", "--budget", "6", "--shape", "square-2048",
                           "--out-dir", str(tmp_path)], capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "best program (DSL)" in proc.stdout and "@triton.jit" in proc.stdout
    files = list(tmp_path.glob("Argus-GEMM-v0__random__0__*.json"))
    assert len(files) == 1, list(tmp_path.iterdir())
    rec = json.loads(files[0].read_text())
    assert rec["shape"] == "square-2048" and 3 <= rec["steps"] <= 6 and rec["versions"]["z3"]
    assert rec["submitted"], rec


def test_argus_errors_are_one_line_with_exit_code_2():
    proc = subprocess.run([sys.executable, "-m", "argus_env.cli", "run", "--task", "gemn"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and "no environment for task 'gemn'" in proc.stderr, proc.stderr
