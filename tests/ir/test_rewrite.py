"""Traversal, rewriting and hashing of IR trees (`argus_env.ir.rewrite`)."""

from __future__ import annotations

import dataclasses
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from argus_env.dsl import DSLTypeError, Program
from argus_env.ir import nodes as ir
from argus_env.ir.printer import print_expr
from argus_env.ir.ops import KERNEL_OPTIONS, OPS
from argus_env.ir.rewrite import children, structural_hash, transform, walk, with_const, with_option

ROOT = Path(__file__).resolve().parents[2]
PROGRAM_FILES = sorted(p for p in ROOT.glob("tasks/**/programs/*.py") if p.name != "__init__.py")

TEXT = '''\
from argus_env import dsl as A


@A.kernel(num_warps=4)
def scale(
    x: A.Tensor[A.f32, "N"],
    y: A.Tensor[A.f32, "N"],
    s: A.f32 = 2.0,
    BLOCK: A.const = 128,
    REPS: A.const = 2,
):
    """Doubles x into y."""
    A.grid(A.cdiv(N, BLOCK))
    offs = A.program_id(0) * BLOCK + A.arange(BLOCK)
    v = A.load(x[offs], mask=offs < N, other=0.0)
    for i in A.static_range(REPS):
        if i == 0:
            v = v * 2.0
        else:
            v = A.tag(v + s, row=offs)
    A.assert_tags(v, N=offs)
    A.store(y[offs], v, mask=offs < N)
'''

# The same program laid out differently: comments, blank lines, line breaks, parentheses.
MESSY = '''\
"""Module docstring: not part of the program."""
from argus_env import dsl as A

# a comment before the kernel


@A.kernel(num_warps=4)
def scale(x: A.Tensor[A.f32, "N"], y: A.Tensor[A.f32, "N"],
          s: A.f32 = 2.0, BLOCK: A.const = 128, REPS: A.const = 2):
    """Doubles x into y."""

    A.grid(A.cdiv(N,   BLOCK))      # launch grid

    offs = (A.program_id(0) * BLOCK) + A.arange(BLOCK)
    v = A.load(x[offs],
               mask=(offs < N),
               other=0.0)
    for i in A.static_range(REPS):
        # comment inside a loop
        if (i == 0):
            v = v * 2.0
        else:
            v = A.tag(v + s,
                      row=offs)

    A.assert_tags(v, N=offs)
    A.store(y[offs], v, mask=offs < N)
'''


@pytest.fixture(scope="module")
def prog() -> Program:
    return Program.from_text(TEXT)


# ---------------------------------------------------------------- structural_hash
def test_hash_ignores_layout_comments_and_locations(prog):
    messy = Program.from_text(MESSY)
    assert messy == prog, "layout and comments changed the program"
    assert messy.hash == prog.hash, f"layout changed the hash: {messy.hash} != {prog.hash}"
    assert structural_hash(messy.kernel) == structural_hash(prog.kernel), "structural_hash differs"
    store = prog.kernel.body[-1]
    messy_store = messy.kernel.body[-1]
    assert store.loc != messy_store.loc, \
        f"test setup: the store should sit on different lines ({store.loc}, {messy_store.loc})"


def test_hash_ignores_filename_and_line_offset(prog):
    other = Program.from_text(TEXT, filename="elsewhere.py", line_offset=1000)
    assert other.kernel.loc.line == prog.kernel.loc.line + 1000, "offset not applied"
    assert other.hash == prog.hash, "a line offset changed the hash"


def test_hash_is_short_hex_and_deterministic(prog):
    assert re.fullmatch(r"[0-9a-f]{16}", prog.hash), f"hash {prog.hash!r} is not 16 hex digits"
    assert Program.from_text(TEXT).hash == prog.hash, "hashing twice gives different digests"


def test_hash_is_stable_across_processes(prog):
    """The digest must not depend on Python's per-process string hash seed."""
    script = ("import sys\nfrom argus_env.dsl import Program\n"
              "print(Program.from_text(sys.stdin.read()).hash)\n")
    env = dict(os.environ, PYTHONHASHSEED="12345")
    out = subprocess.run([sys.executable, "-c", script], input=TEXT, text=True, env=env,
                         capture_output=True, check=True, timeout=60).stdout.strip()
    assert out == prog.hash, f"hash {out} in another process, {prog.hash} here"


MUTATIONS = [
    ("const-param", "BLOCK: A.const = 128", "BLOCK: A.const = 64"),
    ("scalar-default", "s: A.f32 = 2.0", "s: A.f32 = 3.0"),
    ("body-literal", "v = v * 2.0", "v = v * 3.0"),
    ("other-literal", "other=0.0", "other=1.0"),
    ("static-range-const", "REPS: A.const = 2", "REPS: A.const = 3"),
    ("compare-operator", "if i == 0:", "if i != 0:"),
    ("kernel-option", "@A.kernel(num_warps=4)", "@A.kernel(num_warps=8)"),
    ("added-option", "@A.kernel(num_warps=4)", "@A.kernel(num_warps=4, num_stages=3)"),
    ("docstring", '"""Doubles x into y."""', '"""Doubles x into y, twice."""'),
    ("tag-name", "row=offs", "col=offs"),
    ("tensor-dtype", 'A.Tensor[A.f32, "N"]', 'A.Tensor[A.f64, "N"]'),
    ("kernel-name", "def scale(", "def scale2("),
    ("swapped-branches",
     "            v = v * 2.0\n        else:\n            v = A.tag(v + s, row=offs)",
     "            v = A.tag(v + s, row=offs)\n        else:\n            v = v * 2.0"),
]


@pytest.mark.parametrize("old, new", [pytest.param(o, n, id=i) for i, o, n in MUTATIONS])
def test_hash_changes_with_the_program(prog, old, new):
    assert old in TEXT, f"test setup: {old!r} not in the program"
    try:
        other = Program.from_text(TEXT.replace(old, new))
    except Exception as e:  # a mutation must keep the program valid
        pytest.fail(f"mutation {old!r} -> {new!r} made the program invalid: {e}")
    assert other != prog, f"{old!r} -> {new!r} left the program equal"
    assert other.hash != prog.hash, f"{old!r} -> {new!r} left the hash at {prog.hash}"


@pytest.mark.parametrize("text_a, text_b", [
    (TEXT, TEXT.replace("v = v * 2.0", "v = v * 2")),
    (TEXT, TEXT.replace("s: A.f32 = 2.0", "s: A.f32 = 2")),
    (TEXT.replace("A.cdiv(N, BLOCK))", "A.cdiv(N, BLOCK) * 1)"),
     TEXT.replace("A.cdiv(N, BLOCK))", "A.cdiv(N, BLOCK) * True)")),
], ids=["float-vs-int", "default-float-vs-int", "int-vs-bool"])
def test_literal_types_distinguish_programs(text_a, text_b):
    """Programs that differ in a literal's type print differently, so they are different."""
    pa, pb = Program.from_text(text_a), Program.from_text(text_b)
    assert pa.text != pb.text, "test setup: the programs must print differently"
    assert pa.hash != pb.hash, "test setup: structural_hash tells them apart"
    assert pa != pb, f"programs that print differently compare equal:\n{pa.text}\n{pb.text}"


LITERALS = [0, 0.0, -0.0, False, 1, 1.0, True, 2, 2.0, -1, -1.0, float("inf"), float("-inf"),
            2**40, None]


def test_literal_equality_agrees_with_printing_and_hashing():
    """Two constants are equal exactly when they print alike and structural_hash alike."""
    for a in LITERALS:
        for b in LITERALS:
            ca, cb = ir.Const(a), ir.Const(b, loc=ir.Loc(7, 3))
            alike = print_expr(ca) == print_expr(cb)
            assert (ca == cb) == alike, f"Const({a!r}) == Const({b!r}) is {ca == cb}, yet " \
                                        f"they print as {print_expr(ca)} and {print_expr(cb)}"
            assert (structural_hash(ca) == structural_hash(cb)) == alike, \
                f"structural_hash disagrees with printing for {a!r} and {b!r}"
            if ca == cb:
                assert hash(ca) == hash(cb), f"equal Const({a!r}), Const({b!r}) hash apart"


def test_literal_types_distinguish_params_and_options(prog):
    s = prog.kernel.param("s")
    assert s != dataclasses.replace(s, default=2), "default 2.0 and 2 must differ"
    assert s == dataclasses.replace(s, loc=ir.Loc(99, 1)), "a location must not matter"
    assert hash(s) == hash(dataclasses.replace(s, loc=ir.Loc(99, 1))), "nor change the hash"
    as_float = with_option(prog.kernel, "num_warps", 4.0)
    assert as_float != prog.kernel, "num_warps=4.0 and num_warps=4 must differ"
    assert structural_hash(as_float) != structural_hash(prog.kernel), "the hash tells them apart"
    with pytest.raises(DSLTypeError, match="num_warps must be a power of two"):
        Program(as_float)                 # and no program launches 4.0 warps
    assert with_option(prog.kernel, "num_warps", 4) == prog.kernel, "the same option is equal"


def test_nan_is_rejected_not_printed(prog):
    """No literal parses to NaN, so a NaN constant could not round-trip through text."""
    nan = float("nan")
    with pytest.raises(ValueError, match="NaN"):
        print_expr(ir.Const(nan))
    with pytest.raises(DSLTypeError, match="parameter `s`: a NaN default") as err:
        Program(dataclasses.replace(prog.kernel, params=tuple(
            dataclasses.replace(p, default=nan) if p.name == "s" else p
            for p in prog.kernel.params)))
    assert err.value.line == prog.kernel.param("s").loc.line, f"line {err.value.line}"

    def poison(n):
        is_two = isinstance(n, ir.Const) and n.value == 2.0 and isinstance(n.value, float)
        return dataclasses.replace(n, value=nan) if is_two else n

    with pytest.raises(DSLTypeError, match="NaN constant") as err:
        Program(transform(prog.kernel, poison))
    assert err.value.line == TEXT.splitlines().index("            v = v * 2.0") + 1, \
        f"line {err.value.line}"


# ---------------------------------------------------------------- with_const / with_option
def test_with_const_returns_a_new_kernel(prog):
    k = prog.kernel
    new = with_const(k, "BLOCK", 64)
    assert new is not k, "with_const must not return the same kernel"
    assert new.consts == {"BLOCK": 64, "REPS": 2}, f"consts {new.consts}"
    assert k.consts == {"BLOCK": 128, "REPS": 2}, f"the original changed: {k.consts}"
    assert new.body is k.body and new.name == k.name, "with_const should only touch params"
    p = Program(new)
    assert "BLOCK: A.const = 64" in p.text, f"new constant not printed:\n{p.text}"
    assert p == Program.from_text(TEXT.replace("BLOCK: A.const = 128", "BLOCK: A.const = 64")), \
        "with_const differs from editing the text"


def test_with_const_keeps_locations(prog):
    new = with_const(prog.kernel, "REPS", 4)
    old_lines = [p.loc.line for p in prog.kernel.params]
    new_lines = [p.loc.line for p in new.params]
    assert new_lines == old_lines, f"param lines {new_lines} != {old_lines}"


@pytest.mark.parametrize("name", ["BLOK", "x", "s", "N", ""], ids=["typo", "tensor", "scalar",
                                                                   "size", "empty"])
def test_with_const_unknown_name(prog, name):
    with pytest.raises(KeyError) as err:
        with_const(prog.kernel, name, 64)
    message = str(err.value)
    assert "no constant" in message and repr(name) in message, message
    assert "['BLOCK', 'REPS']" in message, f"message {message!r} should list the constants"


@pytest.mark.parametrize("path", PROGRAM_FILES, ids=lambda p: str(p.relative_to(ROOT)))
def test_with_const_on_task_programs(path):
    p = Program.from_file(path)
    for name, value in p.kernel.consts.items():
        if isinstance(value, bool) or not isinstance(value, int):
            continue
        changed = value * 2 if value else 1   # a flag at 0 changes to 1
        new = Program(with_const(p.kernel, name, changed))
        assert new.kernel.consts[name] == changed, f"{name} not changed"
        assert new.hash != p.hash, f"changing {name} kept the hash"


def test_with_option_returns_a_new_kernel(prog):
    k = prog.kernel
    new = with_option(k, "num_warps", 8)
    assert new is not k, "with_option must not return the same kernel"
    assert new.options == (("num_warps", 8),), f"options {new.options}"
    assert k.options == (("num_warps", 4),), f"the original changed: {k.options}"
    both = with_option(new, "num_stages", 3)
    assert both.options == (("num_stages", 3), ("num_warps", 8)), \
        f"options must stay sorted by name: {both.options}"
    assert Program(both) == Program.from_text(
        TEXT.replace("@A.kernel(num_warps=4)", "@A.kernel(num_stages=3, num_warps=8)")), \
        "with_option differs from editing the text"
    assert both.option("num_stages") == 3 and both.option("absent", 7) == 7, "Kernel.option"


def test_with_option_unknown_name(prog):
    with pytest.raises(KeyError) as err:
        with_option(prog.kernel, "num_wraps", 8)
    for known in KERNEL_OPTIONS:
        assert known in str(err.value), f"message {err.value} should list {known}"


def test_with_option_suggests_the_nearest_name(prog):
    with pytest.raises(KeyError, match="did you mean 'num_warps'"):
        with_option(prog.kernel, "num_wraps", 8)
    with pytest.raises(KeyError, match="unknown kernel option 'stages'"):
        with_option(prog.kernel, "stages", 2)


# ---------------------------------------------------------------- walk and children
def _reference_nodes(node) -> list:
    """Every IR node below `node`, found by a plain recursion over dataclass fields."""
    out = [node]

    def visit(value):
        if isinstance(value, ir.Loc):
            return
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            out.extend(_reference_nodes(value))
        elif isinstance(value, tuple):
            for v in value:
                visit(v)

    for f in dataclasses.fields(node):
        if f.name != "loc":
            visit(getattr(node, f.name))
    return out


@pytest.mark.parametrize("source", ["inline", *[str(p.relative_to(ROOT)) for p in PROGRAM_FILES]])
def test_walk_visits_every_node(source):
    p = Program.from_text(TEXT) if source == "inline" else Program.from_file(ROOT / source)
    walked = list(walk(p.kernel))
    reference = _reference_nodes(p.kernel)
    assert [id(n) for n in walked] == [id(n) for n in reference], \
        f"walk order/contents differ from a pre-order recursion: {len(walked)} vs {len(reference)}"
    assert walked[0] is p.kernel, "walk starts at its root"
    calls = sum(1 for n in walked if isinstance(n, ir.Call))
    spelled = len(re.findall(r"\bA\.(" + "|".join(OPS) + r")\(", p.text))
    assert calls == spelled, f"walk found {calls} op calls, the text spells {spelled}"
    params = [n for n in walked if isinstance(n, ir.Param)]
    assert params == list(p.kernel.params), "walk must visit every parameter"


def test_walk_reaches_every_kind_of_child(prog):
    kinds = {type(n).__name__ for n in walk(prog.kernel)}
    expected = {"Kernel", "Param", "ExprStmt", "Assign", "For", "If", "Call", "Name", "Const",
                "BinOp", "Subscript", "TupleExpr"}
    assert expected <= kinds, f"walk missed {sorted(expected - kinds)}"
    tagged = [n for n in walk(prog.kernel) if isinstance(n, ir.Call) and n.fn == "tag"]
    assert tagged and any(isinstance(n, ir.Name) and n.id == "offs"
                          for n in walk(tagged[0].tags[0][1])), "tag values must be walked"
    branch = next(n for n in walk(prog.kernel) if isinstance(n, ir.If))
    in_else = set(map(id, walk(branch.orelse[0])))
    assert in_else <= set(map(id, walk(prog.kernel))), "the else branch must be walked"


def test_walk_parents_before_children(prog):
    order = {id(n): i for i, n in enumerate(walk(prog.kernel))}
    for node in walk(prog.kernel):
        for child in children(node):
            assert order[id(child)] > order[id(node)], \
                f"{type(child).__name__} visited before its parent {type(node).__name__}"


def test_children_skip_locations_and_plain_values(prog):
    for node in walk(prog.kernel):
        for child in children(node):
            assert not isinstance(child, ir.Loc), f"{type(node).__name__} yields its Loc"
            assert dataclasses.is_dataclass(child), f"{type(node).__name__} yields {child!r}"
    assert list(children(ir.Const(3))) == [], "a constant has no children"


# ---------------------------------------------------------------- transform
def test_transform_identity_returns_the_same_tree(prog):
    out = transform(prog.kernel, lambda n: n)
    assert out == prog.kernel, "identity transform changed the tree"
    assert out is prog.kernel, "identity transform should not rebuild anything"


def test_transform_copying_every_node_gives_an_equal_tree(prog):
    out = transform(prog.kernel, lambda n: dataclasses.replace(n))
    assert out == prog.kernel, "copying every node changed the tree"
    assert out is not prog.kernel, "test setup: the copy must be a new object"
    assert structural_hash(out) == prog.hash, "copying every node changed the hash"
    old_locs = [n.loc for n in walk(prog.kernel)]
    new_locs = [n.loc for n in walk(out)]
    assert new_locs == old_locs, "transform must keep locations"
    assert Program(out).text == prog.text, "the copied tree prints differently"


def test_transform_rewrites_bottom_up_and_shares_untouched_subtrees(prog):
    def double(n):
        if isinstance(n, ir.Const) and n.value == 2.0 and isinstance(n.value, float):
            return dataclasses.replace(n, value=4.0)
        return n

    out = transform(prog.kernel, double)
    assert Program(out) == Program.from_text(TEXT.replace("v * 2.0", "v * 4.0")), \
        "rewriting the literal differs from editing the text"
    assert out.params is prog.kernel.params, "params hold no 2.0 literal and must be shared"
    assert out.body[0] is prog.kernel.body[0], "the untouched grid statement must be shared"
    assert out.body[3] is not prog.kernel.body[3], "the loop holding the literal is rebuilt"


def test_transform_sees_rebuilt_children(prog):
    """`fn` runs after the node's children were rebuilt (bottom-up)."""
    seen = []

    def record(n):
        if isinstance(n, ir.BinOp) and n.op == "*" and isinstance(n.rhs, ir.Const):
            seen.append(n.rhs.value)
        if isinstance(n, ir.Const) and n.value == 2.0 and isinstance(n.value, float):
            return dataclasses.replace(n, value=5.0)
        return n

    transform(prog.kernel, record)
    assert 5.0 in seen and 2.0 not in seen, f"parents saw children {seen}"
