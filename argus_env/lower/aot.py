"""Ahead-of-time compilation for a target GPU, on any machine (no GPU needed).

`triton.compile` with a `GPUTarget("cuda", target.arch, 32)` runs the real compiler
pipeline (TTIR, TTGIR, LLVM IR, PTX, cubin) on the CPU. That proves the generated kernel is
legal for the real compiler (the interpreter accepts more), and yields resource figures
(shared memory) and the instructions used (wgmma, TMA), to set against the estimates of
`argus_env.resources` and for tests. `A.num_sms()` compiles to the target's SM count.

The kernel must be imported compiled, not interpreted, and a process runs kernels in
one mode only, so `compile_for` runs the compile in a child process; `compile_hopper` is
`compile_for` on the default (H200) target.

    python -m argus_env.lower.aot FILE.py [--wide NAME,...|all] [--target NAME]   # JSON summary

`wide` names the pointer tensors compiled with 64-bit offsets (the launcher's `I64_<name>`
flags, set for tensors that span 2**31 elements or more); by default none are.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
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

    def to_dict(self) -> dict:
        return asdict(self)


def _wide_flags(names: dict[str, str], wide) -> dict[str, bool]:
    """The `I64_<tensor>` constexprs (`names`: tensor -> flag): True for the tensors in
    `wide` (or all, if True)."""
    unknown = set() if wide is True else set(wide) - set(names)
    if unknown:
        raise ValueError(f"wide: {sorted(unknown)} are not pointer tensors of the kernel")
    return {flag: wide is True or tensor in wide for tensor, flag in names.items()}


def _compile_here(program: Program, target: Target, wide=()) -> AotResult:
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    from ..dsl.semantic import launches
    from .build import load_module
    from .module import kernel_signature, wide_flags

    module = load_module(program, interpret=False)
    sig = kernel_signature(program)
    consts = dict(program.kernel.consts)
    if "NUM_SMS" in sig:
        consts["NUM_SMS"] = target.sms
    consts.update(_wide_flags(wide_flags(program), wide))
    options = {"num_warps": program.kernel.option("num_warps", 4)}
    if program.kernel.option("num_stages") is not None:
        options["num_stages"] = program.kernel.option("num_stages")
    t0 = time.perf_counter()
    result = AotResult(True)
    for i in range(len(launches(program.kernel))):  # one kernel per launch
        name = f"{program.name}_kernel" + (f"_{i}" if i else "")
        try:
            k = triton.compile(ASTSource(getattr(module, name), sig, consts),
                               target=GPUTarget("cuda", target.arch, 32), options=options)
        except Exception as e:  # the compiler's verdict, reported rather than raised
            return AotResult(False, time.perf_counter() - t0,
                             error=f"{name}: {type(e).__name__}: {e}"[:2000])
        ptx = k.asm["ptx"]
        result.kernels += 1
        result.shared_bytes = max(result.shared_bytes, int(k.metadata.shared))
        result.num_warps = max(result.num_warps, int(k.metadata.num_warps))
        result.wgmma += ptx.count("wgmma.mma_async")
        result.tma_loads += ptx.count("cp.async.bulk.tensor")
    result.seconds = time.perf_counter() - t0
    return result


def compile_for(program: Program, target: Target | str, timeout: float = 300,
                wide=()) -> AotResult:
    """Compile `program` for `target` (its compute capability and SM count) in a child
    process and summarise the result; `wide` (tensor names, or True for all) compiles
    those tensors with 64-bit offsets."""
    target = as_target(target)
    env = dict(os.environ, TRITON_INTERPRET="0")
    args = ["--wide", "all" if wide is True else ",".join(wide)] if wide else []
    args += ["--target", target.name]
    proc = subprocess.run([sys.executable, "-m", "argus_env.lower.aot", "-", *args],
                          input=program.text,
                          capture_output=True, text=True, timeout=timeout, env=env)
    try:
        return AotResult(**json.loads(proc.stdout.strip().splitlines()[-1]))
    except (IndexError, json.JSONDecodeError, TypeError):
        return AotResult(False, error=f"compiler process failed (exit {proc.returncode}): "
                         f"{proc.stderr[-2000:]}")


def compile_hopper(program: Program, timeout: float = 300, wide=()) -> AotResult:
    """`compile_for` on the default target (the H200, sm_90)."""
    return compile_for(program, load_target(DEFAULT_HARDWARE), timeout, wide)


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    text = sys.stdin.read() if argv[0] == "-" else open(argv[0]).read()
    wide = ()
    if "--wide" in argv[1:]:
        names = argv[argv.index("--wide", 1) + 1]
        wide = True if names == "all" else tuple(n for n in names.split(",") if n)
    target = load_target(argv[argv.index("--target", 1) + 1] if "--target" in argv[1:]
                         else DEFAULT_HARDWARE)
    result = _compile_here(Program.from_text(text), target, wide=wide)
    print(json.dumps(result.to_dict()))
    return 0 if result.ok else 1


if __name__ == "__main__":
    sys.exit(main())
