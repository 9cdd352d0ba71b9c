"""Replay an episode record and say where it diverges.

    from argus_env.bench.validate import validate
    for d in validate(line):          # a results line, an `argus run` record or an EpisodeRecord
        print(d)                      # step 3: reward: expected 0.1823, got 0.0

`validate` makes a fresh env with the record's env id, mode, measure, hardware, split and
reward, resets it with the record's seed and shape, applies the recorded actions one by
one and compares, step by step, the reward (exactly: table and model mode are
deterministic; within 10% for records timed on a live GPU), the action's label, the invariants the checker reports and the measured
throughput; then the final program, its throughput, whether it was submitted and the
return. It returns a list of `Divergence`s (empty: the record is what its actions give)
and never raises for a mismatch.

Agents that reset several times (greedy's restarts, every genome of the evolutionary
search) record only their last episode's actions, and that is the episode replayed; the
record's `env_steps`, `trace`, best figures and counters span all its episodes, so they
are compared only for records of a single episode (`env_steps == steps`).

`drift` lists the provenance hashes of a results line that differ from this checkout's
(the sources, table or reward changed since): notes that explain a divergence, not
divergences. `remeasure_on_gpu` times the final program on this machine's GPU.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

from ..envs.record import EpisodeRecord, Recorder
from . import results as R
from .runner import share

SINGLE_EPISODE_FIELDS = ("best_frac_anchor", "best_tflops", "best_program", "trace",
                         "violations_met", "violations_fixed", "invalid_actions", "env_steps")


@dataclass
class Divergence:
    """One way a replay differs from its record."""

    step: int | None     # 1-based step of the replayed episode; None: the episode as a whole
    field: str           # "reward", "action", "invariants", "tflops", "final_program", ...
    expected: Any        # what the record says
    got: Any             # what the replay gives

    def __str__(self) -> str:
        where = f"step {self.step}" if self.step is not None else "episode"
        return f"{where}: {self.field}: expected {_short(self.expected)}, got {_short(self.got)}"

    def to_dict(self) -> dict:
        return asdict(self)


def _short(v, n: int = 120) -> str:
    s = repr(v)
    return s if len(s) <= n else s[: n - 3] + "..."


def _same(a, b, approx: bool = False) -> bool:
    """Equal; with `approx` (live GPU timings) floats within 10% or 0.05 match."""
    if isinstance(a, float) and isinstance(b, float):
        if math.isnan(a) and math.isnan(b):
            return True
        if approx:
            return math.isclose(a, b, rel_tol=0.10, abs_tol=0.05)
    return a == b


class Validator:
    """Replays records. Keeps one `Evaluator` per (task, measure, hardware) across
    replays when the backend is deterministic: its answers are computed here, from the
    programs, never taken from the record, so sharing them only saves time."""

    def __init__(self, share_evaluations: bool = True):
        self.share = share_evaluations
        self._evaluators: dict = {}

    def make_env(self, env_id: str, rec: EpisodeRecord, split: str, reward):
        import gymnasium as gym

        import argus_env  # noqa: F401
        kwargs = dict(mode=rec.mode, measure=rec.measure, hardware=rec.hardware, split=split,
                      reward=reward, max_episode_steps=max(len(rec.actions), 1))
        env = gym.make(env_id, **kwargs)
        if self.share:
            share(env, self._evaluators)
        return env

    def replay(self, line: dict | EpisodeRecord) -> tuple[EpisodeRecord, EpisodeRecord]:
        """(the record, the record its actions give in a fresh env)."""
        rec = line if isinstance(line, EpisodeRecord) else R.record_of(line)
        extra = {} if isinstance(line, EpisodeRecord) else line
        split = extra.get("track") or rec.split or "all"
        env = self.make_env(rec.env_id, rec, split, extra.get("reward", "default"))
        try:
            shape = rec.shape if rec.shape != "custom" else dict(rec.sizes)
            obs, info = env.reset(seed=rec.seed, options={"shape": shape})
            again = Recorder(env, rec.agent, rec.seed)
            again.start(info)
            for action in rec.actions:
                obs, reward, terminated, truncated, info = env.step(action)
                again.step(action, reward, info)
                if terminated:
                    break
        finally:
            env.close()
        return rec, again.rec

    def validate(self, line: dict | EpisodeRecord) -> list[Divergence]:
        try:
            rec, got = self.replay(line)
        except Exception as e:  # a record the env cannot even replay is one divergence
            return [Divergence(None, "replay", "a replayable episode", f"{type(e).__name__}: {e}")]
        out = compare(rec, got)
        if isinstance(line, dict) and "submitted_program_hash" in line:
            h = R.program_hash(got.final_program) if got.submitted else None
            if h != line["submitted_program_hash"]:
                out.append(Divergence(None, "submitted_program_hash",
                                      line["submitted_program_hash"], h))
        return out


def compare(rec: EpisodeRecord, got: EpisodeRecord) -> list[Divergence]:
    """Step by step, then the episode's end; see the module docstring."""
    out = []
    approx = rec.measure == "gpu"   # live timings: only table and model replay exactly
    if rec.sizes and dict(rec.sizes) != dict(got.sizes):
        out.append(Divergence(None, "sizes", rec.sizes, got.sizes))
    if not (len(rec.actions) == len(rec.rewards) == rec.steps):
        out.append(Divergence(None, "steps", f"{len(rec.actions)} actions, {rec.steps} steps",
                              f"{len(rec.rewards)} rewards"))
    per_step = (("reward", rec.rewards, got.rewards), ("action", rec.action_labels, got.action_labels),
                ("invariants", rec.step_invariants, got.step_invariants),
                ("tflops", rec.step_tflops, got.step_tflops))
    for i in range(len(rec.actions)):
        for name, want, have in per_step:
            if not want and name in ("invariants", "tflops"):
                continue   # a record from before these fields existed
            w = want[i] if i < len(want) else "<missing>"
            h = have[i] if i < len(have) else "<no such step: the replay ended>"
            if not _same(w, h, approx):
                out.append(Divergence(i + 1, name, w, h))
    if len(got.actions) < len(rec.actions):
        out.append(Divergence(len(got.actions), "terminated", "more steps after this one",
                              "the episode ended (submit)"))
    end = [("submitted", rec.submitted, got.submitted), ("return", rec.return_, got.return_)]
    if rec.final_program:
        end += [("final_program", rec.final_program, got.final_program),
                ("final_tflops", rec.final_tflops, got.final_tflops),
                ("final_frac_anchor", rec.final_frac_anchor, got.final_frac_anchor)]
    if rec.env_steps == rec.steps and not approx:
        end += [(f, getattr(rec, f), getattr(got, f)) for f in SINGLE_EPISODE_FIELDS]
    for name, want, have in end:
        if not _same(want, have, approx):
            out.append(Divergence(None, name, want, have))
    return out


def validate(line: dict | EpisodeRecord) -> list[Divergence]:
    """Replay one record in a fresh env; see the module docstring."""
    return Validator(share_evaluations=False).validate(line)


def drift(line: dict) -> list[Divergence]:
    """Provenance hashes of a results line that differ from this checkout's."""
    import gymnasium as gym

    import argus_env  # noqa: F401
    if "hashes" not in line:
        return []
    env = gym.make(line["env_id"], measure=line["measure"], hardware=line["hardware"])
    now = R.content_hashes(env, line.get("reward", "default"))
    env.close()
    return [Divergence(None, f"hashes.{k}", v, now.get(k)) for k, v in line["hashes"].items()
            if now.get(k) != v]


@dataclass
class GpuCheck:
    """The final program timed again on this machine's GPU."""

    recorded_tflops: float | None
    live_tflops: float | None
    ratio: float | None        # live / recorded throughput
    live_frac_anchor: float    # against the library timed in the same process
    recorded_frac_anchor: float
    error: str = ""


def remeasure_on_gpu(line: dict | EpisodeRecord) -> GpuCheck:
    """Time the record's final (else best) program with the gpu backend."""
    from ..dsl.program import Program
    from ..measure.backends import make_backend
    from ..task import get_task
    rec = line if isinstance(line, EpisodeRecord) else R.record_of(line)
    text = rec.final_program or rec.best_program
    recorded = rec.final_tflops if rec.final_program else rec.best_tflops
    frac = rec.final_frac_anchor if rec.final_program else rec.best_frac_anchor
    backend = make_backend("gpu", rec.hardware)
    try:
        m = backend.measure(Program.from_text(text), dict(rec.sizes), get_task(rec.task))
    finally:
        backend.worker.stop()
    if not m.ok:
        return GpuCheck(recorded, None, None, 0.0, frac, m.error)
    ratio = m.tflops / recorded if recorded else None
    return GpuCheck(recorded, m.tflops, ratio, m.frac_anchor, frac)
