"""Fused residual add + RMSNorm in bf16 (a memory-bound task)."""

from .task import TASK  # noqa: F401  (registers the task)
