"""z3 queries kept apart from the process that asks them.

z3's search is steered by incidental facts: the numbering of terms in their context (the
order of variables, of case splits, of quantifier instances) and its random seeds. The
Python API builds every term in one global context for the life of the process, and a
term's number there depends on everything made and freed before it. So the same query
could be answered in 30 ms in one process and time out in another that had run other
checks first (a coverage query with quantifiers: 27 ms to 3.3 s in one process as terms
made and freed before it changed the numbering, up to 9 s under other seeds).

Every query of a check is therefore asked in a context of the check's own (`Scope`): its
facts are translated there (the same terms, numbered in the order the check made its
queries), every solver gets the same fixed seeds (`SEEDS`), and a model comes back
translated into the global context, where the check's terms live. The checker also builds
its terms in the same order in every process (nothing iterates over a set of names, whose
order follows Python's per-process string hashing), and its first try at a query is
bounded by z3's count of work, not by the clock. A check then asks the same queries alone
or after thousands of other checks, in any thread, up to the first model z3 chooses
otherwise: z3's choice among several models of one satisfiable query can still follow the
process's heap (of 140 checks run in two orders, two named another counterexample of the
same violation; none changed a verdict). Wall-clock limits only ever leave an answer
undecided or refuse the check. A context costs 16 MiB of memory when it is made: the C
library is told to keep it for the next (`keep_context_memory`).
"""

from __future__ import annotations

import ctypes

import z3

#: the parameters every solver is given: z3's seeds, fixed (these are z3's defaults,
#: stated so that no global setting made elsewhere in the process changes them)
SEEDS = (("random_seed", 0), ("smt.random_seed", 0))


def solver(ctx: z3.Context, simple: bool = False) -> z3.Solver:
    """A solver of context `ctx` with the fixed seeds: z3's default solver, or its SMT
    core alone (`simple`: no tactic preprocessing)."""
    s = z3.SimpleSolver(ctx=ctx) if simple else z3.Solver(ctx=ctx)
    for key, value in SEEDS:
        s.set(key, value)
    return s


def into(ctx: z3.Context, terms) -> z3.BoolRef:
    """The conjunction of `terms` (formulas of one context; a Python bool is a constant)
    as one formula of `ctx`: one translation, so that the subterms the formulas share are
    translated once, and no Python-side checks per formula (a query's facts are many and
    mostly shared)."""
    terms = list(terms)
    src = next((t.ctx for t in terms if isinstance(t, z3.ExprRef)), None)
    if src is None:
        return z3.BoolVal(all(bool(t) for t in terms), ctx)
    terms = [t if isinstance(t, z3.ExprRef) else z3.BoolVal(bool(t), src) for t in terms]
    one = terms[0]
    if len(terms) > 1:
        args = (_Ast * len(terms))()
        for i, t in enumerate(terms):
            args[i] = t.as_ast()
        one = z3.BoolRef(_mk_and(src.ref(), len(terms), args), src)
    return z3.BoolRef(_translate(src.ref(), one.as_ast(), ctx.ref()), ctx)


def back(model: z3.ModelRef) -> z3.ModelRef:
    """A model of a scope's query as a model of the global context's terms."""
    return model.translate(z3.main_ctx())


class Scope:
    """The z3 context of one check (or of one problem a task's pack solves): made on first
    use, dropped by `close` (or with the scope)."""

    def __init__(self):
        self._ctx: z3.Context | None = None

    @property
    def ctx(self) -> z3.Context:
        if self._ctx is None:
            keep_context_memory()
            self._ctx = z3.Context()
        return self._ctx

    def solver(self, simple: bool = False) -> z3.Solver:
        return solver(self.ctx, simple)

    def into(self, terms) -> z3.BoolRef:
        return into(self.ctx, terms)

    def close(self) -> None:
        self._ctx = None


#: glibc's `mallopt` parameters (malloc.h): blocks this large or larger are mapped from the
#: system one by one; free memory past this much at the top of the heap goes back to it
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3
#: the values `keep_context_memory` sets: above a context's two blocks of 8.1 MiB, and room
#: for several of them at the top of the heap
MMAP_THRESHOLD, TRIM_THRESHOLD = 32 << 20, 64 << 20
_kept: list = []


def keep_context_memory() -> bool:
    """Keep the memory of a deleted z3 context for the next one (once per process, where
    the C library is glibc; whether it is set).

    A context's term manager allocates two blocks of 8.1 MiB when it is made, and a check
    makes one context. glibc maps blocks that large from the system and unmaps them when
    they are freed (or trims them from the top of the heap), so every check touched 16 MiB
    of new pages: about 4,100 page faults, several milliseconds of system time per check
    (more on a loaded machine). With both thresholds raised (which also stops glibc
    adjusting them itself), blocks up to `MMAP_THRESHOLD` come from the heap and up to
    `TRIM_THRESHOLD` of free heap is kept: the next context reuses the previous one's
    pages. Blocks of 32 MiB or more (large arrays) are still mapped one by one."""
    if not _kept:
        ok = False
        try:
            libc = ctypes.CDLL(None)
            mallopt = getattr(libc, "mallopt", None)
            if mallopt is not None and hasattr(libc, "gnu_get_libc_version"):
                ok = bool(mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD)) and \
                    bool(mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD))
        except OSError:  # no C library to load: nothing to set
            pass
        _kept.append(ok)
    return _kept[0]


_Ast, _mk_and, _translate = z3.z3.Ast, z3.z3core.Z3_mk_and, z3.z3core.Z3_translate

__all__ = ["SEEDS", "Scope", "back", "into", "keep_context_memory", "solver"]
