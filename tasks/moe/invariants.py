"""MoE's invariant pack: the invariants of routed programs, on top of the core tag rules
(`argus_env/check/SEMANTICS.md`; the rules in full are in `INVARIANTS.md` beside this file).

A routed program reads index arrays a routing step wrote: `sorted_ids[p]`, the (token, slot)
pair at sorted position p, and `expert_ids[b]`, the expert of block b. The checker does not
know their contents: a load of integer data is an uninterpreted function of its coordinates
(`Checker.uf`). What it may assume are the routing step's *postconditions*, added to every
solver query as instances at the terms the query mentions (no quantifiers):

- `sid(p)` is the padding sentinel PAD = T*TOPK, or a pair q in [0, PAD) whose expert
  `tid(q // TOPK, q % TOPK)` (the top-k id array) is the expert of p's block
  `bexp(p // BM)`, and then `inv(q) == p`: sorted_ids is injective on pairs;
- every pair q sits somewhere: `0 <= inv(q) < P` and `sid(inv(q)) == q`;
- `-1 <= bexp(b) < E` (-1: a block no expert uses), `0 <= tid(t, k) < E`.

With them, the task's relations between tags are checked where data meets:

- **expert** (at `dot`): an element whose row is sorted position p (tag P) meets expert e's
  weights (tag E) only if p's pair is routed to e (or p is padding);
- **scatter** (at a store leaving the sorted row space): the row of position p is written to
  the token and slot of its pair `sid(p)`, the inverse of the sorting permutation;
- **padding** (same place): no padding row is written;
- **combine** (same place): a top-k weight in the value (tags T, TOPK) is the weight of p's
  own pair; a value reaching the task's output carries a top-k weight at all; two weights of
  different slots never meet (a conflict of tag TOPK).

An `atomic_add` of rows into token order records which slot each row contributes, as
coverage of TOPK (a set: the task's store coverage checks its range; adding a slot twice
across instances of a persistent loop is left unproven, noted).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from argus_env.check.pack import Conflict, InvariantClass, InvariantPack, register_pack

try:  # the rules run inside the checker, which needs z3; the task also runs without it
    import z3

    from argus_env.check.symbolic.values import Cov, evaluate
except ImportError:  # pragma: no cover - a machine that only measures
    z3 = Cov = evaluate = None


@dataclass(frozen=True)
class Routing:
    """The routing step's arrays and sizes (`routing_of`)."""

    block: int                    # rows per block of the aligned layout (the program's BM)
    tokens: int                   # T
    topk: int                     # TOPK
    experts: int                  # E
    rows: int                     # P, positions of the aligned layout
    sorted_ids: str = "sorted_ids"
    expert_ids: str = "expert_ids"
    topk_ids: str = "topk_ids"
    output: str = "out"           # the task's output in token order
    pos: str = "P"                # dim names: sorted position, token, slot, expert
    token: str = "T"
    slot: str = "TOPK"
    expert: str = "E"

    @property
    def pad(self) -> int:
        return self.tokens * self.topk


def routing_of(consts: dict, sizes) -> Routing:
    """What the checker may assume of the routing arrays of a program with `consts` at
    `sizes` (the shape's plus P, the program's padded rows)."""
    return Routing(block=int(consts.get("BM", 64)), tokens=sizes["T"], topk=sizes["TOPK"],
                   experts=sizes["E"], rows=sizes["P"])


def spec(ck) -> Routing:
    """The routing of the program being checked (kept for the whole check)."""
    if "routing" not in ck.memo:
        ck.memo["routing"] = routing_of(ck.kernel.consts, ck.sizes)
    return ck.memo["routing"]


class _Fns:
    """The uninterpreted functions of one checker's routing arrays."""

    def __init__(self, ck, r: Routing):
        self.sid = ck.uf(r.sorted_ids, 1)
        self.bexp = ck.uf(r.expert_ids, 1)
        self.tid = ck.uf(r.topk_ids, 2)
        self.inv = z3.Function(f"inverse_{r.sorted_ids}", z3.IntSort(), z3.IntSort())


def fns(ck) -> _Fns:
    if "routing_fns" not in ck.memo:
        ck.memo["routing_fns"] = _Fns(ck, spec(ck))
    return ck.memo["routing_fns"]


# ---------------------------------------------------------------- postconditions
def axioms(ck, constraints) -> list:
    """Instances of the postconditions at every routing term of `constraints` (and at the
    terms the instances introduce, to a fixed depth)."""
    r = spec(ck)
    f = fns(ck)
    names = {f.sid.name(): "sid", f.bexp.name(): "bexp", f.tid.name(): "tid",
             f.inv.name(): "inv"}
    memo = ck.memo.setdefault("routing_inst", {})  # term id -> (term, instance)
    out, seen, todo = [], set(), list(constraints)
    for _ in range(3):
        terms = _apps(ck, todo, names)
        todo = []
        for kind, t in terms:
            if t.get_id() in seen:
                continue
            seen.add(t.get_id())
            if t.get_id() not in memo:  # the term is kept, so its id is not reused
                memo[t.get_id()] = (t, _instance(r, f, kind, t))
            inst = memo[t.get_id()][1]
            out.append(inst)
            todo.append(inst)
        if not todo:
            break
    return out


def _instance(r: Routing, f: _Fns, kind: str, t):
    a = t.arg(0)
    if kind == "sid":
        q = t
        pair = z3.And(q >= 0, q < r.pad, f.inv(q) == a,
                      f.tid(q / r.topk, q % r.topk) == f.bexp(a / r.block))
        return z3.Implies(z3.And(a >= 0, a < r.rows), z3.Or(q == r.pad, pair))
    if kind == "inv":
        return z3.Implies(z3.And(a >= 0, a < r.pad),
                          z3.And(t >= 0, t < r.rows, f.sid(t) == a))
    if kind == "bexp":
        return z3.Implies(z3.And(a >= 0, a < r.rows // r.block),
                          z3.And(t >= -1, t < r.experts))
    b = t.arg(1)
    return z3.Implies(z3.And(a >= 0, a < r.tokens, b >= 0, b < r.topk),
                      z3.And(t >= 0, t < r.experts))


def _apps(ck, exprs, names: dict) -> list:
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
    from z3 import z3core as _core
    from z3.z3 import _to_expr_ref
    from z3.z3consts import Z3_APP_AST as _APP, Z3_NUMERAL_AST as _NUMERAL

    def _raw(fn):
        """The C function a z3core binding wraps (without its error-code check), or the
        binding itself where its layout differs."""
        f = getattr((fn.__defaults__ or (None,))[-1], "f", None)
        return f if f is not None else fn
    _ast_id, _ast_kind = _raw(_core.Z3_get_ast_id), _raw(_core.Z3_get_ast_kind)
    _num_args, _app_arg = _raw(_core.Z3_get_app_num_args), _raw(_core.Z3_get_app_arg)
    _app_decl, _decl_name = _raw(_core.Z3_get_app_decl), _raw(_core.Z3_get_decl_name)
    _symbol_string = _core.Z3_get_symbol_string


# ---------------------------------------------------------------- relations
def conflict(ck, name: str) -> Conflict | None:
    """Two values of the slot tag meeting: two top-k weights of different slots."""
    return Conflict("combine") if name == spec(ck).slot else None


def on_dot(ck, out, shape, what: str) -> None:
    """expert: a sorted row p meets expert e's weights only if p's pair is routed to e."""
    r = spec(ck)
    if r.pos not in out.tags or r.expert not in out.tags:
        return
    f = fns(ck)
    (gp, p), (ge, e) = out.tags[r.pos], out.tags[r.expert]
    q = f.sid(p)
    routed = f.tid(q / r.topk, q % r.topk)
    m = ck.find(z3.And(gp, ge, p >= 0, p < r.rows, q != r.pad, routed != e), shape)
    if m is None:
        ck.proven(f"{what}: each sorted row meets its own expert's weights")
        return
    ck.violate("expert", "dot", f"`{what}` multiplies the row of sorted position "
               f"{evaluate(m, p)} (pair {evaluate(m, q)}, routed to expert {evaluate(m, routed)}) by expert "
               f"{evaluate(m, e)}'s weights", m, shape, expected={r.expert: routed},
               actual={r.expert: e}, frag="mma")


def on_write(ck, a, value, call):
    """padding, scatter and combine where rows leave the sorted layout; returns the value,
    with the slot each atomically added row contributes as coverage of TOPK."""
    r = spec(ck)
    dims = a.tensor.dims
    op, name = call.fn, a.tensor.name
    if r.pos not in value.tags or r.pos in dims:
        if name == r.output and value.tagged and r.slot not in value.tags \
                and r.slot not in value.cov:
            _unweighted(ck, a, value, op, r)
        return value
    f = fns(ck)
    gp, p = value.tags[r.pos]
    p = ck.fix_lanes(p)
    q = f.sid(p)
    live = z3.And(a.live, a.inbounds, gp, p >= 0, p < r.rows)
    # a padding row whose write the mask lets through, in bounds or not
    m = ck.find(z3.And(a.live, gp, p >= 0, p < r.rows, q == r.pad), a.shape)
    if m is not None:
        ck.violate("padding", op, f"a padding row (sorted position {evaluate(m, p)}) is written to "
                   f"`{name}`", m, a.shape, expected={"pair": f"< {r.pad}"},
                   actual={"pair": q}, tensor=name, coords=tuple(evaluate(m, c) for c in a.coords))
    real = z3.And(live, q != r.pad)
    for dim, want in ((r.token, q / r.topk), (r.slot, q % r.topk)):
        if dim not in dims:
            continue
        got = a.coords[dims.index(dim)]
        m = ck.find(z3.And(real, got != want), a.shape)
        if m is None:
            ck.proven(f"{op} {name}: each row goes to the {dim} of its pair")
            continue
        ck.violate("scatter", op, f"the row of sorted position {evaluate(m, p)} holds pair "
                   f"{evaluate(m, q)} (token {evaluate(m, q / r.topk)}, slot {evaluate(m, q % r.topk)}) but "
                   f"is written to {dim}={evaluate(m, got)} of `{name}`", m, a.shape,
                   expected={dim: want}, actual={dim: got}, tensor=name,
                   coords=tuple(evaluate(m, c) for c in a.coords))
    for dim, want in ((r.slot, q % r.topk), (r.token, q / r.topk)):
        if dim not in value.tags or r.slot not in value.tags:
            continue
        g, v = value.tags[dim]
        m = ck.find(z3.And(real, g, v != want), a.shape)
        if m is not None:
            ck.violate("combine", op, f"the row of pair {evaluate(m, q)} is scaled by the top-k "
                       f"weight of {dim}={evaluate(m, v)}, not its own {dim}={evaluate(m, want)}", m,
                       a.shape, expected={dim: want}, actual={dim: v}, tensor=name)
    if name == r.output and r.slot not in value.tags and r.slot not in value.cov:
        _unweighted(ck, a, value, op, r)
    if op == "atomic_add" and r.slot not in dims and r.slot not in value.cov:
        # as a set ("max" kind): the range is checked, a slot added twice is not (that
        # query over two instances of a persistent tile loop is too slow to decide here)
        cov = {**value.cov, r.slot: [Cov((), z3.And(a.live, a.inbounds, p >= 0, p < r.rows,
                                                   q != r.pad), q % r.topk, "max")]}
        value = replace(value, cov=cov)
    return value


def routed_writes(ck, tensor: str, ws) -> bool:
    """Whether `tensor` is written with rows of the sorted layout (tag P) at the token their
    pair names: then every element has a writer exactly when every pair's position is
    processed, which follows from the routing postconditions (each pair has a position)
    and the row-space tile loops, not from the written coordinates; noted, not proven."""
    r = spec(ck)
    if not any(r.pos in w.value.tags and r.pos not in ck.kernel.param(tensor).dims
                            for w in ws):
        return False
    ck.report.notes.append(f"assumed, not proven: {tensor} is written through the routing "
                           "map; every element has a writer if every sorted position is "
                           "processed")
    return True


def _unweighted(ck, a, value, op: str, r: Routing) -> None:
    m = ck.find(z3.And(a.live, a.inbounds, value.live()), a.shape)
    if m is not None:
        ck.violate("combine", op, f"rows reach `{a.tensor.name}` without a top-k weight (no "
                   f"element of `{r.slot}`-indexed weights was multiplied in)", m, a.shape,
                   expected={r.slot: "a weight"}, actual={r.slot: None},
                   tensor=a.tensor.name)


def completeness(ck, name: str) -> str | None:
    """The top-k slot's coverage is complete by the routing step, not by the indices."""
    if name != spec(ck).slot:
        return None
    return (f"assumed, not proven: completeness of {name} (each (token, slot) pair reaches "
            "one sorted position by the routing postconditions)")


PACK = register_pack(InvariantPack(
    "moe",
    classes=(
        InvariantClass("expert", "a token row meets another expert's weights"),
        InvariantClass("scatter", "a result is written to a token it did not come from"),
        InvariantClass("combine", "the combine weight is not the token's top-k weight for "
                       "the slot"),
        InvariantClass("padding", "a padding row from block alignment is stored"),
    ),
    report_slots=8,  # room for three more classes without changing the observation
    dot=(on_dot,),
    write=(on_write,),
    conflict=conflict,
    axioms=axioms,
    assumed_written=routed_writes,
    assumed_complete=completeness,
))
