"""The routing terms of a solver query: every application of a routing function outside
quantifiers, found by a walk over z3's C accessors (`apps`)."""

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
    quantifiers (memoised per subexpression, by z3's id: every expression visited is kept,
    and with it its subterms, so no id is reused during the check). The walk reads the
    terms through z3's C accessors (an id, a kind, an argument, a name: calls that cannot
    fail on a live term), which makes no Python object per subterm; it finds the terms, in
    the order, that a walk over `children()` finds."""
    memo = ck.memo.setdefault("routing_apps", {})      # term id -> {app id: (kind, app)}
    kept = ck.memo.setdefault("routing_kept", [])      # the expressions walked from
    decls = ck.memo.setdefault("routing_decls", {})    # live declaration -> kind or None
    out: dict = {}
    ctx = None

    def visit(a):
        key = _ast_id(ctx, a)
        found = memo.get(key)
        if found is not None:
            out.update(found)
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
        memo[key] = found
        out.update(found)
        return found
    for e in exprs:
        if e is None:
            continue
        if ctx is None:
            ref = e.ctx
            ctx = ref.ref()
        if e.get_id() not in memo:
            kept.append(e)
        visit(e.as_ast())
    return list(out.values())


_MISSING = object()
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
