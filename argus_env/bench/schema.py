"""What a results line may hold, checked before anything is made from it.

A results line (or an `argus run` record) names an env id, a shape, a measurement backend,
a hardware profile and a reward, and every one of them is later handed to code that can
import modules or read files: `gym.make` imports `module` for an id `module:EnvId`, a
reward or hardware name with a suffix or a slash is read as a path. So a line is checked
here, as data, before any env is made: every key known, every value of its type, the env
id one of `ENV_IDS` compared as a plain string, the task that id's, the shape a name the
task knows (or "custom" with integer sizes), the hardware and reward plain names of the
files in `configs/`, the per-step lists as long as the episode, and the env steps as many
as the actions of every episode when the line carries the earlier ones. `check_line` returns
the problems as `Divergence`s (never raises); a line with any is not replayed.
"""

from __future__ import annotations

import math
import re
from dataclasses import asdict, dataclass
from functools import lru_cache
from typing import Any, Callable

from .leaderboard import counted
from ..measure.correction import ESTIMATORS
from ..measure.analytic import ANCHORS
from .results import RECORD_FIELDS

NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.+-]{0,63}")   # agent, hardware and reward names
MODES = ("discrete", "text")
MEASURES = ("table", "model", "gpu")
TRACKS = ("train", "test", "all")
#: what the bench adds to an episode record (`results.line_fields`)
LINE_EXTRAS = ("task_uri", "track", "budget", "reward", "suite", "agent_args", "hashes",
               "hardware_profile", "submitted_program_hash", "final_measured_by")
PER_STEP = ("actions", "action_labels", "rewards", "step_invariants", "step_tflops")
#: fields a line may leave out: `earlier_actions` is written only for agents that reset,
#: `estimator` only where the model priced, `step_seconds` by recorders that time their
#: steps, `catalog` since catalogs have versions, `model_anchor` where the model priced
#: (lines written before any of them existed lack it)
OPTIONAL = ("earlier_actions", "estimator", "step_seconds", "catalog", "model_anchor")


@dataclass
class Divergence:
    """One way a record fails validation: a value outside the schema (`expected` says what
    is allowed), or a replay that differs from the record."""

    step: int | None     # 1-based step of the replayed episode; None: the episode as a whole
    field: str           # "env_id", "reward", "action", "final_program", ...
    expected: Any        # what the record says (a schema error: what is allowed)
    got: Any             # what the replay gives (a schema error: the value found)

    def __str__(self) -> str:
        where = f"step {self.step}" if self.step is not None else "episode"
        return f"{where}: {self.field}: expected {short(self.expected)}, got {short(self.got)}"

    def to_dict(self) -> dict:
        return asdict(self)


def short(v, n: int = 120) -> str:
    """A value as `repr`, cut to `n` characters."""
    s = repr(v)
    return s if len(s) <= n else s[: n - 3] + "..."


# ------------------------------------------------------------------ value types
def _int(v) -> bool:
    return type(v) is int and v >= 0


def _num(v) -> bool:
    return type(v) in (int, float) and math.isfinite(v)


def _opt_num(v) -> bool:
    return v is None or _num(v)


def _str(v) -> bool:
    return type(v) is str


def _opt_str(v) -> bool:
    return v is None or _str(v)


def _list_of(ok: Callable) -> Callable:
    return lambda v: type(v) is list and all(ok(x) for x in v)


def _map_of(ok: Callable) -> Callable:
    return lambda v: type(v) is dict and all(_str(k) and ok(x) for k, x in v.items())


def _json(v, depth: int = 0) -> bool:
    """Plain JSON data, nested at most 16 deep."""
    if depth > 16:
        return False
    if v is None or type(v) in (bool, int, str) or (type(v) is float and math.isfinite(v)):
        return True
    if type(v) is list:
        return all(_json(x, depth + 1) for x in v)
    return type(v) is dict and all(_str(k) and _json(x, depth + 1) for k, x in v.items())


def _pair(v) -> bool:
    return type(v) is list and len(v) == 2 and _int(v[0]) and _num(v[1])


TYPES: dict[str, tuple[str, Callable]] = {
    "task": ("a task name", _str), "env_id": ("a registered env id", _str),
    "shape": ("a shape name", _str), "sizes": ("sizes {dim: int}", _map_of(_int)),
    "agent": (f"an agent name matching {NAME.pattern}", lambda v: _str(v) and NAME.fullmatch(v)),
    "seed": ("an integer >= 0", _int), "mode": (f"one of {MODES}", lambda v: v in MODES),
    "measure": (f"one of {MEASURES}", lambda v: v in MEASURES),
    "hardware": ("a hardware profile name", lambda v: _str(v) and NAME.fullmatch(v)),
    "actions": ("a list of actions", lambda v: type(v) is list),
    "action_labels": ("a list of strings", _list_of(_str)),
    "rewards": ("a list of finite numbers", _list_of(_num)),
    "return": ("a finite number", _num), "steps": ("an integer >= 0", _int),
    "submitted": ("true or false", lambda v: type(v) is bool),
    "baseline_tflops": ("a finite number or null", _opt_num),
    "best_tflops": ("a finite number or null", _opt_num),
    "best_frac_anchor": ("a finite number", _num), "best_program": ("a string", _str),
    "violations_met": ("{invariant: count}", _map_of(_int)),
    "violations_fixed": ("an integer >= 0", _int), "invalid_actions": ("an integer >= 0", _int),
    "seconds": ("a finite number >= 0", lambda v: _num(v) and v >= 0),
    "env_steps": ("an integer >= 0", _int),
    "trace": ("a list of [env step, fraction] pairs", _list_of(_pair)),
    "step_seconds": ("a list of seconds >= 0, one per env step",
                     _list_of(lambda x: _num(x) and x >= 0)),
    "transcript": ("a list of JSON mappings", _list_of(lambda x: type(x) is dict and _json(x))),
    "earlier_actions": ("a list of lists of actions", _list_of(lambda x: type(x) is list)),
    "split": (f"one of {TRACKS} or ''", lambda v: v in TRACKS + ("",)),
    "final_program": ("a string", _str), "final_tflops": ("a finite number or null", _opt_num),
    "final_frac_anchor": ("a finite number", _num),
    "step_invariants": ("a list of lists of invariant names", _list_of(_list_of(_str))),
    "step_tflops": ("a list of finite numbers or nulls", _list_of(_opt_num)),
    "versions": ("{package: version or null}", _map_of(_opt_str)),
    "created": ("a timestamp string", _str),
    "task_uri": ("a string", _str), "track": (f"one of {TRACKS}", lambda v: v in TRACKS),
    "budget": ("an integer >= 0", _int),
    "reward": ("a reward config name", lambda v: _str(v) and NAME.fullmatch(v)),
    "suite": ("a suite name", _str), "agent_args": ("a JSON mapping", _map_of(_json)),
    "hashes": ("{name: sha256 or path or null}", _map_of(_opt_str)),
    "hardware_profile": ("a JSON mapping", _map_of(_json)),
    "submitted_program_hash": ("a string or null", _opt_str),
    "final_measured_by": (f"one of {MEASURES} or null", lambda v: v is None or v in MEASURES),
    "estimator": (f"one of {ESTIMATORS}", lambda v: v in ESTIMATORS),
    "catalog": ("a catalog version (an integer >= 1)", lambda v: type(v) is int and v >= 1),
    "model_anchor": (f"one of {ANCHORS}", lambda v: v in ANCHORS),
}
assert set(TYPES) == RECORD_FIELDS | set(LINE_EXTRAS), "every field of a line has a type"


# ------------------------------------------------------------------ what the project knows
def registered_env_ids() -> dict[str, str]:
    """env id -> task name, as the project registers them."""
    from ..envs import ENV_IDS
    return dict(ENV_IDS)


@lru_cache(maxsize=None)
def task_shapes(task: str) -> tuple[str, ...]:
    from ..task import get_task
    return tuple(c.name for c in get_task(task).shape_cases("all"))


@lru_cache(maxsize=None)
def config_names(folder: str) -> tuple[str, ...]:
    """Stems of the YAML files of a `configs/` folder ("hardware", "reward", "bench")."""
    from .results import ROOT
    return tuple(sorted(p.stem for p in (ROOT / "configs" / folder).glob("*.yaml")))


# ------------------------------------------------------------------ the check
def check_line(line: dict, extras: bool = False) -> list[Divergence]:
    """Problems of a results line as data; `extras`: the bench's fields are required too."""
    if type(line) is not dict:
        return [Divergence(None, "line", "a JSON mapping", type(line).__name__)]
    want = set(RECORD_FIELDS) - set(OPTIONAL) | (set(LINE_EXTRAS) if extras else set())
    out = [Divergence(None, k, "a field of a results line", "an unknown field")
           for k in sorted(map(str, set(line) - set(TYPES)))]
    out += [Divergence(None, k, "present", "missing") for k in sorted(want - set(line))]
    for key, (what, ok) in TYPES.items():
        if key in line and not ok(line[key]):
            out.append(Divergence(None, key, what, line[key]))
    if out:
        return out      # the checks below read the fields as typed
    return _known(line) + _consistent(line)


def _known(line: dict) -> list[Divergence]:
    """Names that must be the project's own: compared as strings, nothing made from them."""
    ids = registered_env_ids()
    env_id = line["env_id"]
    if env_id not in ids:
        return [Divergence(None, "env_id", f"one of {sorted(ids)}", env_id)]
    task, out = ids[env_id], []
    if line["task"] != task:
        out.append(Divergence(None, "task", task, line["task"]))
    shapes = task_shapes(task)
    if line["shape"] not in shapes and line["shape"] != "custom":
        out.append(Divergence(None, "shape", f"a shape of task {task!r} or 'custom'", line["shape"]))
    if line["hardware"] not in config_names("hardware"):
        out.append(Divergence(None, "hardware", f"one of {config_names('hardware')}",
                              line["hardware"]))
    if "reward" in line and line["reward"] not in config_names("reward"):
        out.append(Divergence(None, "reward", f"one of {config_names('reward')}", line["reward"]))
    kind = int if line["mode"] == "discrete" else str
    for key in ("actions", "earlier_actions"):
        actions = line["actions"] if key == "actions" else \
            [a for episode in line.get(key, []) for a in episode]
        if not all(type(a) is kind for a in actions):
            out.append(Divergence(None, key, f"{kind.__name__} actions ({line['mode']} mode)",
                                  line[key]))
    return out


def recorded_actions(line: dict) -> int:
    """How many env steps a line's actions replay: every episode's when it carries the
    earlier ones, else the last episode's."""
    return len(line["actions"]) + sum(map(len, line.get("earlier_actions", [])))


def _consistent(line: dict) -> list[Divergence]:
    """Counts and lists that a recorder writes together must agree."""
    out, steps = [], line["steps"]
    lengths = {k: len(line[k]) for k in PER_STEP}
    if set(lengths.values()) != {steps}:
        out.append(Divergence(None, "steps", f"{counted(steps, 'entry', 'entries')} in each of {PER_STEP}", lengths))
    trace, env_steps = line["trace"], line["env_steps"]
    if env_steps < steps:
        out.append(Divergence(None, "env_steps", f"at least steps ({steps})", env_steps))
    elif line.get("earlier_actions") and env_steps != recorded_actions(line):
        out.append(Divergence(None, "env_steps", f"the {recorded_actions(line)} actions of "
                              "its episodes", env_steps))
    if [s for s, _ in trace] != list(range(1, env_steps + 1)):
        out.append(Divergence(None, "trace", f"env steps 1..{env_steps} in order",
                              [s for s, _ in trace]))
    elif any(a[1] > b[1] for a, b in zip(trace, trace[1:])) or \
            (trace and trace[-1][1] != line["best_frac_anchor"]):
        out.append(Divergence(None, "trace", "a best-so-far ending at best_frac_anchor", trace))
    secs = line.get("step_seconds")
    if secs is not None and (len(secs) != env_steps or
                             any(a > b for a, b in zip(secs, secs[1:]))):
        out.append(Divergence(None, "step_seconds", f"{env_steps} non-decreasing times, one "
                              "per env step", secs))
    if "track" in line and line["split"] != line["track"]:
        out.append(Divergence(None, "split", f"the track {line['track']!r}", line["split"]))
    if line["shape"] == "custom" and not line["sizes"]:
        out.append(Divergence(None, "sizes", "the custom shape's sizes", line["sizes"]))
    return out
