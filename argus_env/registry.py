"""The task registry: the one place in `argus_env` that names tasks.

Each task lives in `tasks/<name>/` (installed as `argus_env.tasks.<name>`) and is known to
the core by one line of `TASKS`: its name, the package that registers it, and its
Gymnasium id. The core imports a task's package only through `argus_env.task.get_task`,
on first use, so `import argus_env` registers every id without importing any task.
Adding a task is one line here (the first line is the default task).
"""

from __future__ import annotations

from typing import NamedTuple


class TaskEntry(NamedTuple):
    package: str  # the module whose import registers the task (`register_task`)
    env_id: str   # its Gymnasium id


TASKS: dict[str, TaskEntry] = {
    "gemm": TaskEntry("argus_env.tasks.gemm", "Argus-GEMM-v0"),
    "attention": TaskEntry("argus_env.tasks.attention", "Argus-Attention-v0"),
    "moe": TaskEntry("argus_env.tasks.moe", "Argus-MoE-v0"),
    "rmsnorm": TaskEntry("argus_env.tasks.rmsnorm", "Argus-RMSNorm-v0"),
}

DEFAULT_TASK: str = next(iter(TASKS))
DEFAULT_ENV_ID: str = TASKS[DEFAULT_TASK].env_id


def env_ids() -> dict[str, str]:
    """env id -> task name, in registration order."""
    return {entry.env_id: name for name, entry in TASKS.items()}


def packages() -> dict[str, str]:
    """task name -> the package that registers it."""
    return {name: entry.package for name, entry in TASKS.items()}


def env_id_of(task: str) -> str | None:
    entry = TASKS.get(task)
    return entry.env_id if entry else None
