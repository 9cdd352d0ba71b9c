"""The Argus tile DSL.

Write kernels as decorated Python functions (or as text an agent sends):

    from argus_env import dsl as A

    @A.kernel(num_warps=4)
    def scale(x: A.Tensor[A.f32, "N"], y: A.Tensor[A.f32, "N"], BLOCK: A.const = 128):
        A.grid(A.cdiv(N, BLOCK))
        offs = A.program_id(0) * BLOCK + A.arange(BLOCK)
        A.store(y[offs], A.load(x[offs], mask=offs < N) * 2.0, mask=offs < N)

The body is never executed. `@A.kernel` reads the function's source and parses it with
the same whitelisting front end that handles agent-written text, then type-checks it,
so a decorated kernel and its printed text are one program. Every op is listed in
`argus_env.ir.ops.OPS`; calling one outside a kernel raises an error.
"""

from __future__ import annotations

import inspect
import textwrap

from ..ir.ops import OPS
from .dtypes import DTYPES, DType, bf16, f16, f32, f64, i1, i32, i64  # noqa: F401
from .errors import DSLError, DSLLimitError, DSLSyntaxError, DSLTypeError  # noqa: F401
from .frontend import DEFAULT_LIMITS, Limits, parse_program  # noqa: F401
from .program import Program  # noqa: F401
from .semantic import KernelInfo, infer  # noqa: F401


class Tensor:
    """Annotation of a global tensor parameter: `A.Tensor[A.bf16, "M", "K"]`."""

    def __class_getitem__(cls, item):
        return cls


class const:  # noqa: N801  (spelled like a type annotation in kernels)
    """Annotation of a compile-time constant: `BM: A.const = 128`."""


class _Symbol(str):
    """A policy value such as `A.wgmma`; meaningful only inside kernels."""


wgmma, mma_v2, fma = _Symbol("wgmma"), _Symbol("mma_v2"), _Symbol("fma")
tf32, tf32x3, ieee = _Symbol("tf32"), _Symbol("tf32x3"), _Symbol("ieee")
row_major, col_major = _Symbol("row_major"), _Symbol("col_major")


def kernel(fn=None, **options):
    """Decorator: turn a Python function written in the DSL into a `Program`.

    Launch options (`num_warps`, `num_stages`) are keyword arguments of the decorator.
    """
    def wrap(f) -> Program:
        lines, start = inspect.getsourcelines(f)
        text = textwrap.dedent("".join(lines))
        filename = inspect.getsourcefile(f) or "<kernel>"
        return Program.from_text(text, filename=filename, line_offset=start - 1)
    return wrap(fn) if fn is not None else wrap


def __getattr__(name: str):
    if name in OPS:
        def op(*args, **kwargs):
            raise RuntimeError(f"A.{name} is a DSL op: it has meaning only inside an "
                               "@A.kernel function, which Argus parses rather than runs")
        op.__name__ = name
        op.__doc__ = OPS[name].doc
        return op
    raise AttributeError(f"module 'argus_env.dsl' has no attribute {name!r}")
