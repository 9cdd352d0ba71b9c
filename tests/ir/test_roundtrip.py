"""Printing and parsing are inverse: `Program.from_text(p.text) == p`, for every program.

Covers every DSL program shipped with a task (found by glob, so a new task is covered
without editing this file) and inline programs that together call every op in `OPS`.
Also checks that parsed nodes remember the source line they came from, through text and
through the `@A.kernel` decorator.
"""

from __future__ import annotations

import dataclasses
import re
import textwrap
from pathlib import Path

import pytest

from argus_env import dsl as A
from argus_env.dsl import Program
from argus_env.ir import nodes as ir
from argus_env.ir.ops import BIN_OPS, CMP_OPS, OPS, SYMBOL_NAMES, UNARY_OPS
from argus_env.ir.rewrite import walk

ROOT = Path(__file__).resolve().parents[2]
PROGRAM_FILES = sorted(p for p in ROOT.glob("tasks/**/programs/*.py") if p.name != "__init__.py")
HEADER = "from argus_env import dsl as A\n\n\n"

# ---------------------------------------------------------------- inline programs
ROWOPS = HEADER + '''\
@A.kernel(num_warps=4, num_stages=2)
def rowops(
    x: A.Tensor[A.f32, "M", "N"],
    y: A.Tensor[A.f16, "M", "N"],
    s: A.Tensor[A.f32, "M"],
    bias: A.f32,
    scale: A.f32 = 0.5,
    eps: A.f64 = 1e-06,
    shift: A.i32 = -3,
    BM: A.const = 16,
    BN: A.const = 64,
):
    """Elementwise math, reductions, where, casts, branches and augmented assignment."""
    A.grid(A.maximum(A.cdiv(M, BM), 1))
    pid = A.program_id(0)
    rows = pid * BM + A.arange(BM)
    cols = A.arange(BN)
    rmask = rows < M
    t = A.load(x[rows, cols], mask=(rmask, cols < N), other=-1.0)
    t = A.where(t > 0.0, A.exp(t), A.exp2(t) - 1.0)
    t = A.abs(t) + A.sqrt(A.abs(t)) + A.log(t * t + 1.0) + A.log2(A.sigmoid(t) + 1.0)
    hi = A.max(t, 1)
    lo = A.min(t, axis=1)
    tot = A.sum(t - hi[:, None], 1)
    t = A.cast(t * scale + bias + eps, A.f32)
    t -= lo[:, None]
    t = -t
    if pid % 2 == 0:
        w = A.full((BM, BN), 2.0, A.f32)
    elif pid > shift:
        w = A.zeros((BM, BN), A.f32) + 1.0
    else:
        w = A.full((BM, BN), -0.25, A.f32)
    A.store(y[rows, cols], A.cast(t * w, A.f16), mask=rmask[:, None] & (cols < N)[None, :])
    A.store(s[rows], tot, mask=rmask)
'''

MATMUL = HEADER + '''\
@A.kernel(num_warps=8)
def mm(
    a: A.Tensor[A.f32, "M", "K"],
    b: A.Tensor[A.f32, "N", "K", A.col_major],
    c: A.Tensor[A.f32, "M", "N"],
    BM: A.const = 64,
    BN: A.const = 64,
    BK: A.const = 32,
    SPLIT: A.const = 2,
):
    A.grid(A.minimum(A.num_sms(), A.cdiv(M, BM) * A.cdiv(N, BN)), SPLIT)
    num_n = A.cdiv(N, BN)
    for tile in A.range(A.program_id(0), A.cdiv(M, BM) * num_n, A.num_programs(0),
                        flatten=True, warp_specialize=False):
        pid_m, pid_n = tile // num_n, tile % num_n
        rows = A.tag(pid_m * BM + A.arange(BM), M=pid_m)
        cols = pid_n * BN + A.arange(BN)
        acc = A.zeros((BM, BN), A.f32)
        for k in A.range(A.program_id(1) * BK, K, BK * SPLIT, stages=3):
            ks = k + A.arange(BK)
            at = A.load(a[rows, ks], tma=True)
            bt = A.load(b[cols, ks], mask=(cols < N, ks < K), other=0.0)
            acc = A.dot(at, A.trans(bt), acc, mma=A.wgmma, precision=A.tf32)
            acc = A.dot(at, A.trans(bt), acc=acc, mma=A.fma, precision=A.ieee)
        for j in A.static_range(2):
            acc = acc + 0.0 * j
            acc = A.dot(A.zeros((BM, 16), A.f32), A.zeros((16, BN), A.f32), acc,
                        precision=A.tf32x3)
        A.assert_tags(acc, M=rows, N=cols, K=A.covers(0, K))
        A.atomic_add(c[rows, cols], acc, mask=(rows < M, cols < N))
'''

BITS = HEADER + '''\
@A.kernel()
def bits(
    x: A.Tensor[A.i32, "B", "N"],
    y: A.Tensor[A.i32, "B", "N"],
    z: A.Tensor[A.bf16, "N"],
    keep: A.Tensor[A.i1, "N"],
    seed: A.i64,
    BLOCK: A.const = 32,
    FLAG: A.const = True,
    NEG: A.const = -7,
    HALF: A.const = 0.5,
):
    A.grid(A.cdiv(N, BLOCK), B)
    batch = A.program_id(1)
    offs = A.program_id(0) * BLOCK + A.arange(BLOCK)
    ok = (offs < N) & A.load(keep[offs], offs < N, other=False)
    v = A.load(x[batch, offs], ok, 0)
    v = (v & 255 | v << 2) ^ v >> 1
    v = ~v + NEG
    v = v // 3 % 5 - -2
    v = A.where(not FLAG, v, A.maximum(v, 0))
    if seed == 1:
        v = v + 1
    A.store(y[batch, offs], v, mask=ok & (v != 0) | (v >= 2) & (v <= 9))
    w = A.cast(v, A.f32) / 2 * HALF
    u = A.dot(A.cast(w[:, None] + A.zeros((BLOCK, 16), A.f32), A.bf16),
              A.zeros((16, 16), A.bf16), acc=None, mma=A.mma_v2)
    A.store(z[offs], A.cast(A.sum(u, 1), A.bf16), mask=None)
'''

TINY = HEADER + '''\
@A.kernel
def tiny():
    A.grid(1)
'''

SINGLE_DOC = HEADER + '''\
@A.kernel
def scale(x: A.Tensor[A.f32, "N"], y: A.Tensor[A.f32, "N"], BLOCK: A.const = 128):
    """One line of documentation."""
    A.grid(A.cdiv(N, BLOCK))
    offs = A.program_id(0) * BLOCK + A.arange(BLOCK)
    A.store(y[offs], A.load(x[offs], mask=offs < N) * 2.0, mask=offs < N)
'''

INLINE = {"rowops": ROWOPS, "matmul": MATMUL, "bits": BITS, "tiny": TINY,
          "single_doc": SINGLE_DOC}


@pytest.fixture(scope="module")
def inline_programs() -> dict[str, Program]:
    return {name: Program.from_text(text) for name, text in INLINE.items()}


def _assert_roundtrip(p: Program, what: str) -> None:
    q = Program.from_text(p.text)
    assert q == p, f"{what}: reparsing the printed text gives a different program:\n{p.text}"
    assert q.hash == p.hash, f"{what}: hash {q.hash} after round trip, {p.hash} before"
    assert q.text == p.text, f"{what}: printing is not idempotent:\n{p.text}\n---\n{q.text}"


# ---------------------------------------------------------------- task programs
def test_task_programs_found():
    assert PROGRAM_FILES, f"no DSL programs under {ROOT}/tasks/**/programs"


@pytest.mark.parametrize("path", PROGRAM_FILES, ids=lambda p: str(p.relative_to(ROOT)))
def test_task_program_roundtrip(path):
    _assert_roundtrip(Program.from_file(path), str(path.relative_to(ROOT)))


@pytest.mark.parametrize("path", PROGRAM_FILES, ids=lambda p: str(p.relative_to(ROOT)))
def test_task_program_roundtrip_apart_from_docstring(path):
    """Everything but the docstring survives printing (isolates docstring problems)."""
    p = Program.from_file(path)
    p = p.with_kernel(dataclasses.replace(p.kernel, doc=None))
    _assert_roundtrip(p, str(path.relative_to(ROOT)))


@pytest.mark.parametrize("path", PROGRAM_FILES, ids=lambda p: str(p.relative_to(ROOT)))
def test_task_program_locations(path):
    text = path.read_text()
    _assert_locations(Program.from_file(path), text, str(path.relative_to(ROOT)))


# ---------------------------------------------------------------- inline programs
@pytest.mark.parametrize("name", sorted(INLINE))
def test_inline_program_roundtrip(name, inline_programs):
    _assert_roundtrip(inline_programs[name], name)


@pytest.mark.parametrize("name", sorted(INLINE))
def test_inline_program_locations(name, inline_programs):
    p = inline_programs[name]
    _assert_locations(p, INLINE[name], name)
    _assert_locations(Program.from_text(p.text), p.text, f"{name} (printed)")


def _all_inline_kernels() -> list[ir.Kernel]:
    return [Program.from_text(t).kernel for t in INLINE.values()]


def test_inline_programs_call_every_op():
    called = {n.fn for k in _all_inline_kernels() for n in walk(k) if isinstance(n, ir.Call)}
    missing = sorted(set(OPS) - called)
    assert not missing, f"the inline programs never call {missing}; add them so the round " \
                        "trip covers every op"


def test_inline_programs_use_every_symbol_and_operator():
    kernels = _all_inline_kernels()
    symbols = {n.name for k in kernels for n in walk(k) if isinstance(n, ir.Symbol)}
    symbols |= {p.dtype for k in kernels for p in k.params if p.dtype}
    symbols |= {p.order for k in kernels for p in k.params}
    unused = sorted(set(SYMBOL_NAMES) - symbols)
    assert not unused, f"symbols never exercised by the inline programs: {unused}"
    ops = {n.op for k in kernels for n in walk(k) if isinstance(n, (ir.BinOp, ir.UnaryOp))}
    unused_ops = sorted(set(BIN_OPS + CMP_OPS + UNARY_OPS) - ops)
    assert not unused_ops, f"operators never exercised by the inline programs: {unused_ops}"


def test_call_keyword_and_positional_forms_are_one_node():
    """`A.dot(x, y, acc)` and `A.dot(x, y, acc=acc)` bind to one IR node, and print alike."""
    a = MATMUL.replace("A.dot(at, A.trans(bt), acc,", "A.dot(a=at, b=A.trans(bt), acc=acc,")
    assert a != MATMUL, "test setup: the replacement did not apply"
    pa, pb = Program.from_text(a), Program.from_text(MATMUL)
    assert pa == pb, "keyword and positional arguments of A.dot give different programs"
    assert pa.text == pb.text, "keyword and positional A.dot print differently"


def test_range_forms_are_canonical():
    """`A.range(n)`, `A.range(0, n)` and `A.range(0, n, 1)` are one loop."""
    texts = [SINGLE_DOC.replace("A.store(", f"for i in {r}:\n        A.store(")
             for r in ("A.range(N)", "A.range(0, N)", "A.range(0, N, 1)", "A.range(stop=N)")]
    programs = [Program.from_text(t) for t in texts]
    for t, p in zip(texts[1:], programs[1:]):
        assert p == programs[0], f"{t!r} differs from A.range(N)"
    assert "A.range(0, N)" in programs[0].text, \
        f"A.range(N) should print canonically as A.range(0, N):\n{programs[0].text}"


def test_negative_constants_fold_to_literals():
    p = Program.from_text(ROWOPS)
    consts = [n.value for n in walk(p.kernel) if isinstance(n, ir.Const)]
    assert -1.0 in consts and -0.25 in consts, f"negative literals not folded: {consts}"
    unary = [n for n in walk(p.kernel) if isinstance(n, ir.UnaryOp)
             and isinstance(n.operand, ir.Const)]
    assert not unary, f"unary minus on a literal should fold, got {unary}"
    assert p.kernel.param("shift").default == -3, "negative scalar default lost"


def test_col_major_and_scalar_defaults_survive(inline_programs):
    mm = inline_programs["matmul"].kernel
    assert mm.param("b").order == "col_major", f"b's order is {mm.param('b').order}"
    assert mm.param("a").order == "row_major", f"a's order is {mm.param('a').order}"
    rows = inline_programs["rowops"].kernel
    assert rows.param("scale").default == 0.5, f"scale default {rows.param('scale').default}"
    assert rows.param("bias").default is None, "a scalar without default got one"
    assert rows.options == (("num_stages", 2), ("num_warps", 4)), f"options {rows.options}"


def test_multiline_docstring_roundtrip():
    text = SINGLE_DOC.replace('"""One line of documentation."""',
                              '"""First line.\n\n    Second line, indented as usual."""')
    p = Program.from_text(text)
    assert p.kernel.doc == "First line.\n\n    Second line, indented as usual.", repr(p.kernel.doc)
    _assert_roundtrip(p, "multi-line docstring")


@pytest.mark.parametrize("block", ["if seed == 1:\n        pass",
                                   "for i in A.range(4):\n        pass",
                                   "if seed == 1:\n        pass\n    else:\n        pass"],
                         ids=["if", "for", "if-else"])
def test_block_of_only_pass_roundtrips(block):
    text = BITS.replace("if seed == 1:\n        v = v + 1", block)
    assert text != BITS, "test setup: the replacement did not apply"
    _assert_roundtrip(Program.from_text(text), block)


def test_infinite_scalar_default_roundtrip():
    text = SINGLE_DOC.replace("BLOCK: A.const = 128", "BLOCK: A.const = 128, lo: A.f32 = -1e999")
    p = Program.from_text(text)
    assert p.kernel.param("lo").default == float("-inf"), "-1e999 should parse as -inf"
    _assert_roundtrip(p, "infinite default")


def test_infinite_literal_in_body_roundtrips():
    text = SINGLE_DOC.replace("* 2.0", "* 1e999")
    _assert_roundtrip(Program.from_text(text), "infinite literal")


def test_negative_zero_roundtrips():
    """-0.0 and 0.0 print differently, so they must survive printing as different programs."""
    text = SINGLE_DOC.replace("* 2.0", "* -0.0").replace("BLOCK: A.const = 128",
                                                         "BLOCK: A.const = 128, z: A.f32 = -0.0")
    p = Program.from_text(text)
    _assert_roundtrip(p, "negative zero")
    assert "* -0.0" in p.text and "z: A.f32 = -0.0" in p.text, p.text
    assert p != Program.from_text(text.replace("-0.0", "0.0")), "-0.0 and 0.0 compare equal"


def test_literal_defaults_and_options_print_as_literals():
    text = SINGLE_DOC.replace("@A.kernel", "@A.kernel(num_warps=4, num_stages=3)").replace(
        "BLOCK: A.const = 128", "BLOCK: A.const = 128, F: A.const = True, lo: A.f64 = -2.5, "
        "big: A.i64 = -9223372036854775808, hi: A.f32 = 1e999")
    p = Program.from_text(text)
    _assert_roundtrip(p, "literal defaults")
    for spelled in ("F: A.const = True", "lo: A.f64 = -2.5", "big: A.i64 = -9223372036854775808",
                    "hi: A.f32 = 1e309", "@A.kernel(num_stages=3, num_warps=4)"):
        assert spelled in p.text, f"{spelled!r} not in\n{p.text}"


@pytest.mark.parametrize("doc", [
    "a\nb", "ends with a quote\"", "has '''both''' and \"\"\" quotes", "back\\slash\n\\n",
    "tab\there\n\tindented", "trailing newline\n", "\n  leading newline", "cr\rlf",
    "unicode \u00e9\n  x", "", " ", "\"",
], ids=["unindented", "final-quote", "triple-quotes", "backslashes", "tabs", "trailing-newline",
        "leading-newline", "carriage-return", "unicode", "empty", "space", "quote"])
def test_docstring_text_survives_printing(doc):
    p = Program.from_text(SINGLE_DOC)
    p = p.with_kernel(dataclasses.replace(p.kernel, doc=doc))
    assert Program.from_text(p.text).kernel.doc == doc, f"docstring changed:\n{p.text}"
    _assert_roundtrip(p, f"docstring {doc!r}")


# ---------------------------------------------------------------- source locations
def _line_of(text: str, needle: str) -> int:
    hits = [i for i, line in enumerate(text.splitlines(), 1) if needle in line]
    assert len(hits) == 1, f"{needle!r} occurs on lines {hits}, expected exactly once"
    return hits[0]


_STMT_PREFIX = {ir.For: lambda s: (f"for {s.var} in ",), ir.If: lambda s: ("if ", "elif "),
                ir.ExprStmt: lambda s: (f"A.{s.value.fn}(",),
                ir.Assign: lambda s: (s.targets[0],)}


def _assert_locations(p: Program, text: str, what: str, offset: int = 0) -> None:
    """Every statement, call, name and parameter points at its own spelling in `text`."""
    lines = text.splitlines()
    checked = 0
    for node in walk(p.kernel):
        if isinstance(node, ir.Kernel):
            expect = (f"def {node.name}(",)
        elif type(node) in _STMT_PREFIX:
            expect = _STMT_PREFIX[type(node)](node)
        elif isinstance(node, ir.Call):
            expect = (f"A.{node.fn}(",)
        elif isinstance(node, (ir.Name, ir.Param)):
            expect = (node.id if isinstance(node, ir.Name) else node.name,)
        else:
            continue
        line = node.loc.line - offset
        assert 1 <= line <= len(lines), f"{what}: {node!r} has line {node.loc.line}"
        seen = lines[line - 1][node.loc.col:]
        assert seen.startswith(expect), \
            f"{what}: {type(node).__name__} at line {line} col {node.loc.col} reads {seen!r}, " \
            f"expected it to start with {expect}"
        checked += 1
    assert checked >= 3, f"{what}: only {checked} located nodes"


def test_store_statement_line(inline_programs):
    p = inline_programs["single_doc"]
    stores = [s for s in p.kernel.body if isinstance(s, ir.ExprStmt) and s.value.fn == "store"]
    assert len(stores) == 1, f"expected one store, got {stores}"
    line = _line_of(SINGLE_DOC, "A.store(")
    assert stores[0].loc.line == line, f"store at line {stores[0].loc.line}, text has it at {line}"
    assert stores[0].value.loc.line == line, "the store call's own loc disagrees"


def test_multiline_statement_located_at_its_first_line():
    p = Program.from_text(MATMUL)
    loop = next(s for s in p.kernel.body if isinstance(s, ir.For))
    line = _line_of(MATMUL, "for tile in A.range(")
    assert loop.loc.line == line, f"loop at {loop.loc.line}, expected {line}"
    flatten = _line_of(MATMUL, "flatten=True")
    assert flatten == line + 1, "test setup: the loop header should span two lines"
    stop = loop.iter.arg("stop")
    assert stop.loc.line == line, f"stop expression at {stop.loc.line}, expected {line}"


def test_line_offset_shifts_every_location():
    p = Program.from_text(ROWOPS, filename="x.py", line_offset=100)
    _assert_locations(p, ROWOPS, "rowops with offset", offset=100)
    assert p == Program.from_text(ROWOPS), "a line offset must not change the program"


def test_errors_carry_filename_and_offset_line():
    bad = SINGLE_DOC.replace("* 2.0", "* ~")
    with pytest.raises(A.DSLSyntaxError) as err:
        Program.from_text(bad, filename="prog.py", line_offset=10)
    assert err.value.filename == "prog.py", f"filename {err.value.filename}"
    assert err.value.line == _line_of(bad, "* ~") + 10, f"line {err.value.line}"
    assert str(err.value).startswith(f"prog.py:{err.value.line}: "), str(err.value)


# ---------------------------------------------------------------- the @A.kernel decorator
@A.kernel(num_warps=4)
def scale_decorated(x: A.Tensor[A.f32, "N"], y: A.Tensor[A.f32, "N"], BLOCK: A.const = 128):
    """One line of documentation."""
    A.grid(A.cdiv(N, BLOCK))  # noqa: F821 (sizes are symbols of the DSL)
    offs = A.program_id(0) * BLOCK + A.arange(BLOCK)
    A.store(y[offs], A.load(x[offs], mask=offs < N) * 2.0, mask=offs < N)  # noqa: F821  <store>


class Holder:
    @staticmethod
    def make():
        @A.kernel
        def nested(x: A.Tensor[A.f32, "N"], y: A.Tensor[A.f32, "N"], BLOCK: A.const = 128):
            """One line of documentation."""
            A.grid(A.cdiv(N, BLOCK))  # noqa: F821
            offs = A.program_id(0) * BLOCK + A.arange(BLOCK)
            A.store(y[offs], A.load(x[offs], mask=offs < N) * 2.0,  # noqa: F821  <nested-store>
                    mask=offs < N)  # noqa: F821
        return nested


def _this_file_line(marker: str) -> int:
    """The line of this file that starts with `marker` or ends with the comment `marker`."""
    lines = Path(__file__).read_text().splitlines()
    hits = [i for i, line in enumerate(lines, 1)
            if line.lstrip().startswith(marker) or line.rstrip().endswith(f"  {marker}")]
    assert len(hits) == 1, f"{marker!r} marks lines {hits}, expected exactly one"
    return hits[0]


def test_decorator_gives_program_equal_to_text():
    assert isinstance(scale_decorated, Program), f"@A.kernel returned {type(scale_decorated)}"
    expected = Program.from_text(SINGLE_DOC.replace("@A.kernel\n", "@A.kernel(num_warps=4)\n")
                                 .replace("def scale(", "def scale_decorated("))
    assert scale_decorated == expected, f"decorated kernel differs:\n{scale_decorated.text}"
    assert scale_decorated.hash == expected.hash, "decorated kernel hashes differently"
    _assert_roundtrip(scale_decorated, "decorated kernel")


def test_decorator_locations_point_into_this_file():
    k = scale_decorated.kernel
    this = Path(__file__).read_text()
    assert k.loc.line == _this_file_line("def scale_decorated("), f"kernel at {k.loc.line}"
    store = k.body[-1]
    assert store.loc.line == _this_file_line("<store>"), f"store at line {store.loc.line}"
    _assert_locations(scale_decorated, this, "decorated kernel")


def test_decorator_on_indented_function():
    nested = Holder.make()
    expected = Program.from_text(SINGLE_DOC.replace("def scale(", "def nested("))
    assert nested == expected, f"indented decorated kernel differs:\n{nested.text}"
    store = nested.kernel.body[-1]
    assert store.loc.line == _this_file_line("<nested-store>"), f"store at line {store.loc.line}"


def test_ops_outside_kernels_raise():
    with pytest.raises(RuntimeError, match="A.dot is a DSL op"):
        A.dot(1, 2)
    assert A.dot.__doc__ == OPS["dot"].doc, "ops outside kernels should keep their docs"
    with pytest.raises(AttributeError, match="no_such_op"):
        A.no_such_op  # noqa: B018


# ---------------------------------------------------------------- printer details
def test_printed_text_is_canonical_python():
    """The printed text starts with the import, puts one parameter per line, ends in a newline."""
    text = Program.from_text(MATMUL).text
    head = "from argus_env import dsl as A\n\n\n@A.kernel(num_warps=8)\ndef mm(\n"
    assert text.startswith(head), text[:80]
    assert text.endswith("\n") and not text.endswith("\n\n"), repr(text[-20:])
    params = re.findall(r"^    (\w+): A\.", text, flags=re.M)
    assert params == ["a", "b", "c", "BM", "BN", "BK", "SPLIT"], f"params printed as {params}"
    compile(text, "<printed>", "exec")  # valid Python, though never executed


def test_comments_and_layout_do_not_matter():
    messy = textwrap.dedent('''\
        """A module docstring."""
        from argus_env import dsl as A
        # a comment
        @A.kernel
        def scale(x: A.Tensor[A.f32, "N"],
                  y: A.Tensor[A.f32, "N"],   BLOCK: A.const = 128):
            """One line of documentation."""

            A.grid(A.cdiv(N,
                          BLOCK))   # launch
            offs = (A.program_id(0) * BLOCK
                    + A.arange(BLOCK))
            A.store(y[offs], (A.load(x[offs], mask=(offs < N)) * 2.0), mask=offs < N)
        ''')
    assert Program.from_text(messy) == Program.from_text(SINGLE_DOC), \
        "layout, comments and redundant parentheses changed the program"
    assert Program.from_text(messy).text == Program.from_text(SINGLE_DOC).text, \
        "layout changed the printed text"
