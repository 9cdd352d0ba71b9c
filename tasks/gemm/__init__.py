"""GEMM: the first Argus task. Importing this package registers it."""

from .task import TASK, GemmTask  # noqa: F401
