"""Test-wide setup: keep every tool's caches inside a temporary folder, and run Triton
kernels under the interpreter (CI machines have no GPU)."""

import os
import tempfile

_TMP = tempfile.mkdtemp(prefix="argus-tests-")
for var, sub in (("ARGUS_CACHE_DIR", "argus"), ("TRITON_CACHE_DIR", "triton"),
                 ("XDG_CACHE_HOME", "xdg"), ("HF_HOME", "hf"), ("WANDB_DIR", "wandb")):
    os.environ.setdefault(var, os.path.join(_TMP, sub))
os.environ.setdefault("WANDB_MODE", "offline")
# CPU tests run kernels under the interpreter, which must be chosen before triton is
# imported (its library functions are decorated at import time)
os.environ.setdefault("TRITON_INTERPRET", "1")
# environments built here take no compile verdicts unless a test asks for them
# (tests/lower/test_legality.py): a step's ahead-of-time compile costs about a second
os.environ.setdefault("ARGUS_LEGALITY", "0")
os.environ.setdefault("RAY_AUTH_MODE", "disabled")
