"""The symbolic checker: abstract interpretation of a DSL program into z3 formulas.

`check(program, sizes, task)` runs the program once symbolically: program ids and loop
iterations are z3 variables constrained by the grid and the loop bounds, tile elements
are the axis variables of `values.AXES`, problem sizes are the episode's concrete
integers. Every op applies its rule from `SEMANTICS.md`; every implicit or explicit
assertion becomes an existential z3 query for a violation, whose model is the
counterexample. Whole-program properties (exactly-once writes, bijective tile maps,
coverage of reductions across program instances) are checked afterwards over the
recorded writes (`whole.py`). Nothing enumerates the problem: the number of queries
depends on the program, not on the sizes. The task's invariant pack (`..pack`) adds its
rules at the hooks it declares; `pack` is None for a task without one.
"""

from __future__ import annotations

import sys
import time
from dataclasses import replace

import z3

from ...dsl.program import Program
from ...dsl.semantic import launches
from ...ir import nodes as ir
from ...ir.printer import print_expr
from ..isolated import Scope, back
from ..pack import pack_of
from ..report import CheckTimeout, CheckUnsupported, InvariantReport, Obligation, Violation
from ..z3guard import exclusive
from .digits import digits_form, selectors, twins
from . import floats
from .loops import run_loop
from .radix import radix_form
from .rules import effect, expr_rule
from .solver import Var, Vars, const_value, interval, tdiv, tmod
from .state import Frame, Write, owner, stmt_text
from .values import (AXES, SV, And, Not, Or, Text, _app_arg, _app_decl, _ast_id, _ast_kind,
                     _decl_kind, _num_args, axis_ranges, evaluate, free_names, int_var,
                     is_int, merge, simplify, substitution)
from .whole import check_writes

DEFAULT_NUM_SMS = 132  # an H200
#: the least time a solver query is given: with less left of the step's budget the check
#: is refused (`CheckTimeout`) instead of run with a limit that can only end undecided
QUERY_FLOOR_MS = 200
#: models asked for one counterexample while the pack finds them unrealisable
REALISE_TRIES = 4
#: the work a query's first try may do, by z3's SMT core alone (`Checker.ask`), in z3's
#: resource units (`rlimit`, counted by the solver, not by the clock, so that which solver
#: answers, and with which model, is the same on a loaded machine); about 10 ms of search.
#: 0: no first try
FAST_RLIMIT = 20_000
#: the work the digits form of a query proven for all sizes may do (`_digits_unsat`):
#: about 10 ms of search, per case where it is split
DIGITS_RLIMIT = 100_000
#: the work the radix form of a query may do (`_radix_unsat`): at most about half a second
#: of search, most queries settle in a few milliseconds. Two-instance queries of a grouped
#: tile map whose last group is short (a remainder by its row count, no digit) can need
#: more than the fast try's: 1,600 such maps (1 to 10,007 blocks, GROUP_M 2 to 16, 1 to
#: 112 column tiles) were all proven within 50,000. A grouped tile map behind a scatter
#: through loaded data (rows written at positions a routing table maps: the same
#: two-instance map under uninterpreted functions) needed up to 340,000 over 200 routed
#: programs of env_speed's random walks (seeds 0-4); past the limit it went to the default
#: solver, which took 0.1 s to over 5 s (its timeout) on such queries, as incidental facts
#: steer it (`isolated`). A limit of work, not time: the same answer on a loaded machine
RADIX_RLIMIT = 1_000_000
#: the work the default solver may do on a query of a counterexample search's first pass
#: (`solve_real`, `source` "fast"; about a quarter to half a second). Its `unknown` is never
#: a verdict: that pass is made again with the default solver's models, which asks the
#: query again with the whole budget. A work limit, not the clock, so that the first pass
#: ends the same way on a loaded machine, and a query the default solver cannot settle
#: costs the clock's budget once, not twice (such a query took 5 s, then 0.07 s when asked
#: again). The most such a query did over the checker latency benchmarks' programs and
#: corpora and 280 programs of env_speed's random walks: 270,000
SEARCH_RLIMIT = 5_000_000


def fast_solver(scope: Scope) -> z3.Solver:
    """z3's SMT core without the default solver's tactic preprocessing: one per check,
    each query in a scope of its own (push, ask, pop), so the core is set up once. It
    leaves Ctrl-C to Python (`ctrl_c` off): its `unknown` is never an interruption (the
    SMT core names a timeout, an exhausted resource limit and a Ctrl-C alike,
    "canceled"), and a Ctrl-C during its short query raises `KeyboardInterrupt` as the
    query returns."""
    s = scope.solver(simple=True)
    s.set("ctrl_c", False)
    s.set("rlimit", FAST_RLIMIT)
    return s


def _interrupted(reason: str) -> None:
    """z3 answers Ctrl-C by cancelling the query: an interruption, not an answer."""
    if "interrupted" in reason or "canceled" in reason:
        raise KeyboardInterrupt(f"invariant check interrupted ({reason})")


class Checker:
    """One symbolic execution of one program at one problem size."""

    def __init__(self, program: Program, sizes: dict[str, int], task=None,
                 num_sms: int = DEFAULT_NUM_SMS, timeout_ms: int = 5000,
                 deadline: float | None = None, target=None,
                 for_all: dict[str, tuple[int, int]] | None = None,
                 for_all_elements: int | None = None):
        self.program = program
        self.kernel = program.kernel
        if task is not None and hasattr(task, "program_sizes"):
            sizes = task.program_sizes(program, sizes)
        self.sizes = {k: int(v) for k, v in sizes.items()}
        #: the extent of every tensor dim: the sizes and the dims naming a constant
        self.extents = self.kernel.extents(self.sizes)
        #: sizes proven for every value in a range at once (`for_all`: name -> [lo, hi)),
        #: each a z3 variable; the others are the integers of `sizes`
        self.for_all = dict(for_all or {})
        missing = [s for s in self.kernel.sizes if s not in self.sizes]
        if missing:
            raise ValueError(f"check: no value for problem size {missing[0]}; give "
                             f"{list(self.kernel.sizes)}")
        self.task = task
        self.pack = pack_of(task)
        self.memo: dict = {}  # the pack's rules keep their per-check state here
        self.num_sms = num_sms
        self.target = target  # argus_env.target.Target: the MMA default of counterexamples
        self.timeout_ms = timeout_ms
        self.deadline = deadline  # time.monotonic() past which the check gives up
        self.vars = Vars()
        for ax in AXES:
            self.vars.vars[ax.decl().name()] = Var(ax, "axis", 0, None)
        self.size_terms = {}
        for name, value in self.sizes.items():
            if name in self.for_all:
                lo, hi = self.for_all[name]
                v = z3.Int(f"size_{name}")
                self.vars.vars[v.decl().name()] = Var(v, "size", lo, hi)
                self.size_terms[name] = v
            else:
                self.size_terms[name] = z3.IntVal(value)
        self.extent_terms = {**self.size_terms,
                             **{d: z3.IntVal(n) for d, n in self.kernel.const_dims.items()}}
        #: proven for all sizes, integer ranges (`rules.no_wrap`) are asked only of sizes
        #: at which every tensor has fewer than `for_all_elements` elements (the
        #: precondition of such a proof, `check.for_all_covers`): each size's largest
        #: value there (by the tensors' fixed extents), and those facts
        self.size_caps: dict[str, int] = {}
        self.element_facts: list = []
        for p in self.kernel.tensors if self.for_all and for_all_elements else ():
            free = [d for d in p.dims if d in self.for_all]
            if not free:
                continue
            fixed = 1
            for d in p.dims:
                if d not in self.for_all:
                    fixed *= max(int(self.extents[d]), 1)
            for d in free:
                name = self.size_terms[d].decl().name()
                cap = (for_all_elements - 1) // fixed
                self.size_caps[name] = min(self.size_caps.get(name, cap), cap)
            prod = z3.IntVal(fixed)
            for d in free:
                prod = prod * self.size_terms[d]
            self.element_facts.append(prod < for_all_elements)
        self.frames: list[Frame] = []
        self.base_sizes: list[z3.BoolRef] = []  # the ranges of sizes proven for all values
        self.base: list[z3.BoolRef] = []
        self.report = InvariantReport(program.name, program.hash)
        self.writes: list[Write] = []
        #: the writes of the launches that have finished: what a later launch reads from
        #: a workspace carries their coverage (`memory.carried_coverage`)
        self.memory: list[Write] = []
        self.past_linear: list[tuple] = []  # the grid-stride links of finished launches
        self.past_vars: frozenset = frozenset()  # variables of finished launches
        self.quiet = 0
        self.seen: set[tuple[str, int]] = set()
        self.stmt: ir.Stmt | None = None
        self.env: dict[str, SV] = {}
        self.grid: list[int | None] = []   # launch extents (None: depends on a size)
        self.grid_terms: list = []         # the same as z3 terms
        self.pids: list[z3.ArithRef] = []
        self.ufs: dict[str, z3.FuncDeclRef] = {}
        self._pos_cache: dict = {}
        self.linear: list[tuple] = []  # grid-stride loops: (pid, t, v, step, link)
        self._qnames: frozenset = frozenset()
        self.profile: list | None = None  # (seconds, line, result) per query when a list
        self._asked: dict = {}  # id(model) -> (model, constraints) of the latest answers
        self._texts: dict = {}  # id(IR node) -> (node, its DSL text): `text`
        self._printed: dict = {}  # the printer's memo of subexpressions (`print_expr`)
        self._link_names: dict = {}  # id(grid-stride link) -> (link, its variables' names)
        #: the check's own z3 context: every query is asked there (`isolated`)
        self.scope = Scope()
        #: the radix forms' own context (`_radix_unsat`): the terms a rewrite makes would
        #: renumber the check's, and with them the default solver's later searches
        self._forms = Scope()
        self._fast: z3.Solver | None = None  # the first try of every query (`ask`)
        self._fast_budget: int | None = None  # the timeout it was last given

    # ------------------------------------------------------------ queries
    def path(self) -> list[z3.BoolRef]:
        return self.base_sizes + self.base + [c for f in self.frames for c in f.cons]

    def query_timeout_ms(self) -> int:
        """The solver's budget for one query: `timeout_ms`, less if the deadline is near;
        raises `CheckTimeout` once less than `QUERY_FLOOR_MS` is left before it."""
        if self.deadline is None:
            return self.timeout_ms
        left_ms = (self.deadline - time.monotonic()) * 1000
        if left_ms < min(QUERY_FLOOR_MS, self.timeout_ms):
            raise CheckTimeout(f"the invariant checker did not reach a verdict within the "
                               f"step's time budget ({self.report.queries} solver queries "
                               f"made): the program is refused, not judged; a simpler "
                               f"program checks faster", self._line())
        return max(1, min(self.timeout_ms, int(left_ms)))

    def solve(self, constraints, what: str | None = None, realise: bool = False,
              decide: bool = False, source: str = "") -> z3.ModelRef | None:
        """A model of `constraints`, or None when they are unsatisfiable. An undecided
        query also answers None, and records an undecided obligation (`what`, or the rule
        that asked), so that the report cannot be `proven`. `realise`: the model goes to
        the pack's `exclude` hook (`ask`). `decide`: the caller asks only whether there is
        a model (it reads none of it), so the fast try's `sat` is the answer even where
        the pack realises counterexamples. `source` "fast" (`solve_real`, which judges
        every model it takes): the fast try's model is taken even where the pack
        realises counterexamples."""
        constraints = list(constraints)
        if constraints and _false(constraints[-1]):
            # the condition asked about (a violation's, last) is false by simplification
            # alone (a tag both operands share, a guard the sizes decide): no model, and
            # no query (most of a check's conditions are: 590 of 978 over ten seeded bugs
            # of a routed kernel)
            return None
        self._qnames = self._var_names(constraints) if self.linear or self.past_linear \
            else frozenset()
        facts = [*constraints, *self._links(self._qnames)]
        if self.pack is not None and self.pack.axioms is not None:
            facts += self.pack.axioms(self, constraints)  # e.g. a host step's postconditions
        t0 = time.perf_counter()
        # with a pack that realises counterexamples, every model comes from the default
        # solver (`ask`): the models of other queries choose the terms later queries
        # are made of, and so which models the realiser is given
        realise = realise or (self.pack is not None and self.pack.exclude is not None
                              and not decide)
        r, model = self.ask(facts, what or _asker(), realise, source)
        if self.profile is not None:
            self.profile.append((time.perf_counter() - t0, self._line(), str(r)))
        if r != z3.sat:
            return None
        if len(self._asked) >= 16:
            self._asked.pop(next(iter(self._asked)))
        self._asked[id(model)] = (model, constraints)
        return model

    def refuted(self, constraints) -> bool:
        """Whether `constraints` (with the query's links and the pack's facts, as `solve`
        asks them) are shown unsatisfiable by the fast try alone (`ask`: the SMT core,
        `FAST_RLIMIT`), counted as one query. For obligations asked together, one query
        for the disjunction of their conditions (`coverage.exactly_once`): unsatisfiable,
        each of them is. A model or no answer shows nothing and records nothing: the
        caller asks each obligation as it would have."""
        constraints = list(constraints)
        if constraints and _false(constraints[-1]):
            return True
        if FAST_RLIMIT <= 0:
            return False
        names = self._var_names(constraints) if self.linear or self.past_linear \
            else frozenset()
        facts = [*constraints, *self._links(names)]
        if self.pack is not None and self.pack.axioms is not None:
            facts += self.pack.axioms(self, constraints)
        budget = self.query_timeout_ms()
        self.report.queries += 1
        t0 = time.perf_counter()
        facts = self.scope.into(facts)
        if self._fast is None:
            self._fast = fast_solver(self.scope)
            self._fast_budget = None
        fast = self._fast
        if budget != self._fast_budget:
            fast.set("timeout", budget)
            self._fast_budget = budget
        fast.push()
        try:
            fast.add(facts)
            r = fast.check()
        finally:
            fast.pop()
        if r == z3.unknown:
            self._fast = None  # a cancelled search: the next query starts a fresh solver
        if self.profile is not None:
            self.profile.append((time.perf_counter() - t0, self._line(), str(r)))
        return r == z3.unsat

    def none_of(self, conds, shape=()) -> bool:
        """Whether no condition of `conds` (violations `find` would ask, at the current
        point over a tile of `shape`) can hold: their disjunction refuted by one query
        (`refuted`), so that each `find` would answer None. Conditions false by
        simplification are left out; with fewer than two left, False (each is asked as it
        is). In a quiet pass True: its `find`s answer None without asking."""
        if self.quiet:
            return True
        live = [c for c in conds if not _false(c)]
        if len(live) < 2:
            return False
        return self.refuted([*self.path(), *axis_ranges(shape), Or(*live)])

    def solve_real(self, constraints, what: str | None = None) -> z3.ModelRef | None:
        """`solve` for a counterexample: while the task's pack says the model is one no
        input realises (`InvariantPack.exclude`), ask again, at most `REALISE_TRIES`
        models: with the facts it adds that hold of every input (then no model means no
        counterexample: None), or else with the inputs the model fixed excluded (then no
        model means none was realised). The last model when none is realised (a violation
        of it is then undecided, not reported), None when there is none.

        The models are first the fast try's (`ask`, `source` "fast": no query of the
        default solver, the slowest of a counterexample's). Where that search ends
        without a model some input realises, it is made again as it always was, with
        the default solver's models: so a counterexample found that way is still found,
        and one more may be."""
        rule = self.pack.exclude if self.pack is not None else None
        if rule is None:
            return self.solve(constraints, what)
        undecided = len(self.report.undecided)
        m, real = self._realise(list(constraints), what, rule, "fast")
        if real or (m is None and len(self.report.undecided) == undecided):
            return m  # realised, or no model (of the query, or with facts of every input)
        del self.report.undecided[undecided:]  # a query of that search: asked again below
        return self._realise(list(constraints), what, rule, "")[0]

    def _realise(self, constraints, what, rule, source: str) -> tuple:
        """The search of `solve_real` with the models of `source` (`solve`): (the model,
        whether an input realises it), (None, False) when there is none."""
        m = self.solve(constraints, what, True, source=source)
        for _ in range(REALISE_TRIES - 1):
            if m is None:
                return None, False
            out = rule(self, m)
            if out is None:
                return m, True
            implied, narrowing = out
            if implied:  # true of every input: the query is the same, only sharper
                constraints = constraints + list(implied)
                m = self.solve(constraints, what, True, source=source)
                continue
            if narrowing is None:
                return m, False
            again = self.solve(constraints + [narrowing], what, True, source=source)
            if again is None:
                return m, False
            constraints, m = constraints + [narrowing], again
        if m is not None and source == "fast":  # the last model, judged here
            return m, rule(self, m) is None
        return m, False

    def query_of(self, model) -> list | None:
        """The constraints a recent model of `solve` answered (a pack reads the host
        step's values the model fixes there), or None."""
        hit = self._asked.get(id(model))
        return hit[1] if hit is not None and hit[0] is model else None

    def ask(self, facts, what: str, realise: bool = False, source: str = "") \
            -> tuple[z3.CheckSatResult, z3.ModelRef | None]:
        """Whether `facts` hold together, and a model of them when they do: counted as one
        query; `unknown` becomes an undecided obligation named `what`.

        The query is asked in the check's own z3 context (`self.scope`, `isolated`): the
        facts translated there, every solver with fixed seeds, the model translated back;
        so its answer depends on the query alone, not on what the process did before.

        It goes first to z3's SMT core alone (`fast_solver`, in a scope of its own), for at
        most `FAST_RLIMIT` units of work: most of a check's queries are small linear ones
        it answers in well under a millisecond, where the default solver's preprocessing
        costs more than the answer. Its `sat` or `unsat` is the answer (the same z3
        decides it); what it leaves `unknown` (its work limit, a theory it cannot decide)
        is asked of its rewritten forms (`_radix_unsat`, `_digits_unsat`: `unsat` only)
        and then of the default solver with the query's whole budget (`SEARCH_RLIMIT` in
        a counterexample search's first pass, which is asked again where it ends
        `unknown`), and only that solver's `unknown` leaves the obligation undecided (in a
        counterexample search, `source` "fast", whose queries mostly have models, the
        digits form, split into cases, comes after the default solver, where it leaves the
        query `unknown`; the radix form, one try within `RADIX_RLIMIT`, comes first in
        every search: a two-instance query of a grouped tile map that has no model is
        settled there, not by the default solver's clock). With `realise` (a model the
        pack's `exclude` hook judges: a pack may search for the inputs that realise the
        facts a model fixes), the fast try answers only `unsat`: a model comes from the
        default solver, whose models those searches are made for (unless `source` is
        "fast": `solve_real` judges the fast try's models itself, and searches again
        with the default solver's where it finds none realised). z3 answers Ctrl-C
        during the default solver's query by cancelling it (`unknown`): that is re-raised
        as `KeyboardInterrupt`, never taken for an answer (in a first pass, whose work
        limit cancels too, z3 leaves Ctrl-C to Python, as in the fast try)."""
        budget = self.query_timeout_ms()
        self.report.queries += 1
        facts = self.scope.into(facts)  # one formula of the check's own context
        if FAST_RLIMIT > 0:
            if self._fast is None:
                self._fast = fast_solver(self.scope)
                self._fast_budget = None
            fast = self._fast
            if budget != self._fast_budget:  # the work limit ends it long before, but a bound
                fast.set("timeout", budget)  # (set when it changes: each call costs a bit)
                self._fast_budget = budget
            fast.push()
            try:
                fast.add(facts)
                r = fast.check()
                model = fast.model() if r == z3.sat else None
            finally:
                fast.pop()
            if r == z3.unsat or (r == z3.sat and (not realise or source == "fast")):
                return r, back(model) if model is not None else None
            forms = r == z3.unknown
            if forms:
                self._fast = None  # a cancelled search: the next query starts a fresh solver
                # the rewritten forms show only `unsat`: a counterexample search (`source`
                # "fast"), whose queries have models, asks the digits form (case splits)
                # after the default solver; the radix form is one bounded try
                if self._radix_unsat(facts) or \
                        (source != "fast" and self._digits_unsat(facts)):
                    return z3.unsat, None
            budget = self.query_timeout_ms()
        else:
            forms = False
        s = self.scope.solver()
        s.set("timeout", budget)
        if source == "fast":  # ended by `SEARCH_RLIMIT` (so its "canceled" is no Ctrl-C)
            s.set("ctrl_c", False)
            s.set("rlimit", SEARCH_RLIMIT)
        s.add(facts)
        r = s.check()
        if r == z3.unknown:
            reason = s.reason_unknown()
            if source != "fast":
                _interrupted(reason)
            if forms and source == "fast" and self._digits_unsat(facts):
                return z3.unsat, None
            self.undecided(what, f"the solver answered unknown: {reason}")
            return r, None
        return r, back(s.model()) if r == z3.sat else None

    def unsat_each(self, common, extras) -> list[bool]:
        """For each of several queries `common + extra` (one per tile of an enumerated
        combine, say), whether it is shown unsatisfiable by one incremental SMT core:
        `common` asserted once, each extra in a scope of its own, with the fast try's work
        limit per query. Only `unsat` counts (each is counted as a query); a query shown
        nothing here is for the caller to ask as it is (`solve`), which then answers it as
        before. Where the task's pack adds facts per query or realises counterexamples, or
        a grid-stride loop's links would be needed, nothing is shown here."""
        if (self.pack is not None and (self.pack.axioms is not None
                                       or self.pack.exclude is not None)) \
                or self.linear or self.past_linear or FAST_RLIMIT <= 0:
            return [False] * len(extras)
        budget = self.query_timeout_ms()
        out = []
        s = None
        for extra in extras:
            if s is None:
                s = fast_solver(self.scope)
                s.set("timeout", budget)
                s.add(self.scope.into(common))
            self.report.queries += 1
            s.push()
            try:
                s.add(self.scope.into(extra))
                r = s.check()
            finally:
                s.pop()
            out.append(r == z3.unsat)
            if r == z3.unknown:
                s = None  # a cancelled search: a fresh solver for the next
        return out

    def _radix_unsat(self, facts) -> bool:
        """Whether the facts the fast try left undecided are proven unsatisfiable once the
        divisions and remainders of one variable by a chain of constants are written in its
        mixed-radix digits (`radix`: the same models, a linear formula), by z3's SMT core
        with `RADIX_RLIMIT` (a work limit, not the clock: the same answer on a loaded
        machine). Only `unsat` is taken: a model, or no answer, is asked of the default
        solver as before. (The rewrite is made in a context of the check's own, `_forms`,
        apart from the one of its queries: a check makes the same terms in every process,
        and the rewrites leave the numbering of its queries' terms as it was.)"""
        rewritten = radix_form(self._forms.into([facts]))
        if rewritten is None:
            return False
        s = fast_solver(self._forms)
        s.set("rlimit", RADIX_RLIMIT)
        s.set("timeout", self.query_timeout_ms())
        s.add(rewritten)
        return s.check() == z3.unsat

    def _digits_unsat(self, facts) -> bool:
        """Proven for all sizes: whether the facts are shown unsatisfiable once each index
        divided by multiples of a tile count is written in its digits (`digits`: a linear
        formula with every model of the facts), by z3's SMT core with `DIGITS_RLIMIT` per
        try. Only `unsat` is taken, as for `_radix_unsat`."""
        if not self.for_all:
            return False
        sizes = {self.size_terms[n].decl().name() for n in self.for_all}
        got = digits_form(facts, self._at_least_one, sizes.__contains__)
        if got is None:
            return False
        rewritten, tops = got

        s = fast_solver(self.scope)

        def unsat(f, *extra) -> bool:
            # each try its own work limit (set anew: the limit counts from where it is set);
            # what the SMT core leaves open is asked of the default solver (its
            # preprocessing) under the same limit
            for solver in (s, None):
                if solver is None:
                    solver = self.scope.solver()
                solver.set("rlimit", DIGITS_RLIMIT)
                solver.set("timeout", self.query_timeout_ms())
                solver.push()
                try:
                    solver.add(f, *extra)
                    r = solver.check()
                finally:
                    solver.pop()
                if r != z3.unknown:
                    return r == z3.unsat
            return False

        if unsat(rewritten):
            return True
        # two instances of a tile map: where their top digits (a grouped order's group)
        # are shown equal, the second is replaced by the first (the same models); then the
        # query is split on the values of a bounded divisor (the group's width), each case
        # with the divisor replaced by its value and simplified: unsatisfiable in every
        # case, and where the divisor has none of those values, it is unsatisfiable
        pins = [(b, a) for a, b in twins(tops) if unsat(rewritten, a != b)]
        base = z3.substitute(rewritten, *pins) if pins else rewritten
        cases = selectors(base)
        if not cases:
            return bool(pins) and unsat(base)
        term, values, conds = cases[0]
        for c in values:
            value = z3.IntVal(c, base.ctx)
            if not unsat(z3.simplify(z3.substitute(base, (term, value))), term == value):
                return False
        # none of the values: every condition comparing the divisor with one is false
        false = z3.BoolVal(False, base.ctx)
        rest = z3.simplify(z3.substitute(base, *[(c, false) for c in conds]))
        return unsat(rest, *[term != c for c in values])

    def _at_least_one(self, term) -> bool:
        """Whether `term` (of the check's own context) is at least 1 for every value of
        its variables in their ranges (`interval`, with a memo of its own: z3 ids are
        not shared between contexts)."""
        b = interval(term, _Ranges(self.vars))
        return b is not None and b[0] >= 1

    def undecided(self, what: str, reason: str) -> None:
        """Record an obligation neither proven nor refuted (once per obligation and line)."""
        line = self._line()
        if any(o.line == line and o.what == what for o in self.report.undecided):
            return
        self.report.undecided.append(Obligation(what, line, reason, stmt_text(self.stmt)))

    def _var_names(self, constraints) -> frozenset:
        """Names of the variables occurring in a formula."""
        return frozenset().union(*[free_names(c) for c in constraints])

    def _links(self, names) -> list:
        """For each copy of a grid-stride loop's linear index present in a formula that
        also mentions that copy's program id or iteration counter: v = pid + t*step."""
        out = []
        ordered = None
        for entry in self.linear + self.past_linear:
            pid, t, v, _, link = entry
            hit = self._link_names.get(id(entry))
            if hit is None or hit[0] is not entry:
                hit = self._link_names[id(entry)] = (entry, *(x.decl().name() for x in (v, pid, t)))
            _, vname, pname, tname = hit
            if ordered is None:
                ordered = sorted(names)  # the same order in every process
            for name in ordered:
                if not name.startswith(vname):
                    continue
                suffix = name[len(vname):]
                if pname + suffix in names or tname + suffix in names:
                    if not suffix:
                        out += link
                        continue
                    copy = substitution([(x, int_var(n + suffix))
                                         for x, n in ((pid, pname), (t, tname), (v, vname))])
                    out += [copy(c) for c in link]
        return out

    def _pid_values(self, ev) -> tuple:
        """Program ids of a counterexample; inside a grid-stride loop they follow from the
        linear index when the query did not need them."""
        values = [ev(p) for p in self.pids]
        for pid, t, v, step, _ in self.linear:
            if v.decl().name() in self._qnames and pid.decl().name() not in self._qnames:
                vv = ev(v)
                s = step if isinstance(step, int) else ev(step)
                if vv is not None and s:
                    values[[p.eq(pid) for p in self.pids].index(True)] = vv % s
        return tuple(values)

    def find(self, cond, shape=(), extra=()) -> z3.ModelRef | None:
        """A model of a violation `cond` at the current point, or None if none exists
        (or if this is a quiet pass, whose findings are not reported)."""
        if self.quiet:
            return None
        return self.solve_real([*self.path(), *axis_ranges(shape), *extra, cond])

    def _line(self) -> int:
        return self.stmt.loc.line if self.stmt is not None else 0

    def violate(self, invariant: str, op: str, message: str, model, shape=(),
                expected=None, actual=None, frag=None, view=None, scope=None,
                **extra) -> None:
        """Record a violation (one per invariant and line) with its counterexample.
        `view` renames variables first (the first instance of a two-instance query);
        `scope` gives the scalar variables at the op when it is no longer current."""
        key = (invariant, self._line())
        if self.quiet or key in self.seen:
            return
        self.seen.add(key)
        view = view or (lambda e: e)
        ev = (lambda e: evaluate(model, view(e))) if model is not None else (lambda e: None)
        element = tuple(ev(AXES[i]) for i in range(len(shape)))
        thread = register = None
        if len(shape) == 2 and all(x is not None for x in element):
            thread, register = owner(frag, shape, self.kernel, element, self.target)
        v = Violation(
            invariant=invariant, op=op, line=self._line(), message=message,
            source=stmt_text(self.stmt), sizes=self._sizes_at(ev),
            program_id=self._pid_values(ev),
            names=self._names(ev, scope), element=element, thread=thread, register=register,
            expected={k: ev(x) if isinstance(x, z3.ExprRef) else x for k, x in (expected or {}).items()},
            actual={k: ev(x) if isinstance(x, z3.ExprRef) else x for k, x in (actual or {}).items()},
            **extra)
        rule = self.pack.witness if self.pack is not None and model is not None else None
        if rule is not None:  # the inputs that realise the model, or none: then undecided
            found = rule(self, model, v)
            if found is None:
                self.seen.discard(key)
                self.undecided(f"{invariant}: {message}", "the counterexample found under "
                               "the task's stated assumptions is one no input realises")
                return
            v.witness = found
        self.report.violations.append(v)

    def _sizes_at(self, ev) -> dict[str, int]:
        """The sizes of a counterexample: the model's where they are proven for all."""
        out = dict(self.sizes)
        for name in self.for_all:
            v = ev(self.size_terms[name])
            if v is not None:
                out[name] = v
        return out

    def proven(self, what: str) -> None:
        if not self.quiet:
            self.report.proven.append(f"line {self._line()}: {what}")

    def scalars(self) -> dict[str, z3.ArithRef]:
        """The integer scalar variables in scope (program ids, loop variables, ...)."""
        return {name: v.val for name, v in self.env.items()
                if v.shape == () and v.val is not None and is_int(v.val)
                and self.kernel.param(name) is None and name not in self.sizes}

    def _names(self, ev, scope=None) -> dict[str, int]:
        out = {}
        for name, e in (self.scalars() if scope is None else scope).items():
            val = ev(e)
            if val is not None:
                out[name] = val
        return out

    # ------------------------------------------------------------ program
    def run(self) -> InvariantReport:
        try:
            return self._run()
        finally:  # the check's z3 context goes with its last query (`isolated`)
            self._fast = None
            self.scope.close()
            self._forms.close()

    def _run(self) -> InvariantReport:
        t0 = time.perf_counter()
        for p in self.kernel.params:
            if p.kind == "const":
                self.env[p.name] = SV((), _lit(p.default),
                                      fval=p.default if isinstance(p.default, float) else None,
                                      ctime=True)
                if isinstance(p.default, float):  # a float constant's facts (-1e30: -inf-like)
                    floats.with_facts(self.env[p.name], floats.constant(p.default))
            elif p.kind == "scalar":
                self.env[p.name] = SV((), z3.Int(f"scalar_{p.name}") if p.dtype.startswith("i") else None,
                                      wide=p.dtype == "i64")
        for s in self.kernel.sizes:
            self.env[s] = SV((), self.size_terms[s])
        for name in self.for_all:
            lo, hi = self.for_all[name]
            self.base_sizes.append(And(self.size_terms[name] >= lo,
                                          self.size_terms[name] < hi))
        params = dict(self.env)
        for i, (grid, stmts) in enumerate(launches(self.kernel)):
            # each launch starts after the previous one has finished: its own program ids,
            # no values carried over (only memory), its own whole-program checks
            if i:
                self.memory += self.writes
                self.past_linear += self.linear
                self.past_vars = frozenset(n for n, v in self.vars.vars.items() if v.kind != "axis")
                self.env, self.frames, self.base, self.writes = dict(params), [], [], []
                self.grid, self.pids, self.linear, self._pos_cache = [], [], [], {}
                self.grid_terms = []
            try:
                self._grid(grid)
                self.block(stmts)
                check_writes(self)
            except NotImplementedError as e:  # a rule met a construct it has no rule for
                if isinstance(e, CheckUnsupported):
                    raise
                what = str(e).removeprefix("check: ")
                raise CheckUnsupported(f"the invariant checker cannot analyse this program: "
                                       f"{what}", self._line()) from None
        self.report.milliseconds = (time.perf_counter() - t0) * 1000
        return self.report

    def _grid(self, call: ir.Call) -> None:
        self.stmt = next(s for s in self.kernel.body
                         if isinstance(s, ir.ExprStmt) and s.value is call)
        for i, d in enumerate(call.arg("dims").elts):
            term = self.expr(d).val
            n = const_value(term)
            if n is None and not self.for_all:
                raise ValueError(f"grid dim {i} is not a constant at these sizes")
            if n is None:  # an extent that depends on a size proven for all values
                if term is None or not is_int(term):
                    raise NotImplementedError(f"check: grid dim {i} is not an integer")
                self.grid.append(None)
                self.grid_terms.append(term)
                hi = interval(term, self.vars)
                pid = self.vars.fresh(f"pid{i}", "pid", 0, max(hi[1], 1) if hi else None)
                self.pids.append(pid)
                self.base += [pid >= 0, pid < term]
                continue
            self.grid.append(max(n, 0))
            self.grid_terms.append(z3.IntVal(max(n, 0)))
            pid = self.vars.fresh(f"pid{i}", "pid", 0, max(n, 1))
            self.pids.append(pid)
            self.base += [pid >= 0, pid < n]

    def block(self, stmts) -> None:
        for s in stmts:
            self.stmt = s
            if self.deadline is not None:
                self.query_timeout_ms()  # raises past the deadline
            self.statement(s)

    def statement(self, s: ir.Stmt) -> None:
        if isinstance(s, ir.Assign):
            v = self.expr(s.value)
            if len(s.targets) == 1:
                # a value put into a loop-carried name is a pipeline buffer's content
                buffer = any(f.carried and s.targets[0] in f.carried for f in self.frames)
                self.env[s.targets[0]] = replace(v, origin=Text(self.text, s.value),
                                                 carried=v.carried or buffer)
            else:
                for name, part in zip(s.targets, self._unpack(s.value, len(s.targets))):
                    self.env[name] = part
        elif isinstance(s, ir.ExprStmt):
            effect(self, s.value)
        elif isinstance(s, ir.For):
            run_loop(self, s)
        elif isinstance(s, ir.If):
            self.branch(s)
        else:
            raise NotImplementedError(f"check: no rule for statement {type(s).__name__}")

    def _unpack(self, e: ir.Expr, n: int) -> list[SV]:
        if isinstance(e, ir.TupleExpr):
            return [self.expr(x) for x in e.elts]
        raise NotImplementedError("check: only tuples unpack into several names")

    def branch(self, s: ir.If) -> None:
        cond = self.expr(s.cond).val
        cond = cond if cond is not None and z3.is_bool(cond) else z3.Bool(f"cond!{s.loc.line}")
        known = z3.simplify(cond)
        if z3.is_true(known) or z3.is_false(known):
            # decided at these sizes (`if M <= 130:`): only the branch that runs here is
            # the program, and its values (a factor that is 0 here, say) are followed
            self.block(s.body if z3.is_true(known) else s.orelse)
            self.stmt = s
            return
        before = dict(self.env)
        results = []
        for body, c in ((s.body, cond), (s.orelse, Not(cond))):
            self.env = dict(before)
            self.frames.append(Frame("if", [c]))
            self.block(body)
            self.frames.pop()
            results.append(self.env)
        self.stmt = s
        self.env = dict(before)
        then, other = results
        for name in [n for n in then if n in other]:  # in order, not a set's
            if then[name] is not other[name]:
                self.env[name] = merge(cond, then[name], other[name])

    # ------------------------------------------------------------ expressions
    def expr(self, e: ir.Expr) -> SV:
        return expr_rule(self, e)

    def text(self, e: ir.Expr) -> str:
        """The DSL text of expression `e` (`print_expr`), for messages: printed once per
        node and check (a loop's body runs twice), each subexpression once (an
        operator's text contains its operands')."""
        hit = self._texts.get(id(e))
        if hit is None or hit[0] is not e:
            hit = self._texts[id(e)] = (e, print_expr(e, self._printed))
        return hit[1]

    def int_of(self, e: ir.Expr) -> z3.ArithRef:
        v = self.expr(e).val
        if v is None or not is_int(v):
            raise NotImplementedError(f"check: `{print_expr(e)}` is not an integer")
        return v

    def const(self, e: ir.Expr) -> int:
        """A compile-time integer (the semantic layer has checked that it is one)."""
        value = const_value(self.expr(e).val)
        if value is None:
            raise NotImplementedError(f"check: `{print_expr(e)}` is not a compile-time integer")
        return value

    def uf(self, tensor: str, rank: int) -> z3.FuncDeclRef:
        """Loaded integer data (routing tables): an uninterpreted function of coordinates."""
        if tensor not in self.ufs:
            self.ufs[tensor] = z3.Function(f"data_{tensor}", *([z3.IntSort()] * rank), z3.IntSort())
        return self.ufs[tensor]

    def vars_bool(self, prefix: str) -> z3.BoolRef:
        """An unknown condition (a comparison of float data)."""
        return z3.Bool(f"{prefix}!{next(self.vars.counter)}")

    def fix_lanes(self, e):
        """`e` with its existential lane variables ("some lane of a reduction or a dot
        contributes") set to lane 0: where operands meet, the value read at any live lane
        is the same wherever both are live (else a tag conflict was reported)."""
        names = free_names(e)
        lanes = [v.expr for n, v in self.vars.vars.items() if n in names and n.startswith("any")]
        return z3.substitute(e, *[(v, z3.IntVal(0)) for v in lanes]) if lanes else e

    def div(self, a, b):
        return tdiv(a, b, self.vars, self._positive)

    def mod(self, a, b):
        return tmod(a, b, self.vars, self._positive)

    def _positive(self, b) -> bool:
        """Whether divisor `b` is at least 1 wherever this point runs."""
        key = (b.get_id(), tuple(c.get_id() for c in self.path()))
        if key not in self._pos_cache:
            self._pos_cache[key] = self.solve(self.path() + [b < 1], decide=True) is None
        return self._pos_cache[key]


class _Ranges:
    """The variables' ranges of `Vars`, with a memo of its own (`interval`)."""

    def __init__(self, vars: Vars):
        self.vars, self.bounds = vars, {}

    def named(self, name):
        return self.vars.named(name)


def _false(c) -> bool:
    """Whether `c` is false whatever its variables (z3's simplifier makes it `False`). A
    conjunction is where its last conjunct is (the simplifier rewrites each conjunct on
    its own first): a violation's own condition, last, is tried alone before the whole,
    a smaller term to simplify, and `x != x` of one term needs no simplifier (over a
    routed kernel's programs and seeded bugs, every conjunction the simplifier made false
    had a false last conjunct, a third of them `x != x`). The conjunction's structure is
    read through z3's C accessors."""
    if isinstance(c, bool):
        return not c
    if not isinstance(c, z3.BoolRef):
        return z3.is_bool(c) and z3.is_false(simplify(c))
    ctx = c.ctx
    ref = ctx.ref()
    last = c.as_ast()
    while _ast_kind(ref, last) == z3.Z3_APP_AST:
        n = _num_args(ref, last)
        op = _decl_kind(ref, _app_decl(ref, last))
        if op == z3.Z3_OP_AND and n:
            last = _app_arg(ref, last, n - 1)
            continue
        if op == z3.Z3_OP_DISTINCT and n == 2 and \
                _ast_id(ref, _app_arg(ref, last, 0)) == _ast_id(ref, _app_arg(ref, last, 1)):
            return True  # `x != x`
        break
    if last.value != c.as_ast().value and z3.is_false(simplify(z3.BoolRef(last, ctx))):
        return True
    return z3.is_false(simplify(c))


def _lit(value):
    if isinstance(value, bool):
        return z3.BoolVal(value)
    if isinstance(value, int):
        return z3.IntVal(value)
    return None


#: what the checker's rules prove, by the name of the function that asks the solver
_OBLIGATIONS = {
    "exactly_once": "exactly-once coverage of a reduction",
    "check_bounds": "bounds of an access", "_count_tiles": "every output tile written",
    "_instances": "distinct tiles per program instance", "_disjoint": "disjoint tiles",
    "_unwritten": "every output element written", "_positive": "a positive divisor",
    "_exactly_once_tiles": "exactly-once writes", "_exactly_once_write": "exactly-once writes",
}


def _asker() -> str:
    """The obligation a solver query belongs to, named after the rule that made it."""
    frame = sys._getframe(2)
    while frame is not None and frame.f_code.co_name in ("find", "solve", "ask"):
        frame = frame.f_back
    name = frame.f_code.co_name if frame is not None else "?"
    return _OBLIGATIONS.get(name, f"a solver query of rule `{name.strip('_')}`")


@exclusive
def check(program: Program, sizes: dict[str, int], task=None, **kw) -> InvariantReport:
    """Prove or refute every invariant of `program` at problem `sizes`."""
    return Checker(program, sizes, task, **kw).run()


__all__ = ["Checker", "Frame", "Write", "check"]
