"""Where a measurement was made: GPU, driver, clocks, library versions, date."""

from __future__ import annotations

import datetime
import platform
import subprocess


def _smi(query: str) -> str:
    try:
        out = subprocess.run(["nvidia-smi", f"--query-gpu={query}", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=20)
        return out.stdout.strip().splitlines()[0] if out.returncode == 0 and out.stdout else ""
    except (OSError, subprocess.TimeoutExpired):
        return ""


def collect(device_index: int = 0) -> dict:
    """A JSON-ready record of the machine and software a measurement ran on."""
    import torch
    import triton
    rec = {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "host": platform.node(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "triton": triton.__version__,
        "cuda": torch.version.cuda,
    }
    if torch.cuda.is_available():
        props = torch.cuda.get_device_properties(device_index)
        rec.update(gpu=props.name, sms=props.multi_processor_count,
                   memory_gib=round(props.total_memory / 2**30, 1),
                   capability=f"{props.major}.{props.minor}",
                   driver=_smi("driver_version"),
                   clocks_mhz=_smi("clocks.sm,clocks.mem,clocks.max.sm"),
                   power=_smi("power.draw,power.limit"))
    else:
        rec["gpu"] = None
    return rec
