"""Invariant packs: how a task adds its own invariant classes and rules to the checker.

The checker's core knows the invariants every tile program has (contraction, ownership,
coverage, exactly_once, bounds, bijection, tag_conflict, pipeline, assertion, order). A
task with more to say (an online softmax's rescaling, a host routing step's postconditions) declares
an `InvariantPack` in `tasks/<task>/invariants.py`, registers it, and sets it as its
`Task.invariants`:

    from argus_env.check.pack import InvariantClass, InvariantPack, register_pack

    def _normalised(ck, x, y, out, shape, what):      # a rule for `x * y`
        if "@stat" in y.tags and ...:
            ck.violate("row_stat", "*", f"`{what}` scales a row by another row's statistic",
                       ck.find(condition, shape), shape)

    PACK = register_pack(InvariantPack(
        "mytask",
        classes=(InvariantClass("row_stat", "a row is scaled by another row's statistic"),),
        binop={"*": _normalised}))

    class MyTask(Task):
        invariants = PACK

The core calls exactly the hooks below and nothing else of a task; a hook the pack leaves
empty costs nothing. Symbolic hooks receive the symbolic interpreter `ck`
(`argus_env.check.symbolic.Checker`: `find`, `violate`, `proven`, `solve`, `solve_real`,
`query_of`, `frames`, `kernel`, `sizes`, `uf`, `vars`, `fix_lanes`, `report`, and `memo`,
a dict for the pack's per-check state) and values of `argus_env.check.symbolic.values`
(`SV`: `tags` name -> (guard, value), `cov` name -> coverage terms; `Cov`, `evaluate`). Tags a pack invents for
its own bookkeeping are named with the prefix `INTERNAL` ("@"), so they never meet a
tensor's dim names; the core exempts them from the accumulator's tags-do-not-change check.
Concrete hooks receive the concrete interpreter `it`
(`argus_env.check.concrete.interp.Interp`: `violate`, `checked`, `wants`, `tensor_data`,
`kernel`, `sizes`, `pid`, and `memo`, the pack's per-check state, as on the symbolic side)
and its numpy values; `concrete_outputs` receives the run's shared state `sh`
(`interp.Shared`: `rec`, `kernel`, `sizes`, `memo`) once a launch has run.

A pack's classes are the task's block of the report encoding (`report.ReportLayout`): one
slot naming the first violation's class within the pack, one count per class, padded to
`report_slots` (reserve slots there so that adding a class later keeps the task's
observation shape). Class names are global: two packs cannot claim one name, and none may
reuse a core class.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

from ..ir import nodes as ir
from ..ir.rewrite import walk

#: prefix of the tags a pack keeps for its own bookkeeping (never a tensor's dim name)
INTERNAL = "@"
#: the core's own internal tag: an element final for a reduced name (`@final:K`), whose
#: value is the line that finalised it (the **order** invariant, `symbolic/order.py`)
FINAL = INTERNAL + "final:"
#: an accumulator's entry value inside a loop body carries the sums of the iterations
#: before (its coverage terms are kept out of the body): `@sums:K` says so, for the order
#: rules, where the entry holds some (guard `t >= 1`, or an initial value with coverage)
SUMS = INTERNAL + "sums:"
#: the coverage name of contributions of no data: a `dot` or `sum` lane whose operands
#: carry none of the contracted indices and are not known to be zero (a masked lane filled
#: with 1.0); stored, it is a coverage violation (`symbolic/floats.py`)
JUNK = INTERNAL + "junk"


def reduced_names(kernel: ir.Kernel, required: Mapping | None) -> frozenset:
    """The names whose order the order rules check: those a reduction must cover
    completely, by the task's required coverage at its outputs (`required`: tensor ->
    name -> range) or by an `A.covers` of the program. Other names ride along in coverage
    (a score built on a sum over the head dim carries it into every value computed from
    it, where adding and scaling it means nothing)."""
    names = {n for need in (required or {}).values() for n in need}
    for node in walk(kernel):
        if isinstance(node, ir.Call) and node.fn == "assert_tags":
            names |= {n for n, rel in node.tags
                      if isinstance(rel, ir.Call) and rel.fn == "covers"}
    return frozenset(names)


#: floating types a sum is rounded to for storage: rounding one finishes the sum
NARROW_FLOATS = frozenset({"bf16", "f16"})

#: the invariant classes of the core checker, in the order of the report encoding
CORE_CLASSES = (
    "contraction",   # a dot contracts operand elements whose shared index tags differ
    "ownership",     # a stored element's tags differ from the destination coordinates
    "coverage",      # a reduction does not cover its range exactly once
    "exactly_once",  # two program instances (or iterations) write one element, not atomically
    "bounds",        # an access reaches outside its tensor and is not masked
    "bijection",     # an output element no program instance writes (pid remap not onto)
    "tag_conflict",  # an elementwise op meets values whose same-named tags differ
    "pipeline",      # a prefetched (loop-carried) operand is not the slice consumed next
    "assertion",     # an explicit `A.assert_tags` relation fails
    "order",         # a reduction is added to after it was normalised or rounded
)

# Hook signatures (ck: the symbolic interpreter; it: the concrete one; SV / Val values)
#: `x <op> y` after the core rule built `out` (mutable: the rule may add or drop tags)
BinopRule = Callable[[Any, Any, Any, Any, tuple, str], None]        # (ck, x, y, out, shape, what)
#: an elementwise call such as `A.exp(x)`, before its result is built
CallRule = Callable[[Any, str, Any, tuple, str], None]              # (ck, fn, x, shape, what)
#: a reduction `A.max/min/sum(x, axis)`: `present` is where some reduced lane carries data
ReduceRule = Callable[[Any, str, Any, Any], None]                   # (ck, fn, out, present)
#: a `dot` result (before `acc` is added)
DotRule = Callable[[Any, Any, tuple, str], None]                    # (ck, out, shape, what)
#: a `store`/`atomic_add` of `value` through access `a`; returns the value to record
WriteRule = Callable[[Any, Any, Any, Any], Any]                     # (ck, a, value, call) -> value
#: two values of tag `name` meet: a merged (guard, value) instead of a conflict check
MergeRule = Callable[[Any, Any, Any, Any], tuple]                   # (g0, v0, g, v) -> (g, v)
#: the class, label and message suffix of a conflict of tag `name`, or None (tag_conflict)
ConflictRule = Callable[[Any, str], "Conflict | None"]              # (ck, name)
#: facts to add to a solver query mentioning `constraints` (a host step's postconditions)
AxiomRule = Callable[[Any, list], list]                             # (ck, constraints)
#: the whole-program obligations of output `tensor` the pack settles itself (proves or
#: refutes under its own facts): "written" for the bijection, coverage names for the store
#: coverage; the core checks the rest
OutputRule = Callable[[Any, str, list], "frozenset[str]"]          # (ck, tensor, writes)
#: None when some input realises a counterexample's model, else (implied, narrowing):
#: facts true of every input to add to its query (no model then: no counterexample), or a
#: constraint excluding what the model fixed of the inputs (no model then: undecided);
#: `Checker.solve_real` asks again with them
ExcludeRule = Callable[[Any, Any], "tuple | None"]                 # (ck, model)
#: the inputs that realise a violation's model (a host step's arrays), attached to it as
#: `Violation.witness`; None: no input realises the model (the obligation is undecided)
WitnessRule = Callable[[Any, Any, Any], "dict | None"]             # (ck, model, violation)
#: a note when the completeness of coverage of `name` rests on an assumption, else None
CompleteRule = Callable[[Any, str], "str | None"]                   # (ck, name)
#: concrete: after an elementwise op built `out` from `operands`
ConcreteOpRule = Callable[[Any, str, int, list, Any], None]         # (it, op, line, ops, out)
#: concrete: a store/atomic_add of `value` through `ref` where `active` holds
ConcreteWriteRule = Callable[[Any, str, int, Any, Any, Any], None]  # (it, op, line, ref, value, active)
#: concrete: an elementwise math call such as `A.exp(x)`, before its result is built
ConcreteCallRule = Callable[[Any, str, int, Any], None]             # (it, fn, line, x)
#: concrete: a reduction built `out`; `present` is where some reduced lane carries data
ConcreteReduceRule = Callable[[Any, str, int, Any, Any], None]      # (it, fn, line, out, present)
#: concrete: a `dot` product (before `acc` is added)
ConcreteDotRule = Callable[[Any, int, Any], None]                   # (it, line, product)
#: concrete: two values of the pack's tag meet elementwise: their combination
ConcreteMergeRule = Callable[[Any, Any], Any]                       # (prev Tag, tag) -> Tag
#: concrete: after a launch, output `tensor`'s whole-program obligations the pack settles
#: itself from the launch's writes `tw` (`memory.TensorWrites`, its `pack` record): "written"
#: for the bijection, coverage names for the atomic coverage; the core checks the rest
ConcreteOutputRule = Callable[[Any, str, Any], "frozenset[str]"]   # (sh, tensor, tw)


@dataclass(frozen=True)
class InvariantClass:
    """One invariant class: a name reports and observations use, and what it means."""

    name: str
    description: str

    def __post_init__(self) -> None:
        if not self.name.isidentifier() or self.name.startswith("_"):
            raise ValueError(f"invariant class name {self.name!r} must be a plain identifier")


@dataclass(frozen=True)
class Conflict:
    """How a conflict of one tag is reported (`InvariantPack.conflict`)."""

    invariant: str
    label: str = ""      # how the message names the tag ("max version"); default its name
    note: str = ""       # appended to the message


@dataclass(frozen=True)
class InvariantPack:
    """A task's invariant classes and the rules that check them (module docstring)."""

    name: str
    classes: tuple[InvariantClass, ...] = ()
    #: size of the task's block in the report encoding; None: 1 + len(classes)
    report_slots: int | None = None
    # ---- symbolic interpreter hooks
    binop: Mapping[str, BinopRule] = field(default_factory=dict)    # op ("-", "*") -> rule
    calls: Mapping[str, CallRule] = field(default_factory=dict)     # fn ("exp") -> rule
    reduce: Mapping[str, ReduceRule] = field(default_factory=dict)  # fn ("max") -> rule
    dot: tuple[DotRule, ...] = ()
    write: tuple[WriteRule, ...] = ()
    merge: Mapping[str, MergeRule] = field(default_factory=dict)    # tag name -> rule
    conflict: ConflictRule | None = None
    axioms: AxiomRule | None = None
    outputs: OutputRule | None = None
    exclude: ExcludeRule | None = None
    witness: WitnessRule | None = None
    assumed_complete: CompleteRule | None = None
    # ---- concrete interpreter hooks
    concrete_ops: Mapping[str, ConcreteOpRule] = field(default_factory=dict)
    concrete_write: tuple[ConcreteWriteRule, ...] = ()
    concrete_calls: Mapping[str, ConcreteCallRule] = field(default_factory=dict)
    concrete_reduce: Mapping[str, ConcreteReduceRule] = field(default_factory=dict)
    concrete_dot: tuple[ConcreteDotRule, ...] = ()
    concrete_merge: Mapping[str, ConcreteMergeRule] = field(default_factory=dict)
    concrete_outputs: ConcreteOutputRule | None = None

    def __post_init__(self) -> None:
        if not self.name:
            raise ValueError("an invariant pack needs a name (its task's)")
        names = [c.name for c in self.classes]
        if len(set(names)) != len(names):
            raise ValueError(f"pack {self.name!r} declares a class twice: {names}")
        clash = sorted(set(names) & set(CORE_CLASSES))
        if clash:
            raise ValueError(f"pack {self.name!r}: {clash[0]!r} is a core invariant class")
        if self.report_slots is not None and self.report_slots < 1 + len(names):
            raise ValueError(f"pack {self.name!r}: report_slots={self.report_slots} is less "
                             f"than 1 + {len(names)} classes")
        for key in ("binop", "calls", "reduce", "merge", "concrete_ops", "concrete_calls",
                    "concrete_reduce", "concrete_merge"):  # own copies
            object.__setattr__(self, key, dict(getattr(self, key)))
        for key in ("dot", "write", "concrete_write", "concrete_dot"):
            object.__setattr__(self, key, tuple(getattr(self, key)))

    @property
    def class_names(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.classes)

    @property
    def block_size(self) -> int:
        """Slots of the task's block in the report encoding."""
        return self.report_slots if self.report_slots is not None else 1 + len(self.classes)


_PACKS: dict[str, InvariantPack] = {}
_OWNER: dict[str, str] = {}  # class name -> pack name


def register_pack(pack: InvariantPack) -> InvariantPack:
    """Make `pack`'s classes known (reports refuse unknown class names); returns `pack`.
    Registering the same pack again is a no-op; a class another pack owns is an error."""
    if not isinstance(pack, InvariantPack):
        raise TypeError(f"register_pack takes an InvariantPack, not {type(pack).__name__}")
    for c in pack.classes:
        owner = _OWNER.get(c.name)
        if owner is not None and owner != pack.name:
            raise ValueError(f"invariant class {c.name!r} of pack {pack.name!r} is already "
                             f"declared by pack {owner!r}")
    old = _PACKS.get(pack.name)
    if old is not None:
        for name in old.class_names:
            _OWNER.pop(name, None)
    _PACKS[pack.name] = pack
    _OWNER.update({c.name: pack.name for c in pack.classes})
    return pack


def registered_packs() -> tuple[InvariantPack, ...]:
    return tuple(_PACKS.values())


def is_known_class(name: str) -> bool:
    """A core class or one a registered pack declares."""
    return name in CORE_CLASSES or name in _OWNER


def known_classes() -> tuple[str, ...]:
    """The core classes, then every registered pack's, in registration order."""
    return CORE_CLASSES + tuple(_OWNER)


def pack_of(task) -> InvariantPack | None:
    """The invariant pack a task declares (`Task.invariants`), or None."""
    pack = getattr(task, "invariants", None) if task is not None else None
    if pack is not None and not isinstance(pack, InvariantPack):
        raise TypeError(f"task {getattr(task, 'name', task)!r}: `invariants` must be an "
                        f"InvariantPack, not {type(pack).__name__}")
    return pack


__all__ = ["CORE_CLASSES", "FINAL", "INTERNAL", "JUNK", "NARROW_FLOATS", "SUMS", "reduced_names", "Conflict", "InvariantClass", "InvariantPack",
           "is_known_class", "known_classes", "pack_of", "register_pack", "registered_packs"]
