"""PPO with action masking: trains with two env runners, checkpoints, resumes, plays as
an agent, in `argus bench` and on the held-out shapes; no masked action ever reaches an
environment; W&B records the run under its CleanRL name with its config."""

import json
from pathlib import Path

import gymnasium as gym
import pytest

import argus_env  # noqa: F401
from argus_env.agents import load_agent
from argus_env.agents.rl.wrappers import MaskAudit, read_audit
from argus_env.envs.record import EpisodeRecord

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def trained(ray_session, tmp_path_factory):
    """2 iterations, 2 env runners, 64 steps each, on a shape whose checks are cheap;
    every env runner's env appends its steps to one audit file."""
    from argus_env.agents.rl import ppo
    root = tmp_path_factory.mktemp("ppo")
    audit = root / "train_audit.jsonl"
    args = ppo.load_args(ppo.DEFAULT_CONFIG, iterations=2, num_env_runners=2,
                         train_batch_size=64, minibatch_size=32, num_epochs=1,
                         hiddens=[32], correctness="none", max_episode_steps=8,
                         train_shapes=["decode-16"], checkpoint_dir=str(root / "ckpt"),
                         env_config={"mask_audit": str(audit)}, track=True,
                         wandb_dir=str(root / "wandb"), checkpoint_every=2)
    path = ppo.train(args)
    return ppo, args, path, audit, root


def _metrics(checkpoint: str) -> list[dict]:
    lines = (Path(checkpoint).parent / "metrics.jsonl").read_text().splitlines()
    return [json.loads(x) for x in lines]


def test_training_saves_a_checkpoint_and_logs(trained):
    ppo, args, path, audit, root = trained
    module_dir = Path(path) / "learner_group" / "learner" / "rl_module" / "default_policy"
    assert module_dir.is_dir(), path
    assert (Path(args.checkpoint_dir) / "latest").read_text().strip() == path
    saved = sorted(p.name for p in Path(path).parent.glob("iter_*"))
    assert saved == ["iter_0000", "iter_0002"], saved   # the untrained policy, then every 2
    rows = _metrics(path)
    assert [r["iteration"] for r in rows] == [1, 2], rows
    assert rows[-1]["env_steps_sampled_lifetime"] >= 128, rows[-1]
    for key in ("episode_return_mean", "learner/total_loss", "learner/policy_loss"):
        assert key in rows[-1], (key, rows[-1])
    run_dirs = list((root / "wandb" / "wandb").glob(f"offline-run-*-{Path(path).parent.name}"))
    assert len(run_dirs) == 1, list((root / "wandb").rglob("*"))[:20]
    # the run's config is the training's Args (W&B keeps it, JSON-encoded, in the run file)
    raw = (run_dirs[0] / f"run-{Path(path).parent.name}.wandb").read_bytes()
    for key, value in (("num_env_runners", "2"), ("hiddens", "[32]"),
                       ("train_shapes", '["decode-16"]'), ("correctness", '"none"')):
        assert key.encode() in raw and value.encode() in raw, (key, value)


def test_no_masked_action_reaches_the_env_in_training(trained):
    *_, audit, _ = trained
    totals = read_audit(str(audit))
    assert totals["steps"] >= 128, totals
    assert len(totals["pids"]) >= 2, f"expected both env runners to step envs: {totals}"
    assert totals["violations"] == 0, totals


def test_resume_from_the_checkpoint(trained):
    ppo, args, path, _, root = trained
    import dataclasses
    # sampling in this process (no env runner actors to start): restoring does not
    # depend on how many env runners wrote the checkpoint
    again = ppo.train(dataclasses.replace(args, restore=path, iterations=1, track=False,
                                          num_env_runners=0, checkpoint_dir=str(root / "resumed")))
    rows = _metrics(again)
    assert rows[0]["iteration"] == 3, rows          # counters restored with the weights
    assert rows[0]["env_steps_sampled_lifetime"] >= 192, rows


def test_plays_as_an_agent_without_masked_actions(trained, tmp_path):
    ppo, args, path, _, _ = trained
    module = load_agent("ppo")
    env = MaskAudit(gym.make("Argus-GEMM-v0", correctness="none", max_episode_steps=50),
                    str(tmp_path / "play.jsonl"))
    rec = module.run(env, module.Args(checkpoint=path, budget=6, seed=0, shape="decode-16"))
    assert isinstance(rec, EpisodeRecord) and rec.agent == "ppo", rec
    assert rec.submitted and 1 <= rec.steps <= 6 and len(rec.actions) == rec.steps, rec
    assert env.violations == 0, (rec.action_labels, env.violations)
    assert EpisodeRecord.from_json(rec.to_json()) == rec
    again = module.run(MaskAudit(gym.make("Argus-GEMM-v0", correctness="none")),
                       module.Args(checkpoint=path, budget=6, seed=0, shape="decode-16"))
    assert again.actions == rec.actions, "greedy play should be deterministic"


class Pairs(gym.Wrapper):
    """Notes the (program, action) pair of every step."""

    def reset(self, **kw):
        self.pairs, (obs, info) = [], self.env.reset(**kw)
        self.program = info["program"]
        return obs, info

    def step(self, action):
        self.pairs.append((self.program, int(action)))
        obs, r, term, trunc, info = self.env.step(action)
        self.program = info["program"]
        return obs, r, term, trunc, info


def test_no_repeats_and_sampling_play_legal_actions_without_cycles(trained, tmp_path):
    """`no_repeats`: from a program met again the policy takes an action it has not taken
    from it; `sample`: draws from the policy, reproducibly per seed; neither plays a
    masked action."""
    ppo, args, path, _, _ = trained
    module = load_agent("ppo")
    for extra in ({"no_repeats": True}, {"no_repeats": True, "sample": True}):
        env = Pairs(MaskAudit(gym.make("Argus-GEMM-v0", correctness="none",
                                       max_episode_steps=50), str(tmp_path / "play.jsonl")))
        margs = module.Args(checkpoint=path, budget=12, seed=3, shape="decode-16", **extra)
        rec = module.run(env, margs)
        assert env.env.violations == 0 and rec.submitted, rec.action_labels
        assert len(set(env.pairs)) == len(env.pairs), (extra, rec.action_labels)
        again = module.run(MaskAudit(gym.make("Argus-GEMM-v0", correctness="none")), margs)
        assert again.actions == rec.actions, extra


def test_use_budget_plays_every_step_and_submits_last(trained):
    """`use_budget`: the policy's own submit is never taken early; the episode lasts the
    whole budget and only its last step submits."""
    ppo, args, path, _, _ = trained
    module = load_agent("ppo")
    for extra in ({"use_budget": True}, {"use_budget": True, "no_repeats": True}):
        env = MaskAudit(gym.make("Argus-GEMM-v0", correctness="none", max_episode_steps=50))
        submit = env.unwrapped.catalog.index(("submit", None))
        rec = module.run(env, module.Args(checkpoint=path, budget=9, seed=1,
                                          shape="decode-16", **extra))
        assert env.violations == 0 and rec.submitted, rec.action_labels
        assert rec.steps == 9 and len(rec.actions) == 9, (extra, rec.action_labels)
        assert rec.actions[-1] == submit and submit not in rec.actions[:-1], rec.action_labels


def test_act_skips_tried_and_masked_actions():
    from argus_env.agents.rl import ppo
    import numpy as np
    policy = ppo.Policy.__new__(ppo.Policy)
    floor = np.finfo(np.float32).min
    policy.logits = lambda obs: np.array([3.0, 2.0, floor, 1.0], dtype=np.float32)
    assert policy.act({}) == 0
    assert policy.act({}, {0}) == 1
    assert policy.act({}, {0, 1}) == 3            # 2 is masked
    assert policy.act({}, {0, 1, 3}) == 0         # nothing legal left untried: the argmax
    rng = np.random.default_rng(0)
    draws = {policy.act({}, {1}, rng) for _ in range(200)}
    assert draws == {0, 3}, draws                 # never the tried one nor the masked one
    a = [policy.act({}, set(), np.random.default_rng(7)) for _ in range(5)]
    assert len(set(a)) == 1, "a seeded draw repeats"


def test_argus_bench_plays_a_checkpoint(trained, tmp_path, capsys):
    """A trained policy joins a suite as `ppo: {checkpoint: PATH}` (here a template naming
    one policy per env and seed, as the committed leaderboard does); its line replays."""
    ppo, args, path, _, _ = trained
    import yaml
    (tmp_path / "policies" / "Argus-GEMM-v0").mkdir(parents=True)
    (tmp_path / "policies" / "Argus-GEMM-v0" / "seed0").symlink_to(path)
    template = str(tmp_path / "policies" / "{env}" / "seed{seed}")

    from argus_env.bench import results as R
    from argus_env.bench.validate import Validator
    from argus_env.cli import main
    suite = {"name": "ppo", "envs": ["Argus-GEMM-v0"], "tracks": ["test"],
             "shapes": {"Argus-GEMM-v0": {"test": ["square-2048"]}}, "seeds": [0],
             "budget": 4, "measure": "table", "agents": {"ppo": {"checkpoint": template}}}
    (tmp_path / "ppo.yaml").write_text(yaml.safe_dump(suite))
    assert main(["bench", "--config", str(tmp_path / "ppo.yaml"), "--out-dir",
                 str(tmp_path), "--quiet"]) == 0, capsys.readouterr()
    lines = R.read_lines(tmp_path / "ppo.jsonl")
    assert len(lines) == 1, lines
    line = lines[0]
    assert (line["agent"], line["shape"], line["track"]) == ("ppo", "square-2048", "test"), line
    assert line["agent_args"]["checkpoint"] == template, line["agent_args"]
    assert line["submitted"] and 1 <= line["env_steps"] <= 4, line
    assert line["best_frac_anchor"] > 0, line
    assert Validator().validate(line) == [], "the bench's PPO episode should replay exactly"


def test_greedy_evaluation_on_held_out_shapes(trained, tmp_path):
    ppo, args, path, _, _ = trained
    import dataclasses
    audit = tmp_path / "eval.jsonl"
    eval_args = dataclasses.replace(args, budget=4, eval_shapes=["decode-64", "square-2048"],
                                    env_config={"mask_audit": str(audit)}, track=False)
    records = ppo.evaluate(eval_args, path)
    assert [r.shape for r in records] == ["decode-64", "square-2048"], records
    test_shapes = {"decode-64", "ragged-3000", "square-2048", "llama-qkv"}
    assert all(r.shape in test_shapes and r.submitted and r.steps <= 4 for r in records), records
    totals = read_audit(str(audit))
    assert totals["steps"] == sum(r.steps for r in records) and totals["violations"] == 0, totals


def test_missing_checkpoint_says_how_to_get_one(tmp_path, monkeypatch):
    from argus_env.agents.rl import ppo
    monkeypatch.delenv(ppo.CHECKPOINT_ENV, raising=False)
    with pytest.raises(FileNotFoundError, match="train one"):
        ppo.resolve_checkpoint(ppo.Args(checkpoint_dir=str(tmp_path)))


def test_config_file_names_unknown_settings():
    from argus_env.agents.rl import ppo
    args = ppo.load_args()
    assert args.num_env_runners >= 2 and args.train_batch_size <= 512, args
    with pytest.raises(KeyError, match="did you mean 'num_env_runners'"):
        ppo.load_args(num_env_runner=3)
