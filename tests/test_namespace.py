"""The install claims no generic top-level name: `tasks/`, `reward/` and `agents/` live at
the top of the repository but import as `argus_env.tasks`, `argus_env.reward` and
`argus_env.agents`, so a user's own `tasks.py` (or `agents/` folder) cannot break them."""

from __future__ import annotations

import ast
import pickletools
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
GENERIC = ("tasks", "reward", "agents")


def _run(code: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], cwd=cwd, capture_output=True, text=True,
                          timeout=240)


def test_a_users_tasks_module_does_not_break_reset(tmp_path):
    (tmp_path / "tasks.py").write_text("raise SystemExit('the user tasks.py was imported')\n")
    (tmp_path / "agents.py").write_text("raise SystemExit('the user agents.py was imported')\n")
    (tmp_path / "reward").mkdir()
    (tmp_path / "reward" / "__init__.py").write_text("raise SystemExit('user reward imported')\n")
    done = _run("import gymnasium as gym, argus_env\n"
                "for task in ('Argus-GEMM-v0', 'Argus-MoE-v0'):\n"
                "    env = gym.make(task, correctness='none')\n"
                "    env.reset(seed=0)\n"
                "    env.close()\n"
                "from argus_env.agents import load_agent\n"
                "load_agent('greedy')\n"
                "import argus_env.reward\n"
                "print('ok')\n", tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip().endswith("ok")


def test_the_install_claims_no_generic_top_level_name(tmp_path):
    done = _run("import importlib.util, argus_env.tasks.gemm, argus_env.agents, argus_env.reward\n"
                f"print([n for n in {GENERIC!r} if importlib.util.find_spec(n) is not None])\n",
                tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "[]"


def test_no_project_file_imports_a_generic_top_level_name():
    offenders = []
    for folder in ("argus_env", "tasks", "reward", "agents", "benchmarks", "tests"):
        for path in (ROOT / folder).rglob("*.py"):
            if "results" in path.parts:
                continue
            for node in ast.walk(ast.parse(path.read_text(), str(path))):
                names = []
                if isinstance(node, ast.Import):
                    names = [a.name for a in node.names]
                elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                    names = [node.module]
                offenders += [f"{path.relative_to(ROOT)}:{node.lineno} {n}" for n in names
                              if n.split(".")[0] in GENERIC]
    assert not offenders, offenders


def _pickled_modules(data: bytes) -> set[str]:
    """Module names a pickle refers to (the strings before each STACK_GLOBAL, and GLOBAL)."""
    found, strings = set(), []
    for op, arg, _ in pickletools.genops(data):
        if op.name == "GLOBAL":
            found.add(arg.split(" ")[0])
        elif op.name in ("SHORT_BINUNICODE", "BINUNICODE", "UNICODE"):
            strings.append(arg)
        elif op.name == "STACK_GLOBAL" and len(strings) >= 2:
            found.add(strings[-2])
    return found


def test_committed_ppo_checkpoints_name_the_namespaced_module():
    pickles = list((ROOT / "benchmarks" / "results").rglob("class_and_ctor_args.pkl"))
    assert pickles
    modules = set().union(*(_pickled_modules(p.read_bytes()) for p in pickles))
    assert "argus_env.agents.rl.masking" in modules
    assert not [m for m in modules if m.split(".")[0] in GENERIC]
