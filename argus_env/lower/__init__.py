"""Lowering of DSL programs to Triton: source generation, caching by program hash, loading.

    src = lower.source(program)                  # readable Triton text
    launch = lower.load(program, interpret=True) # the launcher, kernel under the interpreter
"""

from .build import cache_dir, cached, load, loads, module_path, source  # noqa: F401
from .module import LOWERING_VERSION, generate  # noqa: F401
from .runtime import LaunchError  # noqa: F401
