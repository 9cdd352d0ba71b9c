"""The hardware a program is built for: one `Target`, made once from a hardware profile.

`configs/hardware/<name>.yaml` holds a GPU's figures, each with its source; `load_profile`
reads one into a `HardwareProfile`. A `Target` is what the rest of Argus asks of the
hardware: the SM count (`A.num_sms()`), the compute capability, the MMA instructions it
has and the one Triton picks when a program does not say `mma=`, shared memory and
registers, TMA and warp specialization, and the legality rules a configuration must meet
there. The space's preconditions, the checker, feature extraction and every measurement
backend take the same `Target`; resource figures come from `argus_env.resources`.
"""

from __future__ import annotations

import difflib
import os
from dataclasses import dataclass, field, fields
from functools import lru_cache
from pathlib import Path

HARDWARE_DIR = Path(__file__).resolve().parents[1] / "configs" / "hardware"
DEFAULT_HARDWARE = "h200"     # the profile of the project's measured GPU

#: MMA instructions by the oldest compute capability (x10) that has them, best first:
#: Hopper's warpgroup MMA only on sm_90(a), Ampere's mma.sync from sm_80, FMA everywhere
MMA_INSTRUCTIONS = (("wgmma", lambda arch: arch == 90), ("mma_v2", lambda arch: arch >= 80),
                    ("fma", lambda arch: True))
#: the DSL's names for them (`A.dot(..., mma=A.wgmma)`)
MMA_NAMES = tuple(name for name, _ in MMA_INSTRUCTIONS)
TMA_ALIGN_BYTES = 16          # a TMA descriptor's strides must be multiples of 16 bytes


# ---------------------------------------------------------------- hardware profiles
@dataclass(frozen=True)
class HardwareProfile:
    """One GPU's figures, read from configs/hardware/<name>.yaml (see its `source` map)."""

    name: str
    description: str
    arch: int                      # compute capability x 10 (90: sm_90a, 80: sm_80)
    sms: int
    bf16_tflops_peak: float        # datasheet dense bf16
    bf16_tflops_achievable: float  # measured library ceiling (cuBLAS), the model's cap
    fp32_tflops: float
    dram_tbps: float               # measured copy bandwidth (read + write)
    dram_tbps_peak: float          # datasheet
    l2_bytes: int
    l2_tbps: float                 # L2-to-SM tile-load bandwidth, all SMs together
    l2_latency_us: float
    dram_latency_us: float
    smem_per_sm: int
    smem_per_block: int
    smem_reserved_per_block: int
    regs_per_sm: int
    max_regs_per_thread: int
    max_warps_per_sm: int
    max_blocks_per_sm: int
    has_tma: bool
    has_warp_specialization: bool
    launch_us: float
    source: dict = field(default_factory=dict, compare=False, hash=False)


def _hardware_dir(directory: Path | None) -> Path:
    return Path(directory or os.environ.get("ARGUS_HARDWARE_DIR") or HARDWARE_DIR)


def available_profiles(directory: Path | None = None) -> list[str]:
    """Profile names (YAML file stems) in the hardware folder."""
    return sorted(p.stem for p in _hardware_dir(directory).glob("*.yaml"))


# a read-only view of a shipped profile file, keyed by its path: a frozen profile, bounded
@lru_cache(maxsize=32)
def _load(path: Path) -> HardwareProfile:
    import yaml
    data = yaml.safe_load(path.read_text()) or {}
    names = {f.name for f in fields(HardwareProfile)}
    missing = sorted(names - set(data) - {"source"})
    extra = sorted(set(data) - names)
    if missing or extra:
        raise ValueError(f"{path}: missing fields {missing}, unknown fields {extra}")
    return HardwareProfile(**data)


def load_profile(name: str = DEFAULT_HARDWARE, directory: Path | None = None) -> HardwareProfile:
    """The hardware profile `name`; an unknown name lists the known ones and the closest."""
    if not isinstance(name, str):
        raise TypeError(f"a hardware profile is named by a string, got {name!r}")
    key = name.strip().lower()
    known = available_profiles(directory)
    if key not in known:
        close = difflib.get_close_matches(key, known, n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        raise ValueError(f"unknown hardware profile {name!r}{hint} "
                         f"(known: {', '.join(known)}; folder {_hardware_dir(directory)})")
    return _load(_hardware_dir(directory) / f"{key}.yaml")


# ---------------------------------------------------------------- the target
@dataclass(frozen=True)
class Target:
    """What a configuration may ask of one GPU. Build it with `load_target(name)` or
    `Target.from_profile(profile)`; `profile` keeps the performance figures (rates,
    bandwidths, latencies) for the cost models."""

    name: str
    arch: int                      # compute capability x 10
    sms: int
    mma: tuple[str, ...]           # MMA instructions available, best first
    smem_per_sm: int
    smem_per_block: int            # the most one program may use (opt-in limit)
    smem_reserved_per_block: int   # set aside per resident program by the system
    regs_per_sm: int
    max_regs_per_thread: int
    max_warps_per_sm: int
    max_blocks_per_sm: int
    tma: bool
    warp_specialization: bool
    profile: HardwareProfile = field(compare=False, repr=False)

    @classmethod
    def from_profile(cls, p: HardwareProfile) -> "Target":
        if not isinstance(p, HardwareProfile):
            raise TypeError(f"Target.from_profile takes a HardwareProfile, got {type(p).__name__}")
        if p.has_tma and p.arch < 90:
            raise ValueError(f"profile {p.name}: TMA needs sm_90 or later, arch is {p.arch}")
        if p.has_warp_specialization and p.arch < 90:
            raise ValueError(f"profile {p.name}: warp specialization needs sm_90 or later, "
                             f"arch is {p.arch}")
        return cls(p.name, p.arch, p.sms, tuple(n for n, has in MMA_INSTRUCTIONS if has(p.arch)),
                   p.smem_per_sm, p.smem_per_block, p.smem_reserved_per_block, p.regs_per_sm,
                   p.max_regs_per_thread, p.max_warps_per_sm, p.max_blocks_per_sm, p.has_tma,
                   p.has_warp_specialization, p)

    # ------------------------------------------------------------ MMA instruction
    def default_mma(self, num_warps: int, block_m: int) -> str:
        """The instruction a `dot` without `mma=` compiles to here, as Triton picks it:
        warpgroup MMA where the target has it and the program's warps form whole
        warpgroups over at least 64 rows, else mma.sync, else FMA."""
        if "wgmma" in self.mma and num_warps % 4 == 0 and block_m >= 64:
            return "wgmma"
        return "mma_v2" if "mma_v2" in self.mma else "fma"

    def mma_of(self, requested: str | None, num_warps: int, block_m: int) -> str:
        """The instruction of a `dot`: the program's `mma=` choice, else the default."""
        return self.default_mma(num_warps, block_m) if requested is None else requested

    # ------------------------------------------------------------ legality rules
    def mma_reason(self, mma: str, num_warps: int, block_m: int) -> str | None:
        """Why a `dot` cannot use `mma` here, or None."""
        if mma not in MMA_NAMES:
            raise ValueError(f"unknown MMA instruction {mma!r}; use one of {MMA_NAMES}")
        if mma not in self.mma:
            what = {"wgmma": "warpgroup MMA (Hopper sm_90a only)",
                    "mma_v2": "mma.sync tensor cores (sm_80+)"}.get(mma, mma)
            return f"{mma}: {self.name} has no {what}"
        if mma == "wgmma" and (num_warps % 4 or block_m < 64):
            return (f"wgmma: needs whole warpgroups and block_m >= 64, got {num_warps} warps "
                    f"and block_m={block_m}")
        return None

    def tma_reason(self, pitches: dict[str, int] | None = None) -> str | None:
        """Why TMA cannot be used here, or None; `pitches` (tensor -> bytes of one row
        along its contiguous dimension) must be multiples of 16 bytes."""
        if not self.tma:
            return f"TMA: {self.name} has no tensor memory accelerator (sm_90+)"
        for name, pitch in (pitches or {}).items():
            if pitch % TMA_ALIGN_BYTES:
                return (f"TMA: needs {TMA_ALIGN_BYTES}-byte aligned rows, `{name}` has "
                        f"{pitch}-byte rows")
        return None

    def warp_specialization_reason(self) -> str | None:
        if not self.warp_specialization:
            return f"warp specialization: not available on {self.name} (sm_90+)"
        return None


# one frozen Target per profile file (name and folder), so that envs built for one
# hardware share it; bounded like the profiles it is made from
@lru_cache(maxsize=32)
def _target(name: str, directory: Path | None) -> Target:
    return Target.from_profile(load_profile(name, directory))


def load_target(name: str = DEFAULT_HARDWARE, directory: Path | None = None) -> Target:
    """The target of hardware profile `name` (one object per profile and folder)."""
    return _target(name.strip().lower() if isinstance(name, str) else name, directory)


def as_target(hardware) -> Target:
    """`hardware` as a Target: a Target, a HardwareProfile, or a profile name."""
    if isinstance(hardware, Target):
        return hardware
    if isinstance(hardware, HardwareProfile):
        return Target.from_profile(hardware)
    if isinstance(hardware, str):
        return load_target(hardware)
    raise TypeError(f"expected a Target, a HardwareProfile or a profile name, "
                    f"got {type(hardware).__name__}")


__all__ = ["HardwareProfile", "Target", "load_profile", "load_target", "as_target",
           "available_profiles", "MMA_NAMES", "HARDWARE_DIR", "DEFAULT_HARDWARE"]
