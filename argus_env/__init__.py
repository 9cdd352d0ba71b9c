"""Argus: Gymnasium environments for optimizing GPU kernels written in a tile DSL.

Importing this package registers the environment ids (`Argus-GEMM-v0`, ...) with
Gymnasium when Gymnasium is installed. Heavy dependencies (torch, triton, z3) are
imported by the submodules that need them.
"""

__version__ = "0.1.0"

try:
    from .envs import register_envs as _register
except ImportError:  # gymnasium missing: the DSL, checker and lowering still work
    pass
