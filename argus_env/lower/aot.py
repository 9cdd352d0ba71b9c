"""Ahead-of-time compilation for a Hopper GPU, on any machine (no GPU needed).

`triton.compile` with a `GPUTarget("cuda", 90, 32)` runs the real compiler pipeline
(TTIR, TTGIR, LLVM IR, PTX, cubin) on the CPU. That proves the generated kernel is legal
for the real compiler (the interpreter accepts more), and yields resource figures
(shared memory) and the instructions used (wgmma, TMA) for the cost model and for tests.

The kernel must be imported compiled, not interpreted, and a process runs kernels in
one mode only, so `compile_hopper` runs the compile in a child process.

    python -m argus_env.lower.aot FILE.py     # prints a JSON summary
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from dataclasses import asdict, dataclass

from ..dsl.program import Program


@dataclass
class AotResult:
    ok: bool
    seconds: float = 0.0
    shared_bytes: int = 0
    num_warps: int = 0
    wgmma: int = 0              # wgmma.mma_async instructions in the PTX
    tma_loads: int = 0          # cp.async.bulk.tensor instructions in the PTX
    error: str = ""

    def to_dict(self) -> dict:
        return asdict(self)


def _compile_here(program: Program, arch: int = 90, num_sms: int = 132) -> AotResult:
    import importlib.util

    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    from .build import _set_mode, module_path
    from .module import kernel_signature

    _set_mode(False)
    path = module_path(program)
    spec = importlib.util.spec_from_file_location(f"argus_aot_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    fn = getattr(module, f"{program.name}_kernel")
    sig = kernel_signature(program)
    consts = dict(program.kernel.consts)
    if "NUM_SMS" in sig:
        consts["NUM_SMS"] = num_sms
    options = {"num_warps": program.kernel.option("num_warps", 4)}
    if program.kernel.option("num_stages") is not None:
        options["num_stages"] = program.kernel.option("num_stages")
    t0 = time.perf_counter()
    try:
        k = triton.compile(ASTSource(fn, sig, consts), target=GPUTarget("cuda", arch, 32),
                           options=options)
    except Exception as e:  # the compiler's verdict, reported rather than raised
        return AotResult(False, time.perf_counter() - t0, error=f"{type(e).__name__}: {e}"[:2000])
    ptx = k.asm["ptx"]
    return AotResult(True, time.perf_counter() - t0, shared_bytes=int(k.metadata.shared),
                     num_warps=int(k.metadata.num_warps),
                     wgmma=ptx.count("wgmma.mma_async"),
                     tma_loads=ptx.count("cp.async.bulk.tensor"))


def compile_hopper(program: Program, timeout: float = 300) -> AotResult:
    """Compile `program` for sm_90 in a child process and summarise the result."""
    env = dict(os.environ, TRITON_INTERPRET="0")
    proc = subprocess.run([sys.executable, "-m", "argus_env.lower.aot", "-"], input=program.text,
                          capture_output=True, text=True, timeout=timeout, env=env)
    try:
        return AotResult(**json.loads(proc.stdout.strip().splitlines()[-1]))
    except (IndexError, json.JSONDecodeError, TypeError):
        return AotResult(False, error=f"compiler process failed (exit {proc.returncode}): "
                         f"{proc.stderr[-2000:]}")


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    text = sys.stdin.read() if argv[0] == "-" else open(argv[0]).read()
    result = _compile_here(Program.from_text(text))
    print(json.dumps(result.to_dict()))
    return 0 if result.ok else 1


if __name__ == "__main__":
    sys.exit(main())
