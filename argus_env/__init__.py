"""Argus: Gymnasium environments for optimizing GPU kernels written in a tile DSL.

Importing this package is cheap: heavy dependencies (torch, triton, z3, gymnasium)
are imported by the submodules that need them.
"""

__version__ = "0.1.0"
