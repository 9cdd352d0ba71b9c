"""Monte-Carlo tree search over transformation sequences, with `undo` walking back up.

`undo` makes the environment a tree: the root is the baseline program, a child is the
program one legal transformation makes. Each iteration selects a node from the root by
UCT (mean value plus `exploration * sqrt(ln N_parent / N_child)`), expands one untried
action there (progressive widening: a node with N visits has at most
`ceil(widening * N ** widening_power)` children, so the tree deepens instead of trying
every one of the ~40 actions at the root), optionally plays `rollout` random legal
steps on from the new program, and backs the iteration's value up the path. The value
of a program is its log throughput gain over the baseline, `log(T / T_baseline)` (the
sum of the env's potential-based rewards along its path), `broken` when it is not
measured (a violated invariant, a failed compile); an iteration's value is the best of
the programs it met. Untried actions are the mask's legal transformations in a seeded
order ranked by the knowledge base's expected gain of each action at that node
(`agents/knowledge/prior.py`; `prior="uniform"`: the seeded random order alone), less
those that lead to a configuration the tree already holds (a transposition: same program,
another order).

Moving between nodes costs env steps: undo to the common ancestor and step down, or
reset (no step) and step down from the root, whichever is fewer. The budget binds every
step (`walk.Walker`): an iteration is played only when it leaves room to return to the
best program and submit it; then the agent does so. Uses only the env's public API.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from argus_env.agents.tracking import trackable
from argus_env.envs.record import EpisodeRecord

from .walk import Walker


@dataclass
class Args:
    budget: int = 50
    """environment steps: moves down the tree, undo, rollouts, the return to the best
    program and the submit, all included"""
    seed: int = 0
    """seeds the environment's reset and the order of untried actions"""
    shape: str | None = None
    """shape name (or None: drawn from the environment's split)"""
    exploration: float = 0.3
    """UCT's exploration constant, in units of log throughput gain"""
    widening: float = 1.0
    """progressive widening: at most ceil(widening * N ** widening_power) children"""
    widening_power: float = 0.5
    """progressive widening's exponent"""
    rollout: int = 0
    """random legal steps played on from each new program (each undone afterwards)"""
    backup: str = "max"
    """a node's value in UCT: "max", the best iteration through it (the search looks for
    one best program, and the env is deterministic), or "mean", UCT's average"""
    broken: float = -1.0
    """value of a program that was not measured, in log throughput gain"""
    prior: str = "knowledge"
    """the order a node's untried actions are expanded in: "knowledge", the knowledge
    base's expected gain of each action there (`agents/knowledge/prior.py`; actions it
    says nothing of after those it expects to gain, before those it expects to lose, ties
    in a seeded random order), or "uniform", a seeded random order"""
    track: bool = False
    """log each step and a summary to W&B (offline by default; agents/tracking.py)"""


@dataclass
class Node:
    path: list[int]                  # actions from the root
    value: float                     # this program's log gain (or `broken`)
    untried: list[int]
    children: list["Node"] = field(default_factory=list)
    visits: int = 0
    total: float = 0.0
    top: float = -math.inf           # the best iteration value through it
    done: bool = False               # nothing left to expand below it


class _Tree:
    def __init__(self, env, args: Args, progress):
        if args.backup not in ("max", "mean"):
            raise ValueError(f"mcts: backup must be 'max' or 'mean', got {args.backup!r}")
        if args.prior not in ("knowledge", "uniform"):
            raise ValueError(f"mcts: prior must be 'knowledge' or 'uniform', got {args.prior!r}")
        self.args = args
        self.w = Walker(env, "mcts", args.budget, args.seed, args.shape, progress)
        self.rng = np.random.default_rng(args.seed)
        self.prior = None
        if args.prior == "knowledge":
            from argus_env.agents.knowledge.prior import ActionPrior
            self.prior = ActionPrior(env)
        self.w.reset()
        self.sizes = dict(self.w.info["sizes"])
        self.root = self.node()
        self.seen = {self.w.config}
        self.nodes = {(): self.root}      # path -> node

    def node(self) -> Node:
        """The node of the program the walker is at."""
        w = self.w
        untried = w.legal()
        self.rng.shuffle(untried)
        if self.prior is not None:   # popped from the end: the best expected gain first
            scores = self.prior.scores(self.sizes, w.view.as_dict(w.config),
                                       w.obs["perf"])
            untried.sort(key=lambda a: scores.get(a, 0.0))   # stable: ties stay shuffled
        return Node(list(w.path), w.gain(w.frac, self.args.broken), untried)

    def widened(self, n: Node) -> bool:
        """Whether `n` may take another child."""
        room = math.ceil(self.args.widening * max(n.visits, 1) ** self.args.widening_power)
        return bool(n.untried) and len(n.children) < room

    def select(self) -> list[Node]:
        """The path from the root to the node to expand, by UCT."""
        n, line = self.root, [self.root]
        while True:
            live = [c for c in n.children if not c.done]
            if self.widened(n) or (n.untried and not live):
                return line
            if not live:
                n.done = True
                return line
            c, use_max = self.args.exploration, self.args.backup == "max"
            n = max(live, key=lambda k: (k.top if use_max else k.total / k.visits) +
                    c * math.sqrt(math.log(n.visits) / k.visits))
            line.append(n)

    def expand(self, n: Node) -> Node | None:
        """Step to one untried action of `n` (the walker is at `n`)."""
        w = self.w
        while n.untried:
            a = n.untried.pop()
            if w.view.after(w.config, a) in self.seen or not w.obs["action_mask"][a]:
                continue
            if not w.fits(w.path + [a]):
                return None
            if not w.step(a):
                continue
            self.seen.add(w.config)
            child = self.node()
            n.children.append(child)
            self.nodes[tuple(child.path)] = child
            return child
        return None

    def rollout(self, value: float) -> float:
        """Random legal steps from here, each undone; the best value met."""
        w, depth = self.w, 0
        start = list(w.path)
        for _ in range(self.args.rollout):
            legal = w.legal()
            if not legal:
                break
            a = int(self.rng.choice(legal))   # the step, the undos back, then home
            if not w.fits(start, steps=depth + 2) or not w.step(a):
                break
            depth += 1
            value = max(value, w.gain(w.frac, self.args.broken))
        for _ in range(depth):
            w.step(w.view.undo)
        return value

    def reachable(self, n: Node) -> bool:
        """Whether the budget has room to go to `n`, expand it and return home."""
        w = self.w   # the way there, one step down and one more step home than from `n`
        return w.fits(n.path, steps=w.travel(n.path) + 2)

    def nearby(self) -> list[Node]:
        """When UCT's choice is out of reach: the best node with untried actions among
        those on the way back to the root from here."""
        path = self.w.path
        line = [self.nodes[tuple(path[:k])] for k in range(len(path), -1, -1)
                if tuple(path[:k]) in self.nodes]
        near = [n for n in line if n.untried and self.reachable(n)]
        if not near:
            return []
        best = max(near, key=lambda n: n.value)
        return [self.nodes[tuple(best.path[:k])] for k in range(len(best.path) + 1)]

    def iterate(self) -> bool:
        """One selection, expansion, rollout and backup; False when none fits."""
        line = self.select()
        leaf = line[-1]
        if leaf.done and leaf is self.root:
            return False
        if not leaf.done and not self.reachable(leaf):
            line = self.nearby()
            if not line:
                return False
            leaf = line[-1]
        if not leaf.done:
            w = self.w
            if not w.goto(leaf.path):
                return False
            child = self.expand(leaf)
            if child is None:
                if leaf.untried:
                    return False                 # out of budget
                leaf.done = not leaf.children
                return True
            line.append(child)
            value = self.rollout(child.value)
        else:
            value = leaf.value
        for n in line:
            n.visits += 1
            n.total += value
            n.top = max(n.top, value)
        return True


@trackable("mcts")
def run(env, args: Args, progress=None) -> EpisodeRecord:
    t = _Tree(env, args, progress)
    while t.w.left() > 1 and t.iterate():
        pass
    return t.w.finish()
