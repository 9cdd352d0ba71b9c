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


OFFSET_LIMIT = 2**31  # the first element count that 32-bit offsets cannot reach


def outer_dim(order: str, rank: int) -> int:
    """The dim with the largest stride in the declared storage order."""
    return 1 if order == "col_major" and rank == 2 else 0


def _span(t, dims) -> int:
    """Elements from the first to the last one reached along `dims` (all strides taken)."""
    return 1 + sum((t.shape[d] - 1) * abs(t.stride(d)) for d in dims)


def check_tensors(kernel: str, **tensors) -> None:
    """Shapes, dtypes, devices and storage orders of every tensor argument.

    Each value is `(tensor, expected_shape, torch_dtype, order, access)`. Sizes and block
    coordinates are 32-bit in the kernel, so every dim must be shorter than 2**31. With
    `access == "pointer"` the kernel computes `index * stride` offsets in 32 bits, except
    along the outermost dim when `wide_offsets` asks for 64 bits; so the other dims must
    span fewer than 2**31 elements. TMA descriptors (`access == "tma"`) address in 64 bits.
    """
    device = None
    for name, (t, shape, dtype, order, access) in tensors.items():
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
        if any(n >= OFFSET_LIMIT for n in t.shape):
            raise LaunchError(f"{kernel}: `{name}` has shape {tuple(t.shape)}; sizes are 32-bit "
                              "in the kernel, so every dim must be shorter than 2**31")
        if access == "pointer":
            outer = outer_dim(order, t.dim())
            inner = _span(t, [d for d in range(t.dim()) if d != outer])
            if inner >= OFFSET_LIMIT:
                raise LaunchError(
                    f"{kernel}: `{name}` spans {inner} elements along its dims other than dim "
                    f"{outer} (strides {t.stride()}); 64-bit offsets cover dim {outer} only, "
                    "so the others need fewer than 2**31")


def wide_offsets(t, order: str) -> bool:
    """Whether pointer offsets into `t` need 64 bits: its span reaches 2**31 elements.

    The kernel then widens the stride of the outermost dim (`outer_dim`) to 64 bits;
    `check_tensors` has made sure the other dims fit in 32.
    """
    return _span(t, range(t.dim())) >= OFFSET_LIMIT


def num_sms(device) -> int:
    """Streaming multiprocessors of `device` (a fixed small number under the interpreter)."""
    import torch
    if getattr(device, "type", str(device)) == "cuda":
        return torch.cuda.get_device_properties(device).multi_processor_count
    return INTERPRETER_NUM_SMS
