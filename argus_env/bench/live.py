"""Live GPU figures: the submitted programs of results lines timed on a GPU, kept apart
from the lines (which replay as recorded) and joined to them by (hardware, env id, shape,
submitted program hash).

    live = live_beside(["benchmarks/results/leaderboard/leaderboard.jsonl"])  # live_*.json there
    figure = live.of(line)        # None: not measured; else ok, status, frac_anchor, ...

The files are written by benchmarks/record_programs.py (`write_live`) on the GPU machine,
where no env runs, so this module imports nothing but the standard library.
"""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
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
    #: (hardware, env id, shape) -> the best program known there: the fastest correct row
    #: of the GPU's tables when the file was written (`frac_anchor`, `program_hash`,
    #: `config`, `table`, `recorded`), a measurement on the same GPU as the figures
    known: dict = dataclasses.field(default_factory=dict)

    def best_known(self, hardware: str, env_id: str, shape: str) -> dict | None:
        """The best program known at a shape on `hardware`'s GPU (None: not recorded)."""
        return self.known.get((hardware, env_id, shape))

    def of(self, line: dict) -> dict | None:
        """The live figure of a line's submitted program (None: not measured). Raises
        ValueError for a figure timed at other sizes than the line's shape has."""
        fig = self.figures.get(live_key(line["hardware"], line["env_id"], line["shape"],
                                        line.get("submitted_program_hash")))
        if fig is not None and isinstance(fig.get("sizes"), dict) and \
                isinstance(line.get("sizes"), dict) and \
                {k: v for k, v in fig["sizes"].items()} != dict(line["sizes"]):
            raise ValueError(f"a live figure of {line['env_id']} {line['shape']} "
                             f"{line.get('submitted_program_hash')} was timed at sizes "
                             f"{fig['sizes']}, the line's shape is {line['sizes']}")
        return fig

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


def _known_problem(k, n: int) -> str | None:
    if type(k) is not dict:
        return f"best known {n} is not a mapping"
    for key in ("env_id", "shape", "program_hash"):
        if type(k.get(key)) is not str:
            return f"best known {n}: {key!r} must be a string, got {k.get(key)!r}"
    frac = k.get("frac_anchor")
    if not (type(frac) in (int, float) and frac == frac and 0 < frac < float("inf")):
        return f"best known {n}: frac_anchor must be finite and > 0, got {frac!r}"
    again = k.get("live_frac_anchor")
    if again is not None and not (type(again) in (int, float) and again == again
                                  and 0 < again < float("inf")):
        return f"best known {n}: live_frac_anchor must be finite and > 0, got {again!r}"
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
    hardware = data["hardware"]
    named = re.fullmatch(r"live_(.+)\.json", path.name)
    if named and named.group(1).lower() != hardware.lower():
        raise ValueError(f"{path}: the file is named for {named.group(1)!r} but holds "
                         f"figures of {hardware!r}")
    gpu = (data.get("provenance") or {}).get("gpu") if type(data.get("provenance")) is dict \
        else None
    if isinstance(gpu, str) and gpu and hardware.lower() not in gpu.lower().replace(" ", ""):
        raise ValueError(f"{path}: figures of {hardware!r} timed on a {gpu!r} (provenance)")
    for n, fig in enumerate(data["figures"]):
        problem = _live_problem(fig, n)
        if problem:
            raise ValueError(f"{path}: {problem}")
        key = live_key(data["hardware"], fig["env_id"], fig["shape"], fig["program_hash"])
        if key in out.figures and out.figures[key] != fig:
            raise ValueError(f"{path}: two figures for {key}")
        out.figures[key] = fig
    known = data.get("best_known", [])
    if type(known) is not list:
        raise ValueError(f"{path}: 'best_known' must be a list")
    for n, k in enumerate(known):
        problem = _known_problem(k, n)
        if problem:
            raise ValueError(f"{path}: {problem}")
        key = (hardware, k["env_id"], k["shape"])
        if key in out.known and out.known[key]["frac_anchor"] >= k["frac_anchor"]:
            continue   # two files: the faster best known stands
        out.known[key] = dict(k)
    out.sources.append({"file": str(path.resolve().relative_to(ROOT)) if path.resolve().is_relative_to(ROOT)
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
               lines: list[dict] | None = None, best_known: list[dict] | None = None) -> Path:
    """Write a live-figures file (`read_live` reads it back): `figures`, one per (env id,
    shape, program hash), each with `ok`, `status` and, when ok, `frac_anchor`; `lines`, an
    optional per-episode view (recorded beside live) that no board reads; `best_known`,
    per (env id, shape) of the lines, the fastest correct program of the GPU's tables
    (`frac_anchor`, `program_hash`, and what identifies its row), which a board measures
    regret against."""
    doc = {"hardware": hardware, "provenance": provenance, "figures": figures}
    if best_known:
        doc["best_known"] = best_known
    if lines is not None:
        doc["lines"] = lines
    checked = LiveFigures()
    for n, fig in enumerate(figures):
        problem = _live_problem(fig, n)
        if problem:
            raise ValueError(problem)
    for n, k in enumerate(best_known or []):
        problem = _known_problem(k, n)
        if problem:
            raise ValueError(problem)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc, indent=1) + "\n")
    read_live(path, checked)   # what was written reads back
    return path
