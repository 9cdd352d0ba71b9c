"""A benchmark suite as data: which agents, envs, tracks, shapes and seeds, under which
budget and measurement (`configs/bench/*.yaml`).

    suite = load_config("default")                     # configs/bench/default.yaml
    suite = load_config("my.yaml", agents=["greedy"], seeds=[0])   # with overrides
    for ep in suite.episodes(): ...                    # agent x env x track x shape x seed
                                                       # (x budget, with `budgets`)

Adding an agent to the leaderboard is a line under `agents:`: its name in
`agents.AGENTS` (or `agent: some.module` for one that is not registered) and the fields
of its `Args` dataclass (a PPO policy's `checkpoint`, say). The bench sets `budget`,
`seed` and `shape` itself.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path

from ..registry import DEFAULT_ENV_ID

CONFIG_DIR = Path(__file__).resolve().parents[2] / "configs" / "bench"
BENCH_SET = ("budget", "seed", "shape")   # Args fields the bench sets for every episode


@dataclass(frozen=True)
class Episode:
    """One episode of the suite; `key` identifies it in a results file."""

    agent: str
    env_id: str
    track: str
    shape: str
    seed: int
    budget: int = 0    # env steps (0: the suite's `budget`)

    @property
    def key(self) -> tuple:
        """(agent, env id, shape, seed, budget): `results.line_key` of its line."""
        return (self.agent, self.env_id, self.shape, self.seed, self.budget)


@dataclass
class BenchConfig:
    name: str = "default"
    """results go to `<out>/<name>.jsonl`"""
    envs: list = field(default_factory=lambda: [DEFAULT_ENV_ID])
    """registered env ids, or ["all"]"""
    tracks: list = field(default_factory=lambda: ["train", "test"])
    """shape splits: the train track and the held-out test track"""
    shapes: dict = field(default_factory=dict)
    """env id -> track -> shape names; an env or track not listed takes `shapes_per_track`"""
    shapes_per_track: int = 3
    """shapes drawn evenly spaced from a split's suite when `shapes` does not name them"""
    seeds: list = field(default_factory=lambda: [0, 1, 2])
    budget: int = 30
    """environment steps per episode, over all of an agent's resets"""
    budgets: list = field(default_factory=list)
    """a budget axis: every episode played at each of these budgets, a line each (the
    board ranks each budget apart); empty: `budget` alone"""
    measure: str = "table"
    """"table" and "model" are exactly reproducible; "gpu" times this machine's GPU"""
    hardware: str = "h200"
    estimator: str = "corrected"
    """model prices: "corrected" (the analytic model times the learned correction, where
    one is used) or "analytic" (the boards made before the correction name it)"""
    model_anchor: str = "measured"
    """the library figure model prices are set against off the H200: "measured" (the
    GPU tables' timing of it at the shape) or "roofline" (0.9 x the roofline; the boards
    made before the field name it)"""
    mode: str = "discrete"
    reward: str = "default"
    catalog: int | None = None
    """the version of the tasks' transformation catalogs (None: each task's newest; a
    number: that version, or a task's newest where it has no later one); a board made
    before a catalog grew names the version it played, and replays so"""
    tables: dict = field(default_factory=dict)
    """env id -> the GPU table rows its table-mode episodes read (`format_snapshot` text,
    as a line's `hashes.table_rows` names them: `table_h200.csv:353`); an env not named
    reads the tables as they are. A committed board pins the rows it was played against,
    so that the tables can grow by later GPU recordings without changing its replays.
    Only the project's own suites (configs/bench) may pin: a submitted suite that pins is
    refused (`bench.submission`), since fewer rows would let it choose model prices"""
    agents: dict = field(default_factory=lambda: {"random": {}, "greedy": {}, "evolutionary": {}})
    """leaderboard name -> {agent: module or registered name (default: the name), Args fields}"""

    def env_ids(self) -> list[str]:
        from ..envs import ENV_IDS
        ids = list(ENV_IDS) if self.envs in (["all"], "all") else list(self.envs)
        for env_id in ids:
            if env_id not in ENV_IDS:
                raise KeyError(_unknown("env", env_id, ENV_IDS))
        return ids

    def track_shapes(self, env_id: str, track: str) -> list[str]:
        """The shapes of `track` that this suite runs for `env_id`."""
        from ..envs import ENV_IDS
        from ..task import get_task
        cases = get_task(ENV_IDS[env_id]).shape_cases(track)
        names = [c.name for c in cases]
        chosen = (self.shapes.get(env_id) or {}).get(track)
        if chosen is None:
            n = min(self.shapes_per_track, len(names))
            chosen = [names[round(i * (len(names) - 1) / max(n - 1, 1))] for i in range(n)]
        for s in chosen:
            if s not in names:
                raise KeyError(_unknown(f"{env_id} {track} shape", s, names))
        return list(chosen)

    def budget_axis(self) -> list[int]:
        """The budgets the suite plays, smallest first."""
        axis = sorted({int(b) for b in self.budgets}) if self.budgets else [int(self.budget)]
        bad = [b for b in axis if b < 1]
        if bad or any(type(b) is not int for b in self.budgets):
            raise ValueError(f"budgets must be positive whole numbers of env steps, got "
                             f"{self.budgets or self.budget!r}")
        return axis

    def episodes(self) -> list[Episode]:
        """Every episode of the suite, in the order the runner plays them."""
        out = []
        for budget in self.budget_axis():
            for agent in self.agents:
                for env_id in self.env_ids():
                    for track in self.tracks:
                        for shape in self.track_shapes(env_id, track):
                            out.extend(Episode(agent, env_id, track, shape, int(s), budget)
                                       for s in self.seeds)
        return out

    def agent_module(self, name: str):
        """The module (`Args`, `run`) behind leaderboard entry `name`."""
        import importlib

        from argus_env.agents import load_agent
        target = (self.agents[name] or {}).get("agent", name)
        return importlib.import_module(target) if "." in target else load_agent(target)

    def agent_args(self, name: str, seed: int, shape: str, budget: int | None = None):
        """The entry's `Args`, with the bench's budget (`budget`, else the suite's), seed
        and shape."""
        module = self.agent_module(name)
        fields = {f.name for f in dataclasses.fields(module.Args)}
        given = {k: v for k, v in (self.agents[name] or {}).items() if k != "agent"}
        unknown = sorted(set(given) - fields)
        if unknown or set(given) & set(BENCH_SET):
            raise ValueError(f"agent {name!r}: {unknown or sorted(set(given) & set(BENCH_SET))} "
                             f"cannot be set here; its Args fields: {', '.join(sorted(fields))} "
                             f"({', '.join(BENCH_SET)} come from the bench)")
        bench = {k: v for k, v in dict(budget=budget or self.budget, seed=seed,
                                       shape=shape).items()
                 if k in fields}
        return module.Args(**given, **bench)

    def catalog_for(self, env_id: str) -> int:
        """The catalog version the suite plays `env_id` with (`catalog`)."""
        from ..envs import ENV_IDS
        from ..task import get_task
        latest = get_task(ENV_IDS[env_id]).space.latest_catalog()
        if self.catalog is None:
            return latest
        if type(self.catalog) is not int or self.catalog < 1:
            raise ValueError(f"catalog must be a whole number >= 1 or null, got {self.catalog!r}")
        return min(self.catalog, latest)

    def pinned_tables(self) -> dict[str, str]:
        """{env id: the table rows the suite plays it against} (`tables`), each as
        `format_snapshot` writes it. Raises KeyError for a pin on an env the suite does not
        play, ValueError on a suite not priced from tables or for one that is not a
        snapshot (`load_config` asks, so a bad pin is refused before any episode)."""
        if not self.tables:
            return {}
        from ..measure.analytic import format_snapshot, parse_snapshot
        if not isinstance(self.tables, dict):
            raise ValueError(f"tables must map env ids to table snapshots, got {self.tables!r}")
        if self.measure != "table":
            raise ValueError(f"tables pins the GPU table rows a table-mode suite reads; this "
                             f"suite's measure is {self.measure!r}")
        unknown = sorted(set(self.tables) - set(self.env_ids()))
        if unknown:
            raise KeyError(f"tables names envs the suite does not play: {unknown}; it plays "
                           f"{', '.join(self.env_ids())}")
        return {e: format_snapshot(parse_snapshot(rows)) for e, rows in self.tables.items()}

    def tables_for(self, env_id: str) -> str | None:
        """The table rows the suite plays `env_id` against (`pinned_tables`); None: the
        tables as they are."""
        return self.pinned_tables().get(env_id)

    def fingerprint(self, env_id: str | None = None) -> dict:
        """What must match for two runs to share one results file; with the `env_id` of a
        line this suite plays, also the catalog version it plays that env with
        (`catalog_for`)."""
        out = {"measure": self.measure, "hardware": self.hardware, "mode": self.mode,
               "reward": self.reward}
        if not self.budgets:   # with a budget axis, a line's budget is one of them
            out["budget"] = self.budget
        if self.measure in ("model", "table"):   # a line names it (`line_setting`)
            out["estimator"] = self.estimator
            out["model_anchor"] = self.model_anchor
        if env_id in self.env_ids():
            out["catalog"] = self.catalog_for(env_id)
            pinned = self.tables_for(env_id)
            if pinned is not None:   # a line names the rows it read (`hashes.table_rows`)
                out["table_rows"] = pinned
        return out

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    def sha256(self) -> str:
        return hashlib.sha256(json.dumps(self.to_dict(), sort_keys=True).encode()).hexdigest()


def load_config(name_or_path: str | Path = "default", **overrides) -> BenchConfig:
    """`configs/bench/<name>.yaml` or a YAML path, with non-None `overrides` applied."""
    import yaml
    path = Path(name_or_path)
    if not path.suffix:
        path = CONFIG_DIR / f"{name_or_path}.yaml"
    if not path.exists():
        known = sorted(p.stem for p in CONFIG_DIR.glob("*.yaml"))
        raise FileNotFoundError(f"no bench config {str(name_or_path)!r}; known: {', '.join(known)}")
    data = yaml.safe_load(path.read_text()) or {}
    names = {f.name for f in dataclasses.fields(BenchConfig)}
    extra = sorted(set(data) - names)
    if extra:
        raise ValueError(f"{path}: unknown keys {extra}; known: {', '.join(sorted(names))}")
    cfg = BenchConfig(**data)
    for key, value in overrides.items():
        if value is None:
            continue
        if key == "budget":   # one budget asked for: the suite's axis gives way to it
            cfg.budgets = []
        if key == "agents" and not isinstance(value, dict):  # a list of names: keep their args
            value = {a: (cfg.agents.get(a) or {}) for a in value}
        setattr(cfg, key, value)
    cfg.agents = {k: dict(v or {}) for k, v in cfg.agents.items()}
    if not isinstance(cfg.budgets, list):
        raise ValueError(f"{path}: budgets must be a list of env step counts, got "
                         f"{cfg.budgets!r}")
    cfg.budget_axis()   # refuse a bad axis before any episode is played
    cfg.pinned_tables()   # and bad table pins
    from ..measure.analytic import check_anchor
    try:
        check_anchor(cfg.model_anchor)   # and a model anchor no backend knows
    except ValueError as e:
        raise ValueError(f"{path}: {e}") from None
    return cfg


def _unknown(what: str, name: str, known) -> str:
    import difflib
    close = difflib.get_close_matches(name, list(known), n=1)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    return f"unknown {what} {name!r}{hint} (known: {', '.join(known)})"
