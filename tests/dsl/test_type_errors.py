"""Ill-typed DSL fails when the program is checked, with a `DSLTypeError` that names the op,
the shapes or dtypes involved and the source line.

Each case inserts a few lines at the end of a valid kernel; the offending line carries the
comment `#!`, and the error must report that line.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from argus_env import dsl as A
from argus_env.dsl import DSLError, DSLSyntaxError, DSLTypeError, Program

HEADER = "from argus_env import dsl as A\n\n\n"
SIGNATURE = '''\
@A.kernel
def k(
    a: A.Tensor[A.bf16, "M", "K"],
    b: A.Tensor[A.bf16, "K", "N"],
    c: A.Tensor[A.f32, "M", "N"],
    o: A.Tensor[A.bf16, "M", "N"],
    v: A.Tensor[A.f32, "M"],
    n: A.Tensor[A.i32, "M"],
    s: A.f32,
    BM: A.const = 64,
    BN: A.const = 64,
    BK: A.const = 32,
):
'''
GRID = "    A.grid(A.cdiv(M, BM), A.cdiv(N, BN))\n"
PROLOGUE = '''\
    rows = A.program_id(0) * BM + A.arange(BM)
    cols = A.program_id(1) * BN + A.arange(BN)
    ks = A.arange(BK)
    x = A.load(a[rows, ks])
    y = A.load(b[ks, cols])
    acc = A.zeros((BM, BN), A.f32)
'''
EPILOGUE = "    A.store(c[rows, cols], acc, mask=(rows < M, cols < N))\n"


def program(code: str = "", grid: str = GRID) -> str:
    """The valid kernel (x: (64, 32) bf16, y: (32, 64) bf16, acc: (64, 64) f32) plus `code`."""
    code = textwrap.indent(textwrap.dedent(code).strip("\n") + "\n", "    ") if code else ""
    return HEADER + SIGNATURE + grid + PROLOGUE + code + EPILOGUE


def marked_line(text: str) -> int:
    hits = [i for i, line in enumerate(text.splitlines(), 1) if line.rstrip().endswith("#!")]
    assert len(hits) == 1, f"test setup: expected one marked line, got {hits}"
    return hits[0]


def test_template_is_valid():
    p = Program.from_text(program())
    assert p.info.stored == {"c"} and p.info.loaded == {"a", "b"}, \
        f"template reads {p.info.loaded} and writes {p.info.stored}"


# (id, code, substrings the message must contain)
CASES = [
    # dot
    ("dot-k-mismatch", "w = A.load(b[A.arange(16), cols])\nz = A.dot(x, w)  #!",
     ["dot", "K mismatch", "(64, 32)", "(16, 64)"]),
    ("dot-dtype-mismatch", "z = A.dot(x, A.cast(y, A.f32))  #!",
     ["dot", "dtypes differ", "bf16", "f32"]),
    ("dot-small-m", "z = A.dot(A.zeros((8, 32), A.bf16), y)  #!",
     ["dot", "at least 16", "M=8 N=64 K=32"]),
    ("dot-small-k", "z = A.dot(A.zeros((64, 8), A.bf16), A.zeros((8, 64), A.bf16))  #!",
     ["dot", "at least 16", "K=8"]),
    ("dot-bf16-accumulator", "z = A.dot(x, y, A.zeros((BM, BN), A.bf16))  #!",
     ["dot", "accumulator must be f32", "bf16"]),
    ("dot-accumulator-shape", "z = A.dot(x, y, A.zeros((BM, 32), A.f32))  #!",
     ["dot", "accumulator must be a (64, 64) tile", "(64, 32)"]),
    ("dot-1d-operand", "z = A.dot(rows, y)  #!", ["dot", "lhs must be a 2-D tile", "(64,)"]),
    ("dot-scalar-operand", "z = A.dot(x, s)  #!", ["dot", "rhs must be a 2-D tile", "scalar f32"]),
    ("dot-int-operands", "z = A.dot(A.zeros((64, 32), A.i32), A.zeros((32, 64), A.i32))  #!",
     ["dot", "bf16, f16 or f32", "i32"]),
    ("dot-precision-bf16", "z = A.dot(x, y, precision=A.tf32)  #!",
     ["dot", "`precision` applies to f32 operands", "bf16"]),
    ("dot-bad-mma", "z = A.dot(x, y, mma=A.tf32)  #!",
     ["dot", "`mma` must be one of A.wgmma, A.mma_v2, A.fma", "tf32"]),
    ("dot-bad-precision", "z = A.dot(A.cast(x, A.f32), A.cast(y, A.f32), precision=A.wgmma)  #!",
     ["dot", "`precision` must be one of A.tf32, A.tf32x3, A.ieee"]),
    ("trans-1d", "z = A.trans(rows)  #!", ["trans", "2-D tile", "(64,)"]),
    # memory
    ("store-dtype", "A.store(o[rows, cols], acc)  #!",
     ["store", "dtype f32", "`o`", "bf16", "A.cast(value, A.bf16)"]),
    ("store-shape", "A.store(v[rows], acc)  #!",
     ["store", "(64, 64)", "does not fit the destination (64,)"]),
    ("store-shape-broadcast", "A.store(c[rows, cols], x)  #!",
     ["store", "(64, 32)", "(64, 64)", "do not broadcast"]),
    ("store-not-a-reference", "A.store(acc, acc)  #!",
     ["store", "must index a tensor parameter", "(64, 64)"]),
    ("atomic-add-dtype",
     "A.atomic_add(o[rows, cols], A.cast(acc, A.bf16))\nA.atomic_add(n[rows], rows == 0)  #!",
     ["atomic_add", "value dtype i1", "i32"]),
    ("too-few-indices", "z = A.load(a[rows])  #!",
     ["tensor `a` has 2 dims ['M', 'K']", "indexed with 1"]),
    ("too-many-indices", "z = A.load(v[rows, cols])  #!",
     ["tensor `v` has 1 dims", "indexed with 2"]),
    ("float-index", "z = A.load(v[rows * 1.5])  #!", ["index of `v` along M", "integer", "f32"]),
    ("bool-index", "z = A.load(v[rows < M])  #!", ["index of `v` along M", "i1"]),
    ("tensor-as-value", "z = a + 1  #!",
     ["operator `+`", "left operand is tensor a", "not a number or tile"]),
    ("mask-shape", "z = A.load(a[rows, ks], mask=cols < N + 0 * A.arange(64)[:, None])  #!",
     ["load", "mask", "(64, 64)", "(64, 32)"]),
    ("mask-shape-1d", "z = A.load(a[rows, ks], mask=rows < M)  #!",
     ["load: mask vs access", "(64,)", "(64, 32)", "do not broadcast"]),
    ("mask-larger-than-access", "z = A.load(v[rows], mask=acc > 0.0)  #!",
     ["load", "mask of shape (64, 64) is larger than the access (64,)"]),
    ("mask-tuple-too-short", "z = A.load(a[rows, ks], mask=(rows < M,))  #!",
     ["load", "per-dim mask needs 2 entries", "`a`", "got 1"]),
    ("mask-tuple-too-long", "A.store(v[rows], A.sum(acc, 1), mask=(rows < M, rows < M))  #!",
     ["store", "per-dim mask needs 1 entries", "got 2"]),
    ("mask-tuple-wrong-dim", "z = A.load(a[rows, ks], mask=(ks < K, ks < K))  #!",
     ["load", "mask for dim M has shape (32,)", "its index has shape (64,)"]),
    ("mask-not-boolean", "z = A.load(v[rows], mask=rows)  #!",
     ["load", "mask must be boolean", "i32"]),
    ("tma-with-mask", "z = A.load(a[rows, ks], mask=(rows < M, ks < K), tma=True)  #!",
     ["load with tma=True takes no mask"]),
    ("tma-store-with-mask", "A.store(c[rows, cols], acc, mask=rows[:, None] < M, tma=True)  #!",
     ["store with tma=True takes no mask"]),
    ("tma-narrow-inner-dim", "z = A.load(a[rows, A.arange(4)], tma=True)  #!",
     ["load with tma=True", "at least 16 bytes", "4 x 2 B"]),
    ("tma-scalar-index", "z = A.load(a[rows, 0], tma=True)  #!",
     ["load with tma=True", "scalars on its leading dims", "`a`"]),
    ("tma-nonzero-other", "z = A.load(a[rows, ks], other=1.0, tma=True)  #!",
     ["load with tma=True", "`other` cannot be 1.0"]),
    ("other-not-literal", "z = A.load(v[rows], mask=rows < M, other=s)  #!",
     ["load", "`other` must be a number literal", "scalar f32"]),
    ("tma-not-bool", "z = A.load(a[rows, ks], tma=1)  #!", ["load", "`tma` must be True or False"]),
    # tile constructors
    ("arange-not-pow2", "z = A.arange(48)  #!", ["arange", "power of two", "48"]),
    ("arange-zero", "z = A.arange(0)  #!", ["arange", "power of two", "0"]),
    ("arange-runtime", "z = A.arange(M)  #!",
     ["arange", "`n` must be a compile-time integer", "scalar i32"]),
    ("arange-float", "z = A.arange(64.0)  #!", ["arange", "compile-time integer", "f32 = 64.0"]),
    ("zeros-runtime-shape", "z = A.zeros((M, BN), A.f32)  #!",
     ["zeros", "tile shape entries must be compile-time integers", "scalar i32"]),
    ("zeros-not-pow2", "z = A.zeros((48, BN), A.f32)  #!", ["zeros", "powers of two", "48"]),
    ("zeros-too-large", "z = A.zeros((2048, 1024), A.f32)  #!",
     ["(2048, 1024)", "2097152 elements", "limit is 1048576"]),
    ("reference-too-large", "z = A.load(c[A.arange(2048)[:, None], A.arange(1024)[None, :]])  #!",
     ["(2048, 1024)", "2097152 elements", "limit is 1048576"]),
    ("zeros-bad-dtype", "z = A.zeros((BM,), 3)  #!",
     ["zeros", "`dtype` must be an element type", "3"]),
    ("full-tile-value", "z = A.full((BM,), rows, A.i32)  #!",
     ["full", "value must be a scalar", "(64,)"]),
    ("cast-bad-dtype", "z = A.cast(x, A.wgmma)  #!", ["cast", "element type", "policy wgmma"]),
    # names and control flow
    ("undefined-name", "z = undefined_thing + 1  #!", ["undefined name `undefined_thing`"]),
    ("defined-in-one-branch", "if s > 0.0:\n    t = 1\nz = t + 1  #!", ["undefined name `t`"]),
    ("defined-in-loop-only", "for i in A.range(4):\n    t = i\nz = t + 1  #!",
     ["undefined name `t`"]),
    ("loop-carried-dtype", "for kk in A.range(0, K, BK):  #!\n    acc = A.cast(acc, A.bf16)",
     ["loop-carried `acc` changes type", "tile (64, 64) f32", "tile (64, 64) bf16", "A.cast"]),
    ("loop-carried-shape", "z = rows\nfor kk in A.range(0, K, BK):  #!\n    z = ks",
     ["loop-carried `z` changes type", "(64,)", "(32,)"]),
    ("nested-loop-carried", "for i in A.range(2):\n    for j in A.range(2):  #!\n        acc = x",
     ["loop-carried `acc`", "(64, 64) f32", "(64, 32) bf16"]),
    ("branches-disagree", "if s > 0.0:  #!\n    t = acc\nelse:\n    t = x",
     ["`t` has type tile (64, 64) f32 in one branch and tile (64, 32) bf16 in the other"]),
    ("if-on-tile", "if rows < M:  #!\n    z = 1",
     ["`if` needs a scalar condition", "tile (64,) i1", "A.where"]),
    ("if-on-tensor", "if a:  #!\n    z = 1", ["`if` needs a scalar condition", "tensor a"]),
    ("grid-in-if", "if M > 1:\n    A.grid(1)  #!", ["`A.grid` may appear only at the top level"]),
    ("grid-in-loop", "for i in A.range(2):\n    A.grid(1)  #!",
     ["`A.grid` may appear only at the top level"]),
    ("assign-scalar-param", "s = 1.0  #!",
     ["cannot assign to `s`", "kernel parameter or problem size"]),
    ("assign-const-param", "BM = 32  #!", ["cannot assign to `BM`"]),
    ("assign-tensor-param", "a = acc  #!", ["cannot assign to `a`"]),
    ("assign-size", "M = 1  #!", ["cannot assign to `M`"]),
    ("augassign-size", "K += 1  #!", ["cannot assign to `K`"]),
    ("assign-size-in-tuple", "z, N = 1, 2  #!", ["cannot assign to `N`"]),
    ("unpack-count", "p, q = 1, 2, 3  #!", ["cannot unpack", "into 2 names"]),
    ("unpack-non-tuple", "p, q = acc  #!", ["cannot unpack tile (64, 64) f32 into 2 names"]),
    ("hold-dtype", "t = A.f32  #!", ["`t` cannot hold dtype f32", "only numbers and tiles"]),
    ("hold-reference", "t = a[rows, ks]  #!", ["`t` cannot hold reference into a"]),
    ("hold-covers", "t = A.covers(0, K)  #!", ["`t` cannot hold coverage relation"]),
    # reductions and elementwise
    ("max-bad-axis", "z = A.max(acc, 2)  #!", ["max", "axis 2 out of range", "(64, 64)"]),
    ("min-negative-axis", "z = A.min(acc, -1)  #!", ["min", "axis -1 out of range"]),
    ("sum-runtime-axis", "z = A.sum(acc, M)  #!", ["sum", "`axis` must be a compile-time integer"]),
    ("sum-of-scalar", "z = A.sum(s, 0)  #!", ["sum", "needs a tile", "scalar f32"]),
    ("mod-float", "z = acc % 2  #!",
     ["operator `%` needs integer or boolean operands", "f32 and i32"]),
    ("and-float", "z = rows & 1.5  #!",
     ["operator `&` needs integer or boolean operands", "i32 and f32"]),
    ("floordiv-float", "z = s // 2  #!", ["operator `//`", "f32 and i32"]),
    ("shift-float", "z = rows << s  #!", ["operator `<<`", "i32 and f32"]),
    ("invert-float", "z = ~acc  #!", ["operator `~` needs an integer or boolean operand", "f32"]),
    ("broadcast-1d", "z = rows + ks  #!",
     ["operator `+`", "(64,)", "(32,)", "do not broadcast", "axis 0: 64 vs 32"]),
    ("broadcast-2d", "z = acc * y  #!",
     ["operator `*`", "(64, 64)", "(32, 64)", "do not broadcast"]),
    ("broadcast-compare", "z = x < acc  #!", ["operator `<`", "(64, 32)", "(64, 64)"]),
    ("minimum-broadcast", "z = A.minimum(rows, ks)  #!",
     ["minimum", "(64,)", "(32,)", "do not broadcast"]),
    ("where-broadcast", "z = A.where(rows < M, rows, ks)  #!", ["where", "(64,)", "(32,)"]),
    ("where-not-bool", "z = A.where(rows, x, 0.0)  #!",
     ["where", "condition must be boolean", "i32"]),
    ("exp-of-reference", "z = A.exp(a[rows, ks])  #!",
     ["exp", "`x` must be a number or a tile", "reference into a"]),
    ("index-tile-with-value", "z = rows[0]  #!",
     ["tiles are indexed only with `:` and `None`", "not with values"]),
    ("index-tile-with-tile", "z = acc[rows, cols]  #!",
     ["tiles are indexed only with `:` and `None`"]),
    ("index-tile-too-many-slices", "z = rows[:, :]  #!",
     ["too many `:` for a tile of shape (64,)"]),
    ("index-tile-too-few-slices", "z = acc[:, None]  #!",
     ["tile of shape (64, 64) indexed with 1 `:`"]),
    ("index-scalar", "z = s[0]  #!", ["cannot index scalar f32"]),
    # scalar ops
    ("program-id-axis", "z = A.program_id(3)  #!", ["program_id", "axis must be 0, 1 or 2", "3"]),
    ("num-programs-runtime-axis", "z = A.num_programs(M)  #!",
     ["num_programs", "compile-time integer"]),
    ("cdiv-by-zero", "z = A.cdiv(M, 0)  #!", ["cdiv", "division by zero"]),
    ("cdiv-float", "z = A.cdiv(M, 2.0)  #!", ["cdiv", "`b` must be an integer scalar", "f32"]),
    ("cdiv-tile", "z = A.cdiv(rows, 2)  #!", ["cdiv", "`a` must be an integer scalar", "(64,)"]),
    # loops and tags
    ("range-zero-step", "for i in A.range(0, K, 0):  #!\n    z = i",
     ["range", "step must be positive", "0"]),
    ("range-negative-step", "for i in A.range(K, 0, -1):  #!\n    z = i",
     ["range", "step must be positive", "-1"]),
    ("range-float-stop", "for i in A.range(0, s):  #!\n    z = i",
     ["range", "`stop` must be an integer scalar", "f32"]),
    ("range-stages", "for i in A.range(0, K, stages=9):  #!\n    z = i",
     ["range", "stages must be between 1 and 8", "9"]),
    ("range-runtime-stages", "for i in A.range(0, K, stages=M):  #!\n    z = i",
     ["range", "`stages` must be a compile-time integer"]),
    ("range-flag-not-bool", "for i in A.range(0, K, warp_specialize=1):  #!\n    z = i",
     ["range", "`warp_specialize` must be True or False"]),
    ("tag-without-tags", "z = A.tag(rows)  #!", ["tag", "give at least one tag"]),
    ("assert-tags-without-relations", "A.assert_tags(acc)  #!",
     ["assert_tags", "give at least one relation"]),
    ("covers-float", "A.assert_tags(acc, K=A.covers(0, s))  #!",
     ["covers", "`hi` must be an integer scalar", "f32"]),
    # assert_tags relations broadcast to the asserted value (numpy rules), never enlarge it
    ("assert-tags-relation-more-axes", "A.assert_tags(A.sum(acc, 1), M=rows[:, None])  #!",
     ["assert_tags: relation M has shape (64, 1)", "does not broadcast", "shape (64,)"]),
    ("assert-tags-relation-larger", "A.assert_tags(rows, M=acc)  #!",
     ["assert_tags: relation M has shape (64, 64)", "(64,)"]),
    ("assert-tags-relation-enlarges", "A.assert_tags(rows[:, None], M=acc)  #!",
     ["assert_tags: relation M has shape (64, 64)", "(64, 1)", "axis 1: 64 vs 1"]),
    ("assert-tags-relation-mismatch", "A.assert_tags(acc, M=ks[:, None])  #!",
     ["assert_tags: relation M has shape (32, 1)", "(64, 64)"]),
    ("assert-tags-relation-wrong-axis", "A.assert_tags(y, K=ks)  #!",
     ["assert_tags: relation K has shape (32,)", "(32, 64)"]),
    ("assert-tags-second-relation", "A.assert_tags(x, K=ks, M=rows)  #!",
     ["assert_tags: relation M has shape (64,)", "(64, 32)"]),
    ("assert-tags-relation-tuple", "A.assert_tags(acc, M=(rows, cols))  #!",
     ["assert_tags: relation M must be a number, a tile or A.covers(lo, hi)"]),
    ("assert-tags-on-reference", "A.assert_tags(a[rows, ks], M=rows[:, None])  #!",
     ["assert_tags", "`x` must be a number or a tile", "reference into a"]),
    # constant folding stays within int64
    ("arange-shift-beyond-int64", "z = A.arange(1 << 64)  #!",
     ["arange", "`n` must be a compile-time integer"]),
    ("arange-product-beyond-int64", "t = 1 << 62\nz = A.arange(t * 4 // 4)  #!",
     ["arange", "`n` must be a compile-time integer"]),
    ("tag-undefined-value", "z = A.tag(rows, row=nowhere)  #!", ["undefined name `nowhere`"]),
]


@pytest.mark.parametrize("code, needles", [pytest.param(c, n, id=i) for i, c, n in CASES])
def test_type_error(code, needles):
    text = program(code)
    with pytest.raises(DSLTypeError) as err:
        Program.from_text(text)
    message = err.value.message
    missing = [n for n in needles if n not in message]
    assert not missing, f"message {message!r} lacks {missing}"
    line = marked_line(text)
    assert err.value.line == line, f"{message!r} reported at line {err.value.line}, " \
                                   f"the offending line is {line}"
    assert err.value.to_dict()["kind"] == "type", f"to_dict {err.value.to_dict()}"


def test_case_ids_are_unique():
    ids = [i for i, _, _ in CASES]
    assert len(ids) == len(set(ids)), f"duplicate ids {sorted(i for i in ids if ids.count(i) > 1)}"


def test_dot_error_names_op_shapes_and_line():
    """The brief's example, spelled out: message and line of a K mismatch."""
    text = program("w = A.load(b[A.arange(16), cols])\nz = A.dot(x, w)  #!")
    with pytest.raises(DSLTypeError) as err:
        Program.from_text(text, line_offset=7)
    assert err.value.message == ("dot: K mismatch, lhs (64, 32) rhs (16, 64): lhs[1] must equal "
                                 "rhs[0]"), err.value.message
    assert err.value.line == marked_line(text) + 7, f"line {err.value.line} ignores the offset"
    assert err.value.col == 8, f"col {err.value.col}: the call starts after `    z = `"


# ---------------------------------------------------------------- the grid
@pytest.mark.parametrize("grid, needles", [
    ("    z = 1  #!\n    A.grid(1)\n", ["first statement of a kernel must be `A.grid(...)`"]),
    ("    for i in A.range(2):  #!\n        A.grid(1)\n", ["first statement", "A.grid"]),
    ("    A.grid(A.cdiv(M, rows))  #!\n", ["grid: `rows` is not known at launch"]),
    ("    A.grid(a)  #!\n", ["grid: `a` is not known at launch"]),
    ("    A.grid(A.program_id(0))  #!\n", ["grid: A.program_id cannot be evaluated at launch"]),
    ("    A.grid(A.cdiv(M, A.arange(BM)))  #!\n", ["grid: A.arange cannot be evaluated at launch"]),
    ("    A.grid(1, 1, 1, 1)  #!\n", ["grid: 1 to 3 dims, got 4"]),
    ("    A.grid()  #!\n", ["grid: 1 to 3 dims, got 0"]),
    ("    A.grid(s)  #!\n", ["grid: dim 0 must be an integer scalar", "scalar f32"]),
    ("    A.grid(M, 2.0)  #!\n", ["grid: dim 1 must be an integer scalar"]),
], ids=["statement-first", "loop-first", "local-variable", "tensor", "program-id", "arange",
        "four-dims", "no-dims", "float-scalar", "float-literal"])
def test_grid_errors(grid, needles):
    text = program(grid=grid)
    with pytest.raises(DSLTypeError) as err:
        Program.from_text(text)
    missing = [n for n in needles if n not in err.value.message]
    assert not missing, f"message {err.value.message!r} lacks {missing}"
    assert err.value.line == marked_line(text), f"line {err.value.line}"


def test_grid_may_use_sizes_constants_scalars_and_num_sms():
    grid = "    A.grid(A.maximum(A.minimum(A.num_sms(), A.cdiv(M, BM)), 1), A.cdiv(N, BN))\n"
    p = Program.from_text(program(grid=grid))
    assert p.info.uses_num_sms, "A.num_sms() in the grid should be recorded"


def test_kernel_without_grid():
    text = HEADER + "@A.kernel\ndef k():  #!\n    \"\"\"Only a docstring.\"\"\"\n"
    with pytest.raises(DSLTypeError, match="first statement of a kernel must be `A.grid") as err:
        Program.from_text(text)
    assert err.value.line == marked_line(text), f"line {err.value.line}"


def test_a_dim_may_name_an_integer_constant():
    """A workspace between launches may have a dim of a compile-time constant (split-K's
    `SPLIT_K` partials): it is no problem size, and its extent is the constant."""
    text = HEADER + '@A.kernel\ndef k(x: A.Tensor[A.f32, "S", "M"], S: A.const = 4):\n' \
        "    A.grid(1)\n"
    kernel = Program.from_text(text).kernel
    assert kernel.sizes == ("M",)
    assert kernel.const_dims == {"S": 4}
    assert kernel.extents({"M": 7}) == {"M": 7, "S": 4}


@pytest.mark.parametrize("param", ["S: A.f32", "S: A.const = 2.5", "S: A.const = 0",
                                   "S: A.const = True"],
                         ids=["scalar", "float-const", "zero", "bool"])
def test_a_dim_naming_another_parameter_is_refused(param):
    text = HEADER + f'@A.kernel\ndef k(x: A.Tensor[A.f32, "S", "M"], {param}):  #!\n' \
        "    A.grid(1)\n"
    with pytest.raises(DSLError, match="dim \"S\" names parameter `S`, which is not a "
                                       "positive integer constant") as err:
        Program.from_text(text)
    assert err.value.line == marked_line(text), f"line {err.value.line}"


@pytest.mark.parametrize("code, pattern", [
    ("z = A.sum(acc)  #!", r"`A.sum` is missing argument `axis`"),
    ("z = A.max(x=acc)  #!", r"`A.max` is missing argument `axis`"),
    ("for i in A.static_range(2.0):  #!\n    z = i",
     r"A.static_range needs a compile-time integer"),
    ("for i in A.static_range(M):  #!\n    z = i", r"A.static_range needs a compile-time integer"),
], ids=["sum-without-axis", "max-keyword-without-axis", "static-range-float", "static-range-size"])
def test_op_misuse_caught_by_parser(code, pattern):
    """Some op errors are caught while parsing, before types: still a named op and a line."""
    text = program(code)
    with pytest.raises(DSLSyntaxError, match=pattern) as err:
        Program.from_text(text)
    assert err.value.line == marked_line(text), f"line {err.value.line}"


def test_tile_size_error_names_the_op():
    with pytest.raises(DSLTypeError) as err:
        Program.from_text(program("z = A.zeros((2048, 1024), A.f32)  #!"))
    assert err.value.message.startswith("zeros:"), f"{err.value.message!r} does not name zeros"


@pytest.mark.parametrize("code", ["for M in A.range(2):  #!\n    z = M",
                                  "for BM in A.static_range(2):  #!\n    z = BM"],
                         ids=["size", "const"])
def test_loop_variable_cannot_shadow_parameter_or_size(code):
    text = program(code)
    with pytest.raises(DSLTypeError, match="cannot assign to") as err:
        Program.from_text(text)
    assert err.value.line == marked_line(text), f"line {err.value.line}"


@pytest.mark.parametrize("code", ["tl = 1  #!", "a_ptr = 1  #!", "stride_x = 1  #!",
                                  "foo_desc = 1  #!", "z = A.tag(rows, stride_m=rows)  #!"],
                         ids=["tl", "a_ptr", "stride_x", "foo_desc", "tag-key"])
def test_reserved_names_rejected_by_parser(code):
    text = program(code)
    with pytest.raises(DSLSyntaxError, match="reserved") as err:
        Program.from_text(text)
    assert err.value.line == marked_line(text), f"line {err.value.line}"


# ---------------------------------------------------------------- valid near-misses
@pytest.mark.parametrize("code", [
    "z = A.dot(x, y, acc)",
    "z = A.dot(A.cast(x, A.f32), A.cast(y, A.f32), precision=A.ieee)",
    "z = A.load(a[rows, ks], mask=(rows < M, None), other=0.0)",
    "z = A.load(a[rows, ks], mask=(rows < M)[:, None])",
    "z = A.load(a[rows, ks], mask=True)",
    "z = A.load(a[rows, ks], tma=True, other=0)",
    "A.store(c[rows, cols], 0.0)",
    "z = rows[:, None] + cols[None, :]",
    "for i in A.range(0, K, BK):\n    acc = acc + 1.0",
    "if s > 0.0:\n    t = acc\nelse:\n    t = acc * 2.0\nz = t",
    "t = 1\nif s > 0.0:\n    t = 2\nz = A.arange(64) + t",
    "z = A.sum(A.cast(x, A.f32), 1) + A.max(acc, 1) + A.min(acc, 0)",
    "z = A.where(rows < M, 1, 0.5)",
    "z = (rows & 1) == 0",
    "z = A.tag(rows, row=rows)\nA.assert_tags(acc, K=A.covers(0, K))",
    "A.assert_tags(acc, M=rows[:, None], N=cols[None, :], K=A.covers(0, K))",
    "A.assert_tags(x, K=ks, M=0)",
    "z = A.arange(1 << 6) + A.arange((1 << 62) // (1 << 56))",
], ids=["dot-acc", "dot-f32-precision", "mask-with-none", "mask-2d-broadcast", "mask-scalar",
        "tma-other-zero", "store-scalar", "outer-broadcast", "loop-keeps-type", "branches-agree",
        "branch-forgets-constant", "reductions", "where-promotes", "bitwise", "tags",
        "assert-tags-broadcast", "assert-tags-trailing-and-scalar", "int64-folding"])
def test_valid_near_miss(code):
    """Close relatives of the error cases type-check, so the errors are not over-eager."""
    assert Program.from_text(program(code)).name == "k", f"{code!r} should type-check"


def test_branch_merged_constant_is_not_a_compile_time_value():
    """After `if`, a name with different constants in the branches is a runtime value."""
    text = program("t = 16\nif s > 0.0:\n    t = 32\nz = A.arange(t)  #!")
    with pytest.raises(DSLTypeError, match="compile-time integer") as err:
        Program.from_text(text)
    assert err.value.line == marked_line(text), f"line {err.value.line}"


def test_loop_carried_constant_is_not_a_compile_time_value():
    text = program("t = 16\nfor i in A.range(2):\n    t = t * 2\nz = A.arange(t)  #!")
    with pytest.raises(DSLTypeError, match="compile-time integer") as err:
        Program.from_text(text)
    assert err.value.line == marked_line(text), f"line {err.value.line}"


def test_arange_over_tile_limit():
    text = program("z = A.arange(1 << 21)  #!")
    with pytest.raises(DSLTypeError, match="elements; the limit is") as err:
        Program.from_text(text)
    assert err.value.line == marked_line(text), f"line {err.value.line}"


# ---------------------------------------------------------------- the @A.kernel decorator
def _this_file_line(marker: str) -> int:
    lines = Path(__file__).read_text().splitlines()
    hits = [i for i, line in enumerate(lines, 1) if line.rstrip().endswith(f"  {marker}")]
    assert len(hits) == 1, f"{marker!r} marks lines {hits}, expected exactly one"
    return hits[0]


def test_decorator_type_error_points_into_this_file():
    with pytest.raises(DSLTypeError) as err:
        @A.kernel
        def bad(a: A.Tensor[A.bf16, "M", "K"], b: A.Tensor[A.bf16, "K", "N"],
                BM: A.const = 64, BK: A.const = 32):
            A.grid(A.cdiv(M, BM))  # noqa: F821
            x = A.load(a[A.arange(BM), A.arange(BK)])
            w = A.load(b[A.arange(16), A.arange(64)])
            z = A.dot(x, w)  # noqa: F841  <dot-mismatch>
    message = err.value.message
    for needle in ("dot", "(64, 32)", "(16, 64)"):
        assert needle in message, f"message {message!r} lacks {needle!r}"
    assert err.value.line == _this_file_line("<dot-mismatch>"), f"line {err.value.line}"


def test_decorator_syntax_error_names_this_file():
    with pytest.raises(DSLSyntaxError, match="name `a_ptr` is reserved") as err:
        @A.kernel
        def bad(BM: A.const = 64):
            A.grid(1)
            a_ptr = A.arange(BM)  # noqa: F841  <reserved-name>
    assert err.value.line == _this_file_line("<reserved-name>"), f"line {err.value.line}"
    assert err.value.filename == __file__, f"filename {err.value.filename}"


def test_type_errors_name_the_file():
    with pytest.raises(DSLTypeError) as err:
        @A.kernel
        def bad(BM: A.const = 64):
            A.grid(1)
            z = A.arange(BM) + A.arange(32)  # noqa: F841
    assert err.value.filename == __file__, f"filename {err.value.filename}"
    assert str(err.value).startswith(f"{__file__}:"), str(err.value)


def test_type_errors_from_text_name_the_file():
    text = program("z = A.max(acc, 2)  #!")
    with pytest.raises(DSLTypeError) as err:
        Program.from_text(text, filename="kernels/k.py", line_offset=3)
    assert err.value.filename == "kernels/k.py", f"filename {err.value.filename}"
    assert err.value.line == marked_line(text) + 3, f"line {err.value.line}"
    assert str(err.value).startswith(f"kernels/k.py:{marked_line(text) + 3}: max:"), str(err.value)
    assert err.value.to_dict()["file"] == "kernels/k.py", f"to_dict {err.value.to_dict()}"


def test_decorator_and_text_raise_the_same_error():
    text = program("z = A.max(acc, 2)  #!")
    with pytest.raises(DSLTypeError) as from_text:
        Program.from_text(text)
    with pytest.raises(DSLTypeError) as from_decorator:
        @A.kernel
        def k(c: A.Tensor[A.f32, "M", "N"], BM: A.const = 64, BN: A.const = 64):
            A.grid(A.cdiv(M, BM))  # noqa: F821
            acc = A.zeros((BM, BN), A.f32)
            z = A.max(acc, 2)  # noqa: F841
    assert from_text.value.message == from_decorator.value.message, \
        f"{from_text.value.message!r} != {from_decorator.value.message!r}"
