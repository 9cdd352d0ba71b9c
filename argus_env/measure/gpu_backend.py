"""The live `gpu` backend: measurements made now, on this machine's GPU, in a worker
process (a hang is a timeout, a crash a fault; the environment keeps going)."""

from __future__ import annotations

from ..dsl.program import Program
from ..target import Target
from .analytic import ModelBackend
from .features import KernelFeatures, extract
from .measurement import Backend, Measurement
from .worker import Worker


class GPUBackend(Backend):
    name = "gpu"
    deterministic = False

    def __init__(self, hardware: Target | str = "h200", timeout: float = 120.0, rounds: int = 3,
                 rep_ms: int = 40, worker: Worker | None = None):
        self.model = ModelBackend(hardware)
        self.target, self.profile = self.model.target, self.model.profile
        self.worker = worker or Worker(interpret=False, timeout=timeout)
        self.options = {"rounds": rounds, "rep_ms": rep_ms,
                        "peak_tflops": self.profile.bf16_tflops_peak,
                        "dram_tbps": self.profile.dram_tbps_peak}

    def measure(self, program: Program, sizes: dict, task, features: KernelFeatures | None = None
                ) -> Measurement:
        f = features or extract(program, sizes, task, target=self.target)
        ans = self.worker.run(program.text, task.name, sizes, op="measure", options=self.options)
        details = {k: ans.get(k) for k in ("status", "message", "ms_rounds", "anchor_ms_rounds",
                                            "ratio", "input_sets", "provenance", "max_rel_err")}
        if not ans.get("ok"):
            return Measurement("gpu", False, error=f"{ans.get('status')}: {ans.get('message', '')}",
                               details=details)
        return Measurement("gpu", True, ans["ms"], ans["tflops"], ans["anchor_tflops"],
                           self.model.roofline(f), details=details)
