"""The analytic model's free constants (`CalibrationParams`) and their fitted values per
hardware profile (`configs/calibration/<profile>.json`, written by
`benchmarks/calibrate_model.py`). A leaf: the model and feature extraction both read it."""

from __future__ import annotations

import json
from dataclasses import dataclass, fields
from functools import lru_cache
from pathlib import Path

CALIBRATION_DIR = Path(__file__).resolve().parents[2] / "configs" / "calibration"


@dataclass(frozen=True)
class CalibrationParams:
    """Every free constant of the model. The defaults are hand-set (tma_latency_us,
    atomic_us and unaligned_atomic start switched off); `CalibrationParams.load(profile)`
    gives a profile's fitted values, written by benchmarks/calibrate_model.py to
    configs/calibration/<profile>.json."""

    sustained_fraction: float = 0.88   # chip MMA rate, sustained timing / achievable (power cap)
    wgmma_efficiency: float = 0.90     # per-SM wgmma rate / datasheet per-SM peak
    mma_v2_efficiency: float = 0.60    # per-SM mma.sync rate / datasheet per-SM peak
    overlap_plain: float = 0.80        # share of the shorter of (MMA, feed) hidden, no TMA/WS
    latency_scale: float = 0.65        # pipelined loads' latency / the profile's latencies
    l2_reuse_onset: float = 0.5        # working set / L2 size where cross-tile reuse starts to fail
    dram_efficiency: float = 0.85      # re-read streams of a GEMM / copy bandwidth
    chip_overlap_p: float = 6.0        # p-norm joining the busiest SM's time and the chip cap
    memory_overlap_p: float = 3.0      # p-norm joining on-chip time and DRAM time
    tma_latency_us: float = 0.0        # extra wait of a TMA load (descriptor, mbarrier)
    unaligned_feed: float = 0.30       # feed-rate factor, non-TMA operand not 16-element aligned
    atomic_feed: float = 0.25          # atomic-add rate / feed bandwidth (split-K epilogue)
    atomic_us: float = 0.0             # one thread's acq_rel atomic add, waited for in turn
    unaligned_atomic: float = 1.0      # atomics' slow-down when N is not 16-aligned
    program_overhead_us: float = 0.3   # start-up of one program (index math, acc init)
    step_overhead_us: float = 0.02     # fixed cost of one k step (stage barrier, loop)

    @classmethod
    def load(cls, profile: str, directory: Path | None = None) -> "CalibrationParams":
        """The constants fitted for `profile`; the hand-set defaults if none were fitted."""
        return _load_params(profile, directory)


@lru_cache(maxsize=32)
def _load_params(profile: str, directory: Path | None) -> CalibrationParams:
    path = Path(directory or CALIBRATION_DIR) / f"{profile.strip().lower()}.json"
    if not path.exists():
        return CalibrationParams()
    params = json.loads(path.read_text()).get("params", {})
    unknown = sorted(set(params) - {f.name for f in fields(CalibrationParams)})
    if unknown:
        raise ValueError(f"{path}: unknown calibration constants {unknown}")
    return CalibrationParams(**params)


