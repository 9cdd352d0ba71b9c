"""Attention: flash attention forward as an Argus task. Importing this package registers it."""

from .task import TASK, AttentionTask  # noqa: F401
