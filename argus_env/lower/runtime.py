"""Helpers the generated launchers call: size binding, argument checks, device queries.

Kept out of the generated text so each launcher reads as "check, allocate, launch".
"""

from __future__ import annotations

INTERPRETER_NUM_SMS = 3  # odd and small, so persistent loops run several tiles per program


class LaunchError(ValueError):
    """A launcher was called with tensors that do not fit the kernel's signature."""


def bind_sizes(kernel: str, sizes: tuple[str, ...], **tensors) -> tuple[int, ...]:
    """Read each size symbol from the first given tensor that has it, checking rank."""
    found: dict[str, int] = {}
    for name, (t, dims) in tensors.items():
        if t is None:
            continue
        if t.dim() != len(dims):
            raise LaunchError(f"{kernel}: `{name}` must have {len(dims)} dims {list(dims)}, "
                              f"got shape {tuple(t.shape)}")
        for d, n in zip(dims, t.shape):
            found.setdefault(d, int(n))
    missing = [s for s in sizes if s not in found]
    if missing:
        raise LaunchError(f"{kernel}: cannot infer size {missing[0]} from the given tensors")
    return tuple(found[s] for s in sizes)


def check_tensors(kernel: str, **tensors) -> None:
    """Shapes, dtypes, devices and storage orders of every tensor argument.

    Each value is `(tensor, expected_shape, torch_dtype, order)`; offsets are computed in
    32-bit integers inside the kernel, so every tensor must span fewer than 2**31 elements.
    """
    device = None
    for name, (t, shape, dtype, order) in tensors.items():
        if tuple(t.shape) != tuple(shape):
            raise LaunchError(f"{kernel}: `{name}` must have shape {tuple(shape)}, got "
                              f"{tuple(t.shape)}")
        if t.dtype != dtype:
            raise LaunchError(f"{kernel}: `{name}` must be {dtype}, got {t.dtype}")
        device = device or t.device
        if t.device != device:
            raise LaunchError(f"{kernel}: `{name}` is on {t.device}, others on {device}")
        if order == "col_major" and t.dim() == 2 and t.stride(0) != 1 and t.shape[0] > 1:
            raise LaunchError(f"{kernel}: `{name}` must be column-major (stride(0) == 1), got "
                              f"strides {t.stride()}; pass `x.t().contiguous().t()`")
        span = 1 + sum((n - 1) * abs(s) for n, s in zip(t.shape, t.stride()))
        if span >= 2**31:
            raise LaunchError(f"{kernel}: `{name}` spans {span} elements; 32-bit offsets "
                              "need fewer than 2**31")


def num_sms(device) -> int:
    """Streaming multiprocessors of `device` (a fixed small number under the interpreter)."""
    import torch
    if getattr(device, "type", str(device)) == "cuda":
        return torch.cuda.get_device_properties(device).multi_processor_count
    return INTERPRETER_NUM_SMS
