"""The project's layering: no import circle anywhere, and no task named in the core outside
the registry (`argus_env/registry.py`)."""

from __future__ import annotations

import ast
import collections
from pathlib import Path

import pytest

from argus_env.registry import TASKS

ROOT = Path(__file__).resolve().parents[1]
#: installed package -> folder in the repository (setup.py maps them the same way)
PACKAGES = {"argus_env": "argus_env", "argus_env.tasks": "tasks", "argus_env.reward": "reward",
            "argus_env.agents": "agents"}


def _modules() -> dict[str, Path]:
    mods = {}
    for pkg, folder in PACKAGES.items():
        for path in (ROOT / folder).rglob("*.py"):
            if "__pycache__" in path.parts or "programs" in path.parts:  # DSL program text
                continue
            parts = list(path.relative_to(ROOT / folder).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            mods[".".join([pkg, *parts])] = path
    return mods


def _is_type_checking_block(node: ast.AST) -> bool:
    return isinstance(node, ast.If) and (
        (isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING")
        or (isinstance(node.test, ast.Attribute) and node.test.attr == "TYPE_CHECKING"))


def import_graph(mods: dict[str, Path]) -> dict[str, set[str]]:
    """module -> project modules it imports (anywhere in its body, function-level imports
    included: a late import does not make a circle go away). Importing a package's own
    submodule does not count as importing the package's `__init__` back."""
    graph = collections.defaultdict(set)
    for name, path in mods.items():
        package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
        tree = ast.parse(path.read_text(), str(path))
        typing_only = {id(n) for node in ast.walk(tree) if _is_type_checking_block(node)
                       for n in ast.walk(node)}
        for node in ast.walk(tree):
            if id(node) in typing_only:  # `if TYPE_CHECKING:` imports never run
                continue
            targets = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package[:len(package) - (node.level - 1)]
                    module = ".".join(base + ([node.module] if node.module else []))
                else:
                    module = node.module or ""
                targets = [f"{module}.{a.name}" if f"{module}.{a.name}" in mods else module
                           for a in node.names]
            for target in targets:
                while target and target not in mods:
                    target = target.rpartition(".")[0]
                if target and target != name and not name.startswith(target + "."):
                    graph[name].add(target)
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan)."""
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_the_circle_finder_finds_a_circle(tmp_path):
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert circles({"a": {"b"}, "b": set()}) == []


def test_no_import_circle_in_the_project():
    found = circles(import_graph(_modules()))
    assert not found, "import circles: " + "; ".join(" <-> ".join(c) for c in found)


def _code_strings_and_names(tree: ast.AST):
    """(line, text) of every identifier and string literal that is not a docstring."""
    docstrings = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
                    and isinstance(body[0].value.value, str):
                docstrings.add(id(body[0].value))
        elif isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
            docstrings.add(id(node.value))  # attribute docstrings (a string after a field)
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) \
                and id(node) not in docstrings:
            yield node.lineno, node.value
        elif isinstance(node, ast.Name):
            yield node.lineno, node.id
        elif isinstance(node, ast.Attribute):
            yield node.lineno, node.attr
        elif isinstance(node, (ast.FunctionDef, ast.ClassDef, ast.arg)):
            yield node.lineno, getattr(node, "name", None) or node.arg


def _names_a_task(text: str) -> str | None:
    import re
    for name, entry in TASKS.items():
        if entry.env_id in text or re.search(rf"(?<![A-Za-z]){name}(?![A-Za-z])", text,
                                             re.IGNORECASE):
            return name
    return None


CORE = sorted(p for p in (ROOT / "argus_env").rglob("*.py")
              if p.name != "registry.py" and "__pycache__" not in p.parts)


@pytest.mark.parametrize("path", CORE, ids=lambda p: str(p.relative_to(ROOT)))
def test_the_core_names_no_task(path):
    found = [f"{path.relative_to(ROOT)}:{line} {text[:60]!r}"
             for line, text in _code_strings_and_names(ast.parse(path.read_text(), str(path)))
             if _names_a_task(text)]
    assert not found, "task names outside argus_env/registry.py: " + "; ".join(found)


def test_the_task_name_finder_finds_names():
    assert _names_a_task("Argus-GEMM-v0") == "gemm"
    assert _names_a_task("moe_rows") == "moe"
    assert _names_a_task("gemm") == "gemm"
    assert _names_a_task("memory") is None and _names_a_task("remove") is None
