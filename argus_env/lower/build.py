"""Write generated modules to a cache keyed by program hash and load them.

Generated code is written to `$ARGUS_CACHE_DIR/kernels/<program>_<hash>.py` (default
`~/.cache/argus`) for people and tools to read, but it is never imported from there: a
module runs from the text generated in this process, compiled directly (no `__pycache__`
bytecode is read or written, so a planted or corrupt `.pyc` cannot run or fail in its
place), and that text is registered in `linecache` under the file's name, which is where
Triton's `@jit` reads a kernel's source (`inspect.getsourcelines`). A file whose content
differs from the text (by SHA-256) is rewritten. Whether the kernel runs under the
Triton interpreter is fixed when its module is executed, so the interpreted and compiled
variants are separate modules, and one process runs kernels in one mode only.

Texts are not remembered here: the environment's evaluator generates a program's text
once per analysis and hands it to the process that runs it (`load(program, interpret,
source=text)`). Memory is bounded however many distinct programs a process runs: the
loaded modules (`MAX_MODULES`, keyed by their text) are a least-recently-used cache, and a
module dropped from it leaves `sys.modules`, `linecache`, Triton's registry of JIT
functions and the interpreter's table of rewritten kernels with it (a launcher still held
elsewhere keeps working).
"""

from __future__ import annotations

import hashlib
import linecache
import os
import sys
import threading
import types
from collections import OrderedDict
from pathlib import Path
from typing import Callable

from ..dsl.program import Program
from .module import LOWERING_VERSION, generate

MAX_MODULES = 128  # loaded modules kept (the text, code objects and Triton's kernel objects)


class LRU:
    """A mapping that keeps its `size` most recently used entries."""

    def __init__(self, size: int):
        self.size = size
        self.items: OrderedDict = OrderedDict()

    def get(self, key):
        value = self.items.get(key)
        if value is not None:
            self.items.move_to_end(key)
        return value

    def put(self, key, value) -> list:
        """Store `value`; the entries this pushed out, oldest first."""
        self.items[key] = value
        self.items.move_to_end(key)
        out = []
        while len(self.items) > max(self.size, 1):
            out.append(self.items.popitem(last=False))
        return out

    def __len__(self) -> int:
        return len(self.items)


_lock = threading.RLock()
_loaded = LRU(MAX_MODULES)    # (key of the text, interpret) -> module
_loads = 0                    # modules executed by this process, ever
_mode: bool | None = None


def cache_dir() -> Path:
    root = os.environ.get("ARGUS_CACHE_DIR") or os.path.join(Path.home(), ".cache", "argus")
    return Path(root) / "kernels"


def _key(text: str) -> str:
    """The name of a generated text: its digest (with the lowering's version)."""
    return hashlib.sha256(f"{LOWERING_VERSION}:{text}".encode()).hexdigest()[:16]


def source(program: Program) -> str:
    """The generated Triton source of `program` (generated once per program object,
    `module._generate`)."""
    return generate(program)


def loads() -> int:
    """How many generated modules this process has executed (a worker recycles itself
    after a number of them)."""
    return _loads


def cached() -> dict[str, int]:
    """How many modules are held now, and the bound on them."""
    return {"modules": len(_loaded), "max_modules": _loaded.size,
            "sys_modules": sum(1 for m in list(sys.modules) if m.startswith("argus_kernels."))}


def module_path(program: Program, text: str | None = None) -> Path:
    """The file holding `program`'s generated module (`text`, by default generated now),
    (re)written unless it already holds exactly that text."""
    text = source(program) if text is None else text
    path = cache_dir() / f"{program.name}_{_key(text)}.py"
    data = text.encode("utf-8")
    if not _holds(path, data):
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.{threading.get_ident()}.tmp")
        tmp.write_bytes(data)
        os.replace(tmp, path)
    return path


def _holds(path: Path, data: bytes) -> bool:
    """Whether the file at `path` has exactly `data` (compared by SHA-256)."""
    try:
        found = path.read_bytes()
    except OSError:
        return False
    return hashlib.sha256(found).digest() == hashlib.sha256(data).digest()


def _exec_verified(text: str, path: Path, modname: str) -> types.ModuleType:
    """Run generated `text` as module `modname`, compiled from the text itself.

    The text is registered in `linecache` under `path` with no mtime, so `linecache`
    never replaces it with the file's current content: whatever happens to the file,
    Triton reads the source that was compiled here."""
    filename = str(path)
    code = compile(text, filename, "exec", dont_inherit=True)
    module = types.ModuleType(modname, None)
    module.__file__ = filename
    linecache.cache[filename] = (len(text), None, text.splitlines(True), filename)
    sys.modules[modname] = module
    try:
        exec(code, module.__dict__)
        _read_sources(module)
    except BaseException:
        sys.modules.pop(modname, None)
        linecache.cache.pop(filename, None)
        raise
    return module


def _read_sources(module: types.ModuleType) -> None:
    """Have the interpreter read its kernels' source now, while `linecache` holds the
    verified text (it otherwise reads it at a kernel's first run); the compiler read it
    when the kernels were defined."""
    for value in list(vars(module).values()):
        rewrite = getattr(value, "rewrite", None)
        if callable(rewrite) and type(value).__name__ == "InterpretedFunction":
            rewrite()


def _set_mode(interpret: bool) -> None:
    """Triton reads TRITON_INTERPRET both when a kernel is defined and while it runs, so a
    process runs kernels one way only: the first load decides."""
    global _mode
    if _mode is None:
        if interpret and "triton" in sys.modules and os.environ.get("TRITON_INTERPRET") != "1":
            raise RuntimeError(
                "Triton was imported before the interpreter was chosen, so its library "
                "functions are compiled-mode only; set TRITON_INTERPRET=1 before importing "
                "triton (or torch code that imports it), or run kernels in a worker process "
                "(argus_env.measure.worker)")
        _mode = interpret
        os.environ["TRITON_INTERPRET"] = "1" if interpret else "0"
        if interpret:
            _patch_interpreter_bf16()
            _wrap_integers_as_compiled()
    elif _mode != interpret:
        raise RuntimeError("this process already runs Triton kernels "
                           f"{'under the interpreter' if _mode else 'compiled'}; run the other "
                           "mode in a separate process")


def _patch_interpreter_bf16() -> None:
    """Triton's interpreter (3.6-3.9) stores bf16 as uint16: its `dot` multiplies those
    integers (garbage for bf16 operands) and its atomic add rejects them. Convert dot
    operands to f32 first, as the tensor cores do (bf16 products are exact in f32), and
    add bf16 atomically in Python."""
    import ctypes

    import numpy as np
    import triton.language as tl
    from triton.runtime import interpreter

    builder = interpreter.InterpreterBuilder
    if getattr(builder.create_dot, "_argus_bf16", False):
        return
    original = builder.create_dot

    def create_dot(self, a, b, d, input_precision, max_num_imprecise_acc):
        if a.dtype.scalar == tl.bfloat16:
            a = interpreter.TensorHandle(
                (a.data.astype(np.uint32) << 16).view(np.float32), tl.float32)
        if b.dtype.scalar == tl.bfloat16:
            b = interpreter.TensorHandle(
                (b.data.astype(np.uint32) << 16).view(np.float32), tl.float32)
        return original(self, a, b, d, input_precision, max_num_imprecise_acc)

    create_dot._argus_bf16 = True
    builder.create_dot = create_dot

    original_rmw = builder.create_atomic_rmw

    def create_atomic_rmw(self, rmwOp, ptr, val, mask, sem, scope):
        """bf16 atomic add, which the interpreter's C++ helper rejects: the interpreter runs
        program instances one after another, so a plain read-add-write is atomic."""
        if val.dtype.scalar != tl.bfloat16 or "ADD" not in str(rmwOp):
            return original_rmw(self, rmwOp, ptr, val, mask, sem, scope)
        def f32(bits):
            return np.array([bits], dtype=np.uint32) << 16

        addrs = np.broadcast_to(ptr.data, mask.data.shape)[mask.data]
        vals = np.broadcast_to(val.data, mask.data.shape)[mask.data]
        old = np.zeros(mask.data.shape, dtype=np.uint16)
        olds = []
        for addr, v in zip(addrs.tolist(), vals.tolist()):
            cell = ctypes.c_uint16.from_address(addr)
            olds.append(cell.value)
            total = (f32(cell.value).view(np.float32) + f32(v).view(np.float32)).view(np.uint32)
            rounded = (total + 0x7FFF + ((total >> 16) & 1)) >> 16  # round to nearest even
            cell.value = int(rounded[0]) & 0xFFFF
        old[mask.data] = olds
        return interpreter.TensorHandle(old, val.dtype.scalar)

    builder.create_atomic_rmw = create_atomic_rmw


def _wrap_integers_as_compiled() -> None:
    """The interpreter checks every 32-bit integer add, sub and mul for overflow (an int64
    copy of each operand, two comparisons and an assert per op: about a fifth of a MoE
    program's interpreted time); compiled kernels do not (`sanitize_overflow` is off
    outside Triton's debug mode) and wrap. Run as compiled: wrapping arithmetic, the
    outputs the GPU would give."""
    import dataclasses

    from triton.runtime import interpreter
    builder = getattr(interpreter, "interpreter_builder", None)
    options = getattr(builder, "options", None)
    if options is not None and getattr(options, "sanitize_overflow", False):
        builder.options = dataclasses.replace(options, sanitize_overflow=False)


def load_module(program: Program, interpret: bool, source: str | None = None) -> types.ModuleType:
    """`program`'s generated module (from `source`, its generated text, when the caller has
    it; else generated now), its kernels under the Triton interpreter if asked."""
    global _loads
    text = generate(program) if source is None else source
    key = (_key(text), interpret)
    with _lock:
        module = _loaded.get(key)
        if module is not None:
            return module
        path = module_path(program, text)
        modname = f"argus_kernels.{path.stem}_{'interp' if interpret else 'jit'}"
        _set_mode(interpret)
        module = _exec_verified(text, path, modname)
        _loads += 1
        for _, old in _loaded.put(key, module):
            _unload(old)
        return module


def _unload(module: types.ModuleType) -> None:
    """Drop every reference this process's registries hold to `module`."""
    sys.modules.pop(module.__name__, None)
    entry = linecache.cache.get(module.__file__)
    if entry is not None and len(entry) == 4 and entry[1] is None \
            and all(m.__file__ != module.__file__ for m in _loaded.items.values()):
        del linecache.cache[module.__file__]
    for value in list(vars(module).values()):
        if type(value).__name__ == "InterpretedFunction":
            table = getattr(type(value), "rewritten_fn", None)
            if isinstance(table, dict):
                table.pop(getattr(value, "fn", None), None)
    jit = sys.modules.get("triton.runtime.jit")  # every JITFunction, by "module:name"
    registry = getattr(jit, "_triton_jit_function_registry", None)
    if isinstance(registry, dict):
        prefix = module.__name__ + ":"
        for name in [n for n in list(registry) if isinstance(n, str) and n.startswith(prefix)]:
            registry.pop(name, None)


def load(program: Program, interpret: bool, source: str | None = None) -> Callable:
    """The launcher of `program` (from its generated text `source` when given); its kernel
    runs under the Triton interpreter if asked."""
    return getattr(load_module(program, interpret, source), program.name)
