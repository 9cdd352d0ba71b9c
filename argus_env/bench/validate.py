"""Replay an episode record and say where it diverges.

    from argus_env.bench.validate import validate
    for d in validate(line):          # a results line, an `argus run` record or an EpisodeRecord
        print(d)                      # step 3: reward: expected 0.1823, got 0.0

`validate` first checks the line as data (`schema.py`: known keys and types, a registered
env id compared as a string, known shape, hardware and reward names); a line that fails
is not replayed. It then makes a fresh env with the record's env id, mode, measure,
hardware, split and reward, resets it with the record's seed and shape, applies the
recorded actions one by one and compares every field of the record with the replay's
but `UNCHECKED`: step by step the reward (exactly: table and model mode are
deterministic; within 10% for records timed on a live GPU), the action's label, the
invariants the checker reports and the measured throughput; then every episode field
(the final program and its figures whatever they are, the best figures, the trace and
the counters) and the fields the bench adds (`task_uri`, `submitted_program_hash`,
`final_measured_by`, the budget). It returns a list of `Divergence`s (empty: the record
is what its actions give) and never raises for a mismatch.

Agents that reset several times (greedy's restarts, every genome of the evolutionary
search) record the actions of each episode before the last in `earlier_actions`: the
replay resets and plays every episode in order, so the `SPANNING` figures (env steps,
trace, best figures, counts) are compared exactly too. A record written before records
carried them (`env_steps > steps`, no `earlier_actions`) replays its last episode only,
and its spanning figures are checked for what that replay bounds (each at least the
replayed episode's). `Validator.check` also returns the *board line*: the line rebuilt
from the replay, which is what a leaderboard of submitted results ranks, so no figure on
a board is taken from a submission on trust.

`drift` lists the provenance hashes of a results line that differ from this checkout's
(the sources, table or reward changed since): notes that explain a divergence, not
divergences. `remeasure_on_gpu` times the final program on this machine's GPU.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

from ..envs.record import EpisodeRecord, Recorder
from . import results as R
from .leaderboard import counted
from .runner import share
from .schema import Divergence, check_line, recorded_actions, registered_env_ids

__all__ = ["Divergence", "Validator", "compare", "drift", "remeasure_on_gpu", "validate"]

#: per-step lists and the name their divergences carry
PER_STEP = {"rewards": "reward", "action_labels": "action", "step_invariants": "invariants",
            "step_tflops": "tflops"}
#: figures that span every episode of an agent that resets
SPANNING = ("best_frac_anchor", "best_tflops", "best_program", "trace", "violations_met",
            "violations_fixed", "invalid_actions", "env_steps")
#: not replayable and read by no board: timings, the recording machine's package
#: versions, the agent's own notes (an LLM's prompts); the actions are the replay's input
UNCHECKED = ("seconds", "step_seconds", "created", "versions", "transcript", "actions",
             "earlier_actions")
#: what live GPU timings may change: which of two programs within 10% was the best
TIMING_DEPENDENT = ("best_program",)
#: fields of a submitted line a board line keeps as they are (no board reads them)
CARRIED = ("seconds", "created", "transcript", "agent_args", "suite")


def _same(a, b, approx: bool = False) -> bool:
    """Equal; with `approx` (live GPU timings) floats within 10% or 0.05 match, in lists
    (a trace) too."""
    if isinstance(a, float) and isinstance(b, float):
        if math.isnan(a) and math.isnan(b):
            return True
        if approx:
            return math.isclose(a, b, rel_tol=0.10, abs_tol=0.05)
    if approx and isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y, approx) for x, y in zip(a, b))
    return a == b


@dataclass
class Replay:
    """A record, what its actions give in a fresh env, and the bench's fields for it."""

    rec: EpisodeRecord
    got: EpisodeRecord
    fields: dict          # `results.line_fields` of the replay


class Validator:
    """Replays records. Keeps one `Evaluator` per (task, measure, hardware) across
    replays when the backend is deterministic: its answers are computed here, from the
    programs, never taken from the record, so sharing them only saves time."""

    def __init__(self, share_evaluations: bool = True):
        self.share = share_evaluations
        self._evaluators: dict = {}

    def make_env(self, env_id: str, rec: EpisodeRecord, split: str, reward,
                 budget: int | None = None, table_snapshot: str | None = None,
                 correction_fit: str | None = None):
        """An env of a registered id (the registry's own string goes to `gym.make`), with
        the step limit the episode was played under (`step_limit`)."""
        import gymnasium as gym

        import argus_env  # noqa: F401
        known = next((k for k in registered_env_ids() if k == env_id), None)
        if known is None:
            raise ValueError(f"{env_id!r} is not a registered env id")
        from .results import LEGACY_CATALOG
        kwargs = dict(mode=rec.mode, measure=rec.measure, hardware=rec.hardware, split=split,
                      reward=reward, max_episode_steps=step_limit(rec, budget),
                      catalog=rec.catalog or LEGACY_CATALOG)   # the actions' catalog
        if rec.measure in ("model", "table"):   # priced as the line was
            from ..measure.correction import LEGACY_ESTIMATOR
            from ..measure.analytic import LEGACY_ANCHOR
            kwargs["estimator"] = rec.estimator or LEGACY_ESTIMATOR
            kwargs["model_anchor"] = rec.model_anchor or LEGACY_ANCHOR
        if rec.measure == "table" and table_snapshot:   # the tables as the line read them
            kwargs["table_snapshot"] = table_snapshot
        if rec.measure in ("model", "table") and correction_fit:   # and the fit it priced with
            kwargs["correction_fit"] = correction_fit
        env = gym.make(known, **kwargs)
        if self.share:
            share(env, self._evaluators)
        return env

    def replay(self, line: dict) -> Replay:
        """Play a line's actions in a fresh env; the line must have passed `check_line`."""
        rec = R.record_of(line)
        if rec.measure in ("model", "table") and not rec.estimator:
            # a line from before the field was priced by the analytic model, and is
            # replayed so (`make_env`): the replay's record names it
            rec.estimator = R.line_setting(line, "estimator")
        if rec.measure in ("model", "table") and not rec.model_anchor:
            rec.model_anchor = R.line_setting(line, "model_anchor")   # the roofline's
        if not rec.catalog:   # a line from before catalogs had versions played the first
            rec.catalog = R.line_setting(line, "catalog")
        split, reward = line.get("track") or rec.split or "all", line.get("reward", "default")
        budget = line.get("budget")
        env = self.make_env(rec.env_id, rec, split, reward,
                            budget if type(budget) is int else None,
                            (line.get("hashes") or {}).get("table_rows"),
                            (line.get("hashes") or {}).get("correction"))
        try:
            again = Recorder(env, rec.agent, rec.seed)
            for n, actions in enumerate([*rec.earlier_actions, rec.actions]):
                play(env, again, rec, actions, first=n == 0)
            fields = R.line_fields(env, again.rec, track=split, budget=line.get("budget"),
                                   reward=reward, suite=line.get("suite"),
                                   agent_args=line.get("agent_args", {}))
        finally:
            env.close()
        return Replay(rec, again.rec, fields)

    def check(self, line: dict | EpisodeRecord) -> tuple[list[Divergence], dict | None]:
        """(divergences, the board line: the line rebuilt from its replay; None unless
        the line validates)."""
        line = json_line(line)
        problems = check_line(line)
        if problems:
            return problems, None
        try:
            r = self.replay(line)
        except Exception as e:  # a record the env cannot even replay is one divergence
            return [Divergence(None, "replay", "a replayable episode", f"{type(e).__name__}: {e}")], None
        out = compare(r.rec, r.got) + compare_fields(line, r)
        return out, (None if out else board_line(line, r))

    def validate(self, line: dict | EpisodeRecord) -> list[Divergence]:
        return self.check(line)[0]


def step_limit(rec: EpisodeRecord, budget: int | None = None) -> int:
    """The step limit to replay `rec` under: the step that reaches it submits the current
    program implicitly, so a replay must reach it where the episode did and nowhere else.
    A bench line's budget is its runner's limit; a record without one (`argus run`) shows
    it: its last episode ended at the limit where it was submitted by a step other than
    `submit()` (the implicit submit), else no episode reached it (one past the longest)."""
    if budget is not None:
        return max(budget, 1)
    implicit = rec.submitted and bool(rec.action_labels) and rec.action_labels[-1] != "submit()"
    if implicit:
        return max(len(rec.actions), 1)
    return max(map(len, [rec.actions, *rec.earlier_actions])) + 1


def play(env, recorder: Recorder, rec: EpisodeRecord, actions: list, first: bool) -> None:
    """One episode of a record: reset to its seed and shape, then its actions until a
    submit ends it."""
    shape = rec.shape if rec.shape != "custom" else dict(rec.sizes)
    obs, info = env.reset(seed=rec.seed, options={"shape": shape})
    if first:
        recorder.start(info)
    else:
        recorder.restart(info)
    for action in actions:
        obs, reward, terminated, truncated, info = env.step(action)
        recorder.step(action, reward, info)
        if terminated:
            break


def json_line(line: dict | EpisodeRecord) -> dict:
    """A record as the JSON mapping a results line is (an `EpisodeRecord` as written)."""
    import json
    return json.loads(line.to_json()) if isinstance(line, EpisodeRecord) else line


def compare(rec: EpisodeRecord, got: EpisodeRecord) -> list[Divergence]:
    """Step by step, then every episode field but `UNCHECKED`; see the module docstring."""
    approx = rec.measure == "gpu"   # live timings: only table and model replay exactly
    out = []
    for i in range(len(rec.actions)):
        for key, name in PER_STEP.items():
            want, have = getattr(rec, key), getattr(got, key)
            w = want[i] if i < len(want) else "<missing>"
            h = have[i] if i < len(have) else "<no such step: the replay ended>"
            if not _same(w, h, approx):
                out.append(Divergence(i + 1, name, w, h))
    if len(got.actions) < len(rec.actions):
        out.append(Divergence(len(got.actions), "terminated", "more steps after this one",
                              "the episode ended (submit)"))
    single = rec.env_steps == rec.steps + sum(map(len, rec.earlier_actions))  # every episode
    for f in dataclasses.fields(EpisodeRecord):
        if f.name in UNCHECKED or f.name in PER_STEP or (f.name in SPANNING and not single) \
                or (approx and f.name in TIMING_DEPENDENT):
            continue
        want, have = getattr(rec, f.name), getattr(got, f.name)
        if not _same(want, have, approx):
            out.append(Divergence(None, "return" if f.name == "return_" else f.name, want, have))
    return out + ([] if single else spanning(rec, got, approx))


def spanning(rec: EpisodeRecord, got: EpisodeRecord, approx: bool = False) -> list[Divergence]:
    """What the replayed last episode bounds of figures that span several episodes: each
    at least the replay's (a best over more steps is no lower, a count no smaller)."""
    slack = (lambda v: v * 0.9 - 0.05) if approx else (lambda v: v)
    claims = [("best_frac_anchor", rec.best_frac_anchor, got.best_frac_anchor),
              ("best_tflops", rec.best_tflops, got.best_tflops),
              ("invalid_actions", rec.invalid_actions, got.invalid_actions),
              ("violations_fixed", rec.violations_fixed, got.violations_fixed)]
    claims += [(f"violations_met.{k}", rec.violations_met.get(k, 0), n)
               for k, n in got.violations_met.items()]
    tail = rec.trace[len(rec.trace) - len(got.trace):] if got.trace else []
    claims += [(f"trace at env step {t[0]}", t[1], g[1]) for t, g in zip(tail, got.trace)]
    out = []
    for name, claim, floor in claims:
        if floor is not None and (claim is None or claim < slack(floor)):
            out.append(Divergence(None, name, f"at least the replayed episode's {floor!r}", claim))
    return out


def compare_fields(line: dict, r: Replay) -> list[Divergence]:
    """The bench's fields of a line that its replay decides."""
    out = []
    for key in ("task_uri", "submitted_program_hash", "final_measured_by"):
        if key in line and line[key] != r.fields[key]:
            out.append(Divergence(None, key, line[key], r.fields[key]))
    if line.get("budget") is not None and recorded_actions(line) > line["budget"]:
        out.append(Divergence(None, "budget", f"at most {counted(line['budget'], 'action')}",
                              recorded_actions(line)))
    return out


def board_line(line: dict, r: Replay) -> dict:
    """The line a board ranks: the replay's record and bench fields, and the `CARRIED`
    fields of the submitted line. No `step_seconds`: a replay cannot confirm a submitter's
    wall-clock times, and the replay's own are the validating machine's, so a board shows
    time to the best known only for episodes its own runner played."""
    out = R.to_line(r.got, **r.fields)
    out.pop("step_seconds", None)
    out.update({k: line[k] for k in CARRIED if k in line})
    return out


def validate(line: dict | EpisodeRecord) -> list[Divergence]:
    """Check one record as data, then replay it in a fresh env; see the module docstring."""
    return Validator(share_evaluations=False).validate(line)


def drift(line: dict) -> list[Divergence]:
    """Provenance hashes of a results line that differ from this checkout's (none for a
    line that fails `check_line`: nothing is made from it)."""
    import gymnasium as gym

    import argus_env  # noqa: F401
    if "hashes" not in line or check_line(line):
        return []
    env_id = next(k for k in registered_env_ids() if k == line["env_id"])
    extra = {"estimator": R.line_setting(line, "estimator"),
             "model_anchor": R.line_setting(line, "model_anchor")} \
        if line["measure"] in ("model", "table") else {}
    env = gym.make(env_id, measure=line["measure"], hardware=line["hardware"], **extra)
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
    problems = check_line(json_line(line))
    if problems:
        return GpuCheck(None, None, None, 0.0, 0.0, f"not a valid record: {problems[0]}")
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
