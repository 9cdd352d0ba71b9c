"""Replay of an MoE counterexample under the Triton interpreter.

A violation of a routed program carries the top-k choice that realises its model
(`Violation.witness["routing"]`, from `realize.py`): `replay` rebuilds the routing arrays
from it (through the routing step's own `routing.align`), draws the other inputs as the
task does (seeded), runs the program's Triton under the interpreter (`TRITON_INTERPRET=1`,
chosen before triton is imported) with the output poisoned as the oracle does, and compares
the output element the violation names with the float32 torch reference. The whole grid
runs, not only the named instance: the output is what every instance's adds leave.

The check and the replay must agree on `A.num_sms()`: a persistent program is checked with
the interpreter's SM count (`argus_env.lower.runtime.INTERPRETER_NUM_SMS`, 3) to be
replayed, and `replay` refuses a witness checked with another.
"""

from __future__ import annotations

import math

from .postconditions import routing_of
from .realize import arrays

SHAPE_DIMS = ("T", "D", "F", "E", "TOPK", "SKEW")


def inputs_for(program, violation, seed: int = 0, equal_weights: bool = False
               ) -> tuple[dict, dict]:
    """(inputs, sizes): the task's random inputs at the violation's shape, with the routing
    arrays of its witness and top-k weights consistent with them (a softmax over each
    token's selected logits, largest first, as `routing.topk` gives). `equal_weights`:
    every slot weighs 1/TOPK, what the routing gives where a token's selected logits are
    equal (so a slot the program drops or doubles is never one of near-zero weight)."""
    import torch

    from .task import TASK
    sizes = {k: violation.sizes[k] for k in SHAPE_DIMS if k in violation.sizes}
    full = TASK.program_sizes(program, sizes)
    r = routing_of(program.kernel.consts, full)
    tids, sorted_ids, expert_ids = arrays(violation.witness["routing"], r)
    gen = torch.Generator().manual_seed(seed)
    t, d, f, e = (full[n] for n in ("T", "D", "F", "E"))

    def randn(*shape, scale=1.0):
        return (torch.randn(*shape, generator=gen) * scale).to(torch.bfloat16)
    logits = torch.sort(torch.randn(t, full["TOPK"], generator=gen), dim=-1,
                        descending=True).values
    if equal_weights:
        logits = torch.zeros_like(logits)
    inputs = {"x": randn(t, d), "w_gate": randn(e, d, f, scale=d ** -0.5),
              "w_up": randn(e, d, f, scale=d ** -0.5), "w_down": randn(e, f, d, scale=f ** -0.5),
              "topk_weights": torch.softmax(logits, dim=-1).float(), "topk_ids": tids,
              "sorted_ids": sorted_ids, "expert_ids": expert_ids}
    return inputs, full


def replay(program, violation, seeds=(0, 1, 2)) -> dict:
    """Run `program` on inputs realising `violation` and read the output element it
    names, for each seed of the other (float) inputs until it is wrong there: first with
    the task's top-k weights, then with equal ones. Returns `element`, `got`, `expected`,
    `differs` (beyond the task's tolerance, or not finite), `mismatches` (output elements
    out of tolerance in all), `seed`, `equal_weights` and `sizes`. The routing is the
    witness's whatever the seed; the float data only decides by how much the element is
    off: a wrong weight on a row whose value is near zero can stay inside the tolerance,
    and so can a dropped slot whose softmax weight is small (the solver may name one
    element of a violation or another, by the model it finds; equal weights make every
    slot's contribution count)."""
    out = {}
    for equal in (False, True):
        for seed in seeds:
            out = _run(program, violation, seed, equal)
            if out["differs"]:
                return out
    return out


def _run(program, violation, seed: int, equal_weights: bool = False) -> dict:
    import torch

    from argus_env import lower
    from argus_env.lower.runtime import INTERPRETER_NUM_SMS

    from .task import TASK
    witness = violation.witness
    if not witness or "routing" not in witness:
        raise ValueError(f"{violation.invariant} at line {violation.line}: no routing witness")
    if program.info.uses_num_sms and witness.get("num_sms") != INTERPRETER_NUM_SMS:
        raise ValueError(f"checked with num_sms={witness.get('num_sms')}, but the interpreter "
                         f"runs A.num_sms() = {INTERPRETER_NUM_SMS}: check with "
                         f"num_sms={INTERPRETER_NUM_SMS} to replay")
    element = tuple(witness.get("output") or violation.coords)
    if len(element) != 2:
        raise ValueError(f"{violation.invariant} at line {violation.line} names no output element")
    inputs, sizes = inputs_for(program, violation, seed, equal_weights)
    reference = TASK.reference({k: v.clone() for k, v in inputs.items()}, sizes)["out"]
    args = dict(inputs)
    for p in program.kernel.tensors:
        if p.name not in args:  # outputs and workspaces start poisoned, as in the oracle
            from argus_env.dsl.dtypes import DTYPES
            dtype = getattr(torch, DTYPES[p.dtype].torch)
            args[p.name] = torch.full([sizes[dim] for dim in p.dims], math.nan, dtype=dtype) \
                if dtype.is_floating_point else torch.full([sizes[dim] for dim in p.dims], -12345,
                                                           dtype=dtype)
    lower.load(program, interpret=True)(**{p.name: args[p.name] for p in program.kernel.tensors})
    out = args["out"].float()
    tol = TASK.tolerance
    rms = reference.pow(2).mean().sqrt().item() or 1.0
    bad = ~((out - reference).abs() <= tol.atol * rms + tol.rtol * reference.abs())
    got, want = out[element].item(), reference[element].item()
    return {"element": element, "got": got, "expected": want, "differs": bool(bad[element]),
            "mismatches": int(bad.sum()), "seed": seed, "equal_weights": equal_weights,
            "sizes": sizes}
