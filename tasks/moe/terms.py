"""The routing terms of a solver query: every application of a routing function outside
quantifiers, found by a walk over z3's C accessors (`apps`, `walked`), memoised across
checks."""

from __future__ import annotations

try:  # the rules run inside the checker, which needs z3; the task also runs without it
    import z3
    from z3 import z3core as _core
    from z3.z3 import _to_expr_ref
    from z3.z3consts import Z3_APP_AST as _APP, Z3_NUMERAL_AST as _NUMERAL
except ImportError:  # pragma: no cover - a machine that only measures
    z3 = None


def apps(ck, exprs, names: dict) -> list:
    """(kind, term) for every application of a routing function in `exprs`, outside
    quantifiers (memoised per subexpression, by z3's id, across checks: `_walks`). The
    walk reads the terms through z3's C accessors (an id, a kind, an argument, a name:
    calls that cannot fail on a live term), which makes no Python object per subterm; it
    finds the terms, in the order, that a walk over `children()` finds."""
    out: dict = {}
    for key, found in walked(exprs, names):
        out.update(found)
    return list(out.values())


def walked(exprs, names: dict) -> list:
    """(id, {app id: (kind, app)}) for each expression of `exprs` (None skipped): its
    routing applications, as `apps` finds them, from the memo of the process's walks of
    the global context's terms (`_walks`; another context's expressions are walked with a
    memo of this call's)."""
    out = []
    memo = kept = decls = None
    ctx = ref = None

    def visit(a):
        key = _ast_id(ctx, a)
        found = memo.get(key)
        if found is not None:
            return found
        found = {}
        k = _ast_kind(ctx, a)
        if k == _APP or k == _NUMERAL:
            n = _num_args(ctx, a)
            for i in range(n):
                found.update(visit(_app_arg(ctx, a, i)))
            if n:
                d = _app_decl(ctx, a)
                kind = decls.get(d.value, _MISSING)
                if kind is _MISSING:
                    kind = decls[d.value] = names.get(_symbol_string(ctx, _decl_name(ctx, d)))
                if kind is not None:
                    found[key] = (kind, _to_expr_ref(a, ref))
        if not found:
            found = _NOTHING  # most terms have none: one shared (never changed) dict
        memo[key] = found
        return found
    for e in exprs:
        if e is None:
            continue
        if ref is None:
            ref = e.ctx
            ctx = ref.ref()
            memo, kept, decls = _walks(names) if ref is z3.main_ctx() else ({}, [], {})
        a = e.as_ast()
        key = _ast_id(ctx, a)
        found = memo.get(key)
        if found is None:
            kept.append(e)  # keeps the expression, and with it every subterm, alive
            found = visit(a)
        out.append((key, found))
    return out


#: the walks' memo per set of routing function names: term id -> its applications, the
#: expressions walked from (kept alive, so that no id in the memo is reused meanwhile) and
#: live declaration -> kind or None. A term's applications are the same in every check
#: (the checker's terms are named alike from check to check, and z3 makes equal terms one
#: term: a routed program's path conditions and the postconditions' instances recur in
#: every query of every check at those sizes); bounded
_WALKS: dict = {}
WALK_ENTRIES = 200_000


def _walks(names: dict) -> tuple:
    if sum(len(w[0]) for w in _WALKS.values()) > WALK_ENTRIES:
        _WALKS.clear()
    key = tuple(sorted(names.items()))
    hit = _WALKS.get(key)
    if hit is None:
        hit = _WALKS[key] = ({}, [], {})
    return hit


_MISSING = object()
_NOTHING: dict = {}  # the applications of a term that has none (read, never updated)
if z3 is not None:
    def _raw(fn):
        """The C function a z3core binding wraps (without its error-code check), or the
        binding itself where its layout differs."""
        f = getattr((fn.__defaults__ or (None,))[-1], "f", None)
        return f if f is not None else fn
    _ast_id, _ast_kind = _raw(_core.Z3_get_ast_id), _raw(_core.Z3_get_ast_kind)
    _num_args, _app_arg = _raw(_core.Z3_get_app_num_args), _raw(_core.Z3_get_app_arg)
    _app_decl, _decl_name = _raw(_core.Z3_get_app_decl), _raw(_core.Z3_get_decl_name)
    _symbol_string = _core.Z3_get_symbol_string
