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
TIMING_FIELDS = ("created", "seconds")   # the only fields two identical runs may differ in
SOURCE_TREES = {                          # hash name -> source files that decide a replay
    "dsl": ("argus_env/dsl", "argus_env/ir"),
    "check": ("argus_env/check",),
    "lower": ("argus_env/lower",),
    "env": ("argus_env/envs", "argus_env/space.py", "argus_env/task.py", "reward"),
}


# ------------------------------------------------------------------ provenance
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


def line_key(line: dict) -> tuple:
    return (line["agent"], line["env_id"], line["shape"], int(line["seed"]))


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
#: files of live figures a board joins: `live_<hardware>.json` beside the results file
LIVE_GLOB = "live_*.json"
LIVE_STATUSES = ("ok", "compile", "mismatch", "impossible", "timeout", "fault")


@dataclasses.dataclass
class LiveFigures:
    """Live GPU measurements of submitted programs, joined to results lines by (hardware,
    env id, shape, submitted program hash); the lines themselves are not changed.

    A figure is the submitted kernel's fraction of the library anchor timed in the same
    run (`frac_anchor`); a program that failed on the GPU (did not compile, gave wrong
    numbers, ran faster than physics allows, hung, crashed) counts as 0."""

    figures: dict = dataclasses.field(default_factory=dict)   # key -> figure
    sources: list = dataclasses.field(default_factory=list)   # {"file", "provenance"} per file

    def of(self, line: dict) -> dict | None:
        """The live figure of a line's submitted program (None: not measured)."""
        return self.figures.get(live_key(line["hardware"], line["env_id"], line["shape"],
                                         line.get("submitted_program_hash")))

    def __len__(self) -> int:
        return len(self.figures)


def live_key(hardware: str, env_id: str, shape: str, program_hash: str | None) -> tuple:
    return (hardware, env_id, shape, program_hash)


def live_frac(figure: dict) -> float:
    """What a live figure counts for on a board: its fraction of the library, 0 for a
    program that failed on the GPU."""
    return float(figure["frac_anchor"]) if figure["ok"] else 0.0


def _live_problem(fig, n: int) -> str | None:
    if type(fig) is not dict:
        return f"figure {n} is not a mapping"
    for key in ("env_id", "shape", "program_hash", "status"):
        if type(fig.get(key)) is not str:
            return f"figure {n}: {key!r} must be a string, got {fig.get(key)!r}"
    if type(fig.get("ok")) is not bool:
        return f"figure {n}: 'ok' must be true or false, got {fig.get('ok')!r}"
    if fig["status"] not in LIVE_STATUSES or fig["ok"] != (fig["status"] == "ok"):
        return f"figure {n}: status {fig['status']!r} with ok={fig['ok']} (statuses: {LIVE_STATUSES})"
    frac = fig.get("frac_anchor")
    if fig["ok"] and not (type(frac) in (int, float) and frac == frac and 0 <= frac < float("inf")):
        return f"figure {n}: a measured program needs a finite frac_anchor >= 0, got {frac!r}"
    return None


def read_live(path: Path, into: LiveFigures | None = None) -> LiveFigures:
    """Live figures from one file (written by benchmarks/record_programs.py); raises
    ValueError for a file that is not one, or that gives one program two figures."""
    path = Path(path)
    out = into if into is not None else LiveFigures()
    try:
        data = json.loads(path.read_text())
    except json.JSONDecodeError as e:
        raise ValueError(f"{path}: not JSON: {e}") from None
    if type(data) is not dict or type(data.get("figures")) is not list \
            or type(data.get("hardware")) is not str:
        raise ValueError(f"{path}: a live-figures file is a mapping with 'hardware' (a name) "
                         "and 'figures' (a list)")
    for n, fig in enumerate(data["figures"]):
        problem = _live_problem(fig, n)
        if problem:
            raise ValueError(f"{path}: {problem}")
        key = live_key(data["hardware"], fig["env_id"], fig["shape"], fig["program_hash"])
        if key in out.figures and out.figures[key] != fig:
            raise ValueError(f"{path}: two figures for {key}")
        out.figures[key] = fig
    out.sources.append({"file": str(path.relative_to(ROOT)) if path.resolve().is_relative_to(ROOT)
                        else str(path), "hardware": data["hardware"],
                        "provenance": data.get("provenance") or {}})
    return out


def live_beside(paths) -> LiveFigures:
    """The live figures in the folders of the results files `paths` (`live_*.json`);
    none found: an empty set, so every line is unverified."""
    out = LiveFigures()
    for folder in dict.fromkeys(Path(p).resolve().parent for p in paths):
        for f in sorted(folder.glob(LIVE_GLOB)):
            read_live(f, out)
    return out


def write_live(path: Path, hardware: str, figures: list[dict], provenance: dict,
               lines: list[dict] | None = None) -> Path:
    """Write a live-figures file (`read_live` reads it back): `figures`, one per (env id,
    shape, program hash), each with `ok`, `status` and, when ok, `frac_anchor`; `lines`, an
    optional per-episode view (recorded beside live) that no board reads."""
    doc = {"hardware": hardware, "provenance": provenance, "figures": figures}
    if lines is not None:
        doc["lines"] = lines
    checked = LiveFigures()
    for n, fig in enumerate(figures):
        problem = _live_problem(fig, n)
        if problem:
            raise ValueError(problem)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc, indent=1) + "\n")
    read_live(path, checked)   # what was written reads back
    return path
