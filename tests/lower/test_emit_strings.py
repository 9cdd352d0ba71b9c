"""Strings from the DSL reach generated Triton escaped: a docstring of any content
lowers to code that parses, keeps its text, and runs."""

from __future__ import annotations

import ast
import random

import pytest
import torch

from argus_env import lower
from argus_env.dsl.program import Program

HEADER = "from argus_env import dsl as A\n\n\n@A.kernel\n"
SIGNATURE = 'def scale(x: A.Tensor[A.f32, "N"], y: A.Tensor[A.f32, "N"], BLOCK: A.const = 64):\n'
BODY = ("    A.grid(A.cdiv(N, BLOCK))\n"
        "    offs = A.program_id(0) * BLOCK + A.arange(BLOCK)\n"
        "    A.store(y[offs], A.load(x[offs], mask=offs < N) * 2.0, mask=offs < N)\n")

#: docstrings as they appear in DSL text (each a valid Python literal there)
DOCSTRINGS = {
    "trailing-backslash": r'"""ends in a backslash \\"""',
    "trailing-quote": "'''ends in a quote \"'''",
    "trailing-quotes": "'''ends in quotes \"\"'''",
    "triple-quotes": "'''holds \"\"\" inside'''",
    "nul": r'"""holds a NUL \x00 here"""',
    "backslash-x": r'"""a Windows path C:\\xyz\\new"""',
    "backslash-n-name": r'"""\\N{BULLET} is not an escape here"""',
    "control": r'"""tab\there, carriage\rreturn, form\x0cfeed, \u2028line separator"""',
    "multi-line": '"""First line.\n\n    Second line with a \\\\ and a "quote".\n    """',
    "non-ascii": '"""Schrödinger’s kernel — ω"""',
    "only-quote": "'\"'",
}


def _program(doc: str) -> Program:
    return Program.from_text(HEADER + SIGNATURE + f"    {doc}\n" + BODY)


def _kernel_doc(source: str) -> str | None:
    tree = ast.parse(source)
    fn = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "scale_kernel")
    return ast.get_docstring(fn, clean=False)


@pytest.mark.parametrize("doc", DOCSTRINGS.values(), ids=DOCSTRINGS.keys())
def test_any_docstring_lowers_to_code_that_parses_and_keeps_it(doc):
    prog = _program(doc)
    assert prog.kernel.doc == ast.literal_eval(doc), "test setup: the DSL reads the docstring"
    source = lower.source(prog)
    compile(source, "generated.py", "exec")  # a SyntaxError here is the bug
    assert _kernel_doc(source) == prog.kernel.doc.strip()
    assert "\x00" not in source and "\r" not in source and "\u2028" not in source
    assert len(source.splitlines()) == source.count("\n"), "only \\n breaks generated lines"


@pytest.mark.parametrize("name", ["trailing-backslash", "trailing-quote", "nul", "backslash-x"])
def test_a_program_with_a_hostile_docstring_runs(name):
    launch = lower.load(_program(DOCSTRINGS[name]), interpret=True)
    x = torch.arange(150, dtype=torch.float32)
    assert torch.equal(launch(x), 2 * x)


def test_every_string_round_trips_through_the_escaping_function():
    from argus_env.lower.emit import py_literal
    rng = random.Random(1234)
    alphabet = ["\\", '"', "'", "\n", "\r", "\t", "\x00", "\x0b", "\u2028", "\x85", "x", "N",
                "{", "é", " ", "0"]
    for _ in range(5000):
        s = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 10)))
        for doc in (False, True):
            lit = py_literal(s, doc=doc)
            assert ast.literal_eval(lit) == s, (s, lit)
            assert lit.count("\n") == s.count("\n") and "\r" not in lit, lit


def test_literals_of_other_values_round_trip():
    from argus_env.lower.emit import py_literal
    for value in [0, -3, 2**40, 1.5, -0.25, 1e300, True, False, None, ("M",), ("M", "K")]:
        assert ast.literal_eval(py_literal(value)) == value
    assert ast.literal_eval(py_literal(float("inf"))) == float("inf")
    with pytest.raises(TypeError):
        py_literal(object())
