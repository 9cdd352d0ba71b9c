"""Lowering of DSL programs to Triton: source generation, loading (modules kept by text).

    src = lower.source(program)                  # readable Triton text
    launch = lower.load(program, interpret=True) # the launcher, kernel under the interpreter
    launch = lower.load(program, True, src)      # the same, from a text generated before
"""

from .build import cache_dir, cached, load, loads, module_path, source  # noqa: F401
from .module import LOWERING_VERSION, generate, interpretation_key  # noqa: F401
from .runtime import LaunchError  # noqa: F401
