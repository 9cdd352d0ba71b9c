"""A tiny benchmark suite (1 shape per track, 2 seeds, budget 6, random and greedy), run
once per session: through `argus bench` in a subprocess, then again in-process."""

import subprocess
import sys
from pathlib import Path

import pytest

TINY = """\
name: tiny
envs: [Argus-GEMM-v0]
tracks: [train, test]
shapes:
  Argus-GEMM-v0: {train: [decode-16], test: [square-2048]}
seeds: [0, 1]
budget: 6
measure: table
hardware: h200
agents: {random: {}, greedy: {}}
"""


@pytest.fixture(scope="session")
def tiny_config(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("suite") / "tiny.yaml"
    path.write_text(TINY)
    return path


@pytest.fixture(scope="session")
def tiny_results(tiny_config, tmp_path_factory) -> Path:
    """results/tiny.jsonl written by `argus bench` (the command line, in a subprocess)."""
    out = tmp_path_factory.mktemp("results")
    proc = subprocess.run([sys.executable, "-m", "argus_env.cli", "bench", "--config",
                           str(tiny_config), "--out-dir", str(out), "--quiet"],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    assert "8 episodes run" in proc.stdout, proc.stdout
    return out / "tiny.jsonl"


#: a suite of one episode, for checking submissions one line at a time
PROBE = """\
name: probe
envs: [Argus-GEMM-v0]
tracks: [train]
shapes:
  Argus-GEMM-v0: {train: [decode-16]}
seeds: [0]
budget: 8
measure: table
hardware: h200
agents: {random: {}, evolutionary: {population: 3, genome_length: 2}}
"""


@pytest.fixture(scope="session")
def probe_suite() -> str:
    """The probe suite's YAML (a fixture: test modules cannot import this conftest by name,
    another folder's conftest may hold it)."""
    return PROBE


@pytest.fixture(scope="session")
def probe_lines(tmp_path_factory) -> dict:
    """The probe suite's results line of an agent that plays one episode (random), of one
    that resets for every genome (evolutionary), and a random episode of a longer budget
    (12 env steps, "long")."""
    from argus_env.bench import load_config
    from argus_env.bench.config import Episode
    from argus_env.bench.runner import Runner
    path = tmp_path_factory.mktemp("probe") / "probe.yaml"
    path.write_text(PROBE)
    cfg = load_config(path)
    runner = Runner(cfg, path.parent)
    lines = {a: runner.play(Episode(a, "Argus-GEMM-v0", "train", "decode-16", 0)) for a in cfg.agents}
    long = Runner(load_config(path, budget=12), path.parent)
    lines["long"] = long.play(Episode("random", "Argus-GEMM-v0", "train", "decode-16", 0))
    assert lines["long"]["steps"] > cfg.budget, lines["long"]["steps"]
    assert lines["random"]["env_steps"] == lines["random"]["steps"], lines["random"]["env_steps"]
    assert lines["evolutionary"]["env_steps"] > lines["evolutionary"]["steps"], "no restart"
    return lines


SHARED_EVALUATIONS: dict = {}


@pytest.fixture
def shared_evaluations(monkeypatch):
    """Validators that share one evaluator per backend across the tests (its answers are
    computed from the programs, never read from a record: sharing only saves time)."""
    from argus_env.bench import validate as V

    class Shared(V.Validator):
        def __init__(self, share_evaluations: bool = True):
            super().__init__(True)
            self._evaluators = SHARED_EVALUATIONS
    monkeypatch.setattr(V, "Validator", Shared)


@pytest.fixture
def submission(tmp_path, monkeypatch):
    """Writes a submission folder of `lines` under the probe suite (its suite.yaml) and
    makes it the working directory, as for someone checking it from inside."""
    import itertools
    import json

    import yaml
    count = itertools.count()

    def make(lines: list[dict], **meta) -> Path:
        folder = tmp_path / f"submission{next(count)}"
        folder.mkdir()
        (folder / "suite.yaml").write_text(PROBE)
        (folder / "results.jsonl").write_text("".join(json.dumps(ln) + "\n" for ln in lines))
        agent = lines[0]["agent"] if lines and isinstance(lines[0].get("agent"), str) else "x"
        fields = dict(name=agent, description="a probe", authors=["Argus"], suite="suite.yaml",
                      agent=agent, args={})
        (folder / "agent.yaml").write_text(yaml.safe_dump({**fields, **meta}))
        (folder / "README.md").write_text("# A probe\n\nHow it was made: `argus bench`.\n")
        monkeypatch.chdir(folder)
        return folder
    return make
