"""Leaderboard submissions: a folder of records that anyone can replay.

    my-submission/
      results.jsonl   lines written by `argus bench` for one agent
      agent.yaml      name, description, authors, suite, agent module and its args
      README.md       how the agent works and how to reproduce the records

`argus leaderboard --check DIR` accepts a folder when every file is there and filled in,
every record belongs to the named agent and follows the suite's settings (budget,
measure, hardware, mode, reward) with no more env steps than the budget, the records
cover every (env, shape, seed) of the suite exactly once, and every record replays
without a divergence (`validate.py`). `new_submission(DIR, results)` starts a folder
from the templates in `templates/submission/`.
"""

from __future__ import annotations

import re
import shutil
from dataclasses import asdict, dataclass
from pathlib import Path

from . import results as R

TEMPLATES = Path(__file__).parent / "templates" / "submission"
FILES = ("results.jsonl", "agent.yaml", "README.md")
REQUIRED = ("name", "description", "authors", "suite")
PLACEHOLDER = re.compile(r"<[A-Z][A-Z ,:'.\n]+>")   # "<AGENT NAME>" and the like, from the templates


@dataclass
class Problem:
    """One reason a submission is not accepted."""

    file: str
    line: int | None
    message: str

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


def _meta(folder: Path, problems: list) -> dict:
    import yaml
    try:
        meta = yaml.safe_load((folder / "agent.yaml").read_text()) or {}
    except yaml.YAMLError as e:
        problems.append(Problem("agent.yaml", None, f"not YAML: {e}"))
        return {}
    if not isinstance(meta, dict):
        problems.append(Problem("agent.yaml", None, "must be a mapping"))
        return {}
    for key in REQUIRED:
        if not meta.get(key):
            problems.append(Problem("agent.yaml", None, f"missing {key!r}"))
    for name in ("agent.yaml", "README.md"):
        left = PLACEHOLDER.findall((folder / name).read_text())
        if left:
            left = sorted({" ".join(x.split()) for x in left})
            problems.append(Problem(name, None, f"template placeholders left: {', '.join(left)}"))
    return meta


def _rules(lines: list[dict], meta: dict, problems: list) -> None:
    """Agent name, the suite's settings and budget, and coverage of the suite."""
    from .config import load_config
    try:
        suite = load_config(meta.get("suite") or "default")
    except (FileNotFoundError, ValueError) as e:
        problems.append(Problem("agent.yaml", None, f"suite: {e}"))
        return
    want = suite.fingerprint()
    for n, line in enumerate(lines, 1):
        if line.get("agent") != meta.get("name"):
            problems.append(Problem("results.jsonl", n, f"agent {line.get('agent')!r} is not "
                                    f"the submission's name {meta.get('name')!r}"))
        got = {k: line.get(k) for k in want}
        if got != want:
            problems.append(Problem("results.jsonl", n, f"settings {got} differ from suite "
                                    f"{suite.name!r}: {want}"))
        if int(line.get("env_steps", 0)) > suite.budget:
            problems.append(Problem("results.jsonl", n, f"{line['env_steps']} env steps, over "
                                    f"the budget of {suite.budget}"))
    have: dict = {}
    for n, line in enumerate(lines, 1):
        key = (line.get("env_id"), line.get("shape"), line.get("seed"))
        if key in have:
            problems.append(Problem("results.jsonl", n, f"episode {key} already on line {have[key]}"))
        have.setdefault(key, n)
    suite.agents = {meta.get("name") or "?": {}}
    for ep in suite.episodes():
        if (ep.env_id, ep.shape, ep.seed) not in have:
            problems.append(Problem("results.jsonl", None, f"missing episode: {ep.env_id} "
                                    f"{ep.track} track, shape {ep.shape}, seed {ep.seed}"))


def check_submission(folder: str | Path, progress=None) -> tuple[list[Problem], list[dict]]:
    """(problems, the records); no problems means the submission is accepted."""
    from .validate import Validator
    folder = Path(folder)
    if not folder.is_dir():
        return [Problem(str(folder), None, "no such submission folder")], []
    problems = [Problem(name, None, "missing (see argus_env/bench/templates/submission/)")
                for name in FILES if not (folder / name).exists()]
    if problems:
        return problems, []
    meta = _meta(folder, problems)
    try:
        lines = R.read_lines(folder / "results.jsonl")
    except ValueError as e:
        return problems + [Problem("results.jsonl", None, str(e))], []
    if not lines:
        return problems + [Problem("results.jsonl", None, "no records")], []
    _rules(lines, meta, problems)
    validator = Validator()
    for n, line in enumerate(lines, 1):
        for d in validator.validate(line):
            problems.append(Problem("results.jsonl", n, f"replay diverges: {d}"))
        if progress:
            progress(n, len(lines))
    return problems, lines
