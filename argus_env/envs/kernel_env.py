"""`KernelEnv`: the Gymnasium environment shared by every Argus task."""

from __future__ import annotations

import copy

import difflib
import logging
import math
import string
from collections.abc import Mapping
from dataclasses import dataclass, replace

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from ..check.pack import pack_of
from ..check.report import GENERIC_DIM, CheckTimeout, ReportLayout
from ..dsl.errors import DSLError
from ..dsl.program import Program
from ..measure.analytic import DEFAULT_ANCHOR, check_anchor
from ..measure.correction import DEFAULT_ESTIMATOR, check_estimator
from ..measure.optimum import best_known, regret
from ..registry import DEFAULT_TASK
from ..space import Action, TransformError
from ..task import get_task
from .evaluate import Evaluation, EvaluationError, Evaluator, interrupted

PRINTABLE = frozenset(string.printable)
MAX_TEXT = 20_000
MAX_CALL = 200        # characters of a transformation call such as `split_k(4)`
MAX_SIZE = 2**31 - 1  # a problem size (kernels index with 32-bit integers)
log = logging.getLogger(__name__)
PERF_DIM = 4
REPORT_DIM = GENERIC_DIM  # the report's generic slots; the task's pack adds its block


@dataclass
class State:
    """The environment's position: a program (and its configuration, when the program
    came from the task's transformation space) and what is known about it."""

    config: object | None
    program: Program
    evaluation: Evaluation


class KernelEnv(gym.Env):
    """Optimize a GPU kernel by transforming a tile-DSL program.

    ## Description
    Each episode starts from the task's baseline program at one problem shape. Actions
    transform the program (tile sizes, pipelining, TMA, split-K, ...) or replace it with
    DSL text. Every program is first checked statically against the task's data-flow
    invariants; a program that passes is run against the PyTorch reference (under the
    Triton interpreter on CPU) and then measured. The agent sees the checker's report,
    so a broken transformation comes with a counterexample saying what to fix.

    ## Action Space
    `mode="discrete"`: `Discrete(n)`, an index into the task's catalog of (transformation,
    value) pairs followed by `undo` and `submit`; `action_mask` in the observation and in
    `info` marks the legal ones. `mode="text"`: `Text`: a call such as `split_k(4)`,
    `tile_m(128)`, `undo()`, `submit()`, or a whole program in DSL text (parsed by the
    whitelisting front end, never executed).

    ## Observation Space
    `Dict`: `config` (`task.config_dim` floats in [0, 1], from the task's own encoder,
    `Task.encode_config`: each field of its configuration, the program's structure as
    feature extraction reads it, a hand-written-program flag, the shape's log sizes),
    `report` (`argus_env.check.report.ReportLayout`: the status proven / violation /
    undecided, log-scaled violation counts per core invariant, the first violation's class,
    line and element, the numbers of violations and of undecided obligations; then the
    task's block: the first violation's class among the task's own and their counts),
    `perf` (log TFLOP/s, fraction of the roofline,
    fraction of the library anchor, best fraction so far), `action_mask`
    (`MultiBinary(n)`); in text mode also `program` and `report_text`.

    ## Rewards
    From `configs/reward/<reward>.yaml` (default): the potential-based throughput gain
    `log T_t - log T_{t-1}` over measured programs, a penalty per newly violated
    invariant (an obligation the checker could not decide counts as a violation: the
    program is refused, not run), a penalty for a numerical mismatch, a failed compile or an invalid
    action, and on `submit` the bonus `log(T / T_library)`. The step that reaches the step
    limit submits the current program implicitly: it pays, besides its own reward, exactly
    what a `submit()` of that program would have paid (below the library a negative
    bonus, or the unmeasured penalty), so never submitting earns no more than submitting.
    `info["reward_terms"]` holds each term's share of the step's reward,
    `info["submitted"]` says the step submitted (explicitly or at the limit),
    `info["implicit_submit"]` that it was the limit's, and `info["submit_reward"]` what
    submitting paid.

    ## Starting State
    The task's baseline program at a shape drawn from the split's shape suite with the
    environment's `np_random` (or `options={"shape": name or sizes}`).

    ## Episode End
    `terminated` on `submit`. The step that reaches the step limit (`max_episode_steps`:
    the registration's or `gym.make(..., max_episode_steps=N)`'s, which the `StepLimit`
    wrapper the registration adds over Gymnasium's `TimeLimit` hands to the env; or this
    class's own argument) submits the current program implicitly (see Rewards) and
    returns `truncated` and `terminated` both: the episode ends there as a submit ends it,
    with nothing owed past it, so a learner must not bootstrap a value at that step.
    After either, steps are refused until `reset`.

    ## Arguments
    `task` ("gemm"), `mode` ("discrete" | "text"), `measure` ("model": the analytic
    cost model; "table": measurements recorded on an H200, falling back to the model for
    programs it lacks; "gpu": live timing on this machine's GPU in a worker process, which
    makes the environment nondeterministic), `estimator` ("corrected": model prices are the
    analytic model's times the task's learned correction for the hardware, where one is
    fitted and its held-out evaluation kept it, `tasks/<task>/correction_<gpu>.json`;
    "analytic": the model alone, as the boards made before the correction were priced),
    `model_anchor` ("measured": a model price is a fraction of the library as this GPU's
    tables timed it at the shape, 0.9 x the roofline where they never did; "roofline":
    always 0.9 x the roofline off the H200, as records made before the field were priced;
    on the H200 the recorded anchors file comes first either way),
    `hardware` (profile in `configs/hardware/`),
    `reward` (config name, path or mapping), `split` ("train" | "test" | "all"),
    `correctness` ("interpreter" | "none": no numerical check, so a program that passes the
    checker is trusted, a kernel writing zeros included; for checker-only experiments),
    `correctness_timeout` (seconds for a
    program's numerical checks, all shapes together; past it the step is scored as a
    timeout), `step_timeout` (seconds for a step's checking and numerics together, worker
    restarts included; a check still running at its end is refused with a message and
    the invalid-action penalty, numerics still running are scored as a timeout; None: no
    bound), `check_shapes` (how many reduced shapes the numerics are checked at, or a
    list of size mappings), `max_episode_steps` (the env's own step limit, None: none but
    the one `gym.make` hands it; with both, the smaller), `catalog` (the version of the
    task's transformation catalog, None: the newest; an older one plays as episodes and
    policies made before later transformations were added did: `TaskSpace.at`). Also
    accepted as one `env_config` mapping, as RLlib passes them.

    ## Errors
    Nothing an agent sends raises: a bad action (wrong type, out of range, masked,
    unparsable or hostile text, a program with the wrong signature, any action after
    `submit` until `reset`) is answered with a
    message in `info["error"]` and the invalid-action penalty, and the state is kept; a
    program Argus itself fails on is answered the same way with `info["internal_error"]`
    set. `reset` raises `ValueError` for options it cannot use.

    ## Invariants
    The task's: for GEMM, contraction over matching k, output ownership, every k
    accumulated exactly once per output element (split-K partials combined, stream-K's
    split tiles fixed up), exactly-once writes, in-bounds or masked accesses, bijective program-id remaps, and consistent
    hand-pipelined prefetches.

    ## Version History
    - v0: first release. The catalogs grow under the same id (the committed boards and
      policies are re-run when they do): GEMM's gained `tile_m(16)`, `swap_ab` and
      `stream_k` (45 discrete actions, two more configuration floats). The step that
      reaches the step limit submits implicitly (before, a truncated episode earned no
      submit term, so never submitting paid below the library).
    """

    metadata = {"render_modes": ["ansi"], "render_fps": 4}

    def __init__(self, task: str = DEFAULT_TASK, mode: str = "discrete", measure: str = "model",
                 hardware: str = "h200", reward="default", split: str = "train",
                 correctness: str = "interpreter", render_mode: str | None = None,
                 env_config: dict | None = None, evaluator: Evaluator | None = None,
                 correctness_timeout: float = 20.0, check_shapes: int | list = 2,
                 step_timeout: float | None = 25.0, estimator: str = DEFAULT_ESTIMATOR,
                 max_episode_steps: int | None = None, table_snapshot: str | None = None,
                 correction_fit: str | None = None, catalog: int | None = None,
                 model_anchor: str = DEFAULT_ANCHOR):
        self._init_kwargs = dict(task=task, mode=mode, measure=measure, hardware=hardware,
                                 reward=reward, split=split, correctness=correctness,
                                 correctness_timeout=correctness_timeout,
                                 check_shapes=check_shapes, step_timeout=step_timeout,
                                 estimator=estimator, max_episode_steps=max_episode_steps,
                                 table_snapshot=table_snapshot, correction_fit=correction_fit,
                                 catalog=catalog, model_anchor=model_anchor)
        if env_config:
            return self.__init__(**{**dict(task=task, mode=mode, measure=measure,
                                           hardware=hardware, reward=reward, split=split,
                                           correctness=correctness, render_mode=render_mode,
                                           evaluator=evaluator,
                                           correctness_timeout=correctness_timeout,
                                           check_shapes=check_shapes,
                                           step_timeout=step_timeout, estimator=estimator,
                                           max_episode_steps=max_episode_steps,
                                           table_snapshot=table_snapshot,
                                           correction_fit=correction_fit, catalog=catalog,
                                           model_anchor=model_anchor),
                                    **dict(env_config)})
        if step_timeout is not None and not (isinstance(step_timeout, (int, float))
                                             and not isinstance(step_timeout, bool)
                                             and 0 < step_timeout < math.inf):
            raise ValueError(f"step_timeout must be a positive number of seconds or None, "
                             f"got {step_timeout!r}")
        self.step_timeout = None if step_timeout is None else float(step_timeout)
        self.max_episode_steps: int | None = None
        if max_episode_steps is not None:
            self.limit_steps(max_episode_steps)
        if mode not in ("discrete", "text"):
            raise ValueError(f"mode must be 'discrete' or 'text', got {mode!r}")
        if render_mode not in (None, "ansi"):
            raise ValueError(f"render_mode must be None or 'ansi', got {render_mode!r}")
        from argus_env.reward import load_reward

        from ..measure.backends import make_backend
        from ..target import load_target
        self.task = get_task(task)
        if self.task.space is None:
            raise ValueError(f"task {task!r} has no transformation space")
        self.space_ = self.task.space.at(catalog)   # the catalog played (None: the newest)
        self.mode, self.split, self.render_mode = mode, split, render_mode
        self.cases = self.task.shape_cases(split)
        if not self.cases:
            raise ValueError(f"task {task!r} has no shapes in split {split!r}")
        if measure == "gpu" and evaluator is None:
            _require_cuda()
        self.target = load_target(hardware)   # the hardware facts, for every part below
        check_estimator(estimator)
        check_anchor(model_anchor)
        if table_snapshot is not None and measure != "table":
            raise ValueError(f"table_snapshot reads the GPU tables as they were; it needs "
                             f"measure='table', not {measure!r}")
        if correction_fit is not None and measure not in ("model", "table"):
            raise ValueError(f"correction_fit prices with a recorded fit of the cost model's "
                             f"correction; it needs measure='model' or 'table', not {measure!r}")
        backend = make_backend(measure, self.target,
                               **({"estimator": estimator, "model_anchor": model_anchor}
                                  if measure in ("model", "table") else {}),
                               **({"snapshot": table_snapshot} if table_snapshot is not None
                                  else {}),
                               **({"fit": correction_fit} if correction_fit is not None
                                  else {}))
        self.estimator = estimator
        self.model_anchor = model_anchor if measure in ("model", "table") else ""
        if measure == "gpu" and correctness == "interpreter":
            correctness = "none"  # the GPU worker checks numerics itself, at the real shape
        self._owns_evaluator = evaluator is None
        self.evaluator = evaluator or Evaluator(self.task, backend, correctness,
                                                correctness_timeout=correctness_timeout,
                                                check_shapes=check_shapes,
                                                target=self.target)
        self.target = self.evaluator.target   # a given evaluator's: mask and prices agree
        self.profile = self.target.profile
        self.reward_fn = load_reward(reward)
        self.catalog = self.space_.catalog()
        n = len(self.catalog)
        self.report_layout = ReportLayout.for_pack(pack_of(self.task))
        obs = {"config": spaces.Box(0.0, 1.0, (self.task.config_dim_of(self.space_),),
                                    np.float32),
               "report": spaces.Box(0.0, 1e6, (self.report_layout.size,), np.float32),
               "perf": spaces.Box(0.0, 1e6, (PERF_DIM,), np.float32),
               "action_mask": spaces.MultiBinary(n)}
        if mode == "text":
            obs["program"] = spaces.Text(MAX_TEXT, min_length=0, charset=PRINTABLE)
            obs["report_text"] = spaces.Text(MAX_TEXT, min_length=0, charset=PRINTABLE)
            self.action_space = spaces.Text(MAX_TEXT, min_length=0, charset=PRINTABLE)
        else:
            self.action_space = spaces.Discrete(n)
        self.observation_space = spaces.Dict(obs)
        self.state: State | None = None
        self.history: list[State] = []
        self.actions: list[str] = []

    def limit_steps(self, max_episode_steps: int) -> None:
        """Limit episodes to `max_episode_steps` steps (the smaller where a limit is set
        already): the step that reaches it submits the current program implicitly.
        `gym.make`'s `StepLimit` wrapper calls this with its `TimeLimit`'s limit."""
        n = max_episode_steps
        if isinstance(n, (bool, np.bool_)) or not isinstance(n, (int, np.integer)) or n < 1:
            raise ValueError(f"max_episode_steps must be a positive integer, got {n!r}")
        n = int(n)
        self.max_episode_steps = n if self.max_episode_steps is None else \
            min(self.max_episode_steps, n)

    # ------------------------------------------------------------ copies and state
    def fork(self) -> "KernelEnv":
        """An independent copy of this environment at its current step (history, actions,
        best so far): stepping one does not change the other. Both share one evaluator
        (its remembered answers and worker), which this environment keeps owning."""
        twin = copy.deepcopy(self, memo={id(self.evaluator): self.evaluator})
        twin._owns_evaluator = False
        return twin

    def env_state(self) -> dict:
        """The episode as plain data (JSON-serialisable): how the environment was made, the
        shape, and every action sent since `reset`; `from_env_state` replays it."""
        if self.state is None:
            raise RuntimeError("env_state: call reset() first")
        kwargs = {k: v for k, v in self._init_kwargs.items() if isinstance(v, (str, int, float,
                                                                             type(None)))}
        # the limit in force (gym.make's included): a replay ends where this episode did
        kwargs["max_episode_steps"] = self.max_episode_steps
        return {"kwargs": kwargs, "shape": dict(self.sizes), "shape_name": self.case.name,
                "actions": list(self.actions), "program": self.state.program.text,
                "steps": self.steps}

    @classmethod
    def from_env_state(cls, state: dict, **kwargs) -> "KernelEnv":
        """A new environment in `state` (from `env_state`): made the same way, reset at the
        same shape, and every recorded action played again."""
        env = cls(**{**state["kwargs"], **kwargs})
        env.reset(options={"shape": state["shape_name"] if state["shape_name"] in
                           {c.name for c in env.cases} else state["shape"]})
        for action in state["actions"]:
            if env.mode == "discrete" and action not in ("undo()", "submit()"):
                action = env._index_of(action)
            env.step(action)
        if env.state.program.text != state["program"]:
            raise ValueError("from_env_state: the replayed program differs from the recorded one")
        return env

    def _index_of(self, label: str):
        """The catalog index of an action label such as `tile_m(128)` (as recorded)."""
        for i, (name, value) in enumerate(self.catalog):
            if (f"{name}({value!r})" if value is not None else f"{name}()") == label:
                return i
        if label.lstrip("-").isdigit():
            return int(label)  # an index that was refused (masked, out of range)
        return label  # any other refused action's label: refused again, as it was

    # ------------------------------------------------------------ episode
    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        if options is not None and not isinstance(options, Mapping):
            raise ValueError(f"options must be a mapping such as {{'shape': 'square-4096'}}, "
                             f"got {type(options).__name__}")
        unknown = sorted(map(str, set(options or {}) - {"shape"}))
        if unknown:
            raise ValueError(f"unknown reset option {unknown[0]!r}; known: 'shape'")
        case = self._pick_shape((options or {}).get("shape"))
        before = getattr(self, "case", None), getattr(self, "sizes", None)
        self.case, self.sizes = case, dict(case.sizes)
        config = self.space_.baseline()
        try:
            state = self._state(config, self.evaluator.program(config, self.sizes))
        except Exception as e:  # noqa: BLE001 - a custom shape the task's programs cannot take
            self.case, self.sizes = before
            raise ValueError(f"the task's baseline program cannot start at shape "
                             f"{_short(case.sizes)}: {type(e).__name__}: {e}") from e
        self.history, self.actions = [], []
        self.state = state
        base = self.state.evaluation
        self.baseline_tflops = base.throughput
        self.best_frac = self._frac(base)
        self.best_tflops = base.throughput
        self.last_tflops = base.throughput
        self.reward_fn.reset(self.state)
        # the best program known at this shape (the fastest in the GPU tables): an
        # episode's best is reported against it (`info["regret"]`)
        self.best_known = best_known(self.task, self.sizes, getattr(self.target, "name", ""))
        self.steps = 0
        self.ended = False  # submitted (or at the step limit): later steps are refused until reset
        self._implicit = False
        self._mask = None
        return self._obs(), self._info(None, event=None)

    def _pick_shape(self, shape):
        from ..task import ShapeCase
        if shape is None:
            return self.cases[int(self.np_random.integers(len(self.cases)))]
        if isinstance(shape, str):
            for c in self.task.shape_cases("all"):
                if c.name == shape:
                    return c
            names = [c.name for c in self.task.shape_cases("all")]
            close = difflib.get_close_matches(shape, names, n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise ValueError(f"unknown shape {shape[:60]!r}{hint} (known: {', '.join(names)})")
        if isinstance(shape, Mapping):
            dims = list(self.task.shapes[0].sizes)
            flags = tuple(getattr(self.task, "flags", ()))  # switches and levels: 0 allowed
            if set(shape) != set(dims) or not all(
                    isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_))
                    and (0 <= v if d in flags else 0 < v) and v <= MAX_SIZE
                    for d, v in shape.items()):
                zero = f" ({', '.join(flags)} from 0)" if flags else ""
                raise ValueError(f"shape needs exactly the sizes {dims}, each an integer in "
                                 f"[1, {MAX_SIZE}]{zero}; got {_short(shape)}")
            sizes = {d: int(shape[d]) for d in dims}
            self.task.check_sizes(sizes)  # ValueError: a shape this task cannot take
            return ShapeCase("custom", sizes, "custom")
        raise ValueError(f"shape must be a name or a mapping of sizes, got {type(shape).__name__}")

    def _state(self, config, program: Program, budget: float | None = None) -> State:
        program = self.task.bind(program, self.sizes)  # the problem's constants, not a choice
        return State(config, program, self.evaluator.evaluate(program, self.sizes, budget))

    def _frac(self, ev: Evaluation) -> float:
        return ev.measurement.frac_anchor if ev.measured else 0.0

    # ------------------------------------------------------------ step
    def step(self, action):
        if self.state is None:
            raise RuntimeError("call reset() before step()")
        self.steps += 1
        if getattr(self, "ended", False):  # a second submit must not earn a second bonus
            why = ("reached its step limit (its program was submitted)"
                   if getattr(self, "_implicit", False) else "ended with submit()")
            obs, reward, _, trunc, info = self._refuse(
                action, "ended", f"the episode {why}; call reset() to start another")
            return obs, reward, True, trunc, info
        obs, reward, terminated, truncated, info = self._step(action)
        if not terminated and self.max_episode_steps is not None \
                and self.steps >= self.max_episode_steps:
            reward = self._submit_at_limit(reward, info)
            terminated = truncated = True
        return obs, reward, terminated, truncated, info

    def _confirm_submitted(self) -> None:
        """The submitted program's compile verdict from the whole compiler
        (`Evaluator.confirm`): a step's verdict stops after Triton's shared-memory
        allocation, a submission's runs ptxas too."""
        from .evaluate import EvaluationError
        try:
            ev = self.evaluator.confirm(self.state.evaluation)
        except EvaluationError as e:  # no compiler process: the step's verdict stands, said so
            log.warning("submitted without the whole compile: %s", e)
            m = self.state.evaluation.measurement
            ev = replace(self.state.evaluation, measurement=replace(
                m, details={**m.details, "confirm_error": str(e)}))
        if ev is not self.state.evaluation:
            self.state = replace(self.state, evaluation=ev)

    def _submit_at_limit(self, reward: float, info: dict) -> float:
        """The step limit: submit the current program as `submit()` would (the same event,
        so the same reward from every term: the submit bonus, or the unmeasured penalty
        where the program is not measured correct), add it to the step's reward and its
        terms, and end the episode."""
        own = dict(getattr(self.reward_fn, "last", {}))
        self._confirm_submitted()
        paid = float(self.reward_fn.update(self._event(Action("submit"), self.state)))
        submit = dict(getattr(self.reward_fn, "last", {}))
        if hasattr(self.reward_fn, "last"):
            self.reward_fn.last = {k: own.get(k, 0.0) + submit.get(k, 0.0)
                                   for k in {**own, **submit}}
        self.ended, self._implicit = True, True
        info.update(reward_terms=dict(getattr(self.reward_fn, "last", {})), submitted=True,
                    implicit_submit=True, submit_reward=paid)
        return float(reward) + paid

    def _step(self, action):
        from ..task import TaskInterfaceError
        prev = self.state
        try:
            act = self._parse(action)
            if act.kind == "transform":
                config = self.space_.apply(prev.config, act.name, act.value, self._ctx())
                program = self.evaluator.program(config, self.sizes)
            elif act.kind == "program":
                config, program = None, act.program
                self.task.check_program(program)
            if act.kind in ("transform", "program"):
                state = self._state(config, program, self.step_timeout)
        except (TransformError, DSLError, TaskInterfaceError) as e:
            kind = "masked" if isinstance(e, TransformError) and "illegal" in str(e) else \
                ("transform" if isinstance(e, TransformError) else
                 "timeout" if isinstance(e, CheckTimeout) else "parse")
            return self._refuse(action, kind, str(e) or type(e).__name__)
        except EvaluationError as e:
            log.warning("refused a step: %s", e)
            return self._refuse(action, "internal", str(e), internal=True)
        except Exception as e:  # noqa: BLE001 - an Argus bug must not end the agent's run
            if interrupted(e):
                raise KeyboardInterrupt("interrupted during a step") from None
            log.exception("refused a step after an internal error")
            return self._refuse(action, "internal", str(EvaluationError("environment", e)),
                                internal=True)
        self.actions.append(act.label() if act.kind != "program" else act.program.text)
        if act.kind == "undo":
            if self.history:
                self.state = self.history.pop()
        elif act.kind in ("transform", "program"):
            self.history.append(prev)
            self.state = state
        self._mask = None
        if act.kind == "submit":
            self._confirm_submitted()
        event = self._event(act, prev)
        reward = self.reward_fn.update(event)
        if event.measured:
            self.last_tflops = event.throughput
            self.best_frac = max(self.best_frac, self._frac(self.state.evaluation))
            self.best_tflops = max(self.best_tflops or 0.0, event.throughput)
        terminated = act.kind == "submit"
        self.ended, self._implicit = terminated, False
        info = self._info(act, event)
        if terminated:
            info.update(submitted=True, submit_reward=float(reward))
        return self._obs(), reward, terminated, False, info

    def _refuse(self, action, kind: str, message: str, internal: bool = False):
        """Answer an action that could not be taken: the state stays, the penalty for an
        invalid action is paid, and `info["error"]` says why."""
        from argus_env.reward import StepEvent
        self.actions.append(_label(action))
        self._mask = None
        reward = self.reward_fn.reward_on_error(kind)
        info = self._info(None, event=StepEvent("error", kind), error=message)
        info["internal_error"] = internal
        return self._obs(), reward, False, False, info

    def _parse(self, action) -> Action:
        if self.mode == "discrete":
            if not isinstance(action, str) and _contains(self.action_space, action):
                action = int(action)  # what the space contains: `np.array(2)`, `np.int32(2)`
            if isinstance(action, (bool, str)) or not isinstance(action, (int, np.integer)):
                raise TransformError(repr(action)[:40], "a discrete action is an integer index")
            if not 0 <= int(action) < len(self.catalog):
                raise TransformError(str(action), f"index out of range [0, {len(self.catalog)})")
            name, value = self.catalog[int(action)]
            if name in ("undo", "submit"):
                return self._special(name)
            reason = None if self.action_mask()[int(action)] else \
                self.space_.why_illegal(self.state.config, name, value, self._ctx())
            if reason is not None:
                raise TransformError(f"{name}({value!r})", f"illegal now: {reason}",
                                     self.legal_actions()[:12])
            return Action("transform", name, value)
        if not isinstance(action, str):
            raise TransformError(repr(action)[:40], "a text action is a string")
        try:
            action.encode("utf-8")
        except UnicodeError as e:  # lone surrogates: no source text can hold them
            raise TransformError(repr(action)[:40], f"text is not valid Unicode ({e.reason} "
                                 f"at position {e.start})") from None
        text = action.strip()
        if "@" in text or "def " in text or "\n" in text:
            program = self.evaluator.parse(text, filename="<action>")
            return Action("program", program=program)
        if len(text) > MAX_CALL:
            raise TransformError(text[:40], f"a transformation call is at most {MAX_CALL} "
                                 "characters (a program starts with its `@A.kernel` line)")
        try:
            act = self.space_.parse_call(text)
        except TransformError:
            raise  # the parser's own message ("did you mean split_k?") is what agents act on
        except (ValueError, RecursionError, MemoryError) as e:  # Python's own parser gave up
            detail = str(e)[:200] or type(e).__name__
            raise TransformError(text[:40], f"not a transformation call: {detail}") from None
        if act.kind in ("undo", "submit"):
            return self._special(act.kind)
        if act.kind == "transform":
            values = self.space_.transform(act.name).values
            if not any(type(v) is type(act.value) and v == act.value for v in values):
                # `tile_m(64.0)` or `tma(1)` compare equal to catalog values, but are not them
                raise TransformError(act.label(), f"value {act.value!r} is not one of "
                                     f"{list(values)}")
            reason = self.space_.why_illegal(self.state.config, act.name, act.value, self._ctx())
            if reason is not None:
                raise TransformError(act.label(), f"illegal now: {reason}", self.legal_actions()[:12])
        return act

    def _special(self, name: str) -> Action:
        if name == "undo" and not self.history:
            raise TransformError("undo()", "illegal now: there is no earlier program in this "
                                 "episode to return to", self.legal_actions()[:12])
        return Action(name)

    def _ctx(self) -> dict:
        return {"sizes": self.sizes, "target": self.target}

    def _event(self, act: Action, prev: State):
        from argus_env.reward import StepEvent
        ev = self.state.evaluation
        before = set(prev.evaluation.report.findings())  # undecided counts as a violation
        new = [f for f in ev.report.findings() if f not in before]
        anchor = ev.measurement.anchor_tflops if ev.measurement is not None else None
        return StepEvent(act.kind, ev.error, len(new) if act.kind != "undo" else 0,
                         ev.measured, ev.throughput, self.last_tflops, anchor)

    # ------------------------------------------------------------ observations
    def legal_actions(self) -> list[str]:
        mask = self.action_mask()
        return [f"{n}({v!r})" if v is not None else f"{n}()"
                for (n, v), ok in zip(self.catalog, mask) if ok]

    def action_mask(self) -> np.ndarray:
        """Legal actions now (computed once per state; the transformations' legality once
        per configuration and shape while the evaluator remembers it)."""
        if getattr(self, "_mask", None) is not None:
            return self._mask.copy()
        config, ctx = self.state.config, self._ctx()

        def legality() -> np.ndarray:
            return np.array([name in ("undo", "submit") or
                             self.space_.why_illegal(config, name, value, ctx) is None
                             for name, value in self.catalog], dtype=np.int8)
        key = ("mask", config, tuple(sorted(self.sizes.items())), getattr(self.target, "name", None))
        mask = self.evaluator.remember(key, legality).copy()
        for i, (name, _) in enumerate(self.catalog):
            if name == "undo":
                mask[i] = bool(self.history)
        self._mask = mask
        return mask.copy()

    def _obs(self) -> dict:
        ev = self.state.evaluation
        obs = {"config": self.task.encode_config(self.state.config, ev.features, self.sizes,
                                                 self.space_),
               "report": _report_vector(ev.report, self.report_layout),
               "perf": self._perf(ev), "action_mask": self.action_mask()}
        if self.mode == "text":
            obs["program"] = _ascii(self.state.program.text)
            obs["report_text"] = _ascii(ev.report.render())
        return obs

    def _perf(self, ev: Evaluation) -> np.ndarray:
        m = ev.measurement if ev.measured else None
        vec = np.array([math.log1p(m.tflops) if m else 0.0, m.frac_roofline if m else 0.0,
                        m.frac_anchor if m else 0.0, self.best_frac], dtype=np.float32)
        return np.clip(np.nan_to_num(vec, nan=0.0), 0.0, 1e6)

    def _info(self, act: Action | None, event, error: str | None = None) -> dict:
        ev = self.state.evaluation
        info = {"shape": self.case.name, "sizes": dict(self.sizes),
                "action": act.label() if act else None, "error": error, "internal_error": False,
                "report": ev.report.to_dict(), "report_text": ev.report.render(),
                # {} rather than None when absent: a key keeps one type across steps and
                # envs, as Gymnasium's vector envs need to batch infos
                "measurement": ev.measurement.to_dict() if ev.measurement else {},
                "correctness": ev.correctness or {}, "failure": ev.error, "failure_message": ev.message,
                "action_mask": self.action_mask(), "program": self.state.program.text,
                "best_frac_anchor": self.best_frac, "reward_terms": dict(self.reward_fn.last),
                # this step submitted the program: `submit()`, or implicitly at the step
                # limit (`implicit_submit`); `submit_reward`: what submitting paid
                "submitted": False, "implicit_submit": False, "submit_reward": 0.0,
                # NaN where the tables never measured the shape (a float either way)
                "best_known_frac_anchor": (self.best_known or {}).get("frac_anchor", math.nan),
                "regret": regret(self.best_frac, self.best_known)}
        info["triton"] = ev.triton  # from the step's analysis: generated once per program
        return info

    def render(self):
        if self.render_mode != "ansi":
            return None
        ev = self.state.evaluation
        perf = (f"{ev.measurement.tflops:.0f} TFLOP/s ({ev.measurement.frac_anchor:.2f}x library)"
                if ev.measured else "unmeasured")
        return f"step {self.steps} on {self.case.name}: {perf}\n{ev.report.render()}\n"

    def close(self):
        """Stop the worker processes this environment started (the shared interpreter
        worker once its last environment closes)."""
        if self._owns_evaluator and getattr(self, "evaluator", None) is not None:
            self.evaluator.close()


def _require_cuda() -> None:
    """`measure="gpu"` times kernels on this machine's GPU: without one, every program
    would be scored as a failure, so the environment is refused when it is made."""
    import torch
    if not torch.cuda.is_available():
        raise ValueError('measure="gpu" needs a CUDA GPU on this machine and torch finds none '
                         f"(torch {torch.__version__}); use measure=\"model\" (the cost model) "
                         'or measure="table" (measurements recorded on an H200)')


def _contains(space, action) -> bool:
    try:
        return bool(space.contains(action))
    except Exception:  # noqa: BLE001 - an object the space cannot even compare
        return False


def _label(action) -> str:
    return action if isinstance(action, str) else repr(action)[:200]


def _short(value) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _ascii(text: str) -> str:
    text = text.encode("ascii", "replace").decode("ascii")
    text = "".join(ch if ch in PRINTABLE else "?" for ch in text)
    return text[:MAX_TEXT]


def _report_vector(report, layout: ReportLayout | None = None) -> np.ndarray:
    """The report's numeric encoding in `layout` (generic slots alone by default), clipped
    into the observation space; if the encoder fails on a violation (an element coordinate
    it cannot read), the same encoding without the element, rather than an exception."""
    layout = layout or ReportLayout()
    try:
        vec = layout.encode(report)
    except Exception as e:  # noqa: BLE001 - a checker bug must not end the agent's run
        log.warning("the invariant report could not be encoded (element left out): %s: %s",
                    type(e).__name__, e)
        vec = layout.encode(report, element=False)
    return np.clip(np.nan_to_num(vec, nan=0.0), 0, 1e6).astype(np.float32)
