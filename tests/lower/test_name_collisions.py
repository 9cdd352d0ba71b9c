"""No DSL name can collide with a name the generated module uses: every program the front
end accepts lowers to Triton that runs correctly, and a name that would collide is
refused with a DSL error naming it."""

from __future__ import annotations

import ast
import re

import pytest
import torch

from argus_env import lower
from argus_env.dsl import DSLError
from argus_env.dsl.frontend import RESERVED
from argus_env.dsl.program import Program
from argus_env.task import get_task

TEMPLATE = '''from argus_env import dsl as A


@A.kernel
def {kernel}(x: A.Tensor[A.f32, "{dim}"], {out}: A.Tensor[A.f32, "{dim}"],
             {scalar}: A.f32 = 2.0, {block}: A.const = 64):
    A.grid(A.cdiv({dim}, {block}))
    {local} = A.program_id(0) * {block} + A.arange({block})
    for {loop} in A.range(0, 1):
        A.store({out}[{local}], A.load(x[{local}], mask={local} < {dim}) * {scalar},
                mask={local} < {dim})
'''
NAMES = dict(kernel="scale", dim="N", out="y", scalar="alpha", block="BLOCK", local="offs",
             loop="i")


def _generated_names() -> set[str]:
    """Every identifier in the generated modules of the task programs and of the template
    that is not a DSL name of its program: imports, helpers, kernels, pointers, strides,
    descriptors, grids, flags."""
    programs = [Program.from_text(TEMPLATE.format(**NAMES))]
    programs += [get_task(t).program(w) for t in ("gemm", "attention", "moe")
                 for w in get_task(t).programs]
    names: set[str] = set()
    for prog in programs:
        k = prog.kernel
        dsl = {k.name, *(p.name for p in k.params), *k.sizes}
        dsl |= {n.id for n in ast.walk(ast.parse(prog.text)) if isinstance(n, ast.Name)}
        tree = ast.parse(lower.source(prog))
        for node in ast.walk(tree):
            if isinstance(node, ast.Name):
                names.add(node.id)
            elif isinstance(node, ast.arg):
                names.add(node.arg)
            elif isinstance(node, ast.FunctionDef):
                names.add(node.name)
            elif isinstance(node, ast.alias):
                names.add((node.asname or node.name).split(".")[0])
        names -= dsl - {"A"}
    return names | {"interpreter_semantic"}  # what Triton's interpreter adds to a kernel


GENERATED = sorted(_generated_names())


def _run(text: str) -> torch.Tensor:
    x = torch.arange(100, dtype=torch.float32)
    return lower.load(Program.from_text(text), interpret=True)(x)


@pytest.mark.parametrize("position", list(NAMES))
@pytest.mark.parametrize("name", GENERATED + ["x", "N", "y", "alpha", "BLOCK", "offs", "scale"])
def test_a_name_either_is_refused_or_lowers_to_code_that_runs(position, name):
    text = TEMPLATE.format(**dict(NAMES, **{position: name}))
    try:
        prog = Program.from_text(text)
    except DSLError as e:
        assert name in str(e), f"the error should name `{name}`: {e}"
        return
    source = lower.source(prog)
    compile(source, "generated.py", "exec")
    # the dim named like the block constant is that constant (a dim may name one): the
    # tensors then have its extent
    n = prog.kernel.const_dims.get(name if position == "dim" else NAMES["dim"], 100)
    x = torch.arange(n, dtype=torch.float32)
    out = lower.load(prog, interpret=True)(x)
    assert torch.equal(out, 2 * x), f"`{name}` as the {position} changed what the kernel computes"


def test_the_generated_names_are_found():
    """The list above must hold the module's own names, or the test proves nothing."""
    for needle in ("tl", "triton", "torch", "wide_offsets", "bind_sizes", "check_tensors",
                   "TensorDescriptor", "NUM_SMS", "scale_kernel", "x_ptr", "stride_xn",
                   "I64_x", "grid", "grid_1"):
        assert needle in GENERATED, needle
    assert any(re.fullmatch(r"\w+_kernel_\d+", n) for n in GENERATED)
    assert any(re.fullmatch(r"\w+_desc_\w+", n) for n in GENERATED)


def test_reserved_names_include_the_runtime_helpers():
    import argus_env.lower.runtime as runtime
    helpers = {n for n, v in vars(runtime).items()
               if callable(v) and getattr(v, "__module__", "") == runtime.__name__}
    used = helpers & set(GENERATED)
    assert used and used <= RESERVED, sorted(used - RESERVED)


PAIR = '''from argus_env import dsl as A


@A.kernel
def pair({a}: A.Tensor[A.f32, "{d}"], {b}: A.Tensor[A.f32, "{d}"], BLOCK: A.const = 64):
    A.grid(A.cdiv({d}, BLOCK))
    offs = A.program_id(0) * BLOCK + A.arange(BLOCK)
    A.store({b}[offs], A.load({a}[offs], mask=offs < {d}) * 2.0, mask=offs < {d})
'''


@pytest.mark.parametrize("a, b, d", [("I64", "ptr", "N"),      # I64_ptr: a pointer and a flag
                                     ("stride", "p", "TR"),    # stride_ptr: a pointer, a stride
                                     ("x", "y", "N")])
def test_names_generated_for_different_tensors_never_collide(a, b, d):
    text = PAIR.format(a=a, b=b, d=d)
    x = torch.arange(100, dtype=torch.float32)
    assert torch.equal(lower.load(Program.from_text(text), interpret=True)(x), 2 * x)


def test_dims_differing_only_in_case_get_distinct_strides():
    text = '''from argus_env import dsl as A


@A.kernel
def twod(x: A.Tensor[A.f32, "M", "m"], y: A.Tensor[A.f32, "M", "m"], B: A.const = 16):
    A.grid(A.cdiv(M, B), A.cdiv(m, B))
    r = A.program_id(0) * B + A.arange(B)
    c = A.program_id(1) * B + A.arange(B)
    A.store(y[r, c], A.load(x[r, c], mask=(r < M, c < m)) * 2.0, mask=(r < M, c < m))
'''
    x = torch.randn(20, 36)
    assert torch.equal(lower.load(Program.from_text(text), interpret=True)(x), 2 * x)


def test_a_long_single_size_binding_keeps_its_tuple():
    """`N, = bind_sizes(...)` wrapped onto several lines must keep its comma."""
    long_dim = "N" + "x" * 60
    text = TEMPLATE.format(**dict(NAMES, dim=long_dim))
    source = lower.source(Program.from_text(text))
    assert f"{long_dim}, = bind_sizes(" in source
    assert torch.equal(_run(text), 2 * torch.arange(100, dtype=torch.float32))


def test_fixed_module_names_are_reserved_in_the_front_end():
    from argus_env.lower.module import FIXED_NAMES
    assert FIXED_NAMES <= RESERVED, sorted(FIXED_NAMES - RESERVED)
