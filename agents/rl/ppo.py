"""PPO with action masking on RLlib's new API stack, as a trainer and as an Argus agent.

Train (prints the checkpoint path; settings from `configs/agents/ppo.yaml`, any field of
`Args` can be overridden on the command line):

    python -m argus_env.agents.rl.ppo train --config configs/agents/ppo.yaml --iterations 5 --track true

Evaluate a checkpoint greedily on the held-out shapes (split "test"), one episode each:

    python -m argus_env.agents.rl.ppo evaluate --checkpoint runs/ppo/<run>/final
    # --no_repeats true: from a program met again, the best action not yet taken from it
    # --sample true: seeded draws from the policy instead of its argmax

Play it like any other agent (the benchmark runner and `argus run` call `run`):

    argus run --task gemm --agent ppo --budget 16   # checkpoint: $ARGUS_PPO_CHECKPOINT,
                                                    # else runs/ppo/latest

What happens: every env runner builds `agents.rl.wrappers.make_env(env_config)`, the
Argus environment whose observation is `{"observations": 44 floats, "action_mask":
40 floats}`; the policy is `MaskedPPOTorchRLModule` (PPO's default MLP with the mask
added to the logits as `log(mask)`, so masked transformations are never sampled); the
learner runs in this process (`num_learners=0`). Per iteration it logs the mean episode
return, env steps sampled and the learner's losses (and to W&B with `track`).

Results to expect with the YAML's defaults on a 2-core machine (measured 2026-12-03, with
other jobs sharing the cores): Ray starts in 10-15 s, the algorithm builds in 5-25 s, and
each iteration of 256 steps takes ~50 s (an uncached program costs 40 ms-3 s of z3
checking plus ~0.1 s of interpreter correctness; `--correctness none --train_shapes
"[decode-16]"` brings an iteration of 64 steps to 2-10 s). Over 3 iterations the mean
episode return stayed between -0.8 and -0.6 (episodes of ~12 steps, entropy ~3.16, near
uniform over the legal actions): a few iterations are a smoke test, not a trained
policy; learning needs hundreds of iterations, i.e. more env runners on more cores
(`ray_address` joins a Ray cluster; the z3 checks run in the env runners).
"""

from __future__ import annotations

import argparse
import dataclasses
import difflib
import functools
import json
import os
import random
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from argus_env.envs.record import EpisodeRecord, Recorder
from argus_env.registry import DEFAULT_ENV_ID

DEFAULT_CONFIG = Path(__file__).resolve().parents[2] / "configs" / "agents" / "ppo.yaml"
CHECKPOINT_ENV = "ARGUS_PPO_CHECKPOINT"
MODULE_PATH = ("learner_group", "learner", "rl_module", "default_policy")


@dataclass
class Args:
    # ---------------------------------------------------------------- experiment
    exp_name: str = "ppo"
    """the agent's name in run names (`env__ppo__seed__time`) and records"""
    seed: int = 0
    """seeds Python, NumPy, torch, RLlib's env runners, and the env's resets"""
    env_id: str = DEFAULT_ENV_ID
    """the registered environment id"""
    track: bool = False
    """log training metrics to W&B (offline unless WANDB_MODE says otherwise)"""
    wandb_dir: str | None = None
    """W&B's folder (None: $WANDB_DIR, else ./wandb)"""
    checkpoint_dir: str = "runs/ppo"
    """checkpoints go to <checkpoint_dir>/<run name>/; <checkpoint_dir>/latest names the last"""
    # ---------------------------------------------------------------- environment
    measure: str = "model"
    """measurement backend: model, table, gpu or pool"""
    hardware: str = "h200"
    """hardware profile (configs/hardware/)"""
    correctness: str = "interpreter"
    """numerical check of each new program: interpreter or none (faster)"""
    max_episode_steps: int = 16
    """episode length limit during training"""
    train_shapes: list | None = None
    """shape names to train on (None: the train split)"""
    env_config: dict = field(default_factory=dict)
    """further keys for KernelEnv / the wrappers (reward, mask_audit, ...)"""
    # ---------------------------------------------------------------- Ray and RLlib
    ray_address: str | None = None
    """an existing Ray cluster (None: $RAY_ADDRESS, else start a local instance)"""
    num_cpus: int | None = None
    """CPUs of the local Ray instance this process starts (None: all)"""
    ray_temp_dir: str | None = None
    """Ray's session folder when this process starts Ray (None: Ray's default)"""
    num_env_runners: int = 2
    """remote env runners (Ray actors) that sample episodes in parallel"""
    num_envs_per_env_runner: int = 1
    """environments per env runner (vectorised)"""
    num_cpus_per_env_runner: float = 1.0
    """CPUs Ray reserves per env runner"""
    sample_timeout_s: float = 600.0
    """how long an env runner may take for its share of a batch"""
    # ---------------------------------------------------------------- PPO
    iterations: int = 5
    """training iterations (one batch each)"""
    train_batch_size: int = 256
    """env steps per iteration"""
    minibatch_size: int = 64
    """steps per SGD minibatch"""
    num_epochs: int = 4
    """passes over each batch"""
    lr: float = 3e-4
    """Adam learning rate"""
    gamma: float = 0.99
    """discount"""
    lambda_: float = 0.95
    """GAE lambda"""
    clip_param: float = 0.2
    """PPO's ratio clip"""
    entropy_coeff: float = 0.01
    """entropy bonus"""
    vf_loss_coeff: float = 0.5
    """value loss weight"""
    hiddens: list = field(default_factory=lambda: [64, 64])
    """MLP layer sizes of the encoder"""
    checkpoint_every: int = 0
    """also save before training and every N iterations, as iter_0000, iter_N, ... (0: only
    at the end)"""
    restore: str | None = None
    """continue training from this checkpoint (weights, optimizer, counters)"""
    # ---------------------------------------------------------------- playing
    checkpoint: str | None = None
    """checkpoint `run` plays (None: $ARGUS_PPO_CHECKPOINT, else <checkpoint_dir>/latest);
    `{env}` and `{seed}` in it name the env id and the episode's seed"""
    budget: int = 16
    """env steps of one played episode, the final submit included"""
    shape: str | None = None
    """shape `run` plays (None: drawn from the env's split)"""
    no_repeats: bool = False
    """play the argmax among the actions not yet taken from the current program (a program
    met again takes its next-best action, so the policy does not cycle, e.g. toggling one
    flag back and forth); off: the plain argmax, as the committed boards were played"""
    sample: bool = False
    """draw each action from the policy's distribution (the softmax of the masked logits,
    seeded by `seed`) instead of taking its argmax; with `no_repeats`, among the actions
    not yet taken from the current program"""
    use_budget: bool = False
    """play the whole budget: the policy's own submit is not taken before the budget's last
    step (its best other action is), and the last step submits, as a search agent plays;
    off: the policy may submit early, as the committed boards were played"""
    eval_split: str = "test"
    """split of the held-out shapes `evaluate` plays"""
    eval_shapes: list | None = None
    """shape names `evaluate` plays (None: every shape of eval_split)"""


def load_args(path: str | os.PathLike | None = DEFAULT_CONFIG, **overrides) -> Args:
    """`Args` from a YAML mapping of field names (unknown names are an error naming
    the closest field), then `overrides`."""
    import yaml
    values = {}
    if path is not None and Path(path).exists():
        values = yaml.safe_load(Path(path).read_text()) or {}
    elif path is not None and Path(path) != DEFAULT_CONFIG:
        raise FileNotFoundError(f"no config file {path}")
    values.update(overrides)
    names = [f.name for f in dataclasses.fields(Args)]
    for key in values:
        if key not in names:
            close = difflib.get_close_matches(key, names, 1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise KeyError(f"unknown PPO setting {key!r}{hint}")
    return Args(**values)


def env_config(args: Args, split: str = "train") -> dict:
    """What every env runner's `make_env` receives."""
    cfg = dict(env_id=args.env_id, measure=args.measure, hardware=args.hardware,
               correctness=args.correctness, split=split,
               max_episode_steps=args.max_episode_steps)
    if split == "train" and args.train_shapes:
        cfg["shape"] = list(args.train_shapes)
    cfg.update(args.env_config)
    return cfg


def build_config(args: Args):
    """The `PPOConfig` (new API stack: RLModule, EnvRunners, a local Learner)."""
    from ray.rllib.algorithms.ppo import PPOConfig
    from ray.rllib.core.rl_module.default_model_config import DefaultModelConfig
    from ray.rllib.core.rl_module.rl_module import RLModuleSpec

    from .masking import MaskedPPOTorchRLModule
    from .wrappers import register
    return (PPOConfig()
            .environment(register(), env_config=env_config(args, "train"))
            .framework("torch")
            .env_runners(num_env_runners=args.num_env_runners,
                         num_envs_per_env_runner=args.num_envs_per_env_runner,
                         num_cpus_per_env_runner=args.num_cpus_per_env_runner,
                         sample_timeout_s=args.sample_timeout_s)
            .learners(num_learners=0)
            .training(train_batch_size_per_learner=args.train_batch_size,
                      minibatch_size=args.minibatch_size, num_epochs=args.num_epochs,
                      lr=args.lr, gamma=args.gamma, lambda_=args.lambda_,
                      clip_param=args.clip_param, entropy_coeff=args.entropy_coeff,
                      vf_loss_coeff=args.vf_loss_coeff)
            .rl_module(rl_module_spec=RLModuleSpec(
                module_class=MaskedPPOTorchRLModule,
                model_config=DefaultModelConfig(fcnet_hiddens=list(args.hiddens),
                                                head_fcnet_hiddens=[])))
            .debugging(seed=args.seed))


def summarize(result: dict) -> dict:
    """The per-iteration figures worth logging from RLlib's result dict."""
    runners = result.get("env_runners", {})
    learner = result.get("learners", {}).get("default_policy", {})
    out = {"iteration": result.get("training_iteration"),
           "episode_return_mean": runners.get("episode_return_mean"),
           "episode_len_mean": runners.get("episode_len_mean"),
           "num_episodes": runners.get("num_episodes"),
           "env_steps_sampled": runners.get("num_env_steps_sampled"),
           "env_steps_sampled_lifetime": result.get("num_env_steps_sampled_lifetime",
                                                    runners.get("num_env_steps_sampled_lifetime")),
           "time_this_iter_s": result.get("time_this_iter_s")}
    for key in ("total_loss", "policy_loss", "vf_loss", "entropy", "mean_kl_loss"):
        out[f"learner/{key}"] = learner.get(key)
    return {k: _plain(v) for k, v in out.items() if v is not None}


def train(args: Args) -> str:
    """Train for `args.iterations` and save; returns the final checkpoint's path."""
    from argus_env.measure.pool import ensure_ray
    from argus_env.agents.tracking import run_name, start_run
    _seed(args.seed)
    started = ensure_ray(args.ray_address, num_cpus=args.num_cpus, temp_dir=args.ray_temp_dir)
    name = run_name(args.env_id, args.exp_name, args.seed)
    out = Path(args.checkpoint_dir) / name
    out.mkdir(parents=True, exist_ok=True)
    tracker = start_run(args.env_id, args.exp_name, args.seed, dataclasses.asdict(args),
                        dir=args.wandb_dir, name=name) if args.track else None
    algo = build_config(args).build_algo()
    try:
        if args.restore:
            algo.restore_from_path(str(Path(args.restore).resolve()))
        elif args.checkpoint_every:   # the untrained policy: the start of a learning curve
            algo.save_to_path(str((out / "iter_0000").resolve()))
        for it in range(1, args.iterations + 1):
            metrics = summarize(algo.train())
            print(json.dumps(metrics), flush=True)
            with open(out / "metrics.jsonl", "a") as f:
                f.write(json.dumps(metrics) + "\n")
            if tracker:
                tracker.log(metrics, step=it)
            if args.checkpoint_every and it % args.checkpoint_every == 0:
                algo.save_to_path(str((out / f"iter_{it:04d}").resolve()))
        path = str(algo.save_to_path(str((out / "final").resolve())))
        (Path(args.checkpoint_dir) / "latest").write_text(path + "\n")
        (out / "args.json").write_text(json.dumps(dataclasses.asdict(args), indent=1))
        return path
    finally:
        algo.stop()
        if tracker:
            tracker.finish()
            import wandb
            wandb.teardown()   # the service writes the run file out before training returns
        if started:
            import ray
            ray.shutdown()


# -------------------------------------------------------------------- playing
class Policy:
    """A trained module played greedily: the argmax of the masked logits."""

    def __init__(self, checkpoint: str):
        from ray.rllib.core.rl_module.rl_module import RLModule
        path = Path(checkpoint)   # an algorithm's checkpoint, or its module's folder
        module_dir = next((d for d in (path.joinpath(*MODULE_PATH), path / MODULE_PATH[-1])
                           if d.exists()), path)
        if not (module_dir / "class_and_ctor_args.pkl").exists():
            raise FileNotFoundError(f"no RLModule in checkpoint {checkpoint} "
                                    f"(looked for {module_dir})")
        self.module = RLModule.from_checkpoint(str(module_dir))
        self.module.eval()

    def logits(self, obs: dict) -> np.ndarray:
        import torch
        from ray.rllib.core.columns import Columns

        from .masking import mask_logits
        from .wrappers import masked_observation
        masked = obs if "observations" in obs else masked_observation(obs)
        x = torch.as_tensor(masked["observations"], dtype=torch.float32)[None]
        mask = torch.as_tensor(masked["action_mask"], dtype=torch.float32)[None]
        with torch.no_grad():
            out = self.module.forward_inference({Columns.OBS: {"observations": x,
                                                              "action_mask": mask}})
            # the module masks already; masking again keeps a foreign module honest
            return mask_logits(out[Columns.ACTION_DIST_INPUTS], mask)[0].numpy()

    def act(self, obs: dict, tried: set[int] = frozenset(), rng=None) -> int:
        """The argmax of the masked logits (with `rng`, a draw from their softmax), among
        the actions not in `tried` where any legal one is left."""
        logits = self.logits(obs).astype(np.float64)
        left = logits > -1e30          # legal: masked logits sit at float32's most negative
        left[list(tried)] = False
        if not left.any():
            left = logits > -1e30
        if rng is None:
            return int(np.argmax(np.where(left, logits, -np.inf)))
        z = np.where(left, logits - logits[left].max(), -np.inf)
        p = np.exp(z)
        return int(rng.choice(len(p), p=p / p.sum()))


@functools.lru_cache(maxsize=4)
def load_policy(checkpoint: str) -> Policy:
    return Policy(checkpoint)


def resolve_checkpoint(args: Args) -> str:
    """`args.checkpoint`, else $ARGUS_PPO_CHECKPOINT, else the path in
    <checkpoint_dir>/latest (written by `train`)."""
    path = args.checkpoint or os.environ.get(CHECKPOINT_ENV)
    latest = Path(args.checkpoint_dir) / "latest"
    if not path and latest.exists():
        path = latest.read_text().strip()
    if not path:
        raise FileNotFoundError(f"no PPO checkpoint: train one (python -m argus_env.agents.rl.ppo train), "
                                f"then pass Args.checkpoint or set ${CHECKPOINT_ENV}")
    return str(Path(path).resolve())


def run(env, args: Args, progress=None) -> EpisodeRecord:
    """One episode with the trained policy: greedy masked actions until the policy
    submits or one step of the budget is left, which submits."""
    if args.checkpoint and "{" in args.checkpoint:   # one policy per env and seed
        env_id = getattr(getattr(env, "spec", None), "id", None) or args.env_id
        args = dataclasses.replace(args, checkpoint=args.checkpoint.format(env=env_id,
                                                                           seed=args.seed))
    policy = load_policy(resolve_checkpoint(args))
    if args.track:
        from argus_env.agents.tracking import trackable
        play = trackable(args.exp_name)(functools.partial(_play, policy=policy))
        return play(env, args, progress)
    return _play(env, args, progress, policy=policy)


def _play(env, args: Args, progress=None, *, policy: Policy) -> EpisodeRecord:
    rec = Recorder(env, args.exp_name, args.seed)
    obs, info = env.reset(seed=args.seed, options={"shape": args.shape} if args.shape else None)
    rec.start(info)
    submit = env.unwrapped.catalog.index(("submit", None))
    tried: dict[str, set[int]] = {}   # program text -> actions taken from it (`no_repeats`)
    rng = np.random.default_rng(args.seed) if args.sample else None
    while True:
        here = tried.setdefault(info["program"], set()) if args.no_repeats else set()
        a = submit if rec.rec.steps >= args.budget - 1 else \
            policy.act(obs, here | {submit} if args.use_budget else here, rng)
        here.add(a)
        obs, reward, terminated, truncated, info = env.step(a)
        rec.step(a, reward, info)
        if progress:
            progress(rec.rec)
        if terminated or truncated:
            return rec.rec


def evaluate(args: Args, checkpoint: str | None = None) -> list[EpisodeRecord]:
    """One greedy episode per held-out shape (`eval_shapes`, else the `eval_split`)."""
    from argus_env.task import get_task

    from .wrappers import make_raw_env
    args = dataclasses.replace(args, checkpoint=checkpoint or resolve_checkpoint(args))
    cfg = env_config(args, args.eval_split)
    cfg.update(max_episode_steps=max(args.budget, 1))
    probe = make_raw_env(cfg)
    shapes = args.eval_shapes or [c.name for c in get_task(probe.unwrapped.task.name)
                                  .shape_cases(args.eval_split)]
    records = []
    for i, shape in enumerate(shapes):
        env = probe if i == 0 else make_raw_env(cfg)
        records.append(run(env, dataclasses.replace(args, shape=shape, seed=args.seed + i)))
        env.close()
    return records


# -------------------------------------------------------------------- helpers
def _seed(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed)
    import torch
    torch.manual_seed(seed)


def _plain(v):
    return v.item() if hasattr(v, "item") else v


def _cli(argv: list[str] | None = None) -> tuple[str, Args]:
    import yaml
    p = argparse.ArgumentParser(prog="python -m argus_env.agents.rl.ppo", description=__doc__.split("\n")[0])
    p.add_argument("command", nargs="?", default="train", choices=["train", "evaluate"])
    p.add_argument("--config", default=str(DEFAULT_CONFIG), help="YAML file of Args fields")
    for f in dataclasses.fields(Args):
        p.add_argument(f"--{f.name}", type=yaml.safe_load, default=argparse.SUPPRESS,
                       nargs="?", const=True, help="(YAML value)")
    ns = vars(p.parse_args(argv))
    command, config = ns.pop("command"), ns.pop("config")
    return command, load_args(config, **ns)


def main(argv: list[str] | None = None) -> int:
    command, args = _cli(argv)
    if command == "train":
        print(train(args))
        return 0
    t0 = time.perf_counter()
    for r in evaluate(args):
        print(f"{r.shape:14s} steps {r.steps:3d} return {r.return_:+.3f} "
              f"best {r.best_frac_anchor:.3f}x library, submitted {r.submitted}")
    print(f"{time.perf_counter() - t0:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
