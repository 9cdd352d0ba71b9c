"""A program's kernels compile at once, in threads (`lower.aot.COMPILE_THREADS`): the
figures are those of one after another, and a failure is the first failing launch in
program order, whichever thread finished first. Run in a process of its own, as the
compile worker runs (the tests' process runs Triton's interpreter)."""

import json
import os
import subprocess
import sys
import textwrap

import pytest

from argus_env.measure.legality import compiler_reason

pytestmark = pytest.mark.skipif(bool(compiler_reason()), reason="no Triton NVIDIA compiler")

SCRIPT = textwrap.dedent("""
    import json, time
    from argus_env.lower import aot
    from argus_env.target import load_target
    from argus_env.task import get_task
    task = get_task("moe")
    sizes = task.shapes[2].sizes
    program = task.bind(task.program("baseline"), sizes)
    target = load_target("h100")
    out = {}
    for threads in (4, 1):
        aot._KERNELS.clear(); aot._SOURCES.clear()
        aot.COMPILE_THREADS = threads
        r = aot._compile_here(program, target, scratch=True, sizes=sizes)
        out[threads] = r.to_dict()
    real = aot._kernel_figures
    def failing(src, gpu_target, options):
        name = src.fn.__name__
        if name.endswith("_kernel_1"):
            time.sleep(0.5)            # the earlier launch fails last
            raise RuntimeError("launch 1 refused")
        if name.endswith("_kernel_4"):
            raise RuntimeError("launch 4 refused")
        return real(src, gpu_target, options)
    aot._kernel_figures = failing
    aot.COMPILE_THREADS = 4
    out["failing"] = aot._compile_here(program, target, scratch=True, sizes=sizes).to_dict()
    print(json.dumps(out))
""")


@pytest.fixture(scope="module")
def answers():
    proc = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True,
                          timeout=600, env=dict(os.environ, TRITON_INTERPRET="0"))
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_threads_give_the_figures_of_one_kernel_after_another(answers):
    together, alone = answers["4"], answers["1"]
    assert together["ok"] and alone["ok"], (together, alone)
    assert together["kernels"] == alone["kernels"] == 6
    for f in ("shared_bytes", "registers", "stack_bytes", "num_warps", "wgmma", "tma_loads"):
        assert together[f] == alone[f], f


def test_the_first_failing_launch_in_program_order_is_the_verdict(answers):
    r = answers["failing"]
    assert not r["ok"] and "launch 1 refused" in r["error"] and "_kernel_1" in r["error"], r
