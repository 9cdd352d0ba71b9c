"""The generated-module cache runs only verified source text: a planted or corrupt
bytecode cache, or a `.py` rewritten after loading, never changes what runs."""

from __future__ import annotations

import importlib.util
import marshal
import os
import struct
import subprocess
import sys
import textwrap
from pathlib import Path

import torch

from argus_env import lower
from argus_env.dsl.program import Program

PROGRAM = '''from argus_env import dsl as A


@A.kernel
def scale(x: A.Tensor[A.f32, "N"], y: A.Tensor[A.f32, "N"], BLOCK: A.const = 128):
    A.grid(A.cdiv(N, BLOCK))
    offs = A.program_id(0) * BLOCK + A.arange(BLOCK)
    A.store(y[offs], A.load(x[offs], mask=offs < N) * 2.0, mask=offs < N)
'''

#: what a fresh process prints: whether the launcher doubled its input
RUN = textwrap.dedent("""
    import sys, torch
    from argus_env import lower
    from argus_env.dsl.program import Program
    prog = Program.from_text(open(sys.argv[1]).read())
    try:
        launch = lower.load(prog, interpret=True)
        x = torch.arange(300, dtype=torch.float32)
        print("correct" if torch.equal(launch(x), 2 * x) else "wrong")
    except Exception as e:
        print("failed", type(e).__name__, e)
""")


def _plant_pyc(source_path: Path, code_text: str | None) -> Path:
    """A `__pycache__` entry whose header matches `source_path`'s mtime and size, holding
    `code_text` compiled (or garbage when None): what the import system would trust."""
    st = source_path.stat()
    body = (marshal.dumps(compile(code_text, str(source_path), "exec"))
            if code_text is not None else b"\x00garbage, not marshal data\xff" * 8)
    header = importlib.util.MAGIC_NUMBER + struct.pack(
        "<III", 0, int(st.st_mtime) & 0xFFFFFFFF, st.st_size & 0xFFFFFFFF)
    pyc = Path(importlib.util.cache_from_source(str(source_path)))
    pyc.parent.mkdir(parents=True, exist_ok=True)
    pyc.write_bytes(header + body)
    return pyc


def _fresh_run(cache: Path, program_file: Path) -> str:
    env = dict(os.environ, ARGUS_CACHE_DIR=str(cache), TRITON_INTERPRET="1")
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # an ordinary process reads and writes .pyc
    proc = subprocess.run([sys.executable, "-c", RUN, str(program_file)], env=env,
                          capture_output=True, text=True, timeout=300,
                          cwd=Path(__file__).resolve().parents[2])
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout.strip().splitlines()[-1]


def _module_file(cache: Path, program_file: Path) -> Path:
    """The module's path in `cache`, written once by a first fresh process."""
    assert _fresh_run(cache, program_file) == "correct"
    [path] = (cache / "kernels").glob("scale_*.py")
    return path


def test_a_planted_bytecode_cache_never_runs(tmp_path):
    program_file = tmp_path / "scale.py"
    program_file.write_text(PROGRAM)
    path = _module_file(tmp_path / "cache", program_file)
    canary = tmp_path / "planted-code-ran"
    planted = (f"open({str(canary)!r}, 'w').write('ran')\n"
               "def scale(x, y=None):\n    return x\n")
    _plant_pyc(path, planted)
    assert _fresh_run(tmp_path / "cache", program_file) == "correct"
    assert not canary.exists(), "code from a planted .pyc ran instead of the verified source"


def test_a_corrupt_bytecode_cache_is_not_a_compile_failure(tmp_path):
    program_file = tmp_path / "scale.py"
    program_file.write_text(PROGRAM)
    path = _module_file(tmp_path / "cache", program_file)
    _plant_pyc(path, None)
    assert _fresh_run(tmp_path / "cache", program_file) == "correct"


def test_a_module_rewritten_after_loading_does_not_change_the_kernel(tmp_path, monkeypatch):
    """Triton reads a kernel's source when it first runs (the interpreter) or is defined
    (the compiler): it must read the verified text, not the file as it is by then."""
    monkeypatch.setenv("ARGUS_CACHE_DIR", str(tmp_path))
    prog = Program.from_text(PROGRAM.replace("BLOCK: A.const = 128", "BLOCK: A.const = 64"))
    launch = lower.load(prog, interpret=True)
    path = lower.module_path(prog)
    text = path.read_text()
    evil = text.replace("* 2.0", "* 3.0")
    assert evil != text
    path.write_text(evil)
    os.utime(path, (1, 1))  # a different mtime, whatever the clock's resolution
    x = torch.arange(200, dtype=torch.float32)
    assert torch.equal(launch(x), 2 * x), "the kernel ran source rewritten after loading"


def test_a_tampered_module_file_is_repaired(tmp_path, monkeypatch):
    monkeypatch.setenv("ARGUS_CACHE_DIR", str(tmp_path))
    prog = Program.from_text(PROGRAM.replace("BLOCK: A.const = 128", "BLOCK: A.const = 32"))
    path = lower.module_path(prog)
    path.write_text(path.read_text().replace("* 2.0", "* 3.0"))
    assert lower.module_path(prog).read_text() == lower.source(prog)


def _variants(n: int, start: int = 0) -> list[Program]:
    """`n` distinct programs (each its own module), cheap to run."""
    return [Program.from_text(PROGRAM.replace("    A.grid(", f'    """variant {i}"""\n    A.grid('))
            for i in range(start, start + n)]


def test_loaded_modules_are_bounded_and_leave_every_registry(monkeypatch, tmp_path):
    import linecache

    import triton.runtime.jit as jit
    from triton.runtime.interpreter import InterpretedFunction

    from argus_env.lower import build
    monkeypatch.setenv("ARGUS_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(build, "_loaded", build.LRU(3))
    first = build.load_module(_variants(1, 1000)[0], interpret=True)
    launch = first.scale
    names = {first.__name__}
    for prog in _variants(8):
        names.add(build.load_module(prog, interpret=True).__name__)
    held = build.cached()
    assert held["modules"] == 3, held
    assert first.__name__ not in sys.modules
    assert first.__file__ not in linecache.cache
    assert first.scale_kernel.fn not in InterpretedFunction.rewritten_fn
    registry = getattr(jit, "_triton_jit_function_registry", {})  # 3.9 has it, 3.6 not
    assert not [k for k in registry if k.startswith(first.__name__)]
    live = names & set(sys.modules)
    assert len(names) == 9 and len(live) == 3, live
    x = torch.arange(130, dtype=torch.float32)
    assert torch.equal(launch(x), 2 * x), "a launcher held elsewhere still works"


def test_a_given_text_is_loaded_as_is_and_keys_its_module(monkeypatch, tmp_path):
    """`load(program, interpret, source=text)` runs `text` without generating the program's
    text again, and two different texts of one program are two modules: no text is
    remembered by program, so a text cannot stand in for another."""
    from argus_env.lower import build
    monkeypatch.setenv("ARGUS_CACHE_DIR", str(tmp_path))
    prog = Program.from_text(PROGRAM.replace("BLOCK: A.const = 128", "BLOCK: A.const = 16"))
    text = lower.source(prog)
    tripled = text.replace("* 2.0", "* 3.0")
    assert tripled != text

    def no_generation(program):
        raise AssertionError("the text was generated again")
    monkeypatch.setattr(build, "generate", no_generation)
    x = torch.arange(40, dtype=torch.float32)
    assert torch.equal(lower.load(prog, True, text)(x), 2 * x)
    assert torch.equal(lower.load(prog, True, tripled)(x), 3 * x), "ran another text"
    assert torch.equal(lower.load(prog, True, text)(x), 2 * x)
    assert lower.module_path(prog, tripled).read_text() == tripled
