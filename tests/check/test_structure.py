"""The checker's structure: no import circle inside `argus_env/check`, no function-level
import there, no task named by the core, no task hook called beyond what `Task` and
`InvariantPack` declare, and a report layout whose generic part a task cannot change."""

from __future__ import annotations

import ast
import dataclasses
import io
import pickle
import re
import tokenize
from pathlib import Path

import numpy as np
import pytest

import argus_env.check as check_pkg
from argus_env.check import check_program
from argus_env.check.pack import (CORE_CLASSES, InvariantClass, InvariantPack, known_classes,
                                  register_pack)
from argus_env.check.report import (GENERIC_DIM, GENERIC_SLOTS, SLOT, TASK_CLASS,
                                    InvariantReport, ReportLayout, Violation,
                                    normalise_encoding)
from argus_env.dsl.program import Program
from argus_env.task import Task, get_task

CHECK = Path(check_pkg.__file__).parent
TASK_NAMES = re.compile(r"\b(gemm|attention|moe|rmsnorm)", re.IGNORECASE)


def _modules() -> dict[str, Path]:
    out = {}
    for p in sorted(CHECK.rglob("*.py")):
        parts = list(p.relative_to(CHECK).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(["argus_env.check", *parts])] = p
    return out


def _imports(name: str, path: Path, modules: dict) -> list[tuple[str, int, bool]]:
    """(imported module of argus_env, line, at module level) for every import in `path`,
    wherever it stands (functions and `if TYPE_CHECKING:` blocks included)."""
    tree = ast.parse(path.read_text())
    top = {id(n) for n in tree.body}
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out = []
    for node in ast.walk(tree):
        targets = []
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                parts = parts[:len(parts) - (node.level - 1)]
                base = ".".join(parts + ([node.module] if node.module else []))
            targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base
                       for a in node.names]
        for t in targets:
            if t.startswith("argus_env"):
                out.append((t, node.lineno, id(node) in top))
    return out


def _graph() -> dict[str, set[str]]:
    modules = _modules()
    graph: dict[str, set[str]] = {m: set() for m in modules}
    for name, path in modules.items():
        for target, _, _ in _imports(name, path, modules):
            while target and target not in modules:
                target = target.rpartition(".")[0]
            # importing a package's own parent runs its __init__ first: not an edge
            if target and target != name and not name.startswith(target + "."):
                graph[name].add(target)
    return graph


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import circle of `graph`, or None."""
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(v):
        state[v] = 1
        stack.append(v)
        for w in sorted(graph.get(v, ())):
            if state.get(w) == 1:
                return stack[stack.index(w):] + [w]
            if w not in state:
                found = visit(w)
                if found:
                    return found
        state[v] = 2
        stack.pop()
        return None
    for v in sorted(graph):
        if v not in state:
            found = visit(v)
            if found:
                return found
    return None


def test_the_cycle_finder_finds_a_circle():
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": set(), "c": {"a", "b"}}) is None


def test_no_import_circle_inside_check():
    graph = _graph()
    assert {"argus_env.check.symbolic.checker", "argus_env.check.concrete.run",
            "argus_env.check.pack", "argus_env.check.report"} <= set(graph)
    assert _cycle(graph) is None, " -> ".join(_cycle(graph))


def test_check_imports_only_at_module_level():
    """No import inside a function or an `if` (a late import hides a circle), except the
    entry point's loading of the symbolic interpreter (and z3) on the first proof."""
    modules = _modules()
    late = [(str(path.relative_to(CHECK)), target) for name, path in modules.items()
            for target, _, top in _imports(name, path, modules) if not top]
    assert late == [("__init__.py", "argus_env.check.symbolic")], late


def test_the_core_names_no_task():
    """Identifiers, strings and comments of every checker module: no task by name."""
    found = []
    for path in sorted(CHECK.rglob("*.py")):
        for tok in tokenize.generate_tokens(io.StringIO(path.read_text()).readline):
            if tok.type in (tokenize.NAME, tokenize.STRING, tokenize.COMMENT) \
                    and TASK_NAMES.search(tok.string):
                found.append(f"{path.relative_to(CHECK)}:{tok.start[0]}: {tok.string[:60]}")
    assert not found, found


def _attr_uses(owner: str) -> list[tuple[str, str, int]]:
    """(file, attribute, line) of `owner.x`, `<...>.owner.x` and getattr/hasattr(owner, "x")
    in the checker."""
    out = []

    def is_owner(n):
        return (isinstance(n, ast.Name) and n.id == owner) or \
            (isinstance(n, ast.Attribute) and n.attr == owner)
    for path in sorted(CHECK.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Attribute) and is_owner(node.value):
                out.append((path.name, node.attr, node.lineno))
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) \
                    and node.func.id in ("getattr", "hasattr") and len(node.args) >= 2 \
                    and is_owner(node.args[0]) and isinstance(node.args[1], ast.Constant):
                out.append((path.name, node.args[1].value, node.lineno))
    return out


def test_the_core_calls_only_declared_task_and_pack_hooks():
    """Whatever the checker reads of a task is declared by `Task`, and whatever it reads of
    a pack is a field of `InvariantPack`: a task cannot be asked for an undeclared hook."""
    task_uses = _attr_uses("task")
    assert task_uses, "the scan found no use of the task at all"
    undeclared = [u for u in task_uses if not hasattr(Task, u[1])]
    assert not undeclared, undeclared
    fields = {f.name for f in dataclasses.fields(InvariantPack)} | \
        {n for n in dir(InvariantPack) if not n.startswith("_")}
    pack_uses = _attr_uses("pack")
    assert {u[1] for u in pack_uses} >= {"binop", "axioms", "write", "concrete_ops"}, pack_uses
    assert not [u for u in pack_uses if u[1] not in fields]


def test_the_tasks_import_only_public_names_of_the_checker():
    root = Path(get_task("gemm").programs["baseline"]).parents[2]
    bad = []
    for path in sorted(root.rglob("*.py")):
        if "programs" in path.parts:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("argus_env.check"):
                bad += [f"{path.name}: {node.module}.{a.name}" for a in node.names
                        if a.name.startswith("_") or "._" in node.module]
    assert not bad, bad


# ---------------------------------------------------------------- registry and layout
EXTRA = InvariantPack("structure-test", classes=(
    InvariantClass("structure_a", "first test class"),))
EXTRA2 = InvariantPack("structure-test", classes=(
    InvariantClass("structure_a", "first test class"),
    InvariantClass("structure_b", "a class added later")))


def _report(*classes: str) -> InvariantReport:
    return InvariantReport("p", "h", [Violation(c, "store", 10 + i, "m", element=(3, 4))
                                      for i, c in enumerate(classes)])


def test_a_pack_with_an_extra_class_leaves_the_generic_layout_unchanged():
    register_pack(EXTRA)
    try:
        before = (GENERIC_SLOTS, GENERIC_DIM, ReportLayout().size)
        one, two = ReportLayout.for_pack(EXTRA), ReportLayout.for_pack(register_pack(EXTRA2))
        assert (GENERIC_SLOTS, GENERIC_DIM, ReportLayout().size) == before
        assert one.size == GENERIC_DIM + 2 and two.size == GENERIC_DIM + 3
        report = _report("bounds", "structure_a", "coverage")
        a, b = one.encode(report), two.encode(report)
        assert np.array_equal(a[:GENERIC_DIM], b[:GENERIC_DIM]), (a, b)
        assert a[SLOT["count:bounds"]] > 0 and a[SLOT["count:coverage"]] > 0
        assert a[SLOT["first_class"]] == 1 + CORE_CLASSES.index("bounds")
        assert a[SLOT["violations"]] == 3 and a[SLOT["element_0"]] == 3
        assert a[GENERIC_DIM] == 0 and a[GENERIC_DIM + 1] == pytest.approx(np.log1p(1))
        first_own = two.encode(_report("structure_b", "bounds"))
        assert first_own[SLOT["first_class"]] == TASK_CLASS and first_own[GENERIC_DIM] == 2
        assert first_own[GENERIC_DIM + 2] > 0 and first_own[GENERIC_DIM + 1] == 0
        for vec in (a, b, first_own):
            n = normalise_encoding(vec)
            assert n.shape == vec.shape and (0 <= n).all() and (n <= 1).all()
    finally:
        register_pack(InvariantPack("structure-test"))


def test_reserved_slots_keep_a_task_block_when_a_class_is_added():
    one = InvariantPack("reserve-test", classes=EXTRA.classes, report_slots=6)
    two = InvariantPack("reserve-test", classes=EXTRA2.classes, report_slots=6)
    assert ReportLayout.for_pack(one).size == ReportLayout.for_pack(two).size == GENERIC_DIM + 6
    with pytest.raises(ValueError, match="report_slots"):
        InvariantPack("reserve-test", classes=EXTRA2.classes, report_slots=2)


def test_pack_classes_are_checked_and_owned():
    with pytest.raises(ValueError, match="core invariant class"):
        InvariantPack("bad", classes=(InvariantClass("bounds", "x"),))
    get_task("attention")
    with pytest.raises(ValueError, match="already declared by pack 'attention'"):
        register_pack(InvariantPack("thief", classes=(InvariantClass("softmax", "x"),)))
    with pytest.raises(ValueError, match="unknown invariant"):
        Violation("never_declared", "store", 1, "m")
    assert "softmax" in known_classes() and Violation("softmax", "dot", 1, "m")
    with pytest.raises(TypeError, match="InvariantPack"):
        check_program(get_task("gemm").program("baseline"), {"M": 64, "N": 64, "K": 64},
                      type("T", (Task,), {"invariants": {"binop": {}}})())


def test_the_tasks_declare_their_packs_and_blocks():
    for name, classes in (("attention", {"causal", "softmax", "exp_base", "head_map"}),
                          ("moe", {"expert", "scatter", "combine", "padding"})):
        pack = get_task(name).invariants
        assert set(pack.class_names) == classes and pack.block_size >= 1 + len(classes)
        assert pickle.loads(pickle.dumps(pack)) == pack  # env runners copy what they hold
    assert get_task("gemm").invariants is None


def test_a_pack_rule_runs_and_reports_its_own_class():
    """A task outside the core plugs a rule in: it is called at the op it names, reports
    its own class, and the class lands in the task's block of the encoding."""
    seen = []

    def doubled(ck, x, y, out, shape, what):
        seen.append(what)
        if y.fval == 2.0:
            ck.violate("structure_rule", "*", f"`{what}` doubles the accumulator",
                       ck.find(x.live(), shape), shape)
    pack = register_pack(InvariantPack("structure-rule", classes=(
        InvariantClass("structure_rule", "a test rule"),), binop={"*": doubled}))
    try:
        gemm = get_task("gemm")
        task = type("WithPack", (type(gemm),), {"invariants": pack})()
        sizes = {"M": 64, "N": 64, "K": 64}
        base = gemm.program("baseline")
        plain, with_pack = check_program(base, sizes, gemm), check_program(base, sizes, task)
        assert with_pack.ok and with_pack.proven == plain.proven
        assert seen == ["pid_m * BM", "pid_n * BN"], seen  # every `*` reaches the rule
        seen.clear()
        text = base.text.replace("A.cast(acc, A.bf16)", "A.cast(acc * 2.0, A.bf16)")
        assert text != base.text
        report = check_program(Program.from_text(text), sizes, task)
        assert "acc * 2.0" in seen and report.kinds() == {"structure_rule"}, report.render()
        assert check_program(Program.from_text(text), sizes, gemm).ok
        vec = ReportLayout.for_pack(pack).encode(report)
        assert vec[SLOT["first_class"]] == TASK_CLASS and vec[GENERIC_DIM] == 1
        assert vec[GENERIC_DIM + 1] > 0 and vec[SLOT["violation"]] == 1
    finally:
        register_pack(InvariantPack("structure-rule"))


def test_semantics_documents_every_pack_hook():
    text = (CHECK / "SEMANTICS.md").read_text()
    hooks = [f.name for f in dataclasses.fields(InvariantPack)
             if f.name not in ("name", "classes", "report_slots")]
    missing = [h for h in hooks if f"`{h}" not in text]
    assert not missing, missing
