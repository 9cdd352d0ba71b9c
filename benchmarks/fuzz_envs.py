"""Fuzz every registered Argus environment with many random and hostile actions.

The long version of `tests/robustness/test_fuzz_envs.py`: N actions per environment id
(split between the discrete and text modes), with fuzzed reset options at every episode
start. It counts what must never happen:

- an exception escaping `step` or `reset` (reset may only raise `ValueError`, and only for
  options it cannot use);
- a step slower than the bound (default 30 s): a hang;
- an action that must be refused (masked, out of range, odd type, malformed or hostile
  text, wrong signature) answered without a message in `info["error"]` or without a
  negative reward;
- an observation outside the observation space; a positive reward for an unmeasured
  program.

It also counts what is contained but worth knowing: refusals marked `internal_error`
(an Argus bug on some input, answered as an invalid action), correctness timeouts and
worker restarts. Results go to `benchmarks/results/fuzz_<env>.json` with provenance,
rewritten every minute so an interrupted run keeps what it found.

    python benchmarks/fuzz_envs.py                        # 100,000 actions per env
    python benchmarks/fuzz_envs.py --actions 20000 --seed 1
"""

from __future__ import annotations

import argparse
import collections
import json
import math
import os
import platform
import random
import statistics
import subprocess
import sys
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests" / "robustness"))
EXAMPLES = 20  # offending actions kept per kind of problem


class Tally:
    """Everything counted for one environment id."""

    def __init__(self, env_id: str):
        self.env_id = env_id
        self.steps = 0
        self.resets = 0
        self.problems: dict[str, int] = collections.Counter()
        self.examples: dict[str, list] = collections.defaultdict(list)
        self.categories: dict[str, int] = collections.Counter()
        self.outcomes: dict[str, int] = collections.Counter()
        self.times: list[float] = []
        self.slowest: list[tuple[float, str]] = []

    def problem(self, kind: str, what: str, detail: str = "") -> None:
        self.problems[kind] += 1
        if len(self.examples[kind]) < EXAMPLES:
            self.examples[kind].append({"action": what, "detail": detail[-2000:]})

    def timed(self, seconds: float, what: str) -> None:
        self.times.append(seconds)
        self.slowest = sorted(self.slowest + [(seconds, what[:300])], reverse=True)[:10]


def outcome(info: dict) -> str:
    if info.get("internal_error"):
        return "refused-internal"
    if info.get("error"):
        return "refused"
    if info.get("failure"):
        return f"failed-{info['failure']}"
    if not info["report"]["ok"]:
        return "violations"
    return "measured" if info.get("measurement") and info["measurement"]["ok"] else "unmeasured"


def fuzz_env(env_id: str, mode: str, n: int, rng: random.Random, tally: Tally, args,
             checkpoint) -> None:
    import gymnasium as gym

    import fuzz_actions as fz
    env = gym.make(env_id, mode=mode, correctness=args.correctness,
                   correctness_timeout=args.correctness_timeout)
    core = env.unwrapped
    need_reset = True
    done = 0
    while done < n:
        if need_reset:
            tally.resets += 1
            options, must_raise = fz.reset_options(rng, core) if rng.random() < 0.3 else (None, False)
            try:
                obs, info = env.reset(seed=rng.randrange(2**31), options=options)
            except ValueError as e:
                if must_raise is False:
                    tally.problem("reset-refused-valid-options", repr(options), str(e))
                elif not str(e):
                    tally.problem("reset-error-without-message", repr(options))
                continue
            except Exception:  # noqa: BLE001
                tally.problem("uncaught-exception-reset", repr(options)[:300],
                              traceback.format_exc())
                continue
            if must_raise is True:
                tally.problem("reset-accepted-bad-options", repr(options)[:300])
            need_reset = False
        fuzzed = fz.action(rng, core)
        what = fuzzed.describe()
        t0 = time.perf_counter()
        try:
            obs, reward, term, trunc, info = env.step(fuzzed.action)
        except Exception:  # noqa: BLE001
            tally.problem("uncaught-exception-step", what, traceback.format_exc())
            need_reset = True
            done += 1
            continue
        dt = time.perf_counter() - t0
        done += 1
        tally.steps += 1
        tally.timed(dt, what)
        tally.categories[fuzzed.category.split("-hostile-")[0]] += 1
        kind = outcome(info)
        tally.outcomes[kind] += 1
        if dt > args.step_bound:
            tally.problem("hang", what, f"{dt:.1f} s")
        if info.get("internal_error"):
            tally.problem("internal-error-contained", what, info["error"])
        if fuzzed.must_fail and not (info["error"] and reward < 0):
            tally.problem("bad-action-without-error", what,
                          f"error={info['error']!r} reward={reward}")
        if info["error"] is not None and not info["error"]:
            tally.problem("error-without-message", what)
        if info["error"] and not reward < 0:
            tally.problem("refusal-without-penalty", what, f"reward={reward}")
        if not env.observation_space.contains(obs):
            tally.problem("observation-outside-space", what)
        measured = info["measurement"] is not None and info["measurement"]["ok"] \
            and not info["failure"] and info["error"] is None
        if reward > 0 and not measured and info["error"] is None and info["action"] != "undo()":
            tally.problem("positive-reward-unmeasured", what, f"reward={reward}")
        if not math.isfinite(reward):
            tally.problem("non-finite-reward", what, f"reward={reward}")
        need_reset = term or trunc
        checkpoint()
    env.close()


def summary(tally: Tally, args, started: float, provenance: dict) -> dict:
    times = sorted(tally.times) or [0.0]
    serious = {k: v for k, v in tally.problems.items() if k != "internal-error-contained"}
    return {
        "env_id": tally.env_id, "actions": tally.steps, "resets": tally.resets,
        "ok": not serious, "problems": dict(tally.problems),
        "uncaught_exceptions": tally.problems.get("uncaught-exception-step", 0)
        + tally.problems.get("uncaught-exception-reset", 0),
        "hangs": tally.problems.get("hang", 0),
        "errors_without_message": tally.problems.get("error-without-message", 0)
        + tally.problems.get("bad-action-without-error", 0),
        "internal_errors_contained": tally.problems.get("internal-error-contained", 0),
        "categories": dict(tally.categories), "outcomes": dict(tally.outcomes),
        "step_seconds": {"median": statistics.median(times), "p99": times[int(0.99 * (len(times) - 1))],
                         "max": times[-1], "total": sum(times)},
        "slowest": [{"seconds": s, "action": a} for s, a in tally.slowest],
        "examples": dict(tally.examples),
        "settings": {"actions_requested": args.actions, "seed": args.seed, "modes": args.modes,
                     "correctness": args.correctness,
                     "correctness_timeout_s": args.correctness_timeout,
                     "step_bound_s": args.step_bound},
        "wall_seconds": time.time() - started,
        "provenance": provenance,
    }


def provenance() -> dict:
    from argus_env.envs.record import versions

    def git(*a):
        try:
            return subprocess.run(["git", *a], cwd=ROOT, capture_output=True, text=True,
                                  timeout=10).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            return None
    return {"date": time.strftime("%Y-%m-%d %H:%M:%S %z"), "commit": git("rev-parse", "HEAD"),
            "dirty": bool(git("status", "--porcelain", "--untracked-files=no")),
            "command": " ".join([Path(sys.executable).name] + sys.argv),
            "machine": platform.machine(), "cpus": os.cpu_count(),
            "platform": platform.platform(), "versions": versions()}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--actions", type=int, default=100_000, help="fuzzed actions per env id")
    ap.add_argument("--env", action="append", help="env id (default: every registered id)")
    ap.add_argument("--modes", default="discrete,text", help="comma-separated modes")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--correctness", default="interpreter", choices=["interpreter", "none"])
    ap.add_argument("--correctness-timeout", type=float, default=20.0,
                    help="the env's correctness budget per program (its default: 20 s)")
    ap.add_argument("--step-bound", type=float, default=30.0, help="a slower step is a hang")
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results")
    args = ap.parse_args(argv)
    os.environ.setdefault("ARGUS_CACHE_DIR", str(Path("/tmp") / f"argus-fuzz-{os.getpid()}"))
    import logging
    logging.getLogger("argus_env").setLevel(logging.ERROR)  # contained errors are counted

    from argus_env.envs import ENV_IDS
    prov = provenance()
    modes = args.modes.split(",")
    failed = False
    for env_id in args.env or sorted(ENV_IDS):
        tally, started = Tally(env_id), time.time()
        rng = random.Random(f"{args.seed}:{env_id}")
        path = args.out / f"fuzz_{env_id}.json"
        last = [time.time()]

        def checkpoint(force=False):
            if force or time.time() - last[0] > 60:
                last[0] = time.time()
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(json.dumps(summary(tally, args, started, prov), indent=1))
                if not force:
                    print(f"{env_id}: {tally.steps} actions, problems {dict(tally.problems)}",
                          flush=True)
        for i, mode in enumerate(modes):
            share = args.actions // len(modes) + (i < args.actions % len(modes))
            fuzz_env(env_id, mode, share, rng, tally, args, checkpoint)
        checkpoint(force=True)
        result = summary(tally, args, started, prov)
        failed |= not result["ok"]
        print(json.dumps({k: result[k] for k in ("env_id", "actions", "ok", "problems",
                                                 "outcomes", "step_seconds", "wall_seconds")},
                         indent=1))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
