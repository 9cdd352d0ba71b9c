"""Evolutionary search over action sequences.

A genome is a short sequence of transformations. Evaluating one resets the environment
to the same shape and applies the sequence (skipping genes the action mask forbids at
that point), costing one env step per applied gene; its fitness is the best fraction of
the library anchor reached along the way, and the prefix that reaches it is what the
agent finally replays and submits. Each generation keeps the elite, fills the
rest by tournament selection, one-point crossover and mutation (replace, insert or
delete a gene), until the step budget is spent; then the best genome is replayed and
submitted. Uses only the environment's public API: reset, step, observations.

The budget binds every env step: a genome takes a step only when that leaves room for
the final replay (of the best prefix so far, or of one of this genome's, at most as
long) and the submit, so the last genome may be cut short, and the episode never takes
more steps than `budget`.

Two options, off by default (the committed leaderboard's episodes replay as they were),
let the search converge on longer budgets: `size_from_budget` sizes the population from
the budget (a fixed population of 8 buys only two or three generations of 100 steps),
and `reuse_fitness` plays no genome twice (by default the elite is played again every
generation, which in table and model modes only repeats figures already known).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from argus_env.envs.record import EpisodeRecord, Recorder


@dataclass
class Args:
    budget: int = 200
    """environment steps over all evaluations, the final replay and submit included"""
    seed: int = 0
    """seeds the environment's reset and every random choice of the search"""
    shape: str | None = None
    """shape name (or None: drawn from the environment's split)"""
    population: int = 8
    """genomes per generation"""
    genome_length: int = 4
    """transformations per genome at the start"""
    elite: int = 2
    """best genomes copied unchanged into the next generation"""
    mutation_rate: float = 0.5
    """chance that a child is mutated"""
    size_from_budget: bool = False
    """derive the population and the elite from the budget (`sized`): about sqrt(budget /
    genome_length) genomes a generation (4 to 16), a quarter of them elite, so a budget
    buys several generations; off: `population` and `elite` as given"""
    reuse_fitness: bool = False
    """remember each genome's fitness and never evaluate one twice (the elite carried
    into the next generation then costs no steps; a child that repeats a remembered
    genome is mutated again, up to 8 times). Exact in table and model modes, where a
    program's figures do not change; off: every genome of every generation is played"""


class _Search:
    def __init__(self, env, args: Args, progress):
        self.env, self.args, self.progress = env, args, progress
        self.rng = np.random.default_rng(args.seed)
        self.rec = Recorder(env, "evolutionary", args.seed)
        catalog = env.unwrapped.catalog
        self.special = {catalog.index(("undo", None)), catalog.index(("submit", None))}
        self.genes = [i for i in range(len(catalog)) if i not in self.special]
        self.submit = catalog.index(("submit", None))
        self.shape = args.shape
        self.started = False
        self.best: list[int] = []     # the best prefix found, its fitness and its env steps
        self.best_fit, self.cost = -1.0, 0
        self.spent = False            # no room for another step before the replay and submit
        self.memo: dict[tuple, float] = {}   # genome -> fitness, with `reuse_fitness`

    def reset(self):
        opts = {"shape": self.shape} if self.shape else None
        obs, info = self.env.reset(seed=self.args.seed, options=opts)
        if not self.started:
            self.rec.start(info)
            self.shape = info["shape"] if info["shape"] != "custom" else self.shape
            self.started = True
        else:
            self.rec.restart(info)
        return obs

    def evaluate(self, genome: list[int], bounded: bool = True) -> tuple[float, int, int]:
        """Apply the genome's legal genes; fitness is the best fraction of the library a
        program along the way reaches (0 for broken or unmeasured ones), with the length
        of the prefix that reaches it and the env steps that prefix takes (masked genes
        take none): submitting after that prefix earns the fitness. `bounded`: stop at
        the first step that would leave no room for the final replay and the submit."""
        obs = self.reset()
        best, at, steps, taken = float(obs["perf"][2]), 0, 0, 0
        for i, g in enumerate(genome):
            if not obs["action_mask"][g]:
                continue
            if bounded and not self.fits(taken):
                self.spent = True
                break
            obs, reward, term, trunc, info = self.env.step(g)
            taken += 1
            self.rec.step(g, reward, info)
            if self.progress:
                self.progress(self.rec.rec)
            if float(obs["perf"][2]) > best:
                best, at, steps = float(obs["perf"][2]), i + 1, taken
        return best, at, steps

    def fits(self, taken: int) -> bool:
        """Whether one more step, the genome's `taken + 1`th, leaves room for the final
        replay (of the best prefix so far, or of one of this genome's, at most as long as
        what it has taken) and the submit."""
        return self.rec.rec.env_steps + 1 + max(self.cost, taken + 1) + 1 <= self.args.budget

    def generation(self, pop: list[list[int]]) -> list[float]:
        """The fitness of each genome the budget leaves room for (fewer than the
        population, the last maybe cut short, when it is spent)."""
        fit = []
        for genome in pop:
            if self.args.reuse_fitness and tuple(genome) in self.memo:
                fit.append(self.memo[tuple(genome)])
                continue
            if not self.fits(0):
                self.spent = True
            if self.spent:
                break
            value, at, steps = self.evaluate(genome)
            if self.args.reuse_fitness and not self.spent:   # a genome cut short is not whole
                self.memo[tuple(genome)] = value
            fit.append(value)
            if value > self.best_fit:
                self.best, self.best_fit, self.cost = list(genome[:at]), value, steps
        return fit

    def random_genome(self) -> list[int]:
        return [int(self.rng.choice(self.genes)) for _ in range(self.args.genome_length)]

    def child(self, pop: list[list[int]], fit: list[float]) -> list[int]:
        kid = self._child(pop, fit)
        for _ in range(8 if self.args.reuse_fitness else 0):
            if tuple(kid) not in self.memo:
                break
            kid = self._mutate(kid)
        return kid

    def _child(self, pop: list[list[int]], fit: list[float]) -> list[int]:
        def pick():
            i, j = self.rng.integers(len(pop), size=2)
            return pop[i] if fit[i] >= fit[j] else pop[j]
        a, b = pick(), pick()
        cut_a, cut_b = int(self.rng.integers(len(a) + 1)), int(self.rng.integers(len(b) + 1))
        kid = (a[:cut_a] + b[cut_b:])[: 2 * self.args.genome_length] or self.random_genome()
        if self.rng.random() < self.args.mutation_rate:
            kid = self._mutate(kid)
        return kid

    def _mutate(self, kid: list[int]) -> list[int]:
        """Replace, insert or delete one gene."""
        kid = list(kid)
        op = self.rng.integers(3)
        pos = int(self.rng.integers(len(kid)))
        if op == 0:
            kid[pos] = int(self.rng.choice(self.genes))
        elif op == 1:
            kid.insert(pos, int(self.rng.choice(self.genes)))
        elif len(kid) > 1:
            kid.pop(pos)
        return kid


def sized(args: Args) -> tuple[int, int]:
    """The population and elite a run uses: as given, or with `size_from_budget` about
    sqrt(budget / genome_length) genomes (4 to 16) and a quarter of them elite."""
    if not args.size_from_budget:
        return args.population, args.elite
    evaluations = max(args.budget / max(args.genome_length, 1), 1.0)
    population = int(np.clip(round(evaluations ** 0.5), 4, 16))
    return population, max(1, population // 4)


def run(env, args: Args, progress=None) -> EpisodeRecord:
    s = _Search(env, args, progress)
    population, elite = sized(args)
    pop = [s.random_genome() for _ in range(population)]
    idle = 0   # generations in a row that took no step
    while True:
        before = s.rec.rec.env_steps
        fit = s.generation(pop)
        idle = idle + 1 if s.rec.rec.env_steps == before else 0
        # no room, or no gene the mask allows (remembered genomes may take a few rounds)
        if s.spent or idle > (2 if args.reuse_fitness else 0):
            break
        order = np.argsort(fit)[::-1]
        pop = [pop[i] for i in order[: elite]] + \
            [s.child(pop, fit) for _ in range(population - elite)]
    s.evaluate(s.best, bounded=False)                    # replay the best prefix ...
    if s.rec.rec.env_steps < args.budget:                # ... and submit where it ends
        obs, reward, term, trunc, info = env.step(s.submit)
        s.rec.step(s.submit, reward, info)
        if progress:
            progress(s.rec.rec)
    return s.rec.rec
