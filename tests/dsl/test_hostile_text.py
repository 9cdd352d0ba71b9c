"""Hostile and malformed program text is rejected by the front end, and never executed.

Every case is a whole program text. The offending line carries the comment `#!`; the
error must report that line (or 0 where no line applies) and a message naming the
construct.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
import uuid

import pytest

from argus_env.dsl import DSLError, DSLLimitError, DSLSyntaxError, Limits, Program
from argus_env.dsl.frontend import DEFAULT_LIMITS

HEADER = "from argus_env import dsl as A\n\n\n"
SIGNATURE = 'def scale(x: A.Tensor[A.f32, "N"], y: A.Tensor[A.f32, "N"], BLOCK: A.const = 128):\n'
PROLOGUE = ("    A.grid(A.cdiv(N, BLOCK))\n"
            "    offs = A.program_id(0) * BLOCK + A.arange(BLOCK)\n")
EPILOGUE = "    A.store(y[offs], A.load(x[offs], mask=offs < N) * 2.0, mask=offs < N)\n"
VALID = HEADER + "@A.kernel\n" + SIGNATURE + PROLOGUE + EPILOGUE


def body(code: str) -> str:
    """A valid kernel with `code` inserted in its body."""
    return HEADER + "@A.kernel\n" + SIGNATURE + PROLOGUE + \
        textwrap.indent(textwrap.dedent(code).strip("\n") + "\n", "    ") + EPILOGUE


def module(before: str = "", after: str = "", deco: str = "@A.kernel",
           signature: str = SIGNATURE) -> str:
    """A valid kernel with module-level code around it, or another decorator or signature."""
    before = textwrap.dedent(before).strip("\n")
    after = textwrap.dedent(after).strip("\n")
    return (HEADER + (before + "\n\n\n" if before else "") + deco + "\n" + signature + PROLOGUE
            + EPILOGUE + ("\n\n" + after + "\n" if after else ""))


def marked_line(text: str) -> int:
    """The line carrying the `#!` marker, or 0 when the text has none."""
    hits = [i for i, line in enumerate(text.splitlines(), 1) if line.rstrip().endswith("#!")]
    assert len(hits) <= 1, f"test setup: several marked lines {hits}"
    return hits[0] if hits else 0


def test_valid_template_parses():
    """The cases below differ from a valid program only in their hostile part."""
    p = Program.from_text(VALID)
    assert p.name == "scale", f"template kernel is {p.name}"
    assert Program.from_text(body("z = offs + 1")).name == "scale", "body() template broken"
    assert Program.from_text(module(before='"""doc"""')).name == "scale", "module() broken"


# ---------------------------------------------------------------- rejected constructs
# (id, text, regex the message must match)
REJECTED = [
    # imports and escapes to the host
    ("import-in-body", body("import os  #!"), r"import statement"),
    ("from-import-in-body", body("from os import system  #!"), r"import statement"),
    ("import-at-top", module(before="import os  #!"),
     r"import statement \(only `from argus_env import dsl as A` may be imported\)"),
    ("from-import-at-top", module(before="from os import system  #!"), r"import statement"),
    ("import-argus-module", module(before="import argus_env.dsl as A  #!"), r"import statement"),
    ("dunder-import", body("z = __import__('os')  #!"), r"call of `__import__` is not allowed"),
    ("open", body("z = open('/etc/passwd')  #!"), r"call of `open` is not allowed"),
    ("eval", body("eval('1 + 1')  #!"), r"call of `eval` is not allowed"),
    ("exec", body("exec('z = 1')  #!"), r"call of `exec` is not allowed"),
    ("getattr", body("z = getattr(A, 'load')  #!"), r"call of `getattr` is not allowed"),
    ("print", body("print(1)  #!"), r"call of `print` is not allowed"),
    ("os-system", body("os.system('x')  #!"), r"call of `os.system` is not allowed"),
    ("call-of-call", body("z = A.arange(BLOCK)(1)  #!"), r"call of `A.arange\(BLOCK\)`"),
    ("alias-dunder-class", body("z = A.__class__  #!"), r"attribute access `A.__class__`"),
    ("value-dunder-dict", body("z = offs.__dict__  #!"), r"attribute access `offs.__dict__`"),
    ("alias-dunder-call", body("z = A.__import__('os')  #!"), r"`A.__import__` is not a DSL op"),
    ("dunder-variable", body("__x = 1  #!"), r"dunder name `__x`"),
    ("dunder-read", body("z = __builtins__  #!"), r"dunder name `__builtins__`"),
    ("dunder-param", module(signature='def scale(x: A.Tensor[A.f32, "N"], y: A.Tensor[A.f32, '
                            '"N"], __BLOCK: A.const = 128, BLOCK: A.const = 1):  #!\n'),
     r"dunder name `__BLOCK`"),
    # Python constructs outside the DSL
    ("lambda", body("f = lambda: 0  #!"), r"lambda is not allowed"),
    ("while", body("while True:  #!\n    pass"), r"`while` loop \(unbounded loops"),
    ("list-comprehension", body("z = [i for i in offs]  #!"), r"list comprehension"),
    ("set-comprehension", body("z = {i for i in offs}  #!"), r"set comprehension"),
    ("dict-comprehension", body("z = {i: i for i in offs}  #!"), r"dict comprehension"),
    ("generator", body("z = A.sum(i for i in offs)  #!"), r"generator expression"),
    ("f-string", body('z = f"{offs}"  #!'), r"f-string"),
    ("with", body("with A.range(4) as r:  #!\n    pass"), r"`with` statement"),
    ("try", body("try:  #!\n    pass\nexcept Exception:\n    pass"), r"`try` statement"),
    ("raise", body("raise ValueError  #!"), r"`raise` statement"),
    ("class-in-body", body("class C:  #!\n    pass"), r"class definition"),
    ("class-at-top", module(after="class C:  #!\n    pass"), r"class definition"),
    ("nested-def", body("def g():  #!\n    pass"), r"nested function definition"),
    ("async-def-in-body", body("async def g():  #!\n    pass"), r"async function"),
    ("global", body("global z  #!"), r"`global`"),
    ("nonlocal", body("nonlocal z  #!"), r"`nonlocal`"),
    ("del", body("del offs  #!"), r"`del` statement"),
    ("yield-value", body("z = (yield offs)  #!"), r"`yield`"),
    ("yield-from", body("z = (yield from offs)  #!"), r"`yield from`"),
    ("yield-statement", body("yield offs  #!"),
     r"expression statement without effect is not allowed.*`yield offs`"),
    ("await", body("z = await offs  #!"), r"`await`"),
    ("walrus", body("z = (w := 1)  #!"), r"`:=` assignment"),
    ("assert", body("assert offs  #!"), r"Python `assert` \(use `A.assert_tags`\)"),
    ("return", body("return offs  #!"), r"`return`"),
    ("match", body("match offs:  #!\n    case 1:\n        pass"), r"`match` statement"),
    ("annotated-assignment", body("z: A.f32 = 1.0  #!"), r"annotated assignment"),
    ("chained-assignment", body("z = w = 1  #!"), r"chained assignment"),
    ("subscript-assignment", body("y[offs] = offs  #!"), r"assignment target `y\[offs\]`"),
    ("attribute-augassign", body("A.x += 1  #!"), r"augmented assignment to a non-name"),
    ("conditional-expression", body("z = offs if True else offs  #!"),
     r"conditional expression \(use `A.where`\)"),
    ("and-or", body("z = (offs < 2) and (offs > 1)  #!"), r"`and`/`or`"),
    ("chained-compare", body("z = 1 < offs < 2  #!"), r"chained or non-arithmetic comparison"),
    ("is-compare", body("z = offs is None  #!"), r"chained or non-arithmetic comparison"),
    ("in-compare", body("z = 1 in offs  #!"), r"chained or non-arithmetic comparison"),
    ("power", body("z = offs ** 2  #!"), r"`BinOp` is not allowed.*offs \*\* 2"),
    ("matmul-operator", body("z = offs @ offs  #!"), r"`BinOp` is not allowed"),
    ("unary-plus", body("z = +offs  #!"), r"`UnaryOp` is not allowed"),
    ("dict", body("z = {1: 2}  #!"), r"dict"),
    ("set", body("z = {1}  #!"), r"set"),
    ("list", body("z = [1, 2]  #!"), r"list \(use a tuple\)"),
    ("string-literal", body('z = "abc"  #!'), r"str literal is not allowed.*\"abc\""),
    ("bytes-literal", body('z = b"abc"  #!'), r"bytes literal"),
    ("complex-literal", body("z = 1j  #!"), r"complex literal"),
    ("ellipsis", body("z = ...  #!"), r"ellipsis literal"),
    ("second-docstring", body('"""not the docstring"""  #!'),
     r"expression statement without effect"),
    ("bare-name-statement", body("offs  #!"), r"expression statement without effect"),
    ("slice-with-bounds", body("z = offs[1:2]  #!"), r"slice with bounds"),
    ("slice-with-step", body("z = offs[::2]  #!"), r"slice with bounds"),
    ("starred-arg", body("z = A.maximum(*offs)  #!"), r"`\*` unpacking"),
    ("double-starred-kwargs", body("z = A.maximum(1, **offs)  #!"), r"`\*\*` unpacking"),
    ("for-else", body("for i in A.range(4):  #!\n    pass\nelse:\n    pass"), r"`for \.\.\. else`"),
    ("for-tuple-target", body("for i, j in A.range(4):  #!\n    pass"),
     r"loop target other than a single name"),
    ("for-over-tile", body("for i in offs:  #!\n    pass"),
     r"loop over something other than `A.range`"),
    # DSL ops misused
    ("op-not-called", body("z = A.load  #!"), r"`A.load` must be called"),
    ("unknown-op", body("z = A.nonexistent(1)  #!"), r"`A.nonexistent` is not a DSL op"),
    ("unknown-attribute", body("z = A.Tensor  #!"), r"attribute access `A.Tensor`"),
    ("value-op-as-statement", body("A.load(x[offs])  #!"), r"used as a value, not as a statement"),
    ("statement-op-as-value", body("z = A.store(y[offs], 1.0)  #!"),
     r"`A.store` is used as a statement, not as a value"),
    ("value-op-as-iterator", body("for i in A.arange(4):  #!\n    pass"),
     r"`A.arange` is used as a value, not as a loop iterator"),
    ("iterator-as-value", body("z = A.range(4)  #!"), r"used as a loop iterator, not as a value"),
    ("too-many-positional", body("z = A.arange(4, 5)  #!"),
     r"`A.arange` takes at most 1 positional arguments \(n\), got 2"),
    ("argument-twice", body("z = A.arange(4, n=4)  #!"), r"argument `n` given twice"),
    ("unknown-keyword", body("z = A.arange(size=4)  #!"), r"`A.arange` has no argument `size`"),
    ("missing-argument", body("z = A.cdiv(4)  #!"), r"`A.cdiv` is missing argument `b`"),
    ("range-without-stop", body("for i in A.range(stages=2):  #!\n    pass"),
     r"`A.range` needs a stop value"),
    ("static-range-runtime", body("for i in A.static_range(N):  #!\n    pass"),
     r"A.static_range needs a compile-time integer"),
    # module structure and the decorator
    ("two-kernels", module(after="@A.kernel\ndef other():  #!\n    A.grid(1)"),
     r"exactly one `@A.kernel` function; found 2"),
    ("no-kernel", HEADER, r"exactly one `@A.kernel` function; found 0"),
    ("empty-text", "", r"exactly one `@A.kernel` function; found 0"),
    ("top-level-assignment", module(before="z = 1  #!"), r"top-level `Assign`"),
    ("top-level-call", module(before="A.grid(1)  #!"), r"top-level `Expr`"),
    ("top-level-if", module(before="if True:  #!\n    pass"), r"top-level `If`"),
    ("no-decorator", module(deco="", signature="def scale():  #!\n"),
     r"function `scale` needs exactly one decorator, `@A.kernel`"),
    ("two-decorators", module(deco="@A.kernel\n@A.kernel",
                              signature=SIGNATURE.rstrip("\n") + "  #!\n"),
     r"needs exactly one decorator"),
    ("staticmethod-decorator", module(deco="@staticmethod  #!"),
     r"unknown decorator `staticmethod`; use `@A.kernel`"),
    ("jit-decorator", module(deco="@A.jit  #!"), r"unknown decorator `A.jit`"),
    ("dotted-decorator", module(deco="@functools.lru_cache()  #!"),
     r"unknown decorator `functools.lru_cache\(\)`"),
    ("decorator-subscript", module(deco="@A.kernels[0]  #!"), r"unknown decorator"),
    ("unknown-kernel-option", module(deco="@A.kernel(num_wraps=4)  #!"),
     r"unknown kernel option `num_wraps`; known: num_warps, num_stages"),
    ("positional-kernel-option", module(deco="@A.kernel(4)  #!"),
     r"`@A.kernel` takes keyword options only"),
    ("non-literal-kernel-option", module(deco="@A.kernel(num_warps=N)  #!"),
     r"kernel option num_warps must be a number literal, got `N`"),
    ("kernel-options-splat", module(deco="@A.kernel(**opts)  #!"), r"unknown kernel option"),
    # parameters
    ("param-without-annotation", module(signature="def scale(x, BLOCK: A.const = 1):  #!\n"),
     r"parameter `x` needs an annotation"),
    ("star-args", module(signature="def scale(*xs: A.f32):  #!\n"),
     r"kernel parameters must be plain `name: annotation` parameters"),
    ("star-star-kwargs", module(signature="def scale(**kw: A.f32):  #!\n"),
     r"kernel parameters must be plain"),
    ("keyword-only", module(signature="def scale(*, s: A.f32):  #!\n"),
     r"kernel parameters must be plain"),
    ("positional-only", module(signature="def scale(s: A.f32, /):  #!\n"),
     r"kernel parameters must be plain"),
    ("duplicate-param", module(signature="def scale(s: A.f32, s: A.i32):  #!\n"),
     r"duplicate parameter s"),
    ("python-type-annotation", module(signature="def scale(s: int):  #!\n"),
     r"unknown annotation `int` for parameter `s`"),
    ("const-without-value", module(signature="def scale(BLOCK: A.const):  #!\n"),
     r"constant `BLOCK` needs a value"),
    ("const-from-name", module(signature="def scale(BLOCK: A.const = N):  #!\n"),
     r"constant BLOCK must be a number literal, got `N`"),
    ("const-from-expression", module(signature="def scale(BLOCK: A.const = 64 * 2):  #!\n"),
     r"constant BLOCK must be a number literal, got `64 \* 2`"),
    ("negative-bool-const", module(signature="def scale(BLOCK: A.const = -True):  #!\n"),
     r"constant BLOCK must be a number literal"),
    ("tensor-default", module(signature='def scale(x: A.Tensor[A.f32, "N"] = 0):  #!\n'),
     r"tensor parameter `x` cannot have a default"),
    ("tensor-no-dtype", module(signature='def scale(x: A.Tensor["N"]):  #!\n'),
     r"write A.Tensor\[A.<dtype>, \"dim\", \.\.\.\]"),
    ("tensor-no-dims", module(signature="def scale(x: A.Tensor[A.f32]):  #!\n"),
     r"tensor `x` needs at least one dim"),
    ("tensor-bad-dim", module(signature='def scale(x: A.Tensor[A.f32, "1M"]):  #!\n'),
     r"dims are size names such as \"M\", got `\"1M\"`"),
    ("tensor-int-dim", module(signature="def scale(x: A.Tensor[A.f32, 128]):  #!\n"),
     r"dims are size names"),
    ("col-major-1d", module(signature='def scale(x: A.Tensor[A.f32, "N", A.col_major]):  #!\n'),
     r"A.col_major applies to 2-D tensors only"),
    # reserved names
    ("reserved-tl", body("tl = 1  #!"), r"name `tl` is reserved"),
    ("reserved-triton", body("triton = 1  #!"), r"name `triton` is reserved"),
    ("reserved-range", body("range = 1  #!"), r"name `range` is reserved"),
    ("reserved-alias", body("A = 1  #!"), r"name `A` is reserved"),
    ("reserved-ptr", body("a_ptr = 1  #!"), r"name `a_ptr` is reserved for generated code"),
    ("reserved-stride", body("stride_x = 1  #!"),
     r"name `stride_x` is reserved for generated code"),
    ("reserved-desc", body("foo_desc = 1  #!"), r"name `foo_desc` is reserved for generated code"),
    ("reserved-read", body("z = tl  #!"), r"name `tl` is reserved"),
    ("reserved-loop-var", body("for tl in A.range(4):  #!\n    pass"), r"name `tl` is reserved"),
    ("reserved-tuple-target", body("z, a_ptr = 1, 2  #!"), r"name `a_ptr` is reserved"),
    ("reserved-augassign", body("torch += 1  #!"), r"name `torch` is reserved"),
    ("reserved-tag-key", body("z = A.tag(offs, tl=offs)  #!"), r"name `tl` is reserved"),
    ("reserved-kernel-name", module(signature="def scale_kernel():  #!\n"),
     r"name `scale_kernel` is reserved"),
    ("reserved-param", module(signature='def scale(x_ptr: A.Tensor[A.f32, "N"]):  #!\n'),
     r"name `x_ptr` is reserved"),
    ("reserved-dim", module(signature='def scale(x: A.Tensor[A.f32, "stride_n"]):  #!\n'),
     r"name `stride_n` is reserved"),
    ("reserved-helper-kernel", module(signature="def wide_offsets():  #!\n"),
     r"name `wide_offsets` is reserved"),
    ("reserved-helper-local", body("bind_sizes = offs  #!"), r"name `bind_sizes` is reserved"),
    ("reserved-wide-flag", body("I64_x = 1  #!"), r"name `I64_x` is reserved for generated"),
    ("reserved-launch-kernel", body("scale_kernel_1 = 1  #!"),
     r"name `scale_kernel_1` is reserved for generated"),
    ("reserved-shaped-desc", body("x_desc_64x32 = 1  #!"),
     r"name `x_desc_64x32` is reserved for generated"),
    ("reserved-second-grid", body("grid_1 = 1  #!"), r"name `grid_1` is reserved for generated"),
    ("reserved-interpreter-name", body("interpreter_semantic = offs  #!"),
     r"name `interpreter_semantic` is reserved"),
    # unicode
    ("unicode-string", body('z = "é"  #!'), r"str literal is not allowed"),
    ("fullwidth-reserved-name", body("ｔｌ = 1  #!"), r"name `tl` is reserved"),
    ("fullwidth-underscore", body("z = ＿＿import＿＿('os')  #!"),
     r"invalid syntax: invalid character"),
    ("cyrillic-variable", body("аcc = 1  #!"), r"name `аcc` is not ASCII"),
    ("cyrillic-loop-var", body("for і in A.range(4):  #!\n    pass"), r"is not ASCII"),
    ("cyrillic-param", module(signature="def scale(ВLOCK: A.const = 1):  #!\n"),
     r"name `ВLOCK` is not ASCII"),
    ("cyrillic-dim", module(signature='def scale(x: A.Tensor[A.f32, "М"]):  #!\n'),
     r"name `М` is not ASCII"),
    ("cyrillic-tag-key", body("z = A.tag(offs, rоw=offs)  #!"), r"is not ASCII"),
    ("cyrillic-alias", HEADER.replace("dsl as A", "dsl as А  #!") + "@А.kernel\n" + SIGNATURE
     + PROLOGUE.replace("A.", "А.") + EPILOGUE.replace("A.", "А."), r"alias `А` is not ASCII"),
    # syntax errors
    ("unclosed-paren", body("z = (1 +  #!"), r"invalid syntax"),
    ("dangling-operator", body("z = 1 +  #!"), r"invalid syntax"),
    ("bad-dedent", VALID.replace("    A.store(", "  A.store(").rstrip("\n") + "  #!\n",
     r"invalid syntax: unindent does not match"),
    ("unexpected-indent", body("z = 1\n        w = 2  #!"), r"invalid syntax: unexpected indent"),
    ("keyword-as-name", body("if = 1  #!"), r"invalid syntax"),
    ("null-byte", body("z = 1\x00"),
     r"invalid syntax: source code string cannot contain null bytes"),
]


@pytest.mark.parametrize("text, pattern", [pytest.param(t, p, id=i) for i, t, p in REJECTED])
def test_rejected(text, pattern):
    with pytest.raises(DSLSyntaxError, match=pattern) as err:
        Program.from_text(text, filename="hostile.py")
    line = marked_line(text)
    assert err.value.line == line, f"error {err.value.message!r} reported at line " \
                                   f"{err.value.line}, the construct is at line {line}"
    assert err.value.filename == "hostile.py", f"error names file {err.value.filename}"
    assert err.value.to_dict()["kind"] == "syntax", f"to_dict {err.value.to_dict()}"


def test_rejected_case_ids_are_unique():
    ids = [i for i, _, _ in REJECTED]
    dups = sorted({i for i in ids if ids.count(i) > 1})
    assert not dups, f"duplicate case ids {dups}"


def test_syntax_error_line_respects_offset():
    text = body("z = (1 +  #!")
    with pytest.raises(DSLSyntaxError, match="invalid syntax") as err:
        Program.from_text(text, line_offset=40)
    assert err.value.line == marked_line(text) + 40, f"line {err.value.line} ignores the offset"


@pytest.mark.parametrize("value", [None, b"from argus_env import dsl as A", 42, ["x"]],
                         ids=["None", "bytes", "int", "list"])
def test_non_string_input(value):
    with pytest.raises(DSLSyntaxError, match=f"program text must be a string, got "
                                             f"{type(value).__name__}") as err:
        Program.from_text(value)
    assert err.value.line == 0, f"non-string input has no line, got {err.value.line}"


# ---------------------------------------------------------------- whitelist gaps (regressions)
def test_return_annotation_rejected():
    text = module(signature=SIGNATURE.replace("):", ") -> open('/etc/passwd'):  #!"))
    with pytest.raises(DSLSyntaxError, match="return annotation") as err:
        Program.from_text(text)
    assert err.value.line == marked_line(text), f"line {err.value.line}"


def test_harmless_return_annotation_rejected():
    text = module(signature=SIGNATURE.replace("):", ") -> None:  #!"))
    with pytest.raises(DSLSyntaxError, match="return annotation .* is not allowed.*`None`") as err:
        Program.from_text(text)
    assert err.value.line == marked_line(text), f"line {err.value.line}"


def test_decorator_alias_without_import_is_free():
    """An @A.kernel function's source has no import: its decorator names the alias."""
    text = VALID.replace(HEADER, "").replace("A.", "dsl.")
    assert "import" not in text and "@dsl.kernel" in text, "test setup"
    assert Program.from_text(text) == Program.from_text(VALID), "alias `dsl` changed the program"


def test_decorator_must_use_imported_alias():
    text = VALID.replace("A.", "np.").replace("from argus_env import dsl as np",
                                              "from argus_env import dsl as A")
    text = text.replace("@np.kernel", "@np.kernel  #!")
    assert "import dsl as A" in text and "np.store(" in text, "test setup"
    with pytest.raises(DSLSyntaxError, match="unknown decorator `np.kernel`") as err:
        Program.from_text(text)
    assert err.value.line == marked_line(text), f"line {err.value.line}"


def test_non_ascii_identifier_rejected():
    text = body("аcc = offs + 1  #!")  # the first letter is CYRILLIC SMALL LETTER A
    assert not "аcc".isascii(), "test setup: the name must be non-ASCII"
    with pytest.raises(DSLSyntaxError, match="ASCII") as err:
        Program.from_text(text)
    assert err.value.line == marked_line(text), f"line {err.value.line}"


# ---------------------------------------------------------------- size limits
# (id, text, regex the message must match): literals whose value cannot be a kernel value
HUGE_LITERALS = [
    ("decimal-5000-digits", body("z = " + "1" * 5000 + "  #!"), r"too many digits"),
    ("decimal-5000-digits-const", module(signature=SIGNATURE.replace(
        "BLOCK: A.const = 128", "BLOCK: A.const = " + "7" * 5000) .rstrip("\n") + "  #!\n"),
     r"too many digits"),
    ("hex-4000-digits", body("z = 0x" + "f" * 4000 + "  #!"), r"integer literal of 16000 bits"),
    ("hex-const", module(signature=SIGNATURE.replace(
        "BLOCK: A.const = 128", "BLOCK: A.const = 0x" + "f" * 4000).rstrip("\n") + "  #!\n"),
     r"integer literal of 16000 bits"),
    ("kernel-option", module(deco="@A.kernel(num_warps=0x" + "f" * 3000 + ")  #!"),
     r"integer literal of 12000 bits"),
    ("just-over-64-bits", body(f"z = {2**64}  #!"), r"integer literal of 65 bits"),
    ("binary", body("z = 0b1" + "0" * 100 + "  #!"), r"integer literal of 101 bits"),
    ("float-5000-digits", body("z = 1" + "0" * 5000 + ".0  #!"),
     r"number literal of 5003 characters; the limit is 100"),
    ("float-long-fraction", body("z = 0." + "3" * 200 + "  #!"),
     r"number literal of 202 characters"),
    ("int-long-spelling", body("z = 0x" + "0" * 200 + "1  #!"), r"number literal of 203 char"),
]


@pytest.mark.parametrize("text, pattern", [pytest.param(t, p, id=i) for i, t, p in HUGE_LITERALS])
def test_number_literals_are_bounded(text, pattern):
    with pytest.raises(DSLLimitError, match=pattern) as err:
        Program.from_text(text, filename="huge.py")
    assert err.value.line == marked_line(text), (err.value.line, err.value.message[:200])
    assert err.value.to_dict()["kind"] == "limit"
    assert len(err.value.message) < 400, "the message quotes the literal, shortened"


def test_number_literals_at_the_limit_are_accepted():
    for literal in (str(2**64 - 1), "-" + str(2**63), "0x" + "f" * 16, "1.7e308", "1e-999",
                    "1e999", "0." + "3" * 98):
        assert Program.from_text(body(f"z = {literal}")).name == "scale", literal
    with pytest.raises(DSLLimitError, match="integer literal of 33 bits"):
        Program.from_text(body(f"z = {2**32}"), limits=Limits(max_int_bits=32))


def test_too_many_characters():
    text = VALID + "# padding\n" * (DEFAULT_LIMITS.max_chars // 10)
    assert len(text) > DEFAULT_LIMITS.max_chars, "test setup: text not long enough"
    with pytest.raises(DSLLimitError, match=f"program is {len(text)} characters; the limit is "
                                            f"{DEFAULT_LIMITS.max_chars}") as err:
        Program.from_text(text)
    assert err.value.line == 0, f"a whole-text limit has no line, got {err.value.line}"


def test_character_limit_is_inclusive():
    assert Program.from_text(VALID, limits=Limits(max_chars=len(VALID))).name == "scale", \
        "a text exactly at the limit must be accepted"
    with pytest.raises(DSLLimitError, match="characters"):
        Program.from_text(VALID, limits=Limits(max_chars=len(VALID) - 1))


def test_too_many_nodes():
    text = body("z = (" + "1, " * DEFAULT_LIMITS.max_nodes + ")")
    limit = DEFAULT_LIMITS.max_nodes
    with pytest.raises(DSLLimitError, match=f"syntax nodes; the limit is {limit}"):
        Program.from_text(text)


def test_too_many_statements():
    n = DEFAULT_LIMITS.max_statements
    text = body("z = 1\n" * n)  # with the grid and `offs`, n + 2 statements
    with pytest.raises(DSLLimitError, match=f"more than {n} statements") as err:
        Program.from_text(text)
    first = text.splitlines().index("    A.grid(A.cdiv(N, BLOCK))") + 1
    assert err.value.line == first + n, f"limit reported at {err.value.line}, statement " \
                                        f"{n + 1} is at line {first + n}"


def test_statements_in_nested_blocks_count():
    limits = Limits(max_statements=5)
    ok = body("for i in A.range(4):\n    z = 1\n    w = 2")  # grid, offs, for, z, w, store
    with pytest.raises(DSLLimitError, match="more than 5 statements"):
        Program.from_text(ok, limits=limits)
    assert Program.from_text(ok, limits=Limits(max_statements=6)).name == "scale", \
        "six statements (grid, offs, for, two assignments, store) fit a limit of 6"


def _nested_loops(depth: int) -> str:
    code = ""
    for d in range(depth):
        code += "    " * d + f"for i{d} in A.range(2):" + ("  #!" if d == depth - 1 else "") + "\n"
    code += "    " * depth + "z = 1\n"
    return body(code)


def test_nesting_at_limit_is_accepted():
    text = _nested_loops(DEFAULT_LIMITS.max_depth)
    assert Program.from_text(text).name == "scale", f"{DEFAULT_LIMITS.max_depth} levels must parse"


def test_nesting_over_limit():
    depth = DEFAULT_LIMITS.max_depth + 1
    text = _nested_loops(depth)
    with pytest.raises(DSLLimitError, match=f"blocks nest {depth} deep; the limit is "
                                            f"{DEFAULT_LIMITS.max_depth}") as err:
        Program.from_text(text)
    expected = marked_line(text) + 1  # the first statement of the too-deep block
    assert err.value.line == expected, f"depth limit reported at {err.value.line}, not {expected}"


def test_nesting_counts_if_blocks():
    code = ""
    for d in range(DEFAULT_LIMITS.max_depth + 1):
        code += "    " * d + "if N > 0:\n"
    code += "    " * (DEFAULT_LIMITS.max_depth + 1) + "z = 1\n"
    with pytest.raises(DSLLimitError, match="blocks nest"):
        Program.from_text(body(code))


def test_static_range_within_unroll_limit_is_accepted():
    text = body("for i in A.static_range(8):\n    for j in A.static_range(8):\n        z = i + j")
    assert 8 * 8 <= DEFAULT_LIMITS.max_unroll, "test setup: 64 trips must fit the limit"
    assert Program.from_text(text).name == "scale", "64 unrolled trips must be accepted"


@pytest.mark.parametrize("code", [
    "for i in A.static_range(1000):  #!\n    z = i",
    "for i in A.static_range(8):\n    for j in A.static_range(16):  #!\n        z = i + j",
    "for i in A.static_range(16):\n    for j in A.static_range(BLOCK):  #!\n        z = i + j",
], ids=["single-1000", "nested-8x16", "nested-const-16x128"])
def test_static_range_over_unroll_limit(code):
    text = body(code)
    with pytest.raises(DSLLimitError, match="unroll") as err:
        Program.from_text(text)
    assert err.value.line == marked_line(text), f"line {err.value.line}"


@pytest.mark.parametrize("expr", ["~" * 1500 + "1", "-" * 40000 + "1", "1" + " + 1" * 3000,
                                  "not " * 2000 + "1"],
                         ids=["invert-1500", "minus-40000", "sum-3000", "not-2000"])
def test_deep_expression_is_a_limit_error(expr):
    text = body(f"z = {expr}")
    assert len(text) < DEFAULT_LIMITS.max_chars, "test setup: within the character limit"
    with pytest.raises((DSLLimitError, DSLSyntaxError)):
        Program.from_text(text)


@pytest.mark.parametrize("op", ["~", "-", "not "], ids=["invert", "minus", "not"])
def test_expression_depth_limit_is_inclusive(op):
    limit = DEFAULT_LIMITS.max_expr_depth
    ok = body(f"z = {op * (limit - 1)}offs")  # the operators and the name: `limit` levels
    p = Program.from_text(ok)
    assert Program.from_text(p.text) == p, "a program at the depth limit must round-trip"
    text = body(f"z = {op * limit}offs  #!")
    with pytest.raises(DSLLimitError, match=f"nests more than {limit} deep") as err:
        Program.from_text(text)
    assert err.value.line == marked_line(text), f"line {err.value.line}"


def test_expression_depth_limit_is_configurable():
    # six nested `+` and the name: 7 levels (the template's own expressions nest 5 deep)
    text = body("z = offs + 1 + 2 + 3 + 4 + 5 + 6  #!")
    assert Program.from_text(text, limits=Limits(max_expr_depth=7)).name == "scale", \
        "7 levels fit a limit of 7"
    with pytest.raises(DSLLimitError, match="nests more than 6 deep") as err:
        Program.from_text(text, limits=Limits(max_expr_depth=6))
    assert err.value.line == marked_line(text), f"line {err.value.line}"


def test_unroll_limit_is_configurable():
    text = body("for i in A.static_range(4):\n    for j in A.static_range(2):  #!\n        z = i")
    assert Program.from_text(text, limits=Limits(max_unroll=8)).name == "scale", "8 trips fit 8"
    with pytest.raises(DSLLimitError, match="unroll 8 times; the limit is 7") as err:
        Program.from_text(text, limits=Limits(max_unroll=7))
    assert err.value.line == marked_line(text), f"line {err.value.line}"


def test_deep_parentheses_are_a_syntax_error():
    text = body("z = " + "(" * 300 + "1" + ")" * 300 + "  #!")
    with pytest.raises(DSLSyntaxError, match="too many nested parentheses") as err:
        Program.from_text(text)
    assert err.value.line == marked_line(text), f"line {err.value.line}"


def test_constant_folding_cannot_hang_the_checker():
    text = body("a = 3\n" + "a = a * a\n" * 40)
    script = ("import sys\nfrom argus_env.dsl import Program, DSLError\n"
              "try:\n    Program.from_text(sys.stdin.read())\nexcept DSLError:\n    pass\n")
    try:
        subprocess.run([sys.executable, "-c", script], input=text, text=True, timeout=2,
                       check=True, capture_output=True)
    except subprocess.TimeoutExpired:
        pytest.fail("type-checking a 500-character program took more than 2 s")


# ---------------------------------------------------------------- nothing is executed
# Text that would create the file {path} if any part of it were evaluated.
EXECUTING = [
    ("body-statement", lambda p: body(f"open({p!r}, 'w')")),
    ("body-expression", lambda p: body(f"z = open({p!r}, 'w')")),
    ("op-argument", lambda p: body(f"z = A.load(x[open({p!r}, 'w')])")),
    ("tag-value", lambda p: body(f"z = A.tag(offs, t=open({p!r}, 'w'))")),
    ("loop-iterator", lambda p: body(f"for i in open({p!r}, 'w'):\n    pass")),
    ("if-condition", lambda p: body(f"if open({p!r}, 'w'):\n    pass")),
    ("f-string", lambda p: body(f"z = f\"{{open({p!r}, 'w')}}\"")),
    ("with", lambda p: body(f"with open({p!r}, 'w'):\n    pass")),
    ("lambda-default", lambda p: body(f"f = lambda q=open({p!r}, 'w'): q")),
    ("nested-def-default", lambda p: body(f"def g(q=open({p!r}, 'w')):\n    pass")),
    ("nested-def-decorator", lambda p: body(f"@open({p!r}, 'w')\ndef g():\n    pass")),
    ("const-default",
     lambda p: module(signature=f"def scale(BLOCK: A.const = open({p!r}, 'w')):\n")),
    ("scalar-default", lambda p: module(signature=f"def scale(s: A.f32 = open({p!r}, 'w')):\n")),
    ("param-annotation", lambda p: module(signature=f"def scale(s: open({p!r}, 'w')):\n")),
    ("tensor-dim",
     lambda p: module(signature=f"def scale(x: A.Tensor[A.f32, open({p!r}, 'w')]):\n")),
    ("return-annotation",
     lambda p: module(signature=SIGNATURE.replace("):", f") -> open({p!r}, 'w'):"))),
    ("decorator", lambda p: module(deco=f"@open({p!r}, 'w')")),
    ("decorator-option", lambda p: module(deco=f"@A.kernel(num_warps=open({p!r}, 'w'))")),
    ("decorator-call-target", lambda p: module(deco=f"@open({p!r}, 'w').kernel")),
    ("module-statement", lambda p: module(before=f"open({p!r}, 'w')")),
    ("module-import-system", lambda p: module(before=f"__import__('os').system('touch {p}')")),
    ("module-class-body", lambda p: module(after=f"class C:\n    open({p!r}, 'w')")),
    ("second-function-default", lambda p: module(after=f"def g(q=open({p!r}, 'w')):\n    pass")),
    ("module-docstring-then-code", lambda p: module(before=f'"""doc"""\nopen({p!r}, "w")')),
]


@pytest.mark.parametrize("make", [pytest.param(m, id=i) for i, m in EXECUTING])
def test_nothing_executes(make, tmp_path):
    path = tmp_path / f"argus_pwned_{uuid.uuid4().hex}"
    text = make(str(path))
    assert str(path) in text, "test setup: the path must appear in the text"
    try:
        Program.from_text(text)
    except DSLError:
        pass
    assert not path.exists(), f"parsing the text created {path}: it was executed"


@pytest.mark.parametrize("make", [pytest.param(m, id=i) for i, m in EXECUTING])
def test_executing_text_is_rejected(make, tmp_path):
    path = tmp_path / f"argus_pwned_{uuid.uuid4().hex}"
    with pytest.raises(DSLSyntaxError):
        Program.from_text(make(str(path)))
    assert not path.exists(), f"rejected text created {path}"
