"""The results file: one JSON line per episode, and what each line says about its origin.

A line is an `EpisodeRecord` (actions, rewards, versions, best and final programs, trace)
plus where it came from:

    task_uri                argus://gemm/v0/decode-16
    track, budget, reward   the suite's settings for this episode
    agent_args              the agent's full `Args`
    hashes                  sha256 of the DSL/IR, checker, lowering, env, task and
                            measurement sources (with the hardware profile and the cost
                            model's calibration), of the table CSV and of the reward config
    hardware_profile        the profile the measure mode used
    submitted_program_hash  structural hash of the submitted program (None: no submit)
    final_measured_by       where the final program's figure comes from: "table" (recorded
                            on the GPU), "model" (a table miss: the cost model), "gpu", None

Lines are appended with one `write` of the whole line, then flushed and fsynced, so a
crash loses at most the episode in flight; a torn last line is cut off on the next run.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import re
from functools import lru_cache
from pathlib import Path

from ..envs.record import EpisodeRecord

ROOT = Path(__file__).resolve().parents[2]
RECORD_FIELDS = {f.name for f in dataclasses.fields(EpisodeRecord)} - {"return_"} | {"return"}
#: the only fields two identical runs may differ in
TIMING_FIELDS = ("created", "seconds", "step_seconds")
SOURCE_TREES = {                          # hash name -> source files that decide a replay
    "dsl": ("argus_env/dsl", "argus_env/ir"),
    "check": ("argus_env/check",),
    "lower": ("argus_env/lower",),
    "env": ("argus_env/envs", "argus_env/space.py", "argus_env/task.py", "reward"),
}


# ------------------------------------------------------------------ provenance
def shown(path) -> str:
    """`path` as a record or a message names it: relative to the checkout where it lies
    inside it, else absolute."""
    path = Path(path).resolve()
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)


def task_uri(env_id: str, task: str, shape: str, sizes: dict) -> str:
    """`argus://<task>/<version>/<shape>`; a custom shape is named by its sizes."""
    m = re.search(r"-(v\d+)$", env_id)
    where = shape if shape != "custom" else ",".join(f"{k}={v}" for k, v in sizes.items())
    return f"argus://{task}/{m.group(1) if m else 'v0'}/{where}"


def _sha(paths) -> str:
    h = hashlib.sha256()
    for p in sorted(paths):
        h.update(str(p.relative_to(ROOT)).encode() + b"\0" + p.read_bytes() + b"\0")
    return h.hexdigest()


def _files(*where: str, suffixes=(".py",)) -> list[Path]:
    out = []
    for w in where:
        p = ROOT / w
        out += [p] if p.is_file() else [f for f in p.rglob("*") if f.suffix in suffixes
                                        and "__pycache__" not in f.parts]
    return out


@lru_cache(maxsize=None)
def source_hashes(task: str, hardware: str) -> dict:
    """sha256 of each source tree that decides what an episode replays to."""
    out = {name: _sha(_files(*trees)) for name, trees in SOURCE_TREES.items()}
    out["task"] = _sha(_files(f"tasks/{task}", suffixes=(".py", ".json")))
    calibration = ROOT / "configs" / "calibration" / f"{hardware}.json"
    out["measure"] = _sha(_files("argus_env/measure", f"configs/hardware/{hardware}.yaml")
                          + ([calibration] if calibration.exists() else []))
    return out


def table_path(env) -> Path | None:
    """The measurement table CSV a table-mode env reads (None in other modes)."""
    backend = env.unwrapped.evaluator.backend
    if not hasattr(backend, "table"):
        return None
    path = backend.table(env.unwrapped.task)["path"]
    return Path(path) if path and Path(path).exists() else None


def reward_hash(reward) -> str:
    """sha256 of the reward configuration as data (a name, a YAML path or a mapping)."""
    import yaml

    from argus_env.reward.base import CONFIG_DIR
    if isinstance(reward, dict):
        data = reward
    else:
        path = Path(reward) if Path(reward).suffix else CONFIG_DIR / f"{reward}.yaml"
        data = yaml.safe_load(path.read_text())
    return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()


def content_hashes(env, reward="default") -> dict:
    core = env.unwrapped
    out = dict(source_hashes(core.task.name, getattr(core.profile, "name", "h200")))
    table = table_path(env)
    out["table"] = hashlib.sha256(table.read_bytes()).hexdigest() if table else None
    out["table_file"] = str(table.relative_to(ROOT)) if table and table.is_relative_to(ROOT) \
        else (str(table) if table else None)
    backend = core.evaluator.backend
    # the rows of every table file the episode could read: a replay reads the tables as
    # they were then (`TableBackend(snapshot=)`), after later recordings appended rows
    out["table_rows"] = backend.snapshot_of(core.task) if table else None
    # the fit of the cost model's correction the episode priced with (None: the analytic
    # model alone): kept in tasks/<task>/corrections/, so a refit changes no replay
    out["correction"] = backend.fit_of(core.task) if hasattr(backend, "fit_of") else None
    out["reward"] = reward_hash(reward)
    return out


def hardware_profile(env) -> dict:
    profile = env.unwrapped.profile
    if profile is None:
        return {}
    d = dataclasses.asdict(profile)
    d.pop("source", None)
    return d


def measured_by(env, record) -> str | None:
    """The backend behind the final program's throughput; a table miss is "model"."""
    if not record.final_program or record.final_tflops is None:
        return None
    from ..dsl.program import Program
    ev = env.unwrapped.evaluator.evaluate(Program.from_text(record.final_program), dict(record.sizes))
    m = ev.measurement
    return None if m is None else ("model" if m.details.get("table_miss") else m.backend)


def line_fields(env, record: EpisodeRecord, *, track: str, budget: int | None, reward,
                suite: str | None, agent_args: dict) -> dict:
    """The fields a results line adds to its record, from the env that played it (the
    bench's run, or a validator's replay, which recomputes them)."""
    submitted = program_hash(record.final_program) if record.submitted else None
    return dict(task_uri=task_uri(record.env_id, record.task, record.shape, record.sizes),
                track=track, budget=budget, reward=reward, suite=suite, agent_args=agent_args,
                hashes=content_hashes(env, reward), hardware_profile=hardware_profile(env),
                submitted_program_hash=submitted, final_measured_by=measured_by(env, record))


def program_hash(text: str) -> str | None:
    from ..dsl.program import Program
    return Program.from_text(text).hash if text else None


# ------------------------------------------------------------------ lines
def to_line(record: EpisodeRecord, **extra) -> dict:
    d = json.loads(record.to_json())
    d.update(extra)
    return d


def record_of(line: dict) -> EpisodeRecord:
    """The `EpisodeRecord` inside a results line (or an `argus run` record)."""
    d = {k: v for k, v in line.items() if k in RECORD_FIELDS}
    d["return_"] = d.pop("return", 0.0)
    return EpisodeRecord(**d)


def strip_timings(line: dict) -> dict:
    """The line without the fields that differ between identical runs."""
    return {k: v for k, v in line.items() if k not in TIMING_FIELDS}


def line_setting(line: dict, key: str):
    """A setting of the run that made `line`: its field, and for `estimator` (or
    `model_anchor`) on a model- or table-priced line that predates the field, the analytic
    model (the roofline anchor) it was priced by."""
    if key == "estimator" and "estimator" not in line:
        from ..measure.correction import LEGACY_ESTIMATOR
        return LEGACY_ESTIMATOR if line.get("measure") in ("model", "table") else None
    if key == "catalog" and "catalog" not in line:
        return LEGACY_CATALOG
    if key == "model_anchor" and "model_anchor" not in line:
        from ..measure.analytic import LEGACY_ANCHOR
        return LEGACY_ANCHOR if line.get("measure") in ("model", "table") else None
    if key == "table_rows":   # the GPU table rows a table-mode line was priced from
        return (line.get("hashes") or {}).get("table_rows")
    return line.get(key)


#: the catalog version of the lines written before catalogs had versions
LEGACY_CATALOG = 1


def line_key(line: dict) -> tuple:
    """(agent, env id, shape, seed, budget): one episode of a suite (`Episode.key`)."""
    return (line["agent"], line["env_id"], line["shape"], int(line["seed"]),
            int(line.get("budget") or 0))


def read_lines(path: Path) -> list[dict]:
    """Every complete line of a results file (a torn last line is ignored)."""
    path = Path(path)
    if not path.exists():
        return []
    out = []
    for n, text in enumerate(path.read_text().splitlines(keepends=True), 1):
        if not text.endswith("\n"):
            break   # written by a run that died mid-line
        if text.strip():
            try:
                out.append(json.loads(text))
            except (json.JSONDecodeError, RecursionError) as e:   # nested past the parser
                raise ValueError(f"{path}:{n}: not a JSON line: {type(e).__name__}: {e}") from None
    return out


def read_records(paths) -> list[dict]:
    """Lines of several results files, or `argus run` JSON records."""
    out = []
    for p in map(Path, paths):
        if not p.exists():
            raise FileNotFoundError(f"no such results file: {p}")
        if p.suffix == ".json":
            out.append(json.loads(p.read_text()))
        else:
            out.extend(read_lines(p))
    return out


def repair(path: Path) -> bool:
    """Cut a torn last line off; True if there was one."""
    path = Path(path)
    if not path.exists():
        return False
    data = path.read_bytes()
    if not data or data.endswith(b"\n"):
        return False
    with path.open("r+b") as f:
        f.truncate(data.rfind(b"\n") + 1)
        f.flush()
        os.fsync(f.fileno())
    return True


def append_line(path: Path, line: dict) -> None:
    """Append one line with a single write, then flush and fsync."""
    data = (json.dumps(line, sort_keys=False) + "\n").encode()
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        written = os.write(fd, data)
        if written != len(data):
            raise OSError(f"{path}: short write ({written} of {len(data)} bytes)")
        os.fsync(fd)
    finally:
        os.close(fd)



# ------------------------------------------------------------------ live GPU figures
# (in live.py, which imports no env: the GPU recorder writes them where no env runs)
from .live import (LIVE_GLOB, LIVE_STATUSES, LiveFigures, live_beside, live_frac,  # noqa: E402,F401
                   live_key, read_live, write_live)
