"""Leaderboard submissions: a folder of records that anyone can replay.

    my-submission/
      results.jsonl   lines written by `argus bench` for one agent
      agent.yaml      name, description, authors, suite, agent module and its args
      README.md       how the agent works and how to reproduce the records
      suite.yaml      optional: the suite, when it is not one of configs/bench

A submission is data from someone else, so nothing in it is run, imported or followed
out of the folder: the three files must be regular files in it (no links), `suite` is a
name in `configs/bench` or a YAML file inside the folder, and no string of `args` or of
a line's `agent_args` names a path outside it (absolute, `~`, `..`, or through a link).
The agent module is never imported.

`argus leaderboard --check DIR` checks, in order: the files; `agent.yaml`; every line as
data (`schema.check_line`: known keys and types, a registered env id compared as a
string); every line against the suite (the submission's agent name, the suite's budget,
measure, hardware, mode and reward, no more actions than the budget, an episode of the
suite on its track, each episode once, every episode's actions recorded: a record of an
agent that resets carries `earlier_actions`; in table mode, played against the GPU tables
as they are now, `hashes.table_rows`: a replay reads the tables a line names, so a line
that could name older ones would choose its own prices) and the suite covered. Only a line that breaks
none of these is replayed (`validate.py`), and the submission is accepted when every
line replays without a divergence. The records it returns are *board lines*: rebuilt
from the replays, so every figure a leaderboard shows is the replay's.
`new_submission(DIR, results)` starts a folder from the templates in
`templates/submission/`.
"""

from __future__ import annotations

import re
import shutil
from dataclasses import asdict, dataclass
from pathlib import Path, PurePosixPath, PureWindowsPath

from . import results as R
from .leaderboard import counted
from .schema import NAME, check_line, config_names, recorded_actions, short

TEMPLATES = Path(__file__).parent / "templates" / "submission"
FILES = ("results.jsonl", "agent.yaml", "README.md")
MAX_BYTES = 64 << 20                               # per file of a submission
REQUIRED = ("name", "description", "authors", "suite")
META = {"name": str, "description": str, "authors": list, "url": str, "suite": str,
        "agent": str, "args": dict}                # agent.yaml: key -> type
PLACEHOLDER = re.compile(r"<[A-Z][A-Z ,:'.\n]+>")   # "<AGENT NAME>" and the like, from the templates


@dataclass
class Problem:
    """One reason a submission is not accepted."""

    file: str
    line: int | None
    message: str
    field: str = ""      # the field at fault (a line's or agent.yaml's); "": the file itself

    def __str__(self) -> str:
        return f"{self.file}{f':{self.line}' if self.line else ''}: {self.message}"

    def to_dict(self) -> dict:
        return asdict(self)


def new_submission(folder: str | Path, results: str | Path | None = None) -> Path:
    """A submission folder from the templates (with a results file copied in)."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    for name in ("agent.yaml", "README.md"):
        if not (folder / name).exists():
            shutil.copy(TEMPLATES / name, folder / name)
    if results is not None:
        shutil.copy(results, folder / "results.jsonl")
    return folder


# ------------------------------------------------------------------ the folder
def inside(folder: Path, path: str) -> Path | None:
    """`folder / path` when it stays in the folder (relative, no `..`, no link out)."""
    if path.startswith(("/", "\\", "~")) or PureWindowsPath(path).drive:
        return None
    pure = PurePosixPath(path.replace("\\", "/"))
    if ".." in pure.parts:
        return None
    try:
        target = (folder / pure).resolve()
        return folder / pure if target.is_relative_to(folder.resolve()) else None
    except (OSError, RuntimeError):   # a link loop
        return None


def escaping(folder: Path, value) -> list[str]:
    """The strings in `value` (nested) that look like paths and lead out of `folder`."""
    if isinstance(value, dict):
        return [s for v in value.values() for s in escaping(folder, v)]
    if isinstance(value, list):
        return [s for v in value for s in escaping(folder, v)]
    if not isinstance(value, str) or not re.search(r"[/\\]|^~|^\.\.$", value):
        return []
    return [] if inside(folder, value) is not None else [value]


def _regular(folder: Path, name: str) -> str | None:
    """Why `folder/name` is not a plain file of the folder (None: it is)."""
    path = folder / name
    if not path.exists() and not path.is_symlink():
        return "missing (see argus_env/bench/templates/submission/)"
    if path.is_symlink() or not path.is_file() or inside(folder, name) is None:
        return "must be a regular file in the folder, not a link or a folder"
    if path.stat().st_size > MAX_BYTES:
        return f"larger than {MAX_BYTES >> 20} MiB"
    return None


def _meta(folder: Path, problems: list) -> dict:
    import yaml
    try:
        meta = yaml.safe_load((folder / "agent.yaml").read_text()) or {}
    except (yaml.YAMLError, UnicodeDecodeError) as e:
        problems.append(Problem("agent.yaml", None, f"not YAML: {e}"))
        return {}
    if not isinstance(meta, dict):
        problems.append(Problem("agent.yaml", None, "must be a mapping"))
        return {}
    for key in sorted(map(str, set(meta) - set(META))):
        problems.append(Problem("agent.yaml", None, f"unknown key {key!r}; known: "
                                f"{', '.join(META)}", key))
    for key, kind in META.items():
        if key in meta and not isinstance(meta[key], kind):
            problems.append(Problem("agent.yaml", None, f"{key} must be a {kind.__name__}", key))
    for key in REQUIRED:
        if not meta.get(key):
            problems.append(Problem("agent.yaml", None, f"missing {key!r}", key))
    if isinstance(meta.get("name"), str) and meta["name"] and not NAME.fullmatch(meta["name"]):
        problems.append(Problem("agent.yaml", None, f"name {meta['name']!r} must match "
                                f"{NAME.pattern}", "name"))
    for s in escaping(folder, meta.get("args")):
        problems.append(Problem("agent.yaml", None, f"args names a path outside the "
                                f"submission folder: {s!r}", "args"))
    for name in ("agent.yaml", "README.md"):
        left = PLACEHOLDER.findall((folder / name).read_text(errors="replace"))
        if left:
            left = sorted({" ".join(x.split()) for x in left})
            problems.append(Problem(name, None, f"template placeholders left: {', '.join(left)}"))
    return meta if not any(p.field in ("name", "suite") for p in problems) else {}


def _suite(folder: Path, meta: dict, problems: list):
    """The suite `agent.yaml` names: one of configs/bench, or a YAML file in the folder."""
    from .config import load_config
    name = meta.get("suite")
    if not isinstance(name, str) or not name:
        return None
    ours = bool(NAME.fullmatch(name)) and name in config_names("bench")
    if ours:
        path = name
    else:
        path = inside(folder, name)
        why = None if path is None else _regular(folder, name)
        if path is None or why or path.suffix not in (".yaml", ".yml"):
            problems.append(Problem("agent.yaml", None, f"suite {name!r}: not one of "
                                    f"{', '.join(config_names('bench'))} nor a YAML file in "
                                    "the submission folder", "suite"))
            return None
    try:
        suite = load_config(path)
        suite.agents = {meta["name"]: {}}
        episodes = suite.episodes()
    except Exception as e:  # noqa: BLE001 - any flaw of a submitted suite is a problem
        problems.append(Problem("agent.yaml", None, f"suite {name!r}: {type(e).__name__}: {e}",
                                "suite"))
        return None
    if suite.tables and not ours:
        # a suite of the submitter's own that names the table rows it is played against
        # would choose its prices (with no rows, the cost model prices everything)
        problems.append(Problem("agent.yaml", None, f"suite {name!r} pins the GPU tables "
                                "(tables:); only the project's own suites may: remove it, "
                                "and play against the tables as they are", "suite"))
        return None
    from ..measure.analytic import DEFAULT_ANCHOR
    if not ours and suite.measure in ("model", "table") and suite.model_anchor != DEFAULT_ANCHOR:
        # 0.9 x the roofline undervalues the library at bandwidth-bound shapes (every
        # program at the roofline scores 1.111): a suite of the submitter's own may not
        # choose it; the project's suites name it only for the boards played so
        problems.append(Problem("agent.yaml", None, f"suite {name!r} sets model prices "
                                f"against the roofline (model_anchor: {suite.model_anchor}); "
                                f"only the project's own suites may: play with "
                                f"model_anchor: {DEFAULT_ANCHOR}", "suite"))
        return None
    return suite, episodes


# ------------------------------------------------------------------ the lines
def _line_rules(line: dict, meta: dict, suite, tracks: dict, folder: Path,
                memo: dict | None = None) -> list[Problem]:
    """A schema-valid line against the submission's name and suite."""
    def bad(message: str, field: str) -> Problem:
        return Problem("results.jsonl", None, message, field)
    out = []
    if line["agent"] != meta["name"]:
        out.append(bad(f"agent {line['agent']!r} is not the submission's name "
                       f"{meta['name']!r}", "agent"))
    for key, want in suite.fingerprint(line.get("env_id")).items():
        got = R.line_setting(line, key)
        if got != want:
            out.append(bad(f"{key} {got!r} differs from suite {suite.name!r}: {want!r}", key))
    if line["suite"] != suite.name:
        out.append(bad(f"suite {line['suite']!r} is not {suite.name!r}", "suite"))
    axis = suite.budget_axis()
    if line["budget"] not in axis:
        out.append(bad(f"budget {line['budget']!r} is not one of suite {suite.name!r}'s: "
                       f"{', '.join(map(str, axis))}", "budget"))
    limit = line["budget"] if line["budget"] in axis else max(axis)
    if recorded_actions(line) > limit:
        out.append(bad(f"{counted(recorded_actions(line), 'action')}, over the budget of "
                       f"{limit}", "actions"))
    if line["env_steps"] > recorded_actions(line):
        out.append(bad(f"{counted(line['env_steps'], 'env step')} but actions for "
                       f"{recorded_actions(line)}: a record of several episodes must carry "
                       "the earlier ones' (earlier_actions); play it again with this version",
                       "earlier_actions"))
    track = tracks.get((line["env_id"], line["shape"]))
    if track is None or line["seed"] not in suite.seeds:
        out.append(bad(f"episode {line['env_id']} {line['shape']} seed {line['seed']} is not "
                       f"one of suite {suite.name!r}", "shape"))
    elif line["track"] != track:
        out.append(bad(f"track {line['track']!r}: {line['shape']} is on the {track} track", "track"))
    out += [bad(f"agent_args names a path outside the submission folder: {s!r}", "agent_args")
            for s in escaping(folder, line["agent_args"])]
    if suite.measure == "table" and memo is not None:
        out += [bad(why, "hashes") for why in
                [stale_tables(line, memo, suite.tables_for(line["env_id"]))] if why]
    if suite.measure in ("model", "table") and memo is not None:
        out += [bad(why, "hashes") for why in [stale_fit(line, memo)] if why]
    return out


def current_pricing(line: dict, memo: dict) -> dict:
    """What a line of the task, hardware, measure and estimator would name now: the rows
    of the task's GPU tables (`table_rows`, table mode) and the correction fit
    (`correction`), from one backend of the line's measure, as `results.content_hashes`
    records them."""
    from . import results as R
    estimator = R.line_setting(line, "estimator")
    key = (line["task"], line["hardware"], line["measure"], estimator)
    if key not in memo:
        if line["measure"] not in ("model", "table"):
            raise ValueError(f"a {line['measure']!r} line is not priced from tables or fits")
        from ..measure.local import make_local_backend
        from ..task import get_task
        task = get_task(line["task"])
        backend = make_local_backend(line["measure"], line["hardware"], estimator=estimator)
        memo[key] = {"table_rows": backend.snapshot_of(task)
                     if line["measure"] == "table" else None,
                     "correction": backend.fit_of(task)}
    return memo[key]


def stale_fit(line: dict, memo: dict) -> str | None:
    """Why a line was not priced with the cost model's correction as it is now (None: it
    was). A replay prices with the fit a line names (`hashes.correction`), so, as with
    the tables, a submission could otherwise pick an older fit it games better."""
    hashes = line.get("hashes") or {}
    try:
        now = current_pricing(line, memo)["correction"]
    except (KeyError, ValueError) as e:
        return f"the {line['task']} correction for {line['hardware']} cannot be read: {e}"
    claimed = hashes.get("correction")
    if "correction" not in hashes and now is not None:
        return ("hashes.correction is missing: a line names the fit of the cost model's "
                f"correction it was priced with; play it again with this version (now: {now})")
    if claimed != now:
        return (f"priced with correction fit {claimed}, not the current {now}: a submission "
                "is priced as the environment prices now; play it again with this version")
    return None


def stale_tables(line: dict, memo: dict, pinned: str | None = None) -> str | None:
    """Why a table-mode line was not played against the tables as they are now (None:
    it was). A replay reads the tables the line names (`hashes.table_rows`), so a
    submission that could name its own would choose its prices: with zero rows every
    program is priced by the cost model, which is what an agent gaming the model wants.
    Committed boards may be older than the tables; a new submission may not, unless it
    is played in one of the project's suites that pins the rows its board was played
    against (`pinned`, `BenchConfig.tables`): then those, the rows every line of that
    board is priced by."""
    from ..measure.analytic import parse_snapshot
    claimed = (line.get("hashes") or {}).get("table_rows")
    try:
        now = pinned if pinned is not None else current_pricing(line, memo)["table_rows"]
    except (KeyError, ValueError) as e:
        return f"the {line['task']} tables of {line['hardware']} cannot be read: {e}"
    if claimed is None:
        return ("hashes.table_rows is missing: a table-mode line names the tables it was "
                f"played against; play it again with this version (tables now: {now})")
    try:
        same = parse_snapshot(claimed) == parse_snapshot(now)
    except ValueError as e:
        return f"hashes.table_rows: {e}"
    if not same:
        return (f"played against tables of {claimed}, not the current {now}: a submission "
                "is played against the tables as they are; play it again with this version")
    return None


def _rules(lines: list, meta: dict, folder: Path, problems: list) -> set[int]:
    """Check every line before any replay; the numbers of the lines that break a rule."""
    got = _suite(folder, meta, problems) if meta else None
    if got is None:
        problems.append(Problem("results.jsonl", None, "no line is replayed: agent.yaml must "
                                "name the agent and its suite first"))
        return set(range(1, len(lines) + 1))
    suite, episodes = got
    tracks = {(ep.env_id, ep.shape): ep.track for ep in episodes}
    broken, have, memo = set(), {}, {}
    for n, line in enumerate(lines, 1):
        mine = [Problem("results.jsonl", None, f"{d.field}: expected {d.expected}, got "
                        f"{short(d.got)}", d.field) for d in check_line(line, extras=True)]
        if not mine:
            mine = _line_rules(line, meta, suite, tracks, folder, memo)
            key = (line["env_id"], line["shape"], line["seed"], line["budget"])
            if key in have:
                mine.append(Problem("results.jsonl", None, f"episode {key} already on line "
                                    f"{have[key]}", "seed"))
            have.setdefault(key, n)
        for p in mine:
            p.line = n
        problems += mine
        broken |= {n} if mine else set()
    for ep in episodes:
        if (ep.env_id, ep.shape, ep.seed, ep.budget) not in have:
            problems.append(Problem("results.jsonl", None, f"missing episode: {ep.env_id} "
                                    f"{ep.track} track, shape {ep.shape}, seed {ep.seed}, "
                                    f"budget {ep.budget}"))
    return broken


def check_submission(folder: str | Path, progress=None) -> tuple[list[Problem], list[dict]]:
    """(problems, the board lines of the records that replay); no problems means the
    submission is accepted. Never raises for anything in the folder."""
    from .validate import Validator
    folder = Path(folder)
    if not folder.is_dir():
        return [Problem(str(folder), None, "no such submission folder")], []
    problems = [Problem(name, None, why) for name in FILES
                if (why := _regular(folder, name)) is not None]
    if problems:
        return problems, []
    meta = _meta(folder, problems)
    try:
        lines = R.read_lines(folder / "results.jsonl")
    except (ValueError, UnicodeDecodeError) as e:
        return problems + [Problem("results.jsonl", None, str(e))], []
    if not lines:
        return problems + [Problem("results.jsonl", None, "no records")], []
    broken = _rules(lines, meta, folder, problems)
    validator, board = Validator(), []
    for n, line in enumerate(lines, 1):
        if n in broken:
            continue
        divergences, accepted = validator.check(line)
        problems += [Problem("results.jsonl", n, f"replay diverges: {d}", d.field)
                     for d in divergences]
        board += [accepted] if accepted else []
        if progress:
            progress(n, len(lines))
    return problems, board
