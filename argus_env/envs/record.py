"""Episode records: what an agent did in an environment, replayable and JSON-serialisable."""

from __future__ import annotations

import datetime
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path


def versions() -> dict:
    """Versions of everything that decides an episode's outcome."""
    import argus_env
    from argus_env.lower import LOWERING_VERSION
    out = {"argus": argus_env.__version__, "lowering": LOWERING_VERSION,
           "python": platform.python_version()}
    from importlib import metadata
    for mod, dist in (("z3", "z3-solver"), ("gymnasium", "gymnasium"), ("triton", "triton"),
                      ("torch", "torch"), ("numpy", "numpy")):
        try:  # from package metadata: importing triton here would fix its mode too early
            out[mod] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            out[mod] = None
    return out


def run_provenance(root: Path) -> dict:
    """Where a benchmark's figures come from: date, the checkout's commit (None outside a
    git checkout) and whether it had uncommitted changes, the command, the machine and
    its CPU, and `versions()`."""
    def git(*args):
        try:
            return subprocess.run(["git", *args], cwd=root, capture_output=True, text=True,
                                  timeout=10).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            return None
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next((ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name")),
                       platform.processor())
    except OSError:
        cpu = platform.processor()
    return {"date": time.strftime("%Y-%m-%d %H:%M:%S %z"), "commit": git("rev-parse", "HEAD"),
            "dirty": bool(git("status", "--porcelain", "--untracked-files=no")),
            "command": " ".join([Path(sys.executable).name] + sys.argv),
            "machine": platform.machine(), "cpu": cpu, "cpus": os.cpu_count(),
            "platform": platform.platform(), "versions": versions()}


@dataclass
class EpisodeRecord:
    task: str
    env_id: str
    shape: str
    sizes: dict
    agent: str
    seed: int
    mode: str
    measure: str
    hardware: str
    actions: list = field(default_factory=list)        # as given to step (index or text)
    action_labels: list = field(default_factory=list)  # human-readable
    rewards: list = field(default_factory=list)
    return_: float = 0.0
    steps: int = 0
    submitted: bool = False     # by submit(), or implicitly by the step at the step limit
    baseline_tflops: float | None = None
    best_tflops: float | None = None
    best_frac_anchor: float = 0.0
    best_program: str = ""
    violations_met: dict = field(default_factory=dict)   # invariant -> times seen
    violations_fixed: int = 0
    invalid_actions: int = 0
    seconds: float = 0.0
    env_steps: int = 0          # every step the agent took, over all its episodes
    trace: list = field(default_factory=list)  # [env step, best fraction of library so far]
    # wall-clock seconds from the agent's start (its Recorder) to the end of each env step,
    # spanning its resets like `trace`: the budget curves' time axis. Left out of the JSON
    # when empty (records written before it existed)
    step_seconds: list = field(default_factory=list)
    transcript: list = field(default_factory=list)  # LLM agents: each step's prompt and answer
    # Agents that reset several times (greedy's restarts, each genome of the evolutionary
    # search): the actions of every episode before the last, one list per reset, so a
    # replay plays them all. Left out of the JSON when empty: a record of one episode is
    # written as before, and one written before it existed holds the last episode only.
    earlier_actions: list = field(default_factory=list)
    # The last episode's own figures (the per-step lists, `actions` and `steps` too):
    split: str = ""                 # the env's shape split ("train", "test", "all")
    final_program: str = ""         # the program the episode ended on: the submitted one
    final_tflops: float | None = None   # its throughput (None: unmeasured or broken)
    final_frac_anchor: float = 0.0  # its fraction of the library anchor (0: unmeasured)
    step_invariants: list = field(default_factory=list)  # per step: invariants violated after it
    step_tflops: list = field(default_factory=list)      # per step: TFLOP/s after it, or None
    versions: dict = field(default_factory=versions)
    created: str = field(default_factory=lambda: datetime.datetime.now(
        datetime.timezone.utc).isoformat(timespec="seconds"))
    # how model prices were made ("analytic" or "corrected", `KernelEnv(estimator=)`);
    # "" for a GPU-timed episode, and in records written before the correction existed
    # (those were priced by the analytic model): left out of the JSON when empty
    estimator: str = ""
    # the version of the task's transformation catalog the episode played (`KernelEnv(
    # catalog=)`); 0 in records written before catalogs had versions (they played the
    # first), and then left out of the JSON
    catalog: int = 0
    # the library figure model prices were set against off the H200 ("measured" or
    # "roofline", `KernelEnv(model_anchor=)`); "" for a GPU-timed episode and in records
    # written before the field (those were priced against 0.9 x the roofline): left out
    # of the JSON when empty
    model_anchor: str = ""

    def to_json(self) -> str:
        d = asdict(self)
        d["return"] = d.pop("return_")
        if not d["earlier_actions"]:
            del d["earlier_actions"]
        if not d["step_seconds"]:
            del d["step_seconds"]
        if not d["estimator"]:
            del d["estimator"]
        if not d["catalog"]:
            del d["catalog"]
        if not d["model_anchor"]:
            del d["model_anchor"]
        # one order for the invariants met (the checker may report them in another order
        # from one process to the next), so that two runs write the same bytes
        d["violations_met"] = dict(sorted(d["violations_met"].items()))
        return json.dumps(d)

    @classmethod
    def from_json(cls, text: str) -> "EpisodeRecord":
        d = json.loads(text)
        d["return_"] = d.pop("return")
        return cls(**d)

    def save(self, path) -> Path:
        """Write the record as JSON atomically: to a temporary file in the same folder,
        flushed to disk, then renamed over `path`; a reader (or a crash) sees the old file
        or the new one, never half of one."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
        try:
            with os.fdopen(fd, "w") as f:
                f.write(self.to_json())
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, path)
        except BaseException:
            try:
                os.unlink(tmp)
            except OSError:
                pass
            raise
        return path

    @classmethod
    def load(cls, path) -> "EpisodeRecord":
        return cls.from_json(Path(path).read_text())


class Recorder:
    """Accumulates an `EpisodeRecord` from the env's observations and infos."""

    def __init__(self, env, agent: str, seed: int):
        core = env.unwrapped
        self.env = core
        self.rec = EpisodeRecord(core.task.name, getattr(env.spec, "id", "") if env.spec else "",
                                 "", {}, agent, seed, core.mode,
                                 type(core.evaluator.backend).__name__.replace("Backend", "").lower(),
                                 getattr(core.profile, "name", ""))
        self.rec.split = getattr(core, "split", "")
        if self.rec.measure in ("model", "table"):
            self.rec.estimator = getattr(core, "estimator", "")
            self.rec.model_anchor = getattr(core, "model_anchor", "")
        space = getattr(core, "space_", None)
        self.rec.catalog = int(getattr(space, "catalog_version", 0) or 0)
        self._violated = False
        self._t0 = time.perf_counter()

    def start(self, info: dict) -> None:
        self.rec.shape, self.rec.sizes = info["shape"], info["sizes"]
        self.rec.baseline_tflops = self.env.baseline_tflops
        self.rec.best_tflops = self.env.baseline_tflops
        self.rec.best_program = info["program"]
        self.rec.best_frac_anchor = info["best_frac_anchor"]
        self._final(info)

    def _final(self, info: dict) -> None:
        """The episode's current program and its measurement, as the final state."""
        r, m = self.rec, info["measurement"]
        ok = bool(m and m["ok"] and info["failure"] is None)
        r.final_program = info["program"]
        r.final_tflops = m["tflops"] if ok else None
        r.final_frac_anchor = m["frac_anchor"] if ok else 0.0

    def restart(self, info: dict) -> None:
        """A new episode of the same agent run: the record describes the latest one,
        while `env_steps`, `trace` and the best figures span them all, and the finished
        episode's actions join `earlier_actions` (a replay plays every episode)."""
        r = self.rec
        r.earlier_actions.append(r.actions)
        r.actions, r.action_labels, r.rewards = [], [], []
        r.return_, r.steps, r.submitted = 0.0, 0, False
        r.step_invariants, r.step_tflops = [], []
        self._violated = False
        self._final(info)

    def step(self, action, reward: float, info: dict) -> None:
        r = self.rec
        r.env_steps += 1
        r.actions.append(action.item() if hasattr(action, "item") else action)
        r.action_labels.append(info["action"] or f"invalid: {str(action)[:60]}")
        r.rewards.append(float(reward))
        r.return_ += float(reward)
        r.steps += 1
        r.invalid_actions += info["error"] is not None
        kinds = {v["invariant"] for v in info["report"]["violations"]}
        r.step_invariants.append(sorted(kinds))
        for k in kinds:
            r.violations_met[k] = r.violations_met.get(k, 0) + 1
        if self._violated and not kinds and info["error"] is None:
            r.violations_fixed += 1
        self._violated = bool(kinds)
        m = info["measurement"]
        if m and m["ok"] and info["failure"] is None and (r.best_tflops is None or m["tflops"] > r.best_tflops):
            r.best_tflops, r.best_program = m["tflops"], info["program"]
        frac = m["frac_anchor"] if m and m["ok"] and info["failure"] is None else 0.0
        r.best_frac_anchor = max(r.best_frac_anchor, info["best_frac_anchor"], frac)
        r.trace.append([r.env_steps, r.best_frac_anchor])
        r.step_seconds.append(round(time.perf_counter() - self._t0, 3))
        self._final(info)
        r.step_tflops.append(r.final_tflops)
        # `submit()`, or the implicit submit of the step that reached the env's step limit
        # (it paid the submit term; the episode ended on that program)
        if info["action"] == "submit()" or info.get("submitted"):
            r.submitted = True
