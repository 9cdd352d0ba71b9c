"""An episode as a walk through the tree of programs that `undo` makes of the environment.

The model-based and tree search agents (`bo`, `mcts`) move between programs: forward by
a transformation, back by `undo`, to the start by `reset` (which takes no env step). A
`Walker` keeps what such an agent needs to stay within its budget: the actions since the
last reset (the env's own undo history, mirrored), the configuration and measured
fraction of the library at each of them (`ConfigView`, read from observations), the
best program seen and the actions from a reset that reach it.

The budget binds every env step, undo and submit included: a step is taken only when
it leaves room to return to the best program seen (undo back along the path to it, or
reset and replay its actions) and to submit it, so `finish` always can.
"""

from __future__ import annotations

import math

from argus_env.envs.record import EpisodeRecord, Recorder

from .configs import ConfigView


class Walker:
    """An agent's position in the environment, its record and its budget."""

    def __init__(self, env, agent: str, budget: int, seed: int, shape: str | None, progress):
        self.env, self.budget, self.seed, self.shape = env, budget, seed, shape
        self.progress = progress
        self.view = ConfigView(env)
        self.rec = Recorder(env, agent, seed)
        self.path: list[int] = []        # transformations since the last reset
        self.configs: list[tuple] = []   # the configuration after each prefix of `path`
        self.known: dict[tuple, float] = {}   # configuration -> fraction of the library (0: unmeasured)
        self.best_path: list[int] = []
        self.best_config: tuple = ()
        self.best_frac = -1.0
        self.base_frac = 0.0
        self.obs = None
        self.info: dict = {}             # the env's info after the last reset or step
        self.started = False

    # ------------------------------------------------------------ moves
    def reset(self) -> None:
        """Back to the baseline program (no env step)."""
        opts = {"shape": self.shape} if self.shape else None
        self.obs, info = self.env.reset(seed=self.seed, options=opts)
        self.info = info
        if not self.started:
            self.rec.start(info)
            self.shape = self.shape or (info["shape"] if info["shape"] != "custom" else None)
            self.started = True
        else:
            self.rec.restart(info)
        self.path, self.configs = [], [self.view.decode(self.obs)]
        self.base_frac = self.frac
        self._note()

    def step(self, action: int) -> bool:
        """Take `action` (a legal transformation or undo); True when the env took it."""
        before = self.config
        self.obs, reward, term, trunc, info = self.env.step(action)
        self.info, self.reward = info, float(reward)
        self.rec.step(action, reward, info)
        if self.progress:
            self.progress(self.rec.rec)
        if info["error"] is not None:
            return False
        if action == self.view.undo:
            self.path.pop()
            self.configs.pop()
        else:
            self.path.append(action)
            self.configs.append(self.view.decode(self.obs, self.view.after(before, action)))
            self._note()
        return True

    def _note(self) -> None:
        self.known.setdefault(self.config, self.frac)
        if self.frac > self.best_frac:
            self.best_frac, self.best_path = self.frac, list(self.path)
            self.best_config = self.config

    def goto(self, target: list[int]) -> bool:
        """Move to the program `target` (actions from a reset) the cheaper way: undo to
        the longest common prefix and step down, or reset and step down. False when a
        step was refused or the budget had no room for one."""
        common = _common(self.path, target)
        if len(target) < len(self.path) - common + len(target) - common:
            self.reset()
            common = 0
        while len(self.path) > common:
            if not self.fits(self.path[:-1]) or not self.step(self.view.undo):
                return False
        for a in target[common:]:
            if not self.obs["action_mask"][a] or not self.fits(self.path + [a]) or not self.step(a):
                return False
        return True

    def finish(self) -> EpisodeRecord:
        """Return to the best program seen and submit it."""
        self.goto(self.best_path)
        if self.left() >= 1:
            self.obs, reward, term, trunc, info = self.env.step(self.view.submit)
            self.rec.step(self.view.submit, reward, info)
            if self.progress:
                self.progress(self.rec.rec)
        return self.rec.rec

    # ------------------------------------------------------------ budget
    def left(self) -> int:
        return self.budget - self.rec.rec.env_steps

    def travel(self, target: list[int]) -> int:
        """Env steps from here to the program `target` (see `goto`)."""
        common = _common(self.path, target)
        return min(len(target), len(self.path) + len(target) - 2 * common)

    def back(self, path: list[int]) -> int:
        """Env steps from the program `path` back to the best program seen."""
        common = _common(path, self.best_path)
        return min(len(self.best_path), len(path) + len(self.best_path) - 2 * common)

    def fits(self, then: list[int], steps: int = 1) -> bool:
        """Whether `steps` more env steps, ending at the program `then`, leave room to
        return to the best program and submit it."""
        return self.rec.rec.env_steps + steps + self.back(then) + 1 <= self.budget

    # ------------------------------------------------------------ what is here
    @property
    def config(self) -> tuple:
        return self.configs[-1]

    @property
    def frac(self) -> float:
        """This program's fraction of the library anchor (0: not measured)."""
        return float(self.obs["perf"][2])

    def gain(self, frac: float, broken: float) -> float:
        """Log throughput gain of a program over the baseline (`broken` when unmeasured)."""
        if frac <= 0 or self.base_frac <= 0:
            return broken
        return math.log(frac / self.base_frac)

    def legal(self) -> list[int]:
        return self.view.transforms(self.obs["action_mask"])


def _common(a: list[int], b: list[int]) -> int:
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return n
