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
worker restarts. Results go to `benchmarks/results/fuzz/fuzz_<env>.json` (or `--out`) with
provenance, rewritten every minute so an interrupted run keeps what it found;
`fuzz_totals.py` adds runs up (the committed ones: `benchmarks/results/fuzz/<run>/`).

    python benchmarks/fuzz_envs.py                        # 100,000 actions per env
    python benchmarks/fuzz_envs.py --actions 20000 --seed 1
    python benchmarks/fuzz_envs.py --jobs 16 --minutes 8  # 16 processes, then merged
    python benchmarks/fuzz_envs.py --merge a.json b.json  # shards of one env id, merged

With `--jobs N` the envs are spread over N processes (job i fuzzes env i mod #envs with
seed `seed + i // #envs`, each its own cache folder), each shard writes
`fuzz_<env>.shard<i>.json`, and the shards of each env are merged into `fuzz_<env>.json`:
counts add up, the slowest steps and examples are pooled, step-time quantiles are the
shards' (median and p99 ranges), the maximum is exact. `--minutes` bounds the time per
env (split evenly over the modes, so text actions are fuzzed however slow discrete ones
are); the action count then is what fitted.
"""

from __future__ import annotations

import argparse
import collections
import json
import math
import os
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
        self.failures: collections.Counter = collections.Counter()  # why programs failed
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
                   correctness_timeout=args.correctness_timeout,
                   step_timeout=args.step_timeout)
    core = env.unwrapped
    need_reset = True
    done = 0
    deadline = time.time() + args.minutes * 60 / len(args.modes.split(",")) \
        if args.minutes else math.inf
    while done < n and time.time() < deadline:
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
        if info.get("failure"):
            tally.failures[f"{info['failure']}: {str(info.get('failure_message'))[:160]}"] += 1
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
        measured = bool(info["measurement"]) and info["measurement"]["ok"] \
            and not info["failure"] and info["error"] is None
        if reward > 0 and not measured and info["error"] is None and info["action"] != "undo()":
            tally.problem("positive-reward-unmeasured", what, f"reward={reward}")
        if not math.isfinite(reward):
            tally.problem("non-finite-reward", what, f"reward={reward}")
        need_reset = term or trunc
        checkpoint()
    env.close()


def clean(problems: dict) -> bool:
    """No problem but contained internal errors (counted, worth knowing, not failures)."""
    return not any(n for k, n in problems.items() if k != "internal-error-contained")


def summary(tally: Tally, args, started: float, provenance: dict) -> dict:
    times = sorted(tally.times) or [0.0]
    return {
        "env_id": tally.env_id, "actions": tally.steps, "resets": tally.resets,
        "ok": clean(tally.problems), "problems": dict(tally.problems),
        "uncaught_exceptions": tally.problems.get("uncaught-exception-step", 0)
        + tally.problems.get("uncaught-exception-reset", 0),
        "hangs": tally.problems.get("hang", 0),
        "errors_without_message": tally.problems.get("error-without-message", 0)
        + tally.problems.get("bad-action-without-error", 0),
        "internal_errors_contained": tally.problems.get("internal-error-contained", 0),
        "categories": dict(tally.categories), "outcomes": dict(tally.outcomes),
        "failure_reasons": dict(tally.failures.most_common(20)),
        "step_seconds": {"median": statistics.median(times), "p99": times[int(0.99 * (len(times) - 1))],
                         "max": times[-1], "total": sum(times)},
        "slowest": [{"seconds": s, "action": a} for s, a in tally.slowest],
        "examples": dict(tally.examples),
        "settings": {"actions_requested": args.actions, "minutes": args.minutes,
                     "seed": args.seed, "modes": args.modes,
                     "correctness": args.correctness,
                     "correctness_timeout_s": args.correctness_timeout,
                     "step_timeout_s": args.step_timeout,
                     "step_bound_s": args.step_bound},
        "wall_seconds": time.time() - started,
        "provenance": provenance,
    }


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--actions", type=int, default=100_000, help="fuzzed actions per env id")
    ap.add_argument("--env", action="append", help="env id (default: every registered id)")
    ap.add_argument("--modes", default="discrete,text", help="comma-separated modes")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--correctness", default="interpreter", choices=["interpreter", "none"])
    ap.add_argument("--correctness-timeout", type=float, default=20.0,
                    help="the env's correctness budget per program (its default: 20 s)")
    ap.add_argument("--step-timeout", type=float, default=25.0,
                    help="the env's time budget per step (its default: 25 s)")
    ap.add_argument("--step-bound", type=float, default=30.0, help="a slower step is a hang")
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "fuzz")
    ap.add_argument("--minutes", type=float, default=None,
                    help="wall-time bound per env id (split over the modes)")
    ap.add_argument("--jobs", type=int, default=1, help="processes, spread over the env ids")
    ap.add_argument("--shard", default="", help=argparse.SUPPRESS)
    ap.add_argument("--merge", nargs="+", type=Path, help="merge these shard files and exit")
    args = ap.parse_args(argv)
    if args.merge:
        merged = merge([json.loads(p.read_text()) for p in args.merge])
        path = args.out / f"fuzz_{merged['env_id']}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(merged, indent=1))
        print(f"{path}: {merged['actions']} actions from {len(args.merge)} shards, ok={merged['ok']}")
        return 0 if merged["ok"] else 1
    if args.jobs > 1:
        return run_jobs(args, argv if argv is not None else sys.argv[1:])
    os.environ.setdefault("ARGUS_CACHE_DIR", str(Path("/tmp") / f"argus-fuzz-{os.getpid()}"))
    import logging
    logging.getLogger("argus_env").setLevel(logging.ERROR)  # contained errors are counted

    from argus_env.envs import ENV_IDS
    from argus_env.envs.record import run_provenance
    prov = run_provenance(ROOT)
    modes = args.modes.split(",")
    failed = False
    for env_id in args.env or sorted(ENV_IDS):
        tally, started = Tally(env_id), time.time()
        rng = random.Random(f"{args.seed}:{env_id}")
        path = args.out / f"fuzz_{env_id}{args.shard}.json"
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


def run_jobs(args, argv: list[str]) -> int:
    """Spread the env ids over `args.jobs` processes, then merge each env's shards."""
    from argus_env.envs import ENV_IDS
    envs = args.env or sorted(ENV_IDS)
    keep, skip = [], False
    for a in argv:   # the command line without --jobs/--env/--seed (set per job)
        if skip:
            skip = False
            continue
        if a in ("--jobs", "--env", "--seed"):
            skip = True
            continue
        if not a.startswith(("--jobs=", "--env=", "--seed=")):
            keep.append(a)
    procs = []
    for i in range(args.jobs):
        env_id, seed = envs[i % len(envs)], args.seed + i // len(envs)
        cmd = [sys.executable, __file__, *keep, "--env", env_id, "--seed", str(seed),
               "--shard", f".shard{i}"]
        log = (args.out / f"fuzz_{env_id}.shard{i}.log")
        log.parent.mkdir(parents=True, exist_ok=True)
        procs.append((env_id, args.out / f"fuzz_{env_id}.shard{i}.json",
                      subprocess.Popen(cmd, stdout=log.open("w"), stderr=subprocess.STDOUT,
                                       env={**os.environ, "ARGUS_CACHE_DIR":
                                            str(Path("/tmp") / f"argus-fuzz-{env_id}-{seed}-shard{i}")})))
    codes = [p.wait() for _, _, p in procs]
    failed = False
    for env_id in envs:
        shards = [json.loads(path.read_text()) for e, path, _ in procs
                  if e == env_id and path.exists()]
        if not shards:
            print(f"{env_id}: no shard wrote results (exit codes {codes})")
            failed = True
            continue
        merged = merge(shards)
        (args.out / f"fuzz_{env_id}.json").write_text(json.dumps(merged, indent=1))
        failed |= not merged["ok"]
        print(json.dumps({k: merged[k] for k in ("env_id", "actions", "ok", "problems",
                                                 "outcomes", "step_seconds", "wall_seconds")},
                         indent=1))
    return 1 if failed or any(codes) else 0


def merge(shards: list[dict]) -> dict:
    """One env id's shard summaries as one: counts summed, worst cases pooled."""
    ids = {s["env_id"] for s in shards}
    if len(ids) != 1:
        raise SystemExit(f"shards of different env ids: {sorted(ids)}")

    def add(key, optional=False):  # an optional key: one older shards may lack
        total = collections.Counter()
        for s in shards:
            total.update(s.get(key, {}) if optional else s[key])
        return total
    problems = dict(add("problems"))
    examples = collections.defaultdict(list)
    for s in shards:
        for k, v in s["examples"].items():
            examples[k] = (examples[k] + v)[:EXAMPLES]
    med = [s["step_seconds"]["median"] for s in shards]
    p99 = [s["step_seconds"]["p99"] for s in shards]
    out = {
        "env_id": ids.pop(), "actions": sum(s["actions"] for s in shards),
        "resets": sum(s["resets"] for s in shards), "ok": clean(problems), "problems": problems,
        **{k: sum(s[k] for s in shards) for k in ("uncaught_exceptions", "hangs",
                                                   "errors_without_message",
                                                   "internal_errors_contained")},
        "categories": dict(add("categories")), "outcomes": dict(add("outcomes")),
        "failure_reasons": dict(add("failure_reasons", optional=True).most_common(20)),
        "step_seconds": {"median_range": [min(med), max(med)], "p99_range": [min(p99), max(p99)],
                         "max": max(s["step_seconds"]["max"] for s in shards),
                         "total": sum(s["step_seconds"]["total"] for s in shards)},
        "slowest": sorted((x for s in shards for x in s["slowest"]),
                          key=lambda x: -x["seconds"])[:10],
        "examples": dict(examples),
        "shards": [{"actions": s["actions"], "seed": s["settings"]["seed"],
                    "wall_seconds": s["wall_seconds"], "ok": s["ok"]} for s in shards],
        "settings": {**shards[0]["settings"], "seed": sorted(s["settings"]["seed"] for s in shards)},
        "wall_seconds": max(s["wall_seconds"] for s in shards),
        "provenance": shards[0]["provenance"],
    }
    return out


if __name__ == "__main__":
    sys.exit(main())
