"""The configuration an observation describes, named the way the catalog's actions name it.

The search agents that reason about configurations (`bo`, `mcts`) see a program as a
choice per transformation: `tile_m` is 128, `tma` is True, `stages` is still the
baseline's None. They read it from the observation, never from the environment's state:
the first block of `obs["config"]` holds one code per configuration field
(`Task.encode_config`), and each catalog action `name(value)` sets one field to `value`.
The task's published transformation declarations (`task.space.transforms`: name, field,
values) say which field each name sets; `Task.encode_config` itself gives each value's
code, so a task that encodes its fields its own way is read its own way.

    view = ConfigView(env)
    config = view.decode(obs)            # ("tile_m", 64), ... as a tuple of values
    view.moves(config, target)           # the actions that turn one into the other
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

SPECIAL = ("undo", "submit")
#: two codes closer than this are one value (the observation holds float32)
TOLERANCE = 1e-5


class ConfigView:
    """Decodes observations into configurations (one value per transformation name, in
    catalog order) and names the catalog actions between two configurations."""

    def __init__(self, env):
        core = env.unwrapped
        task = core.task
        self.catalog: list[tuple[str, Any]] = list(core.catalog)
        self.index = {pair: i for i, pair in enumerate(self.catalog)}
        self.undo, self.submit = self.index[("undo", None)], self.index[("submit", None)]
        space = core.space_                       # the catalog the env plays
        declared = {t.name: t for t in space.transforms}
        self.names: tuple[str, ...] = tuple(dict.fromkeys(
            n for n, _ in self.catalog if n not in SPECIAL))
        fields = task.config_fields(space)
        base = space.baseline()
        self.settable = {n: tuple(declared[n].values) for n in self.names}
        self.slot, self.choices, self.codes = {}, {}, {}
        for name in self.names:
            field = declared[name].field
            self.slot[name] = fields.index(field)
            values = list(self.settable[name])
            if getattr(base, field) not in values:   # e.g. stages=None: Triton's default
                values.insert(0, getattr(base, field))
            codes = np.array([task.encode_config(dataclasses.replace(base, **{field: v}),
                                                 None, {}, space)[self.slot[name]]
                              for v in values],
                             dtype=np.float64)
            self.choices[name], self.codes[name] = tuple(values), codes

    def decode(self, obs: dict, expected: tuple | None = None) -> tuple:
        """The configuration `obs` describes: one value per name (`names`). Where two
        values share a code (an encoding that saturates: RMSNorm's feature tiles of 4096
        and 8192 both read 1.0), the value of `expected` (what the agent's own actions
        should have led to, `after`) is taken when it fits, else the first that fits; a
        code no value fits (a program sent as text) reads as the string "?"."""
        vec = np.asarray(obs["config"], dtype=np.float64)
        out = []
        for k, name in enumerate(self.names):
            fits = [v for v, c in zip(self.choices[name], self.codes[name])
                    if abs(c - vec[self.slot[name]]) < TOLERANCE]
            if expected is not None and expected[k] in fits:
                out.append(expected[k])
            else:
                out.append(fits[0] if fits else "?")
        return tuple(out)

    def as_dict(self, config: tuple) -> dict:
        return dict(zip(self.names, config))

    def moves(self, config: tuple, target: tuple) -> list[int] | None:
        """The catalog actions that set each field where `target` differs from `config`
        (in catalog order), or None when a difference is a value no action sets (the
        baseline's `stages=None`, say: only undo or reset return to it)."""
        out = []
        for name, have, want in zip(self.names, config, target):
            if have == want:
                continue
            if want not in self.settable[name]:
                return None
            out.append(self.index[(name, want)])
        return out

    def after(self, config: tuple, action: int) -> tuple:
        """The configuration `action` leads to from `config`, as far as the action itself
        says (a task's follow-up edits, such as split-K dropping its combine, are not
        foreseen: the next observation has them)."""
        name, value = self.catalog[action]
        return tuple(value if n == name else v for n, v in zip(self.names, config))

    def transforms(self, mask) -> list[int]:
        """The legal transformations of an action mask (no undo, no submit)."""
        return [int(i) for i in np.flatnonzero(mask) if i not in (self.undo, self.submit)]
