"""Record on the H200 the programs that agents visit and the tables lack, and time every
committed leaderboard line's submitted program live.

Three steps, each one command:

    # 1. on a CPU machine with the envs (gymnasium, z3): what to measure
    python benchmarks/record_programs.py plan --out runs/record_h200 [--walks 100] \
        [--records more.jsonl ...] [--configs small-shapes] [--dry-run]
    # 2. on the GPU (torch and Triton only), as often as needed: each run stops by
    #    --max-seconds, a rerun continues from the state in the folder
    python benchmarks/record_programs.py measure --out runs/record_h200 --max-seconds 540
    # 3. on the CPU again: grow the tables and place the live figures beside the board
    python benchmarks/record_programs.py append --out runs/record_h200

**Sources** (`plan`): (a) the committed leaderboard's episodes: each line's submitted
program, its best program and every program its last episode measured (the configuration
replayed from its actions; used only when the replay ends at the recorded submitted
program); (b) random legal walks, seeded, at every suite shape of every task (`--walks`
priced programs per task, walks of `--walk-steps` legal transformations from the baseline,
taken from the env's action mask in model mode without numerics; programs the checker
refuses are never priced, so they are left out); (c) further episode records
(`--records`); (d) named sets of catalog configurations (`--configs small-shapes`: GEMM's
swap-AB and stream-K configurations, `tasks/gemm/space.py` `SMALL_SHAPES`) at every suite
shape where the mask allows them and the checker proves them. Programs are deduplicated
by what the tables are keyed by (the task, the problem sizes, the program hash). Held-out walks (`--eval-walks`, another seed, at the
leaderboard's shapes, never measured) measure coverage honestly.

**Selection**: a program is measured when the tables (`tasks/<task>/table_h200*.csv`, read
as the table backend reads them) lack it, and every leaderboard line's submitted program is
timed whether the tables hold it or not (its live figure). Board programs go first, then
programs episodes visited, then walks.

**Measuring** (`measure`, the GPU part: `measure_items`): kernels are compiled first in a
process pool (each launched once at its real shape, which fills Triton's cache), then
timed one by one in the project's measurement worker (`argus_env.measure.worker`,
`op="measure"`: correctness at the real shape against the float32 reference, inputs rotated
past L2, CUDA-graph medians alternating with the library anchor in the same process,
results faster than the hardware's limit rejected). A compile failure, a numerical
mismatch, an impossible time, a hang or a crash of the kernel is recorded as such. Every
answer is appended to `results.jsonl` at once, so a run cut short loses at most one
program.

**Output folder** (at most 8 files, so it comes back from a machine whole): `plan.jsonl`,
`results.jsonl`, `state.json` (chunks run, with provenance), `table_<task>_h200.csv` (rows
in the task table's own columns, followed by provenance columns: GPU, driver, torch,
Triton, CUDA, protocol, date, commit), `live_h200.json` (one live figure per leaderboard
program, read by `argus_env.bench.live.read_live`, and a per-line view). Every run
prints the coverage: of the programs walks and episodes visit at the leaderboard's shapes,
the share the tables price, before and after this run's rows.
"""

from __future__ import annotations

import argparse
import csv
import datetime
import hashlib
import json
import math
import os
import statistics
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

#: what setup.py installs under the project's namespace, for a checkout that is not
#: installed (a GPU machine that got the working tree only)
NAMESPACE = {"argus_env.tasks": "tasks", "argus_env.reward": "reward",
             "argus_env.agents": "agents"}
class NamespaceFinder:
    """Finds `argus_env.tasks` (and reward, agents) in the checkout's folders."""

    def __init__(self, root: str, folders: dict):
        self.root, self.folders = root, folders

    def find_spec(self, name, path=None, target=None):
        import importlib.util
        folder = self.folders.get(name)
        if folder is None:
            return None
        where = os.path.join(self.root, folder)
        return importlib.util.spec_from_file_location(
            name, os.path.join(where, "__init__.py"), submodule_search_locations=[where])


#: the same finder for processes started from here (written as their `sitecustomize`)
SITECUSTOMIZE = """import importlib.util, os, sys


class NamespaceFinder:
    def __init__(self, root, folders):
        self.root, self.folders = root, folders

    def find_spec(self, name, path=None, target=None):
        folder = self.folders.get(name)
        if folder is None:
            return None
        where = os.path.join(self.root, folder)
        return importlib.util.spec_from_file_location(
            name, os.path.join(where, "__init__.py"), submodule_search_locations=[where])


sys.meta_path.append(NamespaceFinder({root!r}, {folders!r}))
"""


def namespace() -> None:
    """Make `argus_env.tasks` (and reward, agents) importable from a checkout that is not
    installed, here and in every Python process started from here (the measurement worker,
    the compile pool): a `sitecustomize` on PYTHONPATH adds the same finder there."""
    import importlib.util
    if importlib.util.find_spec("argus_env.tasks") is not None:
        return
    sys.meta_path.append(NamespaceFinder(str(ROOT), NAMESPACE))
    import tempfile
    shim = Path(tempfile.mkdtemp(prefix="argus-namespace-"))
    (shim / "sitecustomize.py").write_text(SITECUSTOMIZE.format(root=str(ROOT), folders=NAMESPACE))
    sys.path.insert(1, str(shim))
    os.environ["PYTHONPATH"] = os.pathsep.join(
        [str(ROOT), str(shim)] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p])


BOARD = ROOT / "benchmarks" / "results" / "leaderboard" / "leaderboard.jsonl"
#: the hardware whose tables and live figures a command reads and writes (`--hardware`;
#: `measure` takes it from the GPU it runs on): rows timed on one GPU never enter another's
#: tables, and a board joins only live figures of its own hardware
HARDWARE = "h200"
#: GPU names (upper case, spaces removed) -> hardware profile, for `measure --hardware auto`
GPU_PROFILES = {"H200": "h200", "H100": "h100", "A100": "a100"}
PROVENANCE_COLUMNS = ("gpu", "driver", "torch", "triton", "cuda", "protocol", "date", "commit")
#: measurement order: the board's submitted programs (live figures), what episodes
#: visited, walks at the board's shapes, held-out walks (with `measure --heldout` only),
#: other walks
PRIORITY = {"board": 0, "known": 0, "episode": 1, "records": 1, "retime": 2, "configs": 2,
            "neighbours": 2,
            "walk-board": 2, "heldout": 3, "walk": 4}
#: named sets of catalog configurations a plan may add (`plan --configs NAME`): task, the
#: attribute of the task's space module holding them
CONFIG_SETS = {"small-shapes": ("gemm", "SMALL_SHAPES"), "sample": ("gemm", None),
               "model-top": ("gemm", "model-top"), "gemm-expert": ("gemm", "EXPERT"),
               "moe-grouped": ("moe", "GROUPED"), "moe-summed": ("moe", "SUMMED"),
               "attention-expert": ("attention", "EXPERT"), "moe-expert": ("moe", "EXPERT"),
               "rmsnorm-expert": ("rmsnorm", "EXPERT")}
#: `model-top`: at each of these GEMM shapes (the suite's furthest below cuBLAS), the
#: configurations the corrected cost model of `TOP_HARDWARE` ranks fastest among
#: `TOP_POOL` mask-legal ones drawn at random, `TOP_N` of those the tables lack
TOP_SHAPES = ("small-m-512", "ragged-1000", "ragged-3000", "decode-64")
TOP_HARDWARE, TOP_POOL, TOP_N = "h100", 1500, 20
#: configurations the `sample` set draws (seeded by `plan --seed`)
SAMPLE_SIZE = 48
#: seconds one program took on the H200 when the tables were recorded, per task (from the
#: rows' timestamps: median gap between rows, compile included except for GEMM, whose
#: recorder compiled in a pool first); the estimate of a chunk's time
SECONDS_PER_PROGRAM = {"gemm": 0.7, "attention": 1.9, "moe": 1.1, "rmsnorm": 0.8}
COMPILE_SECONDS = 2.0        # one program's compile in the pool (the GEMM recorder: 98 in 12 s on 12)
END_MARGIN = 20.0            # seconds kept at the end of a run to write the outputs
PROTOCOL = ("argus_env.measure.gpu.measure_program in the measurement worker: correctness at "
            "the real shape (fresh randn inputs, NaN-poisoned outputs, the task's float32 "
            "reference and tolerance), inputs rotated past 2x L2, do_bench_cudagraph medians "
            "of {rounds} rounds of {rep_ms} ms per side alternating with the task's library "
            "anchor in the same process, times under the physical limit rejected")


# ====================================================================== items
@dataclass
class Item:
    """One program at one problem size, and where it was met."""

    task: str
    env_id: str
    shape: str
    sizes: dict
    program_hash: str
    program: str
    config: str = ""               # the table's `config` column
    summary: str = ""              # the table's `summary` column
    sources: list = field(default_factory=list)
    population: bool = False       # visited at a leaderboard shape (counts in coverage)
    heldout: bool = False          # only in the held-out walks: never in the tables
    held: bool = False             # the table backend priced it from a table at plan time

    @property
    def key(self) -> str:
        return item_key(self.task, self.sizes, self.program_hash)

    @property
    def priority(self) -> int:
        return min((PRIORITY.get(s, 9) for s in self.sources), default=9)

    @property
    def board(self) -> bool:
        return "board" in self.sources

    @property
    def known(self) -> bool:
        """A board shape's best known program, timed with the board's kernels so that the
        board sets their live figures against it as timed in the same run."""
        return "known" in self.sources

    @property
    def retime(self) -> bool:
        """Held by a table, timed again so that its new row supersedes the old one
        (`plan --retime`)."""
        return "retime" in self.sources


def anchor_dims(task_name: str) -> tuple:
    from argus_env.task import get_task
    return tuple(get_task(task_name).anchor_dims)


def item_key(task: str, sizes: dict, program_hash: str) -> str:
    """What the table backend looks a program up by: the task's anchor sizes and the
    program hash (`TableBackend.measure`)."""
    dims = "x".join(str(sizes[d]) for d in anchor_dims(task))
    return f"{task}|{dims}|{program_hash}"


class Items:
    """Programs met, deduplicated by `item_key`; sources and flags are merged."""

    def __init__(self):
        self.by_key: dict[str, Item] = {}
        self.refused: list = []   # walk steps the env refused (env, shape, action, why)

    def add(self, item: Item) -> Item:
        have = self.by_key.get(item.key)
        if have is None:
            self.by_key[item.key] = item
            return item
        for s in item.sources:
            if s not in have.sources:
                have.sources.append(s)
        have.population |= item.population
        have.heldout &= item.heldout
        have.held |= item.held
        have.config = have.config or item.config
        have.summary = have.summary or item.summary
        return have

    def retain(self, kept) -> None:
        """Keep only the items `kept` (those a filter let through)."""
        keys = {it.key for it in kept}
        self.by_key = {k: it for k, it in self.by_key.items() if k in keys}

    def __iter__(self):
        return iter(sorted(self.by_key.values(), key=lambda i: (i.priority, i.task, i.shape,
                                                                 i.program_hash)))

    def __len__(self):
        return len(self.by_key)


def config_columns(task, config, program, sizes: dict, target) -> tuple[str, str]:
    """(config, summary) as the task's table writes them: GEMM the feature key of the
    program, attention the configuration's summary, MoE and RMSNorm its repr."""
    if task.name == "gemm":
        from argus_env.measure.features import extract
        return extract(program, sizes, task, target=target).key(), ""
    if config is None:
        return "", ""
    summary = config.summary() if hasattr(config, "summary") else ""
    return (summary if task.name == "attention" else repr(config)), summary


# ====================================================================== tables
def table_rows(task_name: str) -> dict:
    """The rows the table backend reads for a task (every `table_*h200*.csv`), keyed like
    `item_key`."""
    from argus_env.measure.analytic import TableBackend
    from argus_env.task import get_task
    task = get_task(task_name)
    rows = TableBackend(HARDWARE).table(task)["rows"]
    return {f"{task_name}|{'x'.join(map(str, k[:-1]))}|{k[-1]}": r for k, r in rows.items()}


def held_keys(tasks, items=()) -> set:
    """Keys the tables hold: their rows' own keys, and the items the table backend priced
    from a table when the plan was made (`mark_held`: it may also find a recorded program
    that executes the same as a program written another way)."""
    out = {i.key for i in items if i.held}
    for t in tasks:
        out |= set(table_rows(t))
    return out


#: sources whose programs a plan may leave out when the compile verdict refuses them (the
#: board's kernels, best knowns and retimed rows are timed whatever the verdict says, and
#: the held-out walks stay the sample the model's error is measured on)
VERDICT_SOURCES = ("configs", "neighbours", "walk", "walk-board")


def refused_by_verdict(items, log=None) -> list:
    """`plan --verdict`: the items, but those of `VERDICT_SOURCES` alone that the compile
    verdict for the tables' hardware refuses (`measure.legality`, specialised as the
    launch at the item's sizes): programs an env would never price, so no GPU time goes to
    them. Returns the items kept."""
    from argus_env.dsl.program import Program
    from argus_env.measure.legality import Legality
    from argus_env.target import load_target
    from argus_env.task import get_task
    target, legality, kept, refused = load_target(HARDWARE), {}, [], {}
    try:
        for it in items:
            if not it.sources or not set(it.sources) <= set(VERDICT_SOURCES):
                kept.append(it)
                continue
            task = get_task(it.task)
            # asked for by name: compiled whatever ARGUS_LEGALITY says
            leg = legality.get(task.name) or legality.setdefault(
                task.name, Legality(task, target))
            program = Program.from_text(it.program)
            verdict = leg.verdict(program, sizes=task.program_sizes(program, it.sizes))
            if verdict.ok:
                kept.append(it)
            else:
                refused[it.task] = refused.get(it.task, 0) + 1
    finally:
        for leg in legality.values():
            leg.close()
    if log:
        n = sum(refused.values())
        log(f"compile verdict ({HARDWARE}): {n} program{'s' if n != 1 else ''} refused and "
            f"left out ({', '.join(f'{t} {k}' for t, k in sorted(refused.items())) or 'none'})")
    return kept


def mark_held(items, log=None) -> int:
    """Set `held` on every item the table backend prices from a table (a recorded run,
    or a recorded failure), as an env in table mode would; returns how many."""
    from argus_env.dsl.program import Program
    from argus_env.measure.analytic import TableBackend
    from argus_env.task import get_task
    backend = TableBackend(HARDWARE)
    n = 0
    for it in items:
        try:
            m = backend.measure(Program.from_text(it.program), it.sizes, get_task(it.task))
            it.held = m.backend == "table"
        except Exception as e:  # noqa: BLE001 - a program the backend cannot price is a miss
            it.held = False
            if log:
                log(f"table lookup failed for {it.key}: {type(e).__name__}: {e}")
        n += it.held
    return n


def table_header(task_name: str) -> list[str]:
    """The task table's columns (a hardware without a table yet takes the H200 table's:
    every hardware's table has the same columns)."""
    path = ROOT / "tasks" / task_name / f"table_{HARDWARE}.csv"
    if not path.exists():
        path = ROOT / "tasks" / task_name / "table_h200.csv"
    with path.open() as f:
        return [c for c in next(csv.reader(f)) if c not in PROVENANCE_COLUMNS]


# ====================================================================== sources
def board_lines(path: Path = BOARD) -> list[dict]:
    from argus_env.bench.results import read_records
    return read_records([path])


def replay_configs(line: dict, task, target) -> list | None:
    """The configurations a discrete-mode record's last episode held after each action,
    replayed at the configuration level (the env's mask and transitions: a masked or
    failing action keeps the state, undo returns to the one before); None when the record
    is not a discrete one of the task's space."""
    if line.get("mode") != "discrete":
        return None
    space = task.space
    catalog = space.catalog()
    ctx = {"sizes": dict(line["sizes"]), "target": target}
    config, history, out = space.baseline(), [], []
    for a in _recorded_actions(line, space, catalog):
        if a is None:
            out.append(config)
            continue
        name, value = a
        if name == "submit":
            out.append(config)
            break
        if name == "undo":
            if history:
                config = history.pop()
            out.append(config)
            continue
        if space.why_illegal(config, name, value, ctx) is None:
            try:
                nxt = space.apply(config, name, value, ctx)
            except Exception:  # noqa: BLE001 - refused by the env as well
                nxt = None
            if nxt is not None:
                history.append(config)
                config = nxt
        out.append(config)
    return out


def _recorded_actions(line: dict, space, catalog) -> list:
    """The (transformation, value) of each recorded action, read from its label where the
    record has them (`action_labels`: a catalog that grew since keeps their meaning), else
    from its index into today's catalog; None for an action that names neither."""
    labels = line.get("action_labels")
    if isinstance(labels, list) and len(labels) == len(line["actions"]):
        out = []
        for text in labels:
            try:
                act = space.parse_call(str(text))
            except Exception:  # noqa: BLE001 - not a call of this catalog
                out.append(None)
                continue
            out.append((act.name, act.value) if act.kind == "transform" else
                       (act.kind, None))
        return out
    return [catalog[a] if type(a) is int and 0 <= a < len(catalog) else None
            for a in line["actions"]]


def episode_items(lines: list[dict], tag: str, board_shapes: set) -> tuple[Items, dict]:
    """Items from episode records: the submitted (final) and best programs and every
    program the last episode measured. Returns the items and, per line, its replay's
    verdict ("replayed", "no replay", "replay differs")."""
    from argus_env.dsl.program import Program
    from argus_env.target import load_target
    from argus_env.task import get_task
    items, verdicts = Items(), {}
    rendered: dict = {}
    for n, line in enumerate(lines):
        task = get_task(line["task"])
        target = load_target(line.get("hardware", HARDWARE))
        sizes = dict(line["sizes"])
        at_board = (line["env_id"], line["shape"]) in board_shapes

        def add(text: str, config, source: str):
            program = Program.from_text(text)
            cfg, summary = config_columns(task, config, program, sizes, target)
            items.add(Item(task.name, line["env_id"], line["shape"], sizes, program.hash, text,
                           cfg, summary, [source], population=at_board))

        def render(config):
            key = (task.name, repr(config), tuple(sorted(sizes.items())))
            if key not in rendered:
                rendered[key] = task.bind(Program.from_text(task.space.render(config)), sizes)
            return rendered[key]

        configs = replay_configs(line, task, target)
        final_config = None
        if configs is None:
            verdicts[n] = "no replay"
        else:
            final = render(configs[-1] if configs else task.space.baseline())
            if line["final_program"] and final.hash == Program.from_text(line["final_program"]).hash:
                verdicts[n] = "replayed"
                final_config = configs[-1] if configs else task.space.baseline()
                base = task.space.baseline()
                add(render(base).text, base, "episode")
                for cfg, tflops in zip(configs, line.get("step_tflops") or []):
                    if tflops is not None:
                        add(render(cfg).text, cfg, "episode")
            else:
                verdicts[n] = "replay differs"
        if line.get("best_program"):
            add(line["best_program"], None, "episode")
        if line.get("submitted") and line.get("final_program"):
            add(line["final_program"], final_config, tag)
    return items, verdicts


def walk_items(env_ids: list[str], programs: int, steps: int, seed: int, shapes=None,
               tag: str = "walk", board_shapes: set = frozenset(), log=None) -> Items:
    """Random legal walks: per task, walks of `steps` transformations from the baseline,
    each chosen uniformly among the legal ones of the env's action mask (never undo or
    submit), at the task's suite shapes in turn (`shapes`: env id -> names; default all),
    until `programs` distinct priced programs are met (the checker proved them, so the env
    priced them). The env runs in model mode without numerics."""
    import warnings

    import gymnasium as gym
    import numpy as np
    warnings.filterwarnings("ignore", message="TRITON_DEFAULT_FP_FUSION")

    import argus_env  # noqa: F401
    from argus_env.envs import ENV_IDS
    from argus_env.task import get_task
    items = Items()
    for t_index, env_id in enumerate(env_ids):
        task = get_task(dict(ENV_IDS)[env_id])
        names = list(shapes[env_id]) if shapes else [c.name for c in task.shape_cases("all")]
        env = gym.make(env_id, measure="model", correctness="none", split="all",
                       max_episode_steps=steps + 1)
        core = env.unwrapped
        special = np.array([n in ("undo", "submit") for n, _ in core.catalog])
        found: set = set()
        walk, t0, cap = 0, time.time(), 40 * programs + 10
        try:
            while len(found) < programs and walk * steps < cap:
                shape = names[walk % len(names)]
                rng = np.random.default_rng([seed, t_index, walk])
                obs, info = env.reset(seed=int(rng.integers(2**31)), options={"shape": shape})
                for _ in range(steps):
                    legal = np.flatnonzero(info["action_mask"].astype(bool) & ~special)
                    if not len(legal):
                        break
                    obs, _, _, _, info = env.step(int(rng.choice(legal)))
                    if info["error"] is not None:   # a legal action the env still refused
                        items.refused.append((env_id, shape, info["action"], info["error"]))
                        continue                    # (a check past the step's time limit)
                    ev = core.state.evaluation
                    if not ev.report.ok or ev.measurement is None:
                        continue    # refused by the checker: never priced
                    config, program = core.state.config, core.state.program
                    cfg, summary = config_columns(task, config, program, core.sizes, core.target)
                    it = items.add(Item(task.name, env_id, shape, dict(core.sizes), program.hash,
                                        program.text, cfg, summary, [tag],
                                        population=(env_id, shape) in board_shapes,
                                        heldout=tag == "heldout"))
                    found.add(it.key)
                    if len(found) >= programs:
                        break
                walk += 1
        finally:
            env.close()
        if log:
            log(f"walks {tag} {env_id}: {len(found)} priced programs in {walk} walks, "
                f"{time.time() - t0:.0f} s; {len(items.refused)} steps refused so far")
    return items


def draw_configuration(rng, base, fields):
    """One configuration with each field drawn by `rng` from its values (`fields`:
    `TaskSpace.field_values()`), or None for a draw that names no program (split-K
    partials left uncombined); an unsplit draw's combine is dropped (nothing to combine)."""
    import dataclasses
    config = dataclasses.replace(base, **{f: rng.choice(v) for f, v in fields})
    if getattr(config, "split_k", 1) == 1 and getattr(config, "combine", None):
        config = dataclasses.replace(config, combine=None)   # nothing to combine
    if getattr(config, "split_k", 1) > 1 and getattr(config, "combine", "") is None:
        return None   # a primitive's first step alone (uncombined partials): no program
    return config


def sampled_configurations(task, target, n: int, seed: int) -> list:
    """`n` distinct catalog configurations of `task`, each field drawn uniformly from its
    transformation's values (and the baseline's own), kept where the mask allows them at
    one suite shape at least: a seeded sample of the space beyond the named sets."""
    import random
    rng, space = random.Random(seed), task.space
    base, fields = space.baseline(), space.field_values()
    out, seen = [], set()
    for _ in range(200 * n):
        if len(out) >= n:
            break
        config = draw_configuration(rng, base, fields)
        if config is None or config in seen:
            continue
        seen.add(config)
        if any(space.config_reason(config, {"sizes": c.sizes, "target": target}) is None
               for c in task.shapes):
            out.append(config)
    return out


def model_top_items(task, board_shapes: set, seed: int, log=None) -> list:
    """The `model-top` set: at each of `TOP_SHAPES`, `TOP_POOL` configurations drawn from
    the space (each field from its transformation's values) that the mask allows on
    `TOP_HARDWARE`, priced by its corrected cost model; the `TOP_N` fastest that its
    tables lack and the checker proves, as items."""
    import random

    from argus_env.check import check_program
    from argus_env.envs import ENV_IDS
    from argus_env.measure.analytic import TableBackend
    from argus_env.target import load_target
    target = load_target(TOP_HARDWARE)
    table = TableBackend(TOP_HARDWARE)
    env_id = {t: e for e, t in dict(ENV_IDS).items()}[task.name]
    space, base, fields = task.space, task.space.baseline(), task.space.field_values()
    out = []
    for case in task.shapes:
        if case.name not in TOP_SHAPES:
            continue
        rng, seen, ranked = random.Random(f"{seed}:{case.name}"), set(), []
        for _ in range(20 * TOP_POOL):
            if len(seen) >= TOP_POOL:
                break
            config = draw_configuration(rng, base, fields)
            if config is None or config in seen or space.config_reason(
                    config, {"sizes": case.sizes, "target": target}) is not None:
                continue
            seen.add(config)
            program = task.bind(space.program(config), case.sizes)
            m = table.measure(program, dict(case.sizes), task)
            if m.ok and m.backend != "table":
                ranked.append((m.ms, program, config))
        ranked.sort(key=lambda r: r[0])
        kept = 0
        for ms, program, config in ranked:
            if kept >= TOP_N:
                break
            if not check_program(program, case.sizes, task, num_sms=target.sms,
                                 target=target).ok:
                continue
            cfg, summary = config_columns(task, config, program, case.sizes, target)
            out.append(Item(task.name, env_id, case.name, dict(case.sizes), program.hash,
                            program.text, cfg, summary, ["configs"],
                            population=(env_id, case.name) in board_shapes))
            kept += 1
        if log:
            log(f"configs model-top: {case.name}: {len(seen)} drawn, {len(ranked)} priced by "
                f"the model, {kept} fastest kept (estimated {ranked[0][0] * 1e3:.1f} to "
                f"{ranked[min(kept, len(ranked)) - 1][0] * 1e3:.1f} us)" if ranked else
                f"configs model-top: {case.name}: nothing priced")
    return out


def config_items(names: list[str], board_shapes: set = frozenset(), log=None,
                 seed: int = 0) -> Items:
    """The configurations of the named sets (`CONFIG_SETS`) at every suite shape of their
    task where the mask allows them on the H200 and the checker proves their program
    there (nothing unproven is planned)."""
    import importlib

    from argus_env.check import check_program
    from argus_env.envs import ENV_IDS
    from argus_env.target import load_target
    from argus_env.task import get_task
    items, target = Items(), load_target(HARDWARE)
    env_of = {task: env for env, task in dict(ENV_IDS).items()}
    for name in names:
        task_name, attr = CONFIG_SETS[name]
        task = get_task(task_name)
        if attr == "model-top":
            for it in model_top_items(task, board_shapes, seed, log):
                items.add(it)
            continue
        if attr is None:
            configs = sampled_configurations(task, target, SAMPLE_SIZE, seed)
        else:
            found = getattr(importlib.import_module(type(task.space).__module__), attr)
            configs = list(found.values()) if isinstance(found, dict) else \
                list(found) if isinstance(found, (list, tuple)) else [found]
        kept = refused = 0
        for config in configs:
            for case in task.shapes:
                if task.space.config_reason(config, {"sizes": case.sizes, "target": target}):
                    continue
                program = task.bind(task.space.program(config), case.sizes)
                report = check_program(program, case.sizes, task, num_sms=target.sms,
                                       target=target)
                if not report.ok:
                    refused += 1
                    continue
                cfg, summary = config_columns(task, config, program, case.sizes, target)
                env_id = env_of[task.name]
                items.add(Item(task.name, env_id, case.name, dict(case.sizes), program.hash,
                               program.text, cfg, summary, ["configs"],
                               population=(env_id, case.name) in board_shapes))
                kept += 1
        if log:
            log(f"configs {name}: {kept} programs at their shapes, {refused} not proven "
                "(left out)")
    return items


def row_config(task, row: dict, recover):
    """(configuration, program, sizes) of a table row: its configuration recovered as the
    task's program and confirmed by the row's program hash; None where it is not."""
    sizes = {d: int(row[d]) for d in task.size_names() if row.get(d, "") != ""}
    try:
        config = recover(row)
        program = task.bind(task.space.program(config), sizes) if config is not None else None
    except (ValueError, TypeError, KeyError):
        program = None
    if program is None or program.hash != row["program_hash"]:
        return None
    return config, program, sizes


def row_item(task, env_id: str, row: dict, source: str, recover) -> Item | None:
    """A table row as an item (`row_config`; None where it is not recovered)."""
    found = row_config(task, row, recover)
    if found is None:
        return None
    _, program, sizes = found
    return Item(task.name, env_id, row["shape"], sizes, program.hash, program.text,
                row.get("config", ""), row.get("summary", ""), [source], population=True)


def neighbour_items(task_name: str, top: int = 1, shapes=None, log=None) -> list:
    """`plan --neighbours TASK`: at every suite shape of the task (or those named in
    `shapes`), the `top` fastest correct programs of the tables (a program's last row) and
    every configuration one legal catalog action away from each (the mask of the tables'
    hardware at that shape), proven by the checker, as items; `mark_held` leaves out those
    the tables already hold. One round of a local search on the GPU around the best known:
    run it again after `append` to climb further."""
    from argus_env.check import check_program
    from argus_env.envs import ENV_IDS
    from argus_env.measure.analytic import TableBackend
    from argus_env.measure.recorded import ConfigRecovery
    from argus_env.target import load_target
    from argus_env.task import get_task
    task, target = get_task(task_name), load_target(HARDWARE)
    env_id = {t: e for e, t in dict(ENV_IDS).items()}[task.name]
    space, recover = task.space, ConfigRecovery(task)
    rows = TableBackend(HARDWARE).table(task)["rows"].values()
    out, unrecovered, refused = [], 0, 0
    for case in task.shapes:
        if shapes and case.name not in shapes:
            continue
        ranked = sorted((r for r in rows if r.get("shape") == case.name
                         and str(r.get("ok")) == "True" and r.get("ratio") not in ("", None)),
                        key=lambda r: -float(r["ratio"]))
        ctx, seen = {"sizes": dict(case.sizes), "target": target}, set()
        for row in ranked[:top]:
            found = row_config(task, row, recover)
            if found is None:
                unrecovered += 1
                continue
            config = found[0]
            for name, value in space.legal(config, ctx):
                new = space.apply(config, name, value, ctx)
                if new in seen or space.config_reason(new, ctx) is not None:
                    continue
                seen.add(new)
                program = task.bind(space.program(new), case.sizes)
                if not check_program(program, case.sizes, task, num_sms=target.sms,
                                     target=target).ok:
                    refused += 1
                    continue
                cfg, summary = config_columns(task, new, program, case.sizes, target)
                out.append(Item(task.name, env_id, case.name, dict(case.sizes), program.hash,
                                program.text, cfg, summary, ["neighbours"]))
    if log:
        log(f"neighbours {task_name}: {len(out)} programs one action from the {top} best of "
            f"the {HARDWARE} tables per shape; {refused} not proven, {unrecovered} best rows "
            "not recovered as their program (left out)")
    return out


def known_items(lines: list[dict], log=None) -> list:
    """Each board shape's best known program (`best_known_of`), as an item timed with the
    board's kernels: `append` then gives the live file its same-run figure."""
    from argus_env.measure.analytic import TableBackend
    from argus_env.measure.recorded import ConfigRecovery
    from argus_env.task import get_task
    out, missing, backend, recover = [], [], TableBackend(HARDWARE), {}
    for k in best_known_of([line_view(ln) for ln in lines]):
        ln = next(x for x in lines if (x["env_id"], x["shape"]) == (k["env_id"], k["shape"]))
        task = get_task(ln["task"])
        shape = tuple(int(ln["sizes"][d]) for d in task.anchor_dims)
        row = backend.table(task)["rows"].get(shape + (k["program_hash"],))
        it = row_item(task, k["env_id"], row, "known",
                      recover.setdefault(task.name, ConfigRecovery(task))) if row else None
        (out.append(it) if it is not None else missing.append(f"{k['env_id']} {k['shape']}"))
    if log:
        log(f"best known: {len(out)} programs to time with the board's kernels"
            + (f"; not recovered as a program: {', '.join(missing)}" if missing else ""))
    return out


def retime_items(task_name: str, board_shapes: set, log=None) -> list:
    """`plan --retime TASK`: every program the task's tables hold at the board's shapes,
    to be timed again (its row recovered as a program and confirmed by its hash); their
    new rows supersede the old ones (`TableBackend` reads a program's last row), for rows
    timed against an anchor that has since changed."""
    from argus_env.envs import ENV_IDS
    from argus_env.measure.analytic import TableBackend
    from argus_env.measure.recorded import ConfigRecovery
    from argus_env.task import get_task
    task = get_task(task_name)
    env_id = {t: e for e, t in dict(ENV_IDS).items()}[task.name]
    shapes = {s for e, s in board_shapes if e == env_id}
    recover, out, skipped = ConfigRecovery(task), [], 0
    for row in TableBackend(HARDWARE).table(task)["rows"].values():
        if row.get("shape") not in shapes:
            continue
        it = row_item(task, env_id, row, "retime", recover)
        if it is None:
            skipped += 1
            continue
        out.append(it)
    if log:
        log(f"retime {task_name}: {len(out)} programs of its {HARDWARE} tables at "
            f"{', '.join(sorted(shapes))}; {skipped} rows not recovered as their program "
            "(left out)")
    return out


# ====================================================================== plan
def git_commit() -> str:
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True,
                             text=True, timeout=10)
        return out.stdout.strip() if out.returncode == 0 else ""
    except (OSError, subprocess.TimeoutExpired):
        return ""


def make_plan(board: Path, walks: int, eval_walks: int, walk_steps: int, seed: int,
              records: list[Path], walk_shapes: str = "all", log=print,
              configs: list[str] = (), retime: list[str] = (), neighbours: list[str] = (),
              neighbour_top: int = 1, neighbour_shapes=None, verdict: bool = False) -> dict:
    """Everything to measure and to count: the header (the board's lines, settings) and
    the items, deduplicated."""
    from argus_env.bench.results import read_records
    from argus_env.envs import ENV_IDS
    lines = board_lines(board) if str(board) != "none" else []
    if str(board) == "none" and (eval_walks or (walks and walk_shapes == "board")):
        raise SystemExit("--board none: there are no board shapes for --eval-walks or "
                         "--walk-shapes board (walks go to every suite shape)")
    board_shapes = {(ln["env_id"], ln["shape"]) for ln in lines}
    per_env: dict = {}
    for env_id, shape in sorted(board_shapes):
        per_env.setdefault(env_id, []).append(shape)
    items = Items()
    found, verdicts = episode_items(lines, "board", board_shapes)
    for it in found:
        items.add(it)
    log(f"board: {len(lines)} lines, replays {_counts(verdicts.values())}")
    for it in known_items(lines, log):
        items.add(it)
    for path in records:
        found, v = episode_items(read_records([path]), "records", board_shapes)
        for it in found:
            items.add(it)
        log(f"records {path}: replays {_counts(v.values())}")
    if configs:
        for it in config_items(list(configs), board_shapes, log, seed=seed):
            items.add(it)
    for task_name in retime:
        for it in retime_items(task_name, board_shapes, log):
            items.add(it)
    if neighbours and neighbour_shapes:
        from argus_env.task import get_task
        named = {c.name for t in neighbours for c in get_task(t).shapes}
        unknown = sorted(set(neighbour_shapes) - named)
        if unknown:
            raise SystemExit(f"--neighbour-shapes: {', '.join(unknown)}: not a suite shape of "
                             f"{', '.join(neighbours)}")
    for task_name in neighbours:
        for it in neighbour_items(task_name, neighbour_top, neighbour_shapes, log):
            items.add(it)
    env_ids = list(dict(ENV_IDS))
    if walks:
        for it in walk_items(env_ids, walks, walk_steps, seed,
                             per_env if walk_shapes == "board" else None, "walk", board_shapes,
                             log):
            if it.population:
                it.sources = ["walk-board"]
            items.add(it)
    if eval_walks:
        for it in walk_items(env_ids, eval_walks, walk_steps, seed + 1000, per_env, "heldout",
                             board_shapes, log):
            items.add(it)
    if verdict:
        items.retain(refused_by_verdict(list(items), log))
    found = mark_held(items, log)
    log(f"{len(items)} distinct programs, {found} priced from the tables")
    header = {"kind": "plan", "created": _now(), "commit": git_commit(), "board": str(board),
              "hardware": HARDWARE,
              "walks": walks, "eval_walks": eval_walks, "walk_steps": walk_steps, "seed": seed,
              "walk_shapes": walk_shapes, "records": [str(p) for p in records],
              "configs": list(configs), "retime": list(retime),
              "neighbours": list(neighbours), "neighbour_top": neighbour_top,
              "verdict": verdict,
              "lines": [line_view(ln) for ln in lines]}
    return {"header": header, "items": list(items)}


def line_view(line: dict) -> dict:
    from argus_env.task import get_task
    task = get_task(line["task"])
    return {"agent": line["agent"], "env_id": line["env_id"], "task": line["task"],
            "shape": line["shape"], "sizes": line["sizes"], "seed": line["seed"],
            "track": line.get("track"), "budget": line.get("budget"),
            "hardware": line["hardware"], "submitted": line["submitted"],
            "submitted_program_hash": line.get("submitted_program_hash"),
            "recorded_frac_anchor": line["final_frac_anchor"] if line["submitted"] else 0.0,
            "recorded_tflops": line.get("final_tflops"),
            "final_measured_by": line.get("final_measured_by"),
            "key": item_key(task.name, line["sizes"], line["submitted_program_hash"])
            if line.get("submitted_program_hash") else None}


def write_plan(plan: dict, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    with tmp.open("w") as f:
        f.write(json.dumps(plan["header"]) + "\n")
        for it in plan["items"]:
            f.write(json.dumps(asdict(it)) + "\n")
    os.replace(tmp, path)


def read_plan(path: Path) -> dict:
    if not path.exists():
        raise SystemExit(f"{path}: no plan; make one first (on a CPU machine with the envs): "
                         f"python benchmarks/record_programs.py plan --out {path.parent}")
    text = path.read_text().splitlines()
    header = json.loads(text[0])
    if header.get("kind") != "plan":
        raise SystemExit(f"{path}: not a plan (its first line is not the plan's header)")
    items = [Item(**json.loads(t)) for t in text[1:] if t.strip()]
    if header.get("hardware", "h200") != HARDWARE:
        # the plan marked what another hardware's tables price: here only this
        # hardware's own tables hold anything
        for it in items:
            it.held = False
    return {"header": header, "items": items,
            "sha256": hashlib.sha256(path.read_bytes()).hexdigest()}


# ====================================================================== state
def read_results(path: Path) -> dict:
    """key -> the last answer recorded for it (a torn last line is ignored)."""
    out = {}
    if path.exists():
        for text in path.read_text().splitlines(keepends=True):
            if text.endswith("\n") and text.strip():
                rec = json.loads(text)
                out[rec["key"]] = rec
    return out


def append_result(path: Path, rec: dict) -> None:
    data = (json.dumps(rec) + "\n").encode()
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)


def is_verdict(rec: dict) -> bool:
    """A recorded answer that says something about the program (a worker stopped from
    outside, `transient`, does not: it is measured again, at most twice)."""
    return not rec.get("transient") or rec.get("attempts", 1) >= 2


def select(items: list[Item], held: set, done: dict, heldout: bool = False) -> list[Item]:
    """What remains to measure, in priority order: programs the tables lack, and the
    board's submitted programs (whose live figure is wanted even where a table holds
    them); held-out walks the tables lack only when `heldout` (their figures test the
    estimates, `evaluate`, and never enter the tables); never what `done` has a verdict
    for."""
    out = [it for it in items if (heldout or not it.heldout)
           and (it.board or it.known or it.retime or it.key not in held)
           and not (it.key in done and is_verdict(done[it.key]))]
    return sorted(out, key=lambda i: (i.priority, i.task, i.shape, i.program_hash))


def estimate_seconds(items: list[Item], compile_workers: int) -> float:
    """Assumed GPU time for `items`: each task's seconds per program when its table was
    recorded, plus compiling in `compile_workers` processes."""
    timing = sum(SECONDS_PER_PROGRAM.get(i.task, 2.0) for i in items)
    return timing + COMPILE_SECONDS * len(items) / max(compile_workers, 1)


# ====================================================================== coverage
def coverage(items: list[Item], held: set, measured: set) -> list[dict]:
    """Per task and source group, of the distinct programs visited at the leaderboard's
    shapes: how many the tables held before and how many they hold with this run's rows."""
    groups = {"episodes": lambda i: bool({"board", "episode", "records"} & set(i.sources)),
              "walks": lambda i: bool({"walk", "walk-board"} & set(i.sources)),
              "held-out walks": lambda i: "heldout" in i.sources}
    out = []
    tasks = sorted({i.task for i in items})
    for group, member in groups.items():
        for task in tasks + ["all"]:
            pop = [i for i in items if i.population and member(i) and task in (i.task, "all")]
            if not pop:
                continue
            before = sum(i.key in held for i in pop)
            after = sum(i.key in held or i.key in measured for i in pop)
            out.append({"group": group, "task": task, "programs": len(pop), "before": before,
                        "after": after})
    return out


def print_coverage(rows: list[dict], out=print) -> None:
    out("coverage: programs visited at the leaderboard's shapes that the tables price")
    out(f"  {'source':<15}{'task':<11}{'programs':>9}{'before':>15}{'after':>15}")
    for r in rows:
        n = r["programs"]
        out(f"  {r['group']:<15}{r['task']:<11}{n:>9}{r['before']:>7} ({r['before'] / n:4.0%})"
            f"{r['after']:>7} ({r['after'] / n:4.0%})")


# ====================================================================== the GPU part
def gpu_provenance(rounds: int, rep_ms: int, commit: str) -> dict:
    from argus_env.measure import provenance
    prov = provenance.collect()
    prov.update(protocol=PROTOCOL.format(rounds=rounds, rep_ms=rep_ms),
                commit=git_commit() or commit)
    return prov


def _warm_one(payload: dict) -> tuple[str, str, float]:
    """Compile one program in a pool process by launching it once at its real shape (so
    Triton's on-disk cache holds it when the measuring worker loads it); the error, if
    any, is only a hint: the measuring worker gives the verdict."""
    os.environ["TRITON_INTERPRET"] = "0"
    t0 = time.perf_counter()
    try:
        import torch

        from argus_env import lower
        from argus_env.dsl.dtypes import DTYPES
        from argus_env.dsl.program import Program
        from argus_env.task import get_task
        task = get_task(payload["task"])
        program = Program.from_text(payload["program"])
        launch = lower.load(program, interpret=False)
        sizes = payload["sizes"]
        sizes = task.program_sizes(program, sizes) if hasattr(task, "program_sizes") else sizes
        gen = torch.Generator(device="cuda").manual_seed(0)
        args = dict(task.make_inputs(program, sizes, "cuda", gen))
        for p in program.kernel.tensors:
            if p.name not in args:
                shape = [sizes[d] for d in p.dims]
                dtype = getattr(torch, DTYPES[p.dtype].torch)
                args[p.name] = torch.empty(shape[::-1], device="cuda", dtype=dtype).t() \
                    if p.order == "col_major" else torch.empty(shape, device="cuda", dtype=dtype)
        launch(**{p.name: args[p.name] for p in program.kernel.tensors})
        torch.cuda.synchronize()
        return payload["key"], "", time.perf_counter() - t0
    except Exception as e:  # noqa: BLE001 - reported again by the measuring worker
        return payload["key"], f"{type(e).__name__}: {e}"[:300], time.perf_counter() - t0


def warm(items: list[Item], workers: int, deadline: float, log=print) -> dict:
    """Compile `items` in `workers` processes until `deadline` (time.time()); a process
    that crashes or hangs costs only its program's warm-up. key -> hint."""
    if workers <= 1 or not items:
        return {}
    import multiprocessing as mp
    t0 = time.time()
    hints: dict = {}
    ctx = mp.get_context("spawn")
    pool = ctx.Pool(workers, maxtasksperchild=20)
    try:
        jobs = {i.key: pool.apply_async(_warm_one, ({"key": i.key, "task": i.task,
                                                     "sizes": i.sizes, "program": i.program},))
                for i in items}
        while jobs and time.time() < deadline:   # a hung or crashed process holds only its own
            for key in [k for k, job in jobs.items() if job.ready()]:
                try:
                    hints[key] = jobs.pop(key).get()[1]
                except Exception as e:  # noqa: BLE001 - the pool's own failure
                    hints[key] = f"{type(e).__name__}: {e}"[:300]
            time.sleep(0.2)
    finally:
        pool.terminate()
        pool.join()
    log(f"compiled {len(hints)} of {len(items)} programs in {workers} processes in "
        f"{time.time() - t0:.0f} s ({sum(bool(e) for e in hints.values())} failed there)")
    return hints


class GpuMeasurer:
    """Times programs in the project's measurement worker (`op="measure"`), one at a time."""

    def __init__(self, rounds: int = 2, rep_ms: int = 20, timeout: float = 120.0):
        from argus_env.measure.worker import Worker
        from argus_env.target import load_target
        profile = load_target(HARDWARE).profile
        self.options = {"rounds": rounds, "rep_ms": rep_ms,
                        "peak_tflops": profile.bf16_tflops_peak,
                        "dram_tbps": profile.dram_tbps_peak}
        self.worker = Worker(interpret=False, timeout=timeout)

    def __call__(self, item: Item) -> dict:
        return self.worker.run(item.program, item.task, item.sizes,
                               seed=int(item.program_hash[:6], 16) % 1000, op="measure",
                               options=self.options)

    def close(self) -> None:
        self.worker.stop()


def measure_items(items: list[Item], results: Path, measure, *, max_seconds: float,
                  prior: dict | None = None, clock=time.time, log=print,
                  warm_fn=None, compile_workers: int = 12) -> dict:
    """Measure `items` in order with `measure(item) -> answer` (the worker's dict) until
    the next one would end past `max_seconds`, appending each answer to `results` at once.
    `warm_fn(items, deadline)` first compiles, in `compile_workers` processes, the items
    this run can hope to time (None: no pool). Returns counts."""
    start = clock()
    prior = prior or {}
    stop = start + max_seconds - END_MARGIN
    todo, budget = [], 0.0
    per_compile = COMPILE_SECONDS / max(compile_workers, 1) if warm_fn is not None else 0.0
    for it in items:   # what this run can hope to compile and time
        budget += SECONDS_PER_PROGRAM.get(it.task, 2.0) + per_compile
        if start + budget > stop:
            break
        todo.append(it)
    if warm_fn is not None and todo:
        warm_fn(todo, start + 0.5 * (stop - start))
    counts = {"measured": 0, "ok": 0, "failed": 0, "transient": 0, "left": 0}
    for n, it in enumerate(items):
        if clock() + SECONDS_PER_PROGRAM.get(it.task, 2.0) > stop:
            counts["left"] = len(items) - n
            log(f"time limit: {counts['left']} programs left; run again to continue")
            break
        t0 = clock()
        ans = measure(it)
        rec = result_record(it, ans, clock() - t0)
        if rec["transient"]:
            rec["attempts"] = prior.get(it.key, {}).get("attempts", 0) + 1
        append_result(results, rec)
        counts["measured"] += 1
        counts["transient" if rec["transient"] else "ok" if rec["ok"] else "failed"] += 1
        log(json.dumps({k: rec[k] for k in ("task", "shape", "program_hash", "status", "frac_anchor",
                                            "seconds")} | {"error": rec["error"][:100]}))
    return counts


def result_record(it: Item, ans: dict, seconds: float) -> dict:
    """One answer as results.jsonl keeps it."""
    ok = bool(ans.get("ok"))
    status = "ok" if ok else str(ans.get("status") or "error")
    if status not in ("ok", "compile", "mismatch", "impossible", "timeout", "fault"):
        status = "fault" if "fault" in status else "compile"
    tflops, anchor = ans.get("tflops"), ans.get("anchor_tflops")
    frac = tflops / anchor if ok and tflops and anchor else None
    prov = ans.get("provenance") or {}
    return {"key": it.key, "task": it.task, "env_id": it.env_id, "shape": it.shape,
            "sizes": it.sizes, "program_hash": it.program_hash, "ok": ok, "status": status,
            "error": "" if ok else f"{status}: {ans.get('message', '')}"[:300],
            "transient": bool(ans.get("transient")),
            "ms": ans.get("ms"), "tflops": tflops, "anchor_ms": ans.get("anchor_ms"),
            "anchor_tflops": anchor, "ratio": ans.get("ratio"), "frac_anchor": frac,
            "max_rel_err": ans.get("max_rel_err"), "timing": ans.get("timing"),
            "ms_rounds": ans.get("ms_rounds"), "anchor_ms_rounds": ans.get("anchor_ms_rounds"),
            "seconds": round(seconds, 2), "timestamp": round(time.time(), 1), "date": _now(),
            "provenance": {k: prov.get(k) for k in ("gpu", "driver", "torch", "triton", "cuda",
                                                     "capability", "clocks_mhz", "power")}}


# ====================================================================== outputs
def table_row(item: Item, rec: dict, header: list[str], prov: dict) -> dict:
    """A results record in the task table's columns, then the provenance columns."""
    from argus_env.task import get_task
    task = get_task(item.task)
    row = {c: item.sizes[c] for c in header if c in item.sizes}
    row.update(shape=item.shape, config=item.config, summary=item.summary,
               program_hash=item.program_hash, ok=rec["ok"], error=rec["error"],
               max_rel_err=rec.get("max_rel_err"), timestamp=rec["timestamp"],
               interpreter=False)
    if rec["ok"]:
        row.update(ms=rec["ms"], tflops=rec["tflops"], ratio=rec["ratio"],
                   anchor_ms=rec["anchor_ms"], anchor_tflops=rec["anchor_tflops"],
                   cublas_ms=rec["anchor_ms"], cublas_tflops=rec["anchor_tflops"])
        if "gbps" in header:
            row["gbps"] = task.min_bytes(item.sizes) / rec["ms"] / 1e6
    if "anchor_mode" in header and hasattr(task, "anchor_mode"):
        row["anchor_mode"] = task.anchor_mode(item.sizes)
    if "compile_s" in header:
        row["compile_s"] = ""
    out = {c: row.get(c, "") for c in header}
    p = rec.get("provenance") or {}
    out.update({"gpu": p.get("gpu") or prov.get("gpu"), "driver": p.get("driver") or
                prov.get("driver"), "torch": p.get("torch") or prov.get("torch"),
                "triton": p.get("triton") or prov.get("triton"),
                "cuda": p.get("cuda") or prov.get("cuda"), "protocol": prov.get("protocol"),
                "date": rec["date"], "commit": prov.get("commit")})
    return out


def write_outputs(out_dir: Path, plan: dict, done: dict, held: set, prov: dict) -> dict:
    """The per-task CSVs of rows the tables lack, and the live figures of the board."""
    items = {i.key: i for i in plan["items"]}
    written = {}
    for task in sorted({i.task for i in plan["items"]}):
        header = table_header(task)
        keys = recorded(done)
        rows = [table_row(items[k], r, header, prov) for k, r in sorted(done.items())
                if r["task"] == task and k in keys and k in items and not items[k].heldout
                and (k not in held or items[k].retime)]
        path = out_dir / f"table_{task}_{HARDWARE}.csv"
        with path.open("w", newline="") as f:
            w = csv.DictWriter(f, header + list(PROVENANCE_COLUMNS))
            w.writeheader()
            w.writerows(rows)
        written[task] = len(rows)
    live_path = out_dir / f"live_{HARDWARE}.json"
    figures, views = live_figures(plan, done)
    from argus_env.bench.live import write_live
    write_live(live_path, HARDWARE, figures, {**prov, "plan": plan.get("sha256"),
                                              "plan_commit": plan["header"].get("commit")}, views)
    return {"tables": written, "figures": len(figures), "lines": len(views)}


def live_figures(plan: dict, done: dict) -> tuple[list[dict], list[dict]]:
    """One figure per board program with a verdict, and the per-line view."""
    figures, seen, views = [], set(), []
    for ln in plan["header"]["lines"]:
        rec = done.get(ln["key"]) if ln["key"] else None
        if rec is not None and rec["key"] not in recorded({rec["key"]: rec}):
            rec = None
        fig = None
        if rec is not None:
            fig = {"env_id": ln["env_id"], "shape": ln["shape"],
                   "program_hash": ln["submitted_program_hash"], "sizes": ln["sizes"],
                   "ok": rec["ok"], "status": rec["status"], "error": rec["error"],
                   "frac_anchor": rec["frac_anchor"], "tflops": rec["tflops"],
                   "anchor_tflops": rec["anchor_tflops"], "ms": rec["ms"],
                   "anchor_ms": rec["anchor_ms"], "ratio": rec["ratio"], "date": rec["date"]}
            if fig["frac_anchor"] is None:
                fig.pop("frac_anchor")
            key = (ln["env_id"], ln["shape"], ln["submitted_program_hash"])
            if key not in seen:
                seen.add(key)
                figures.append(fig)
        live = (fig.get("frac_anchor") or 0.0) if fig and fig["ok"] else (0.0 if fig else None)
        views.append({k: ln[k] for k in ("agent", "env_id", "shape", "seed", "track", "budget",
                                          "submitted_program_hash", "recorded_frac_anchor",
                                          "final_measured_by")}
                     | {"live_frac_anchor": live, "live_status": fig["status"] if fig else None})
    return figures, views


def print_summary(plan: dict, done: dict, held: set, counts: dict | None, out=print) -> None:
    """The short table: per task, what the plan holds and where it stands; then the board."""
    items = plan["items"]
    out(f"\n{'task':<11}{'planned':>8}{'in tables':>10}{'to measure':>11}{'ok':>6}"
        f"{'failed':>7}{'left':>6}{'est. s left':>12}")
    pending = select(items, held, done)
    for task in sorted({i.task for i in items}):
        mine = [i for i in items if i.task == task and not i.heldout]
        rec = [done[i.key] for i in mine if i.key in done and is_verdict(done[i.key])]
        left = [i for i in pending if i.task == task]
        want = [i for i in mine if i.board or i.known or i.retime or i.key not in held]
        out(f"{task:<11}{len(mine):>8}{sum(i.key in held for i in mine):>10}{len(want):>11}"
            f"{sum(r['ok'] for r in rec):>6}{sum(not r['ok'] for r in rec):>7}{len(left):>6}"
            f"{estimate_seconds(left, 12):>12.0f}")
    out_held = [i for i in items if "heldout" in i.sources and i.population]
    if out_held:
        lack = [i for i in out_held if i.key not in held]
        timed = [done[i.key] for i in lack if i.key in done and is_verdict(done[i.key])]
        out(f"held-out walks: {len(out_held)} programs at the board's shapes, {len(lack)} the "
            f"tables lack, {len(timed)} of those timed ({sum(r['ok'] for r in timed)} ok); "
            f"`evaluate` sets the estimates against them")
    lines = plan["header"]["lines"]
    figs, views = live_figures(plan, done)
    out(f"\n{'env':<20}{'lines':>6}{'live':>6}{'failed':>7}{'live/recorded median':>22}")
    for env in sorted({v["env_id"] for v in views}):
        mine = [v for v in views if v["env_id"] == env]
        have = [v for v in mine if v["live_status"] is not None]
        ratios = [v["live_frac_anchor"] / v["recorded_frac_anchor"] for v in have
                  if v["recorded_frac_anchor"]]
        med = f"{statistics.median(ratios):.3f}" if ratios else "-"
        out(f"{env:<20}{len(mine):>6}{len(have):>6}"
            f"{sum(v['live_status'] != 'ok' for v in have):>7}{med:>22}")
    if counts:
        out(f"\nthis run: {counts}")
    del lines, figs


# ====================================================================== append
def append_tables(out_dir: Path, tables_root: Path = ROOT / "tasks", log=print) -> dict:
    """Append the output folder's rows to `tasks/<task>/table_h200.csv`, leaving out the
    programs the tables already hold, but for those the plan timed again (`--retime`),
    whose new row goes after the old one and supersedes it (once: a row with the same
    timestamp is not added twice); the header gains the provenance columns (earlier rows
    have them empty). Returns rows added per task."""
    plan_path = out_dir / "plan.jsonl"
    again = {i.key for i in read_plan(plan_path)["items"] if i.retime} \
        if plan_path.exists() else set()
    added = {}
    for src in sorted(out_dir.glob(f"table_*_{HARDWARE}.csv")):
        task = src.name[len("table_"):-len(f"_{HARDWARE}.csv")]
        dst = tables_root / task / f"table_{HARDWARE}.csv"
        if not dst.exists():
            if not dst.parent.is_dir():
                raise SystemExit(f"{dst.parent}: no such task folder (from {src})")
            with src.open(newline="") as f:   # the hardware's first table: the rows' columns
                header, rows = list(csv.DictReader(f).fieldnames), []
        else:
            with dst.open(newline="") as f:
                reader = csv.DictReader(f)
                header, rows = list(reader.fieldnames), list(reader)
        dims = anchor_dims(task)
        have = {tuple(r[d] for d in dims) + (r["program_hash"],) for r in rows}
        stamped = {tuple(r[d] for d in dims) + (r["program_hash"], r.get("timestamp"))
                   for r in rows}
        with src.open(newline="") as f:
            new = list(csv.DictReader(f))

        def wanted(r) -> bool:
            key = tuple(r[d] for d in dims) + (r["program_hash"],)
            if key not in have:
                return True
            retimed = item_key(task, r, r["program_hash"]) in again
            return retimed and key + (r.get("timestamp"),) not in stamped
        fresh = [r for r in new if wanted(r)]
        for c in PROVENANCE_COLUMNS:
            if c not in header:
                header.append(c)
        tmp = dst.with_suffix(".tmp")
        with tmp.open("w", newline="") as f:
            w = csv.DictWriter(f, header)
            w.writeheader()
            w.writerows(rows + fresh)
        os.replace(tmp, dst)
        added[task] = len(fresh)
        log(f"{dst.relative_to(tables_root.parent) if dst.is_relative_to(tables_root.parent) else dst}"
            f": {len(fresh)} rows added ({len(new) - len(fresh)} already held)")
    return added


# ====================================================================== commands
def _now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")


def _counts(values) -> dict:
    out: dict = {}
    for v in values:
        out[v] = out.get(v, 0) + 1
    return out


def cmd_plan(args) -> int:
    global HARDWARE
    HARDWARE = args.hardware or HARDWARE
    plan = make_plan(args.board, args.walks, args.eval_walks, args.walk_steps, args.seed,
                     args.records, args.walk_shapes, configs=args.configs,
                     retime=args.retime, neighbours=args.neighbours,
                     neighbour_top=args.neighbour_top, neighbour_shapes=args.neighbour_shapes,
                     verdict=args.verdict)
    items = plan["items"]
    held = held_keys({i.task for i in items}, items)
    todo = select(items, held, {})
    print(f"{len(items)} distinct programs; {len(todo)} to measure "
          f"({sum(i.board for i in todo)} board programs for live figures, "
          f"{sum(i.key not in held for i in todo)} the tables lack)")
    if args.dry_run:
        for it in todo[: args.list]:
            print(f"  {it.task:<10}{it.shape:<32}{it.program_hash}  {','.join(it.sources)}  "
                  f"{'held' if it.key in held else 'new'}")
    else:
        write_plan(plan, args.out / "plan.jsonl")
        print(f"wrote {args.out / 'plan.jsonl'}")
    print_coverage(coverage(items, held, set()))
    est = estimate_seconds(todo, args.compile_workers)
    print(f"estimated GPU time: {est:.0f} s ({math.ceil(est / (540 - END_MARGIN))} runs of "
          f"--max-seconds 540), assuming {SECONDS_PER_PROGRAM} s per program and "
          f"{COMPILE_SECONDS:.0f} s per compile over {args.compile_workers} processes")
    return 0


def gpu_hardware() -> str | None:
    """The hardware profile of the GPU this process sees (None: no CUDA GPU, or one
    without a profile)."""
    import torch
    if not torch.cuda.is_available():
        return None
    name = torch.cuda.get_device_name(0).upper().replace(" ", "")
    return next((hw for key, hw in GPU_PROFILES.items() if key in name), None)


def folder_hardware(out_dir: Path) -> str | None:
    """The hardware a recording folder's runs measured on (its state file), if any."""
    state = out_dir / "state.json"
    if state.exists():
        return json.loads(state.read_text()).get("hardware")
    return None


def cmd_measure(args) -> int:
    out_dir = args.out
    global HARDWARE
    if args.hardware == "auto":
        HARDWARE = (gpu_hardware() if not args.dry_run else None) or folder_hardware(out_dir) \
            or HARDWARE
    else:
        HARDWARE = args.hardware
    earlier = folder_hardware(out_dir)
    if earlier and earlier != HARDWARE:
        print(f"{out_dir}: its answers were measured on {earlier}, this run would be on "
              f"{HARDWARE}: use another folder (copy plan.jsonl there)", file=sys.stderr)
        return 3
    print(f"hardware: {HARDWARE}")
    plan = read_plan(out_dir / "plan.jsonl")
    results = out_dir / "results.jsonl"
    done = read_results(results)
    held = held_keys({i.task for i in plan["items"]}, plan["items"])
    todo = select(plan["items"], held, done, args.heldout)
    state_path = out_dir / "state.json"
    state = json.loads(state_path.read_text()) if state_path.exists() else {"chunks": []}
    if state.get("plan") and state["plan"] != plan["sha256"]:
        print("note: the plan changed since the last run; recorded answers are kept by program")
    print(f"{len(todo)} programs to measure ({len(done)} answered before, "
          f"{len(held)} held by the tables); estimated {estimate_seconds(todo, args.compile_workers):.0f} s")
    if args.dry_run:
        for it in todo[: args.list]:
            print(f"  {it.task:<10}{it.shape:<32}{it.program_hash}  {','.join(it.sources)}")
        print_coverage(coverage(plan["items"], held, recorded(done)))
        print_summary(plan, done, held, None)
        return 0
    import torch
    if not torch.cuda.is_available():
        print("no CUDA GPU: `measure` times programs on a GPU (--dry-run lists them)",
              file=sys.stderr)
        return 2
    gpu = torch.cuda.get_device_name(0)
    if HARDWARE.upper() not in gpu.upper().replace(" ", "") and not args.any_gpu:
        # rows timed on another GPU would corrupt this hardware's tables
        print(f"this GPU is {gpu!r}, not an {HARDWARE.upper()}: its figures would not "
              f"belong in the {HARDWARE} tables (--hardware auto takes the GPU's own; "
              f"--any-gpu overrides)", file=sys.stderr)
        return 3
    prov = gpu_provenance(args.rounds, args.rep_ms, plan["header"].get("commit", ""))
    measurer = GpuMeasurer(args.rounds, args.rep_ms, args.timeout)
    try:
        run_chunk(out_dir, measurer, prov, max_seconds=args.max_seconds,
                  warm_fn=lambda its, dl: warm(its, args.compile_workers, dl),
                  compile_workers=args.compile_workers, heldout=args.heldout)
    finally:
        measurer.close()
    return 0


def run_chunk(out_dir: Path, measure, prov: dict, *, max_seconds: float, warm_fn=None,
              compile_workers: int = 12, clock=time.time, log=print,
              heldout: bool = False) -> dict:
    """One resumable run: measure what the plan in `out_dir` still lacks with
    `measure(item) -> answer` for at most `max_seconds` (the held-out walks too when
    `heldout`), then rewrite the outputs and the state file and print the coverage and
    the summary. Returns the state."""
    plan = read_plan(out_dir / "plan.jsonl")
    results = out_dir / "results.jsonl"
    done = read_results(results)
    held = held_keys({i.task for i in plan["items"]}, plan["items"])
    todo = select(plan["items"], held, done, heldout)
    state_path = out_dir / "state.json"
    state = json.loads(state_path.read_text()) if state_path.exists() else {"chunks": []}
    started = _now()
    counts = measure_items(todo, results, measure, max_seconds=max_seconds, prior=done,
                           warm_fn=warm_fn, compile_workers=compile_workers, clock=clock,
                           log=log)
    done = read_results(results)
    written = write_outputs(out_dir, plan, done, held, prov)
    state["plan"] = plan["sha256"]
    state["hardware"] = HARDWARE
    state["chunks"].append({"started": started, "ended": _now(), **counts,
                            "provenance": prov, "outputs": written})
    state.update(answered=len(done), pending=len(select(plan["items"], held, done, heldout)))
    state_path.write_text(json.dumps(state, indent=1) + "\n")
    print_coverage(coverage(plan["items"], held, recorded(done)), out=log)
    print_summary(plan, done, held, counts, out=log)
    return state


def recorded(done: dict) -> set:
    """Keys whose answer is a verdict a table row can hold."""
    return {k for k, r in done.items() if is_verdict(r) and not r["transient"]}


# ====================================================================== evaluate
def evaluate_heldout(plan: dict, done: dict, log=print) -> dict:
    """The held-out walks as the environment prices them now, against their live figures:
    per task, how many the env answers from the tables (a recorded run or failure), how
    many it refuses before pricing (the compile verdict for the target), how many it
    prices that then fail on the GPU, and, for those the cost model prices, the
    within-shape Spearman of model against live TFLOP/s and the median |log(model/live)|.
    Only held-out programs with a live verdict (or a table figure) count."""
    from argus_env.dsl.program import Program
    from argus_env.measure.analytic import TableBackend
    from argus_env.measure.learned import _spearman
    from argus_env.measure.legality import LegalityUnavailable, make_legality
    from argus_env.target import load_target
    from argus_env.task import get_task
    # the analytic model's figures are the ones `--record-error` keeps (the correction's
    # own held-out figures live in its file, `fit_cost_model.py --export --walks`); the
    # corrected price is set beside each row
    backend, target = TableBackend(HARDWARE, estimator="analytic"), load_target(HARDWARE)
    corrected_backend = TableBackend(HARDWARE, estimator="corrected")
    legal: dict = {}
    rows = []
    for it in plan["items"]:
        if "heldout" not in it.sources or not it.population:
            continue
        task = get_task(it.task)
        program = Program.from_text(it.program)
        m = backend.measure(program, it.sizes, task)
        mc = corrected_backend.measure(program, it.sizes, task)
        rec = done.get(it.key)
        live = rec if rec is not None and is_verdict(rec) and not rec["transient"] else None
        if m.backend != "table" and live is None:
            continue                       # neither a table figure nor a live one
        verdict = "unchecked"
        if task.name not in legal:
            try:
                legal[task.name] = make_legality(task, target, True)
            except LegalityUnavailable as e:
                legal[task.name] = None
                log(f"legality unavailable for {task.name}: {e}")
        if legal[task.name] is not None:
            v = legal[task.name].verdict(program, sizes=dict(task.program_sizes(program, it.sizes)))
            verdict = "ok" if v.ok else "refused"
        rows.append({"task": it.task, "shape": it.shape, "program_hash": it.program_hash,
                     "held_at_plan": it.held, "backend": m.backend, "priced_ok": bool(m.ok),
                     "estimate_tflops": m.tflops if m.ok else None,
                     "corrected_tflops": mc.tflops if mc.ok else None, "legality": verdict,
                     "live_status": live["status"] if live else None,
                     "live_tflops": live["tflops"] if live and live["ok"] else None,
                     "live_frac_anchor": live["frac_anchor"] if live else None})
    for lg in legal.values():
        if lg is not None:
            lg.close()
    tasks = {}
    for task in sorted({r["task"] for r in rows}):
        mine = [r for r in rows if r["task"] == task]
        priced = [r for r in mine if r["legality"] != "refused"]
        model = [r for r in priced if r["backend"] != "table" and r["priced_ok"]
                 and r["live_tflops"]]
        by_shape: dict = {}
        for r in model:
            by_shape.setdefault(r["shape"], []).append(r)
        rhos = {s: _spearman([r["estimate_tflops"] for r in rs], [r["live_tflops"] for r in rs])
                for s, rs in by_shape.items() if len(rs) >= 3}
        rhos = {s: rho for s, rho in rhos.items() if not math.isnan(rho)}
        logs = sorted(abs(math.log(r["estimate_tflops"] / r["live_tflops"])) for r in model)
        clogs = sorted(abs(math.log(r["corrected_tflops"] / r["live_tflops"])) for r in model
                       if r["corrected_tflops"])
        crhos = {s: _spearman([r["corrected_tflops"] or 0.0 for r in rs],
                              [r["live_tflops"] for r in rs])
                 for s, rs in by_shape.items() if len(rs) >= 3}
        crhos = {s: rho for s, rho in crhos.items() if not math.isnan(rho)}
        cweight = sum(len(by_shape[s]) for s in crhos)
        weight = sum(len(by_shape[s]) for s in rhos)
        tasks[task] = {
            "programs": len(mine),
            "refused_before_pricing": len(mine) - len(priced),
            "priced_from_tables": sum(r["backend"] == "table" for r in priced),
            "share_from_tables": (sum(r["backend"] == "table" for r in priced) / len(priced)
                                  if priced else None),
            "priced_then_failed_on_gpu": sum(r["priced_ok"] and r["live_status"] not in
                                             (None, "ok") for r in priced),
            "model_priced_with_live": len(model),
            "spearman_within_shape": (sum(rho * len(by_shape[s]) for s, rho in rhos.items())
                                      / weight if weight else None),
            "spearman_by_shape": rhos,
            "median_abs_log_error": statistics.median(logs) if logs else None,
            "p90_abs_log_error": logs[int(0.9 * (len(logs) - 1))] if logs else None,
            # the same programs priced with the learned correction (`estimator="corrected"`)
            "corrected": {
                "spearman_within_shape": (sum(rho * len(by_shape[s]) for s, rho in crhos.items())
                                          / cweight if cweight else None),
                "median_abs_log_error": statistics.median(clogs) if clogs else None,
                "p90_abs_log_error": clogs[int(0.9 * (len(clogs) - 1))] if clogs else None}}
    return {"kind": "heldout-walks", "hardware": HARDWARE, "created": _now(),
            "plan_commit": plan["header"].get("commit"), "commit": git_commit(),
            "seed": plan["header"].get("seed", 0) + 1000,
            "walk_steps": plan["header"].get("walk_steps"), "tasks": tasks, "rows": rows}


def print_evaluation(ev: dict, out=print) -> None:
    out("held-out walks at the leaderboard's shapes, priced as the env prices them now, "
        f"against the {str(ev.get('hardware', HARDWARE)).upper()}")
    out(f"  {'task':<11}{'programs':>9}{'refused':>8}{'tables':>13}{'priced+failed':>14}"
        f"{'model n':>8}{'spearman':>9}{'med|log|':>9}{'corrected':>20}")

    def fmt(v, spec):
        return "-" if v is None else format(v, spec)
    for task, t in ev["tasks"].items():
        share = f"{t['priced_from_tables']} ({t['share_from_tables']:.0%})" \
            if t["share_from_tables"] is not None else "-"
        c = t.get("corrected") or {}
        out(f"  {task:<11}{t['programs']:>9}{t['refused_before_pricing']:>8}{share:>13}"
            f"{t['priced_then_failed_on_gpu']:>14}{t['model_priced_with_live']:>8}"
            f"{fmt(t['spearman_within_shape'], '.2f'):>9}{fmt(t['median_abs_log_error'], '.3f'):>9}"
            f"{fmt(c.get('spearman_within_shape'), '.2f'):>11}"
            f"{fmt(c.get('median_abs_log_error'), '.3f'):>9}")
    out("  spearman / med|log|: the analytic model; corrected: the same programs priced with "
        "the learned correction")


def cmd_evaluate(args) -> int:
    use_folder_hardware(args.out)
    plan = read_plan(args.out / "plan.jsonl")
    done = read_results(args.out / "results.jsonl")
    if args.record_error and not args.to:
        raise SystemExit("--record-error: name the evaluation's record with --to (the "
                         "model-error files point at it)")
    ev = evaluate_heldout(plan, done)
    if not ev["rows"]:
        raise SystemExit(f"{args.out}: no held-out walk has a live figure or a table figure; "
                         f"time them first: measure --out {args.out} --heldout")
    print_evaluation(ev)
    if args.to:
        args.to.parent.mkdir(parents=True, exist_ok=True)
        args.to.write_text(json.dumps(ev, indent=1) + "\n")
        print(f"wrote {args.to}")
    if args.record_error:
        # the figures every model-priced measurement on this GPU carries from now on
        from argus_env.bench.results import shown
        from argus_env.measure.recorded import record_heldout_error
        from argus_env.task import get_task
        for name, t in ev["tasks"].items():
            where = record_heldout_error(get_task(name), HARDWARE, {
                **t, "created": ev["created"], "commit": ev["commit"],
                "plan_commit": ev["plan_commit"], "seed": ev["seed"],
                "evaluation": shown(args.to)})
            print(f"{name}: " + (f"{shown(where)} carries these figures" if where else
                                 f"no model-error file for {HARDWARE} (run "
                                 f"benchmarks/fit_cost_model.py --hardware {HARDWARE} first)"))
    return 0



def plan_board(out_dir: Path) -> Path | None:
    """The board the folder's plan was made for (its header's `board`), else the default;
    None for a plan made without one (`--board none`)."""
    path = out_dir / "plan.jsonl"
    if path.exists():
        header = json.loads(path.read_text().splitlines()[0])
        if header.get("kind") == "plan" and header.get("board") == "none":
            return None
        if header.get("kind") == "plan" and header.get("board"):
            board = Path(header["board"])
            return board if board.is_absolute() else ROOT / board
    return BOARD


def best_known_of(lines: list[dict], figures: list[dict] | None = None) -> list[dict]:
    """Per (env id, shape) of the board's lines, the best program known on this hardware
    (`argus_env.measure.optimum.best_known`: the fastest correct row of the task's tables,
    read after this run's rows were appended), for the live file: what the board measures
    regret against. Where the live recording timed that very program at that shape
    (`figures`: a board kernel or any program the recording measured is the best known),
    its figure there too (`live_frac_anchor`), so the board's live ratio compares timings
    of one recording."""
    from argus_env.measure.optimum import best_known
    from argus_env.task import get_task
    out, seen = [], set()
    for ln in lines:
        key = (ln["env_id"], ln["shape"])
        if key in seen:
            continue
        seen.add(key)
        found = best_known(get_task(ln["task"]), ln["sizes"], HARDWARE)
        if found:
            try:   # a row's timestamp (seconds since the epoch) as a UTC time
                found["recorded"] = datetime.datetime.fromtimestamp(
                    float(found["recorded"]), datetime.timezone.utc).isoformat(timespec="seconds")
            except (TypeError, ValueError):
                pass
            again = [f["frac_anchor"] for f in figures or ()
                     if (f.get("env_id"), f.get("shape"), f.get("program_hash"))
                     == (ln["env_id"], ln["shape"], found.get("program_hash"))
                     and f.get("status") == "ok" and f.get("frac_anchor")]
            if again:
                found["live_frac_anchor"] = float(statistics.median(again))
            out.append({"env_id": ln["env_id"], "shape": ln["shape"], **found})
    return out


def use_folder_hardware(out_dir: Path) -> None:
    """Read and write the tables of the hardware the folder's runs measured on."""
    global HARDWARE
    HARDWARE = folder_hardware(out_dir) or HARDWARE


def cmd_append(args) -> int:
    use_folder_hardware(args.out)
    print(f"hardware: {HARDWARE}")
    added = append_tables(args.out)
    from argus_env.bench.results import shown
    live = args.out / f"live_{HARDWARE}.json"
    board = plan_board(args.out)
    if board is not None:
        args.live_to = args.live_to or board.parent / f"live_{HARDWARE}.json"
    elif args.live_to:
        print(f"note: the plan was made without a board (--board none): no live figures "
              f"to write to {args.live_to}")
    if live.exists() and args.live_to and board is not None:
        from argus_env.bench.live import read_live, write_live
        read_live(live)   # refuse a malformed file before it reaches the board
        doc = json.loads(live.read_text())
        # the board's kernels and every other program this recording timed
        timed = doc["figures"] + list(read_results(args.out / "results.jsonl").values())
        known = best_known_of(read_plan(args.out / "plan.jsonl")["header"]["lines"], timed)
        write_live(args.live_to, doc["hardware"], doc["figures"], doc["provenance"],
                   doc.get("lines"), known)
        print(f"best known (the tables' fastest correct program, {HARDWARE}): " + "; ".join(
            f"{k['env_id']} {k['shape']} {k['frac_anchor']:.3f}" for k in known))
        print(f"{args.live_to}: the live figures (rebuild the board: argus leaderboard "
              f"{shown(board)} --out-dir {shown(board.parent)})")
    if any(added.values()):
        print("note: table-mode lines that name their table rows (hashes.table_rows) still "
              "replay; older lines that visited these programs now price them from the "
              "tables and replay differently until re-run")
    return 0


def cmd_known(args) -> int:
    """Rewrite a live file with the best known of every (env, shape) its board plays, from
    the tables of the file's hardware as they are now (for a board whose live figures
    were written before `append` recorded best knowns)."""
    global HARDWARE
    from argus_env.bench.live import read_live, write_live
    read_live(args.live)
    doc = json.loads(args.live.read_text())
    HARDWARE = doc["hardware"]
    board = args.board
    if board is None:
        found = sorted(args.live.parent.glob("*.jsonl"))
        if len(found) != 1:
            raise SystemExit(f"{args.live.parent}: {len(found)} results files; name one with "
                             f"--board")
        board = found[0]
    lines = [line_view(ln) for ln in board_lines(board)]
    known = best_known_of(lines, doc["figures"])
    # a best known the file already held, timed in the live run (`live_frac_anchor`, from a
    # program that run measured besides the board's kernels): kept while it is the same
    # program; a new best known has no figure from that run
    before = {(k["env_id"], k["shape"], k["program_hash"]): k for k in doc.get("best_known") or []}
    for k in known:
        old = before.get((k["env_id"], k["shape"], k["program_hash"]))
        if old is not None and "live_frac_anchor" in old and "live_frac_anchor" not in k:
            k["live_frac_anchor"] = old["live_frac_anchor"]
    write_live(args.live, doc["hardware"], doc["figures"], doc["provenance"], doc.get("lines"),
               known)
    for k in known:
        print(f"{k['env_id']:20} {k['shape']:28} best known {k['frac_anchor']:.3f} "
              f"({k['table']}, {str(k.get('recorded'))[:10]}, {k['program_hash'][:12]})")
    missing = {(ln["env_id"], ln["shape"]) for ln in lines} - \
        {(k["env_id"], k["shape"]) for k in known}
    for env_id, shape in sorted(missing):
        print(f"{env_id:20} {shape:28} no correct row in the {HARDWARE} tables")
    return 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("plan", help="what to measure (CPU; needs the envs)")
    p.add_argument("--out", type=Path, required=True, help="output folder")
    p.add_argument("--board", type=Path, default=BOARD,
                   help="leaderboard results file ('none': no board, only the other sources)")
    p.add_argument("--records", type=Path, nargs="*", default=[], help="more episode records")
    p.add_argument("--walks", type=int, default=100, help="priced walk programs per task")
    p.add_argument("--eval-walks", type=int, default=100,
                   help="held-out walk programs per task at the board's shapes (coverage only)")
    p.add_argument("--walk-steps", type=int, default=10)
    p.add_argument("--walk-shapes", choices=("all", "board"), default="all")
    p.add_argument("--configs", nargs="*", default=[], choices=sorted(CONFIG_SETS),
                   help="add named sets of catalog configurations at every suite shape where "
                        "the mask allows them (small-shapes: GEMM swap-AB, stream-K and "
                        f"split-K; sample: {SAMPLE_SIZE} GEMM configurations drawn with --seed; "
                        "model-top: the corrected model's fastest; gemm-expert, attention-expert, "
                        "moe-expert, rmsnorm-expert: that task's expert configuration)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--retime", nargs="*", default=[], metavar="TASK",
                   help="time again every program the task's tables hold at the board's "
                        "shapes; the new rows supersede the old (rows timed against an "
                        "anchor that has since changed)")
    p.add_argument("--neighbours", nargs="*", default=[], metavar="TASK",
                   help="at every suite shape, every configuration one legal catalog action "
                        "from the tables' --neighbour-top fastest programs (a round of local "
                        "search around the best known; the tables' hardware's mask)")
    p.add_argument("--neighbour-top", type=int, default=1)
    p.add_argument("--neighbour-shapes", nargs="*", default=None, metavar="SHAPE",
                   help="only these suite shapes for --neighbours")
    p.add_argument("--verdict", action="store_true",
                   help="leave out the configuration, neighbour and walk programs that the "
                        "compile verdict for the tables' hardware refuses (CPU compiles; the "
                        "board's kernels are timed whatever it says)")
    p.add_argument("--hardware", default=None,
                   help="the tables the plan reads (held programs, --retime): default h200")
    p.add_argument("--compile-workers", type=int, default=12, help="for the estimate")
    p.add_argument("--dry-run", action="store_true", help="list, write nothing")
    p.add_argument("--list", type=int, default=40, help="programs listed by --dry-run")
    p.set_defaults(fn=cmd_plan)
    m = sub.add_parser("measure", help="measure what the plan lacks (GPU)")
    m.add_argument("--out", type=Path, required=True, help="the plan's folder")
    m.add_argument("--max-seconds", type=float, default=540)
    m.add_argument("--compile-workers", type=int, default=12)
    m.add_argument("--rounds", type=int, default=2)
    m.add_argument("--rep-ms", type=int, default=20)
    m.add_argument("--timeout", type=float, default=120, help="seconds per program")
    m.add_argument("--hardware", default="auto",
                   help="the hardware profile the rows belong to (default: the GPU's own, "
                        "h200 or h100; a folder holds one hardware's answers)")
    m.add_argument("--any-gpu", action="store_true",
                   help=f"measure on a GPU that is not an {HARDWARE.upper()} (for testing "
                        "the recorder; never append such rows)")
    m.add_argument("--heldout", action="store_true",
                   help="also time the held-out walks the tables lack (for `evaluate`; "
                        "their figures never enter the tables)")
    m.add_argument("--dry-run", action="store_true", help="list what would be measured (CPU)")
    m.add_argument("--list", type=int, default=40, help="programs listed by --dry-run")
    m.set_defaults(fn=cmd_measure)
    a = sub.add_parser("append", help="append the recorded rows to the tasks' tables (CPU)")
    a.add_argument("--out", type=Path, required=True, help="the recording's folder")
    a.add_argument("--live-to", type=Path, default=None,
                   help="where the board's live figures go (default: live_<hardware>.json "
                        "beside the board the plan was made for)")
    a.set_defaults(fn=cmd_append)
    k = sub.add_parser("known", help="write each board shape's best known into a live file "
                                     "(CPU): the fastest correct program of the tables now")
    k.add_argument("--live", type=Path, required=True, help="a live_<hardware>.json file")
    k.add_argument("--board", type=Path, default=None,
                   help="the board's results file (default: the .jsonl beside the live file)")
    k.set_defaults(fn=cmd_known)
    e = sub.add_parser("evaluate", help="the estimates against the held-out walks' live "
                                        "figures (CPU; after `measure --heldout`)")
    e.add_argument("--out", type=Path, required=True, help="the recording's folder")
    e.add_argument("--to", type=Path, default=None, help="write the evaluation here (JSON)")
    e.add_argument("--record-error", action="store_true",
                   help="make these figures the expected error that every model-priced "
                        "measurement on this GPU carries (tasks/<task>/model_error_<gpu>."
                        "json, `heldout_walks`); needs --to, the evaluation's record")
    e.set_defaults(fn=cmd_evaluate)
    args = ap.parse_args(argv)
    namespace()
    if getattr(args, "max_seconds", 0) > 600 - END_MARGIN:
        ap.error("--max-seconds: a command may run at most 10 minutes; keep it under 580")
    return args.fn(args)


if __name__ == "__main__":
    sys.exit(main())
