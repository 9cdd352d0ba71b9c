"""The correctness oracle: run a program on fresh random inputs and compare with torch.

Every check draws new inputs (never zeros), poisons every output with NaN before the run
(so an element the kernel never writes cannot pass, whatever the program declares: the
task's reference names the outputs), checks that every input is unchanged afterwards (a
kernel may not scribble over what it reads, even where it also stores), and compares each
output with the task's float32 reference elementwise:

    |out - ref| <= atol * rms(ref) + rtol * |ref|

The tolerance is relative to the reference's scale, so an all-zero output fails.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field

from ..dsl.program import Program
from ..task import Sizes, Task


@dataclass
class Correctness:
    """The verdict of one correctness check at one shape."""

    ok: bool
    sizes: dict[str, int]
    max_abs_err: float = math.nan
    max_rel_err: float = math.nan  # max |out - ref| / rms(ref)
    mismatches: int = 0
    first_mismatch: list[int] | None = None  # element coordinates
    message: str = ""
    outputs: dict[str, float] = field(default_factory=dict)  # name -> rms(ref)

    def to_dict(self) -> dict:
        return asdict(self)


def check(program: Program, task: Task, sizes: Sizes, launcher, device="cpu",
          seed: int = 0) -> Correctness:
    """Run `launcher` (from `argus_env.lower.load`) at `sizes` and compare with the reference."""
    import torch
    sizes = task.program_sizes(program, sizes) if hasattr(task, "program_sizes") else sizes
    gen = torch.Generator(device=device).manual_seed(seed)
    inputs = task.make_inputs(program, sizes, device, gen)
    saved = {k: v.clone() for k, v in inputs.items()}
    reference = task.reference(saved, sizes)  # from copies: the kernel cannot reach it
    # the task's outputs (the reference's keys) start poisoned even when the program reads
    # them or never writes them; so does any other tensor the task does not supply
    args = dict(inputs)
    for p in program.kernel.tensors:
        if p.name in reference or p.name not in args:
            args[p.name] = _poisoned(p, program.kernel.extents(sizes), device)
    absent = [name for name in reference if name not in args]
    if absent:
        return Correctness(False, dict(sizes), message=f"the program has no output tensor "
                           f"`{absent[0]}`")
    launcher(**{p.name: args[p.name] for p in program.kernel.tensors})
    if device != "cpu":
        torch.cuda.synchronize()
    for name, before in saved.items():
        if name not in reference and not torch.equal(before, args[name]):
            changed = int((before != args[name]).sum().item())
            return Correctness(False, dict(sizes), message=f"input `{name}` was modified by "
                               f"the kernel ({changed} of {before.numel()} elements): a kernel "
                               "may write only its outputs")
    return compare({name: args[name] for name in reference}, reference, task, sizes)


def _poisoned(p, sizes: Sizes, device):
    import torch
    from ..dsl.dtypes import DTYPES
    dtype = getattr(torch, DTYPES[p.dtype].torch)
    shape = [sizes[d] for d in p.dims]
    if p.order == "col_major":
        t = torch.empty(shape[::-1], dtype=dtype, device=device).t()
    else:
        t = torch.empty(shape, dtype=dtype, device=device)
    return t.fill_(math.nan if dtype.is_floating_point else -12345)


def compare(outputs: dict, reference: dict, task: Task, sizes: Sizes) -> Correctness:
    """Elementwise comparison of every output with its reference."""
    import torch
    tol = task.tolerance
    verdict = Correctness(True, dict(sizes))
    for name, ref in reference.items():
        out = outputs[name].float()
        ref = ref.float().to(out.device)
        rms = ref.pow(2).mean().sqrt().item() or 1.0
        verdict.outputs[name] = rms
        scale = rms
        if tol.row_dims:  # per-row scale (rows of different magnitude), never below 0
            dims = tuple(range(ref.dim() - tol.row_dims, ref.dim()))
            scale = ref.pow(2).mean(dim=dims, keepdim=True).sqrt()
        err = (out - ref).abs()
        bad = ~(err <= tol.atol * scale + tol.rtol * ref.abs())  # NaN counts as bad
        finite_err = torch.nan_to_num(err, nan=math.inf)
        verdict.max_abs_err = max(_nanmax(verdict.max_abs_err), finite_err.max().item())
        verdict.max_rel_err = verdict.max_abs_err / rms
        n_bad = int(bad.sum().item())
        if n_bad:
            idx = [int(i) for i in torch.nonzero(bad)[0].tolist()]
            verdict.ok = False
            verdict.mismatches += n_bad
            if verdict.first_mismatch is None:
                verdict.first_mismatch = idx
                got, want = out[tuple(idx)].item(), ref[tuple(idx)].item()
                verdict.message = (f"`{name}` differs from the reference at {n_bad} of "
                                   f"{ref.numel()} elements; first at {tuple(idx)}: got {got:.6g}, "
                                   f"expected {want:.6g}")
    return verdict


def _nanmax(x: float) -> float:
    return -math.inf if math.isnan(x) else x
