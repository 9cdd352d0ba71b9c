"""A whole generated Triton module: imports, the `@triton.jit` kernel, and its launcher.

The launcher is the host side a careful person writes by hand: read the problem sizes
from the tensors, check every argument, allocate outputs that were not given, build TMA
descriptors, compute the grid, launch. Compile-time constants are fixed by the program
(a different tile shape is a different program, hence a different module).
"""

from __future__ import annotations

import ast
import dataclasses
import re

from ..dsl.dtypes import DTYPES
from ..dsl.program import Program
from ..ir import nodes as ir
from ..ir.printer import print_expr
from ..ir.rewrite import structural_hash, transform
from . import emit as E

LOWERING_VERSION = "3"

#: Names the generated module binds besides the program's own and those made per tensor
#: (the front end refuses them in programs, `dsl.frontend.RESERVED`).
FIXED_NAMES = frozenset({"torch", "triton", "tl", "TensorDescriptor", "bind_sizes",
                         "check_tensors", "num_sms", "wide_offsets", "NUM_SMS", "grid", "range",
                         "min", "max"})


def _host_expr(e: ir.Expr) -> str:
    """A grid expression evaluated by the launcher (sizes, constants, scalars)."""
    def conv(x: ir.Expr) -> ast.expr:
        if isinstance(x, ir.Const):
            return E._const(x.value)
        if isinstance(x, ir.Name):
            return E._name(x.id)
        if isinstance(x, ir.BinOp):
            ops = {"+": ast.Add, "-": ast.Sub, "*": ast.Mult, "//": ast.FloorDiv, "%": ast.Mod}
            if x.op not in ops:
                raise ValueError(f"grid: operator {x.op} is not allowed")
            return E._binop(conv(x.lhs), ops[x.op](), conv(x.rhs))
        if isinstance(x, ir.Call):
            if x.fn == "num_sms":
                return E._name("NUM_SMS")
            fn = {"cdiv": "triton.cdiv", "minimum": "min", "maximum": "max"}[x.fn]
            return E._call(E._name(fn), [conv(v) for _, v in x.args])
        raise ValueError(f"grid: cannot evaluate {print_expr(x)} on the host")
    return ast.unparse(conv(e))


#: loop arguments only the compiler reads (software pipelining, warp specialization, loop
#: flattening), like the kernel's launch options (`num_warps`, `num_stages`): the Triton
#: interpreter runs `tl.range(..., num_stages=3)` as `range(...)` and drops launch options
COMPILER_HINTS = ("stages", "warp_specialize", "flatten")


def interpretation_key(program: Program) -> str:
    """A digest of `program` as the Triton interpreter runs it: the structure without the
    launch options, the loops' compiler hints and the docstring. Two programs with one
    key compute the same outputs from the same inputs under the interpreter, so a
    numerical verdict reached there holds for both."""
    def bare(node):
        if isinstance(node, ir.For) and isinstance(node.iter, ir.Call):
            args = tuple((k, v) for k, v in node.iter.args if k not in COMPILER_HINTS)
            if args != node.iter.args:
                return dataclasses.replace(node, iter=dataclasses.replace(node.iter, args=args))
        return node
    k = program.kernel
    stripped = transform(dataclasses.replace(k, options=(), doc=None), bare)
    return structural_hash(stripped)


def generate(program: Program) -> str:
    """The Triton source for `program`."""
    return _generate(program)[0]


def kernel_signature(program: Program) -> dict[str, str]:
    """The kernel's arguments with Triton's signature types (`*bf16`, `i32`,
    `tensordesc<bf16[128, 64]>`, `constexpr`), for ahead-of-time compilation."""
    return _generate(program)[1]


def wide_flags(program: Program) -> dict[str, str]:
    """Per pointer tensor, the name of its 64-bit-offsets flag (`I64_<tensor>`)."""
    return _generate(program)[2]


def stride_args(program: Program) -> dict[tuple[str, int], str]:
    """(pointer tensor, dim) -> the kernel argument that carries that stride."""
    return _generate(program)[3]


def _generate(program: Program) -> tuple[str, dict[str, str], dict[str, str], dict]:
    """(source, kernel signature, wide flags) of `program`, worked out once per program
    object and kept on it: the compile worker, sent the program, reads them from its copy
    instead of lowering it three times over (module, signature, flags)."""
    done = program.__dict__.get("_lowered")
    if done is None or done[0] != LOWERING_VERSION:
        done = (LOWERING_VERSION, _lower(program))
        program.__dict__["_lowered"] = done
    return done[1]


def _lower(program: Program) -> tuple[str, dict[str, str], dict[str, str]]:
    info = program.info
    k = program.kernel
    from ..dsl.semantic import launches
    knames = [f"{k.name}_kernel" + (f"_{i}" if i else "") for i in range(len(launches(k)))]
    grids = [f"grid_{i}" for i in range(1, len(knames))]
    names = E.Names(E.program_names(k) | FIXED_NAMES | set(knames) | set(grids))
    tensors = {p.name: E.TensorArgs(p, names) for p in k.tensors}
    emitter = E.KernelEmitter(info, tensors, program.typer)
    bodies = [_widen(E.render(emitter.body(stmts)), tensors) for _, stmts in launches(k)]
    uses_tma = any(ta.descriptors for ta in tensors.values())

    # ---- kernel signature, one line per group: pointers and descriptors, sizes, the
    # strides of each tensor, runtime scalars, compile-time constants
    sig: list[list[str]] = []
    call: list[list[str]] = []
    group = [(ta.ptr, ta.param.name) for ta in tensors.values() if ta.pointer]
    group += [(n, n) for ta in tensors.values() for n in ta.descriptors.values()]
    sig.append([a for a, _ in group])
    call.append([b for _, b in group])
    sig.append(list(k.sizes))
    call.append(list(k.sizes))
    for ta in tensors.values():
        if ta.pointer:
            sig.append([ta.stride(d) for d in range(len(ta.param.dims))])
            call.append([f"{ta.param.name}.stride({d})" for d in range(len(ta.param.dims))])
    scalars = [p.name for p in k.params if p.kind == "scalar"]
    sig.append(scalars)
    call.append(scalars)
    consts = [p.name for p in k.params if p.kind == "const"]
    consts += ["NUM_SMS"] if info.uses_num_sms else []
    sig.append([f"{c}: tl.constexpr" for c in consts])
    call.append([f"{c}={c}" for c in consts])
    wide = [ta.wide for ta in tensors.values() if ta.pointer]  # 64-bit offsets, per tensor
    sig.append([f"{w}: tl.constexpr" for w in wide])
    call.append([f"{w}={w}" for w in wide])
    consts += wide
    call.append([f"{name}={E.py_literal(value)}" for name, value in k.options])

    types: dict[str, str] = {}
    for ta in tensors.values():
        tt = _sig_type(ta.param.dtype)
        if ta.pointer:
            types[ta.ptr] = f"*{tt}"
        for shape, name in ta.descriptors.items():
            block = list(shape[::-1] if ta.param.order == "col_major" else shape)
            types[name] = f"tensordesc<{tt}[{', '.join(map(str, block))}]>"
    types.update({s: "i32" for s in k.sizes})
    for ta in tensors.values():
        if ta.pointer:
            types.update({ta.stride(d): "i32" for d in range(len(ta.param.dims))})
    for p in k.params:
        if p.kind == "scalar":
            types[p.name] = _sig_type(p.dtype)
    types.update({c: "constexpr" for c in consts})

    lines = [
        E.py_literal(f"Triton kernel generated by Argus from the DSL program `{k.name}` "
                     f"(program {program.hash}).\n\n"
                     "Each statement below is one DSL statement; invariants stated in the "
                     "program are\nkept as comments; the environments run this code only "
                     "after the invariant checker\naccepts the program (`argus check` gives "
                     "its verdict).",
                     doc=True),
        "import torch",
        "import triton",
        "import triton.language as tl",
    ]
    if uses_tma:
        lines.append("from triton.tools.tensor_descriptor import TensorDescriptor")
    lines += ["", "from argus_env.lower.runtime import bind_sizes, check_tensors, num_sms, "
              "wide_offsets"]
    for i, (kname, body) in enumerate(zip(knames, bodies)):
        lines += ["", "", "@triton.jit", f"def {kname}("]
        lines += [f"    {', '.join(g)}," for g in sig if g]
        lines.append("):")
        doc = k.doc if i == 0 else f"Launch {i + 1} of {len(bodies)} of `{k.name}`."
        if doc and doc.strip():
            lines.append(f"    {E.py_literal(doc.strip(), doc=True)}")
        lines += ["    " + line if line else line for line in body.splitlines()]
    lines += ["", ""] + _launcher(program, tensors, knames, call)
    flags = {n: ta.wide for n, ta in tensors.items() if ta.pointer}
    strides = {(n, d): ta.stride(d) for n, ta in tensors.items() if ta.pointer
               for d in range(len(ta.param.dims))}
    return "\n".join(lines) + "\n", types, flags, strides


def _sig_type(dtype: str) -> str:
    """A DSL dtype as Triton's signature strings spell it (`bf16`, `fp32`, `i32`)."""
    return DTYPES[dtype].triton.replace("tl.", "").replace("bfloat16", "bf16") \
        .replace("float", "fp").replace("int", "i")


def _widen(body: str, tensors: dict) -> str:
    """Prefix a kernel body with, per pointer tensor it indexes, the switch to 64-bit offsets
    along the outermost dim. The flag is a constexpr, so when it is off (the common case)
    the `if` is resolved while tracing and the kernel is the same as without it."""
    head = []
    for ta in tensors.values():
        if ta.pointer and re.search(rf"\b{ta.outer_stride}\b", body):
            head += [f"if {ta.wide}:  # `{ta.param.name}` spans 2**31 elements or more",
                     f"    {ta.outer_stride} = tl.cast({ta.outer_stride}, tl.int64)"]
    return "\n".join(head + [body])


def _launcher(program: Program, tensors: dict, knames: list[str],
              call: list[list[str]]) -> list[str]:
    k = program.kernel
    info = program.info
    outputs = info.outputs
    workspaces = info.workspaces
    params = [p.name if p.name not in outputs + workspaces else f"{p.name}=None"
              for p in k.tensors]
    params += [p.name if p.default is None else f"{p.name}={E.py_literal(p.default)}"
               for p in k.params if p.kind == "scalar"]
    ret = ", ".join(outputs) if outputs else "None"
    out = [f"def {k.name}({', '.join(params)}):",
           f"    {E.py_literal(f'Launch `{k.name}`; returns {ret}.', doc=True)}"]
    consts = [p for p in k.params if p.kind == "const"]
    if consts:
        out.append(f"    {', '.join(p.name for p in consts)} = "
                   f"{', '.join(E.py_literal(p.default) for p in consts)}")
    sizes = list(k.sizes)
    binds = ", ".join(f"{p.name}=({p.name}, {E.py_literal(tuple(p.dims))})" for p in k.tensors)
    bind = f"bind_sizes({E.py_literal(k.name)}, {E.py_literal(tuple(sizes))}, {binds})"
    # every dim may name a constant: then there is no size to read, only ranks to check
    out.append(f"    {', '.join(sizes)}{',' if len(sizes) == 1 else ''} = {bind}" if sizes
               else f"    {bind}")
    first_input = next((p.name for p in k.tensors if p.name not in outputs), None)
    for p in k.tensors:
        if p.name in outputs:
            shape = "(" + ", ".join(p.dims) + ("," if len(p.dims) == 1 else "") + ")"
            # an output accumulated with atomic adds starts from zeros, also where other
            # elements of it are stored (stream-K stores the tiles one program owns and
            # adds the shared ones); the checker proves no element is both
            alloc = "torch.zeros" if p.name in info.atomic else "torch.empty"
            dev = f"{first_input}.device" if first_input else "'cuda'"
            alloc_expr = f"{alloc}({shape}, device={dev}, dtype=torch.{_torch(p)})"
            if p.order == "col_major":
                alloc_expr = (f"{alloc}(({p.dims[1]}, {p.dims[0]}), device={dev}, "
                              f"dtype=torch.{_torch(p)}).t()")
            out += [f"    if {p.name} is None:", f"        {p.name} = {alloc_expr}"]
            if p.name in info.atomic:
                out += ["    else:", f"        {p.name}.zero_()  # accumulated with atomic adds"]
    for p in k.tensors:
        if p.name in workspaces:  # written by one launch, read by a later one
            shape = "(" + ", ".join(p.dims) + ("," if len(p.dims) == 1 else "") + ")"
            dev = f"{first_input}.device" if first_input else "'cuda'"
            alloc = "torch.zeros" if p.name in info.atomic else "torch.empty"
            out += [f"    if {p.name} is None:  # workspace between launches",
                    f"        {p.name} = {alloc}({shape}, device={dev}, dtype=torch.{_torch(p)})"]
            if p.name in info.atomic:
                out += ["    else:", f"        {p.name}.zero_()"]
    access = {n: "pointer" if ta.pointer else "tma" for n, ta in tensors.items()}
    checks = ", ".join(f"{p.name}=({p.name}, ({', '.join(p.dims)}{',' if len(p.dims) == 1 else ''}), "
                       f"torch.{_torch(p)}, {E.py_literal(p.order)}, "
                       f"{E.py_literal(access[p.name])})" for p in k.tensors)
    out.append(f"    check_tensors({E.py_literal(k.name)}, {checks})")
    for ta in tensors.values():
        if ta.pointer:
            out.append(f"    {ta.wide} = wide_offsets({ta.param.name}, "
                       f"{E.py_literal(ta.param.order)})")
    if info.uses_num_sms:
        out.append(f"    NUM_SMS = num_sms({k.tensors[0].name}.device)")
    for ta in tensors.values():
        for name in ta.descriptors.values():
            blocks = [print_expr(b) for b in ta.blocks[name]]
            src = ta.param.name
            if ta.param.order == "col_major":
                src, blocks = f"{src}.t()", blocks[::-1]
            out.append(f"    {name} = TensorDescriptor.from_tensor({src}, [{', '.join(blocks)}])")
    for i, (kname, g) in enumerate(zip(knames, info.grids)):
        dims = g.arg("dims").elts
        grid = ", ".join(_host_expr(d) for d in dims) + ("," if len(dims) == 1 else "")
        gname = "grid" + (f"_{i}" if i else "")
        out.append(f"    {gname} = ({grid})")
        out.append(f"    {kname}[{gname}](")
        out += [f"        {', '.join(a)}," for a in call if a]
        out.append("    )")
    if outputs:
        out.append(f"    return {ret}")
    return [wrapped for line in out for wrapped in E.wrap_call(line)]


def _torch(p: ir.Param) -> str:
    return DTYPES[p.dtype].torch

