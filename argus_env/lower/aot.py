"""Ahead-of-time compilation for a target GPU, on any machine (no GPU needed).

`triton.compile` with a `GPUTarget("cuda", target.arch, 32)` runs the real compiler
pipeline (TTIR, TTGIR, LLVM IR, PTX, cubin) on the CPU. That proves the generated kernel is
legal for the real compiler (the interpreter accepts more), and yields resource figures
(shared memory) and the instructions used (wgmma, TMA), to set against the estimates of
`argus_env.resources` and for tests. `A.num_sms()` compiles to the target's SM count.

The kernel must be imported compiled, not interpreted, and a process runs kernels in
one mode only, so `compile_for` runs the compile in a child process; `compile_hopper` is
`compile_for` on the default (H200) target.

    python -m argus_env.lower.aot FILE.py [--wide NAME,...|all] [--target NAME] \
        [--sizes JSON] [--until alloc|ptx|cubin]                                   # JSON summary

`wide` names the pointer tensors compiled with 64-bit offsets (the launcher's `I64_<name>`
flags, set for tensors that span 2**31 elements or more); by default none are.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import subprocess
import sys
import threading
import time
from collections import OrderedDict
from dataclasses import asdict, dataclass

from ..dsl.program import Program
from ..target import DEFAULT_HARDWARE, Target, as_target, load_target


@dataclass
class AotResult:
    """Figures over all of a program's kernels: the most shared memory and warps any one
    uses, instruction counts summed."""

    ok: bool
    seconds: float = 0.0
    shared_bytes: int = 0
    num_warps: int = 0
    wgmma: int = 0              # wgmma.mma_async instructions in the PTX
    tma_loads: int = 0          # cp.async.bulk.tensor instructions in the PTX
    kernels: int = 0            # kernels compiled, one per launch
    error: str = ""
    registers: int = 0          # registers per thread (ptxas, from the cubin)
    stack_bytes: int = 0        # per-thread stack frame (spilled registers, local arrays)
    remembered: int = 0         # kernels whose figures this process had (`_KERNELS`)
    stage: str = "cubin"        # how far the compiler ran (`STAGES`): figures past it are 0

    def to_dict(self) -> dict:
        return asdict(self)


def _wide_flags(names: dict[str, str], wide) -> dict[str, bool]:
    """The `I64_<tensor>` constexprs (`names`: tensor -> flag): True for the tensors in
    `wide` (or all, if True)."""
    unknown = set() if wide is True else set(wide) - set(names)
    if unknown:
        raise ValueError(f"wide: {sorted(unknown)} are not pointer tensors of the kernel")
    return {flag: wide is True or tensor in wide for tensor, flag in names.items()}


#: cubin `.nv.info` attributes (EIATTR_*): registers per thread, per-thread frame size
EIATTR_REGCOUNT, EIATTR_FRAME_SIZE = 0x2F, 0x11


def cubin_resources(cubin: bytes) -> tuple[int, int]:
    """(registers per thread, stack frame bytes) of the kernel in `cubin`, read from the
    ELF's `.nv.info` section (what `cuobjdump --dump-resource-usage` reports as REG and
    STACK); (0, 0) where the section is missing."""
    import struct
    if cubin[:4] != b"\x7fELF" or cubin[4] != 2:
        raise ValueError("not a 64-bit ELF cubin")
    shoff, = struct.unpack_from("<Q", cubin, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", cubin, 0x3A)
    secs = [struct.unpack_from("<IIQQQQIIQQ", cubin, shoff + i * shentsize)
            for i in range(shnum)]
    names = secs[shstrndx][4]
    regs = frame = 0
    for s in secs:
        start = names + s[0]
        if cubin[start:cubin.index(b"\0", start)] != b".nv.info":
            continue
        data, i = cubin[s[4]:s[4] + s[5]], 0
        while i + 4 <= len(data):
            fmt, attr, size = struct.unpack_from("<BBH", data, i)
            if fmt != 0x04:  # EIFMT_SVAL carries a payload of `size` bytes; others none
                i += 4
                continue
            if attr in (EIATTR_REGCOUNT, EIATTR_FRAME_SIZE) and size >= 8:
                value = struct.unpack_from("<I", data, i + 8)[0]
                if attr == EIATTR_REGCOUNT:
                    regs = max(regs, value)
                else:
                    frame = max(frame, value)
            i += 4 + size
    return regs, frame


def _compile_here(program: Program, target: Target, wide=(), scratch: bool = False,
                  sizes: dict | None = None, until: str = "cubin") -> AotResult:
    """Compile in this process (which must not interpret kernels). `scratch`: Triton's
    on-disk cache goes to a private temporary folder, removed afterwards (a compile
    service meets many programs once each; Triton's cache would keep every one)."""
    if os.environ.get("TRITON_INTERPRET", "0") not in ("", "0"):
        raise RuntimeError("ahead-of-time compilation needs TRITON_INTERPRET unset or 0")
    if until not in _DEPTH:
        raise ValueError(f"until must be one of {STAGES}, got {until!r}")
    if not scratch or until != "cubin":  # a partial compile writes no Triton cache
        return _compile_kernels(program, target, wide, sizes, until)
    with _private_triton_cache("argus-aot-"):
        return _compile_kernels(program, target, wide, sizes, until)


@contextlib.contextmanager
def _private_triton_cache(prefix: str):
    """Triton's on-disk cache in a temporary folder of its own for the block (yielded),
    removed afterwards, and the caller's TRITON_CACHE_DIR restored."""
    import shutil
    import tempfile
    folder = tempfile.mkdtemp(prefix=prefix)
    before = os.environ.get("TRITON_CACHE_DIR")
    os.environ["TRITON_CACHE_DIR"] = folder
    try:
        yield folder
    finally:
        if before is None:
            os.environ.pop("TRITON_CACHE_DIR", None)
        else:
            os.environ["TRITON_CACHE_DIR"] = before
        shutil.rmtree(folder, ignore_errors=True)


_WARM_KERNEL = """import triton
import triton.language as tl


@triton.jit
def argus_warm_up(x_ptr, n, BLOCK: tl.constexpr):
    i = tl.arange(0, BLOCK)
    tl.store(x_ptr + i, tl.load(x_ptr + i, mask=i < n, other=0.0) * 2.0, mask=i < n)
"""


def warm_up(arch: int = 90) -> float:
    """Compile a small kernel once for `arch`, in Triton's whole pipeline (PTX and ptxas
    included), so that the process's first real compile does not pay the compiler's own
    start (about a second on the CPU: loading the backend, initialising LLVM); its figures
    are not kept. Returns the seconds it took (0 when it could not run: the first real
    compile then starts the compiler as before)."""
    import importlib.util
    t0 = time.perf_counter()
    # a private cache: a hit would warm nothing
    with _private_triton_cache("argus-warm-") as folder:
        try:
            import triton
            from triton.backends.compiler import GPUTarget
            from triton.compiler import ASTSource
            path = os.path.join(folder, "argus_warm_up.py")
            with open(path, "w") as f:
                f.write(_WARM_KERNEL)
            spec = importlib.util.spec_from_file_location("argus_warm_up", path)
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
            triton.compile(ASTSource(module.argus_warm_up, {"x_ptr": "*fp32", "n": "i32"},
                                     {"BLOCK": 128}),
                           target=GPUTarget("cuda", arch, 32), options={"num_warps": 1})
            return time.perf_counter() - t0
        except Exception:  # noqa: BLE001 - warming is an optimisation, never a verdict
            return 0.0


def compile_answer(program: Program, target: str = DEFAULT_HARDWARE,
                   sizes: dict | None = None, until: str = "cubin") -> dict:
    """The compile worker's answer (`measure.worker`, op "compile"): `compile_for`'s
    figures as a dict, with `status` "ok" or "compile"; `sizes`: the launch's sizes, whose
    specialisation the compile takes (`specialization`); `until`: how far the compiler
    runs (`STAGES`)."""
    result = _compile_here(program, load_target(target), scratch=True, sizes=sizes,
                           until=until)
    return {"status": "ok" if result.ok else "compile", **result.to_dict()}


#: per-kernel figures of the kernels this process compiled, by what the compiler's
#: pipeline receives (`_kernel_key`): a program whose launches repeat kernels of programs
#: compiled before (an MoE program changing one GEMM's tiles keeps its gather, SwiGLU and
#: combine kernels) compiles only its new kernels. Successes only: a failure is compiled
#: again.
_KERNELS: "OrderedDict[str, dict]" = OrderedDict()
#: the same kernels' `_kernel_key`, by Triton's own cache key of their source
#: (`_source_key`): a kernel met again with the same source, constants, signature and
#: options is found without running the front end again
_SOURCES: "OrderedDict[str, str]" = OrderedDict()
KERNEL_MEMORY = 4096
_MEMO_LOCK = threading.Lock()   # the memos above, shared by the compile threads
#: kernels of one program compiled at once, in threads: Triton's passes release the GIL
#: and ptxas is a process of its own (`benchmarks/compile_threads.py`: 8 MoE programs of 2
#: and 6 kernels on 2 cores, 11.7-11.9 s one after another, 7.2-7.3 s in 2 threads)
COMPILE_THREADS = max(1, min(4, os.cpu_count() or 1))
_LOC_FILE = re.compile(r'loc\("[^"\n]*":(\d+):(\d+)\)')


def _source_key(src, gpu_target, options: dict) -> str | None:
    """Triton's own compile-cache key of `src` (the kernel's source and the sources and
    global values it depends on, signature, constants, attributes: `ASTSource.hash`),
    with the backend, the parsed options, Triton's version key and the environment
    variables that change Triton's output, as `triton.compile` digests them to find a
    kernel in its cache; None where it cannot be worked out."""
    try:
        from triton._C.libtriton import get_cache_invalidating_env_vars
        from triton.compiler.compiler import make_backend
        from triton.runtime.cache import triton_key
        backend = make_backend(gpu_target)
        parsed = backend.parse_options(dict(options, **src.parse_options()))
        env = str(sorted(get_cache_invalidating_env_vars().items()))
        key = f"{triton_key()}|{backend.hash()}|{parsed.hash()}|{env}|{src.hash()}"
        return hashlib.sha256(key.encode("utf-8")).hexdigest()
    except Exception:  # noqa: BLE001 - the front end's key decides
        return None


def _front_end(src, gpu_target, options: dict):
    """(`_kernel_key`, the kernel's TTIR module as the front end made it) or (None, None)
    where it cannot be worked out (the kernel is then compiled from its source, and a
    front-end error is the compiler's verdict there)."""
    try:
        from triton._C.libtriton import get_cache_invalidating_env_vars, ir
        from triton.compiler.compiler import make_backend
        from triton.runtime.cache import triton_key
        backend = make_backend(gpu_target)
        parsed = backend.parse_options(dict(options, **src.parse_options()))
        context = ir.context()
        ir.load_dialects(context)
        backend.load_dialects(context)
        module = src.make_ir(gpu_target, parsed, backend.get_codegen_implementation(parsed),
                             backend.get_module_map(), context)
        module.context = context  # the module keeps its context alive
        text = _LOC_FILE.sub(r'loc("kernel.py":\1:\2)', str(module))
        env = str(sorted(get_cache_invalidating_env_vars().items()))
        key = f"{triton_key()}|{backend.hash()}|{parsed.hash()}|{env}|{text}"
        return hashlib.sha256(key.encode("utf-8")).hexdigest(), module
    except Exception:  # noqa: BLE001 - no memo: the compiler answers
        return None, None


def _kernel_key(src, gpu_target, options: dict) -> str | None:
    """The digest of what Triton's pipeline after the front end compiles: the kernel's
    TTIR as the front end makes it (constants folded in, so a constant the kernel does
    not use is not in it), with the generated module's file name taken out of its source
    locations (they name a per-program file; line and column stay), the parsed options,
    the backend (its target and ptxas), Triton's own version key and the environment
    variables that change Triton's output. None where it cannot be worked out (the
    kernel is then compiled, and a front-end error is the compiler's verdict there)."""
    return _front_end(src, gpu_target, options)[0]


def _with_front_end(src, module):
    """`src` whose front end answers with `module`, the TTIR it already made for this
    kernel (same options, codegen and module map as `triton.compile` passes), so that a
    compile runs the front end once instead of twice; every later stage is Triton's."""
    from triton.compiler import ASTSource

    class _Made(ASTSource):
        def make_ir(self, target, options, codegen_fns, module_map, context):
            return module
    made = _Made.__new__(_Made)
    made.__dict__.update(src.__dict__)
    return made


def _remember(memo: OrderedDict, key: str, value) -> None:
    with _MEMO_LOCK:
        memo[key] = value
        memo.move_to_end(key)
        while len(memo) > KERNEL_MEMORY:
            memo.popitem(last=False)


#: how far a compile runs, shallowest first (`compile_answer`'s `until`):
#:
#: - "alloc": Triton's front end, TTIR and TTGIR stages, and its LLVM stage's passes up to
#:   and including its shared-memory (and tensor-memory) allocation, run exactly as
#:   Triton's `make_llir` runs them (`_ALLOC_PREFIX`), then stopped: the kernel's shared
#:   memory and warp count are Triton's final figures there (the later passes lower the
#:   allocated program to LLVM and do not allocate), and every refusal recorded so far
#:   comes from these stages (`benchmarks/compile_stages.py`); no PTX, no ptxas;
#: - "ptx": Triton's whole pipeline up to PTX (wgmma and TMA counts), without ptxas;
#: - "cubin": the whole pipeline, ptxas included (registers and stack), `triton.compile`.
#:
#: A refusal at any stage is the compiler's refusal; figures of stages not run are 0.
STAGES = ("alloc", "ptx", "cubin")
_DEPTH = {s: i for i, s in enumerate(STAGES)}

#: the statements of Triton's NVIDIA `make_llir` that run before its shared-memory
#: allocation's first dependent pass, as `_allocated` replays them; where the installed
#: Triton's `make_llir` does not start with them, "alloc" compiles run to "ptx" instead
_ALLOC_PREFIX = (
    "passes.ttgpuir.add_combine_tensor_select_and_if(pm)",
    'passes.ttgpuir.add_allocate_warp_groups(pm, is_enabled(options, "consan"))',
    "passes.convert.add_scf_to_cf(pm)",
    "passes.gluon.add_inliner(pm)",
    "nvidia.passes.ttgpuir.add_allocate_shared_memory_nv(pm, capability, ptx_version)",
    "nvidia.passes.ttnvgpuir.add_allocate_tensor_memory(pm)",
)
_PREFIX_OK: bool | None = None


def _prefix_matches() -> bool:
    """Whether the installed Triton's `make_llir` runs `_ALLOC_PREFIX` first (after its
    sanitizer options, which Argus never sets), in that order, before any other pass."""
    global _PREFIX_OK
    if _PREFIX_OK is None:
        try:
            import inspect

            from triton.backends.nvidia.compiler import CUDABackend
            lines = [ln.strip() for ln in inspect.getsource(CUDABackend.make_llir).splitlines()]
            adds = [ln for ln in lines if ln.startswith(("passes.", "nvidia.passes."))]
            guarded = {"passes.ttgpuir.add_global_sanitizer(pm)",
                       'passes.ttgpuir.add_prepare_consan_captures(pm, "nvidia")'}
            adds = [ln for ln in adds if ln not in guarded]
            _PREFIX_OK = tuple(adds[:len(_ALLOC_PREFIX)]) == _ALLOC_PREFIX
        except Exception:  # noqa: BLE001 - no source to compare: the whole stage runs
            _PREFIX_OK = False
    return _PREFIX_OK


def _sanitized(options) -> bool:
    """Whether Triton's sanitizers (which add passes around the allocation) are on."""
    from triton._instrumentation import is_enabled
    return any(is_enabled(options, mode) for mode in ("gsan", "consan", "fpsan"))


def _allocated(module, backend, options, capability: int) -> None:
    """Run the start of Triton's `make_llir` on the TTGIR `module` in place: the passes
    of `_ALLOC_PREFIX`, in one pass manager, as Triton does without its sanitizers
    (raises what it raises)."""
    from triton._C.libtriton import ir, nvidia, passes
    from triton.backends.nvidia.compiler import get_ptx_version_from_options
    ptx_version = get_ptx_version_from_options(options, backend.target.arch)
    pm = ir.pass_manager(module.context)
    pm.enable_debug()
    passes.ttgpuir.add_combine_tensor_select_and_if(pm)
    passes.ttgpuir.add_allocate_warp_groups(pm, False)   # consan is off (`_sanitized`)
    passes.convert.add_scf_to_cf(pm)
    passes.gluon.add_inliner(pm)
    nvidia.passes.ttgpuir.add_allocate_shared_memory_nv(pm, capability, ptx_version)
    nvidia.passes.ttnvgpuir.add_allocate_tensor_memory(pm)
    pm.run(module, "make_llir")


def _partial_figures(src, gpu_target, options: dict, module, until: str) -> dict:
    """A kernel's figures from Triton's stages run in this process up to `until` ("alloc"
    or "ptx"), each stage Triton's own function with the options and metadata
    `triton.compile` gives it (no Triton cache: nothing of a partial compile is kept);
    `module`: the front end's TTIR already made for the memo key, or None."""
    from triton._C.libtriton import get_cache_invalidating_env_vars, ir
    from triton.compiler.compiler import make_backend
    backend = make_backend(gpu_target)
    parsed = backend.parse_options(dict(options, **src.parse_options()))
    if module is None:
        context = ir.context()
        ir.load_dialects(context)
        backend.load_dialects(context)
        module = src.make_ir(gpu_target, parsed, backend.get_codegen_implementation(parsed),
                             backend.get_module_map(), context)
        module.context = context
    metadata = {"target": gpu_target, **parsed.__dict__,
                **get_cache_invalidating_env_vars()}
    stages: dict = {}
    backend.add_stages(stages, parsed, src.language)
    names = list(stages)
    capability = backend._parse_arch(parsed.arch)
    if until == "alloc" and _sanitized(parsed):
        until = "ptx"   # its passes are not `_allocated`'s: Triton's own stage runs
    for ext in names[names.index(src.ext):]:
        if ext == "llir" and until == "alloc":
            _allocated(module, backend, parsed, capability)
            warps = module.get_int_attr("ttg.total-num-warps")
            return {"shared": int(module.get_int_attr("ttg.shared") or 0),
                    "num_warps": int(warps if warps is not None else parsed.num_warps),
                    "registers": 0, "stack_bytes": 0, "wgmma": 0, "tma_loads": 0,
                    "stage": "alloc"}
        module = stages[ext](module, metadata)
        if ext == "ptx":
            return {"shared": int(metadata["shared"]), "num_warps": int(metadata["num_warps"]),
                    "registers": 0, "stack_bytes": 0,
                    "wgmma": module.count("wgmma.mma_async"),
                    "tma_loads": module.count("cp.async.bulk.tensor"), "stage": "ptx"}
    raise RuntimeError(f"Triton's NVIDIA stages have no {until!r}: {names}")


#: the figures each stage adds (those of a later stage are 0 in an earlier one's answer)
_ADDED = {"ptx": ("wgmma", "tma_loads"), "cubin": ("registers", "stack_bytes")}


def _as_of(figures: dict, until: str) -> dict:
    """Figures remembered from a compile that ran at least to `until`, as a compile run
    to `until` gives them: a program's answer does not depend on what the process
    compiled before."""
    out = dict(figures, stage=until)
    for stage, names in _ADDED.items():
        if _DEPTH[stage] > _DEPTH[until]:
            out.update({n: 0 for n in names})
    return out


def _kernel_figures(src, gpu_target, options: dict, until: str = "cubin") -> dict:
    """One kernel's figures, from the compiler run up to `until` (`STAGES`): remembered
    by `_kernel_key` (found by `_source_key` first; figures of a compile that ran at
    least as far serve), else compiled from the front end's module already made for the
    key (raises what the compiler raises)."""
    import triton
    if until == "alloc" and not _prefix_matches():
        until = "ptx"
    depth = _DEPTH[until]
    quick = _source_key(src, gpu_target, options)
    with _MEMO_LOCK:
        key = _SOURCES.get(quick) if quick is not None else None
        known = key is not None and key in _KERNELS and \
            _DEPTH[_KERNELS[key].get("stage", "cubin")] >= depth
    module = None
    if not known:
        key, module = _front_end(src, gpu_target, options)
        if key is not None and quick is not None:
            _remember(_SOURCES, quick, key)
    with _MEMO_LOCK:
        if key is not None and key in _KERNELS and \
                _DEPTH[_KERNELS[key].get("stage", "cubin")] >= depth:
            _KERNELS.move_to_end(key)
            return {**_as_of(_KERNELS[key], until), "remembered": True}
    if until != "cubin":
        figures = _partial_figures(src, gpu_target, options, module, until)
    else:
        k = triton.compile(src if module is None else _with_front_end(src, module),
                           target=gpu_target, options=options)
        ptx = k.asm["ptx"]
        regs, frame = cubin_resources(k.asm["cubin"])
        figures = {"shared": int(k.metadata.shared), "num_warps": int(k.metadata.num_warps),
                   "registers": regs, "stack_bytes": frame,
                   "wgmma": ptx.count("wgmma.mma_async"),
                   "tma_loads": ptx.count("cp.async.bulk.tensor"), "stage": "cubin"}
    if key is not None:
        _remember(_KERNELS, key, figures)
    return figures


def int_args(program: Program, sizes: dict) -> dict[str, int]:
    """The integer arguments a launch of `program` at `sizes` passes (the kernel
    signature's sizes and the strides of its pointer tensors, as the launcher reads
    them from contiguous tensors: row-major, or a transposed one for `col_major`); an
    argument whose value cannot be known from the sizes is left out."""
    from .module import kernel_signature, stride_args
    k = program.kernel
    values = {**{n: v for n, v in k.consts.items() if isinstance(v, int)},
              **{n: int(v) for n, v in sizes.items()}}
    sig, stride_arg = kernel_signature(program), stride_args(program)
    out = {n: values[n] for n in k.sizes if n in values and sig.get(n) == "i32"}
    for p in k.tensors:
        dims = [values.get(d) for d in p.dims]
        if any(d is None for d in dims):
            continue
        if p.order == "col_major":     # a transposed contiguous tensor
            strides = [1, dims[0]]
        else:
            strides = [1] * len(dims)
            for d in range(len(dims) - 2, -1, -1):
                strides[d] = strides[d + 1] * dims[d + 1]
        for d, st in enumerate(strides):
            arg = stride_arg.get((p.name, d))
            if arg is not None and sig.get(arg) == "i32":
                out[arg] = st
    return out


def specialization(program: Program, sizes: dict | None) -> dict[str, str]:
    """How Triton specialises a launch of `program` at `sizes`: integer arguments equal
    to 1 become the constant 1 ("1"), those divisible by 16 carry that divisibility
    ("D"), and every pointer is 16-byte aligned ("D": torch allocations are). What the
    GPU's own compile of the launch sees; the compile verdict must see the same (the
    pipeliner and vectoriser act on it: without it a kernel may compile in a fraction of
    the shared memory the real launch needs). {} when `sizes` is None: unspecialised."""
    if sizes is None:
        return {}
    from .module import kernel_signature
    sig = kernel_signature(program)
    out = {n: "D" for n, t in sig.items() if t.startswith("*")}
    for n, v in int_args(program, sizes).items():
        if v == 1:
            out[n] = "1"
        elif v % 16 == 0:
            out[n] = "D"
    return out


def spec_text(spec: dict[str, str]) -> str:
    """A specialisation as text, for compile keys: `name=class` in name order."""
    return ",".join(f"{n}={c}" for n, c in sorted(spec.items()))


def _compile_kernels(program: Program, target: Target, wide=(),
                     sizes: dict | None = None, until: str = "cubin") -> AotResult:
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    from ..dsl.semantic import launches
    from .build import load_module
    from .module import kernel_signature, wide_flags

    module = load_module(program, interpret=False)
    sig = dict(kernel_signature(program))
    consts = dict(program.kernel.consts)
    spec = specialization(program, sizes)
    for n, c in spec.items():
        if c == "1":                   # specialised to the constant, as the launch does
            sig[n], consts[n] = "constexpr", 1
    names = list(sig)
    attrs = {(names.index(n),): [["tt.divisibility", 16]] for n, c in spec.items()
             if c == "D" and n in sig}
    if "NUM_SMS" in sig:
        consts["NUM_SMS"] = target.sms
    consts.update(_wide_flags(wide_flags(program), wide))
    options = {"num_warps": program.kernel.option("num_warps", 4)}
    if program.kernel.option("num_stages") is not None:
        options["num_stages"] = program.kernel.option("num_stages")
    t0 = time.perf_counter()
    result = AotResult(True)
    names = [f"{program.name}_kernel" + (f"_{i}" if i else "")
             for i in range(len(launches(program.kernel)))]   # one kernel per launch

    # `until` passed only where it is not the default: `_kernel_figures`'s three-argument
    # call stays the whole compile's (tests stand in for it with that signature)
    stage = {} if until == "cubin" else {"until": until}

    def figures(name: str):
        try:
            return _kernel_figures(ASTSource(getattr(module, name), sig, consts, attrs),
                                   GPUTarget("cuda", target.arch, 32), options, **stage)
        except Exception as e:  # the compiler's verdict, reported rather than raised
            return e
    if len(names) > 1 and COMPILE_THREADS > 1:
        from concurrent.futures import ThreadPoolExecutor
        with ThreadPoolExecutor(min(COMPILE_THREADS, len(names))) as pool:
            answers = list(pool.map(figures, names))
    else:
        answers = [figures(n) for n in names]
    result.stage = min((k.get("stage", until) for k in answers
                        if not isinstance(k, Exception)), key=_DEPTH.get, default=until)
    for name, k in zip(names, answers):
        if isinstance(k, Exception):   # the first failing launch, in program order
            return AotResult(False, time.perf_counter() - t0,
                             error=f"{name}: {type(k).__name__}: {k}"[:2000], stage=until)
        result.kernels += 1
        result.remembered += bool(k.get("remembered"))
        result.shared_bytes = max(result.shared_bytes, k["shared"])
        result.num_warps = max(result.num_warps, k["num_warps"])
        result.registers = max(result.registers, k["registers"])
        result.stack_bytes = max(result.stack_bytes, k["stack_bytes"])
        result.wgmma += k["wgmma"]
        result.tma_loads += k["tma_loads"]
    result.seconds = time.perf_counter() - t0
    return result


def compile_for(program: Program, target: Target | str, timeout: float = 300,
                wide=(), sizes: dict | None = None, until: str = "cubin") -> AotResult:
    """Compile `program` for `target` (its compute capability and SM count) in a child
    process and summarise the result; `wide` (tensor names, or True for all) compiles
    those tensors with 64-bit offsets; `sizes`: specialised as a launch at those sizes
    (`specialization`), else unspecialised; `until`: how far the compiler runs
    (`STAGES`; by default all the way, ptxas included)."""
    target = as_target(target)
    env = dict(os.environ, TRITON_INTERPRET="0")
    args = ["--wide", "all" if wide is True else ",".join(wide)] if wide else []
    args += ["--target", target.name]
    if sizes is not None:
        args += ["--sizes", json.dumps({k: int(v) for k, v in sizes.items()})]
    if until != "cubin":
        args += ["--until", until]
    proc = subprocess.run([sys.executable, "-m", "argus_env.lower.aot", "-", *args],
                          input=program.text,
                          capture_output=True, text=True, timeout=timeout, env=env)
    try:
        return AotResult(**json.loads(proc.stdout.strip().splitlines()[-1]))
    except (IndexError, json.JSONDecodeError, TypeError):
        return AotResult(False, error=f"compiler process failed (exit {proc.returncode}): "
                         f"{proc.stderr[-2000:]}")


def compile_hopper(program: Program, timeout: float = 300, wide=(),
                   sizes: dict | None = None) -> AotResult:
    """`compile_for` on the default target (the H200, sm_90)."""
    return compile_for(program, load_target(DEFAULT_HARDWARE), timeout, wide, sizes)


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    text = sys.stdin.read() if argv[0] == "-" else open(argv[0]).read()
    wide = ()
    if "--wide" in argv[1:]:
        names = argv[argv.index("--wide", 1) + 1]
        wide = True if names == "all" else tuple(n for n in names.split(",") if n)
    target = load_target(argv[argv.index("--target", 1) + 1] if "--target" in argv[1:]
                         else DEFAULT_HARDWARE)
    sizes = json.loads(argv[argv.index("--sizes", 1) + 1]) if "--sizes" in argv[1:] else None
    until = argv[argv.index("--until", 1) + 1] if "--until" in argv[1:] else "cubin"
    result = _compile_here(Program.from_text(text), target, wide=wide, sizes=sizes,
                           until=until)
    print(json.dumps(result.to_dict()))
    return 0 if result.ok else 1


if __name__ == "__main__":
    sys.exit(main())
