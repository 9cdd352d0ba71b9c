"""The correctness oracle: run a program on fresh random inputs and compare with torch.

Every check draws new inputs (never zeros), poisons every output with NaN before the run
(so an element the kernel never writes cannot pass), checks that the inputs are unchanged
afterwards (a kernel may not scribble over what it reads), and compares each output with
the task's float32 reference elementwise:

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
    gen = torch.Generator(device=device).manual_seed(seed)
    inputs = task.make_inputs(program, sizes, device, gen)
    saved = {k: v.clone() for k, v in inputs.items()}
    outputs = {}
    for p in program.kernel.tensors:
        if p.name in program.info.outputs:
            outputs[p.name] = _poisoned(p, sizes, device)
    args = {**inputs, **outputs}
    launcher(**{p.name: args[p.name] for p in program.kernel.tensors})
    if device != "cpu":
        torch.cuda.synchronize()
    for name, before in saved.items():
        if not torch.equal(before, inputs[name]) and name not in program.info.stored:
            return Correctness(False, dict(sizes), message=f"input `{name}` was modified by "
                               "the kernel")
    reference = task.reference(saved, sizes)
    return compare(outputs, reference, task, sizes)


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
        err = (out - ref).abs()
        bad = ~(err <= tol.atol * rms + tol.rtol * ref.abs())  # NaN counts as bad
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
