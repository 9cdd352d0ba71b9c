"""One analysis per (program, sizes, target): every fact about a program at one shape that
more than one stage of a step needs, each worked out once, when first asked for.

    an = Analysis(program, sizes, task, target)
    an.program_sizes   # the task's sizes for this program (MoE adds its padded rows)
    an.features        # what the cost model and the observation read
    an.triton          # the generated Triton module (shown in `info`, run by the worker)
    an.numerics_key    # what the interpreter runs: programs that differ only in compiler
                       # hints share their numerical verdicts

The step's evaluator owns it (`argus_env.envs.evaluate`): it is made once per program and
shape, handed to the checker's caller, the numerics worker, the measurement backend and
the observation, and remembered with the program's evaluation.
"""

from __future__ import annotations

import functools

from ..dsl.program import Program


class Analysis:
    """The facts about `program` at `sizes` on `target`, each computed at most once."""

    def __init__(self, program: Program, sizes: dict, task, target=None):
        self.program = program
        self.sizes = dict(sizes)
        self.task = task
        self.target = target

    def __deepcopy__(self, memo) -> "Analysis":
        return self  # facts about an immutable program: a copied environment shares them

    def __getstate__(self) -> dict:
        """Pickled with its task's name (the task is found again by name)."""
        state = dict(self.__dict__)
        state["task"] = getattr(self.task, "name", None)
        state.pop("task_view", None)
        return state

    def __setstate__(self, state: dict) -> None:
        from ..task import get_task
        name = state.get("task")
        self.__dict__.update(state, task=get_task(name) if name else None)

    @property
    def info(self):
        """The typed program's kernel info (launches, outputs, workspaces), from the one
        type-check the program had when it was made."""
        return self.program.info

    @functools.cached_property
    def program_sizes(self) -> dict:
        """The sizes the program runs at (`Task.program_sizes`)."""
        return dict(self.task.program_sizes(self.program, self.sizes))

    @functools.cached_property
    def task_view(self) -> "AnalysedTask":
        """The task as the checker and feature extraction are given it: the same task,
        whose `program_sizes` answers for this program and shape from the analysis."""
        return AnalysedTask(self)

    @functools.cached_property
    def features(self):
        """Performance features (`argus_env.measure.features.extract`) at the shape's sizes;
        raises what extraction raises (a program without a dot, say)."""
        from ..measure.features import extract
        if self.target is None:
            return extract(self.program, self.sizes, self.task_view)
        return extract(self.program, self.sizes, self.task_view, target=self.target)

    @functools.cached_property
    def triton(self) -> str:
        """The generated Triton module; raises what the lowering raises."""
        from ..lower import source
        return source(self.program)

    @functools.cached_property
    def numerics_key(self) -> str:
        """The program as the Triton interpreter sees it (`lower.interpretation_key`)."""
        from ..lower import interpretation_key
        return interpretation_key(self.program)


class AnalysedTask:
    """A task seen through one analysis: every attribute is the task's, except that
    `program_sizes` of the analysed program at the analysed sizes is the analysis' own
    (worked out once, whoever asks)."""

    def __init__(self, analysis: Analysis):
        self._analysis = analysis

    def __getattr__(self, name: str):
        if name.startswith("__") or name == "_analysis":
            raise AttributeError(name)
        return getattr(self._analysis.task, name)

    def program_sizes(self, program: Program, sizes: dict) -> dict:
        an = self._analysis
        if program is an.program and dict(sizes) == an.sizes:
            return dict(an.program_sizes)
        return an.task.program_sizes(program, sizes)

    def __repr__(self) -> str:
        return f"AnalysedTask({self._analysis.task!r})"
