"""The learned correction the cost models price with: what the analytic model gets wrong on
a GPU, learned from that GPU's tables, applied to what a program executes.

The analytic models (`measure/model.py`, `tasks/<task>/model.py`) price a program from its
executed structure. On the programs agents actually visit they are off by a median 1.2-1.6x
(`benchmarks/results/heldout_walks_h100/`). A gradient-boosted correction of
log(measured / model), fitted on the tables (`measure/learned.py`,
`benchmarks/fit_cost_model.py --export`), brings that down; this module is the part that
prices with it, and needs no learning library:

* `structure(...)`: the learner's inputs. The executed structure the analytic model itself
  read (GEMM: `KernelFeatures`; a task with a model of its own: that model's features),
  log2 of every problem size and the model's own log time. Never the program's names, its
  text or its configuration object: two programs that execute the same are corrected
  alike, and a decoy the live-program analysis removes changes nothing.
* `TreeCorrection`: the fitted trees, read from `tasks/<task>/correction_<gpu>.json`
  (exported from scikit-learn's `GradientBoostingRegressor`, whose public tree arrays it
  evaluates exactly as scikit-learn does), with the held-out evaluation that decided
  whether pricing uses it (`use`) and the expected error a corrected figure carries.
* `correction_for(task, hardware)`: the correction pricing uses on that GPU, or None
  (no file, or the file's evaluation found it no better than the analytic model).
* Fits are pinned like table rows: a record names the fit it was priced with (`fit_id`,
  the first 12 hex digits of the file's sha256; `hashes.correction`), every fit that
  priced a record is kept in `tasks/<task>/corrections/` (`archive`, which a refit calls
  before it writes), and `correction_for(..., fit=)` reads that fit back, so a refit does
  not change what an older record replays to.

A corrected time never goes below the roofline's (compulsory traffic at the DRAM bandwidth,
the FLOPs at the tensor cores' peak): a tree's guess cannot make a program faster than the
hardware allows.
"""

from __future__ import annotations

import dataclasses
import json
import math
from functools import lru_cache
from pathlib import Path

#: pricing with the analytic model alone, or with the learned correction where one is used
ESTIMATORS = ("analytic", "corrected")
DEFAULT_ESTIMATOR = "corrected"
#: an environment or board line that names no estimator was made before the correction
LEGACY_ESTIMATOR = "analytic"
FORMAT = 1
_SKIP = {"task", "sizes", "tma_pitches"}


def check_estimator(estimator: str) -> str:
    if estimator not in ESTIMATORS:
        raise ValueError(f"estimator must be one of {', '.join(map(repr, ESTIMATORS))}, "
                         f"got {estimator!r}")
    return estimator


def _code(value) -> float | None:
    """A feature's value as a number: booleans 0/1, numbers as they are, a named choice
    (an MMA instruction, say) as a stable code; None for what is neither (left out)."""
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, (int, float)):
        return float(value) if math.isfinite(float(value)) else None
    if isinstance(value, str):
        return float(sum(map(ord, value)) % 97 + 1)
    return None


def structure(features, sizes: dict, model_ms: float) -> dict[str, float]:
    """The correction's inputs for one priced program: `features` (a dataclass or dict: the
    structure the analytic model read), log2 of each size, log of the model's time."""
    if dataclasses.is_dataclass(features) and not isinstance(features, type):
        features = dataclasses.asdict(features)
    out: dict[str, float] = {}
    for name, value in sorted(dict(features or {}).items()):
        if name in _SKIP:
            continue
        v = _code(value)
        if v is not None:
            out[name] = v
    for name, value in sorted(sizes.items()):
        if isinstance(value, int) and not isinstance(value, bool):   # sizes, not settings
            out[f"log2_{name}"] = math.log2(max(value, 1))
    out["log_model_ms"] = math.log(model_ms)
    return out


class TreeCorrection:
    """A fitted correction: log(measured / model) = init + rate * sum of the trees' leaves,
    each tree walked as scikit-learn walks it (`x <= threshold` goes left, the input taken
    at float32 precision first, as its trees read their inputs)."""

    def __init__(self, data: dict, path: Path | None = None):
        if data.get("format") != FORMAT:
            raise ValueError(f"{path or 'correction'}: format {data.get('format')!r}, "
                             f"this version reads {FORMAT}")
        self.data, self.path = data, path
        self.names: list[str] = list(data["features"])
        self.init = float(data["init"])
        self.rate = float(data["learning_rate"])
        self.trees = [(t["feature"], t["threshold"], t["left"], t["right"], t["value"])
                      for t in data["trees"]]
        self.use = bool(data.get("use"))
        lo, hi = data.get("log_ratio_range", (-math.inf, math.inf))
        self.range = (float(lo), float(hi))

    def vector(self, s: dict[str, float]) -> list[float]:
        import numpy as np
        return [float(np.float32(s.get(n, 0.0))) for n in self.names]

    def log_ratio(self, s: dict[str, float]) -> float:
        """The predicted log(measured / model), within the range the fit saw."""
        x = self.vector(s)
        total = 0.0
        for feature, threshold, left, right, value in self.trees:
            i = 0
            while left[i] != -1:
                i = left[i] if x[feature[i]] <= threshold[i] else right[i]
            total += value[i]
        lo, hi = self.range
        return min(hi, max(lo, self.init + self.rate * total))

    def factor(self, s: dict[str, float]) -> float:
        return math.exp(self.log_ratio(s))

    @property
    def expected_error(self) -> dict | None:
        """The held-out error of corrected figures (what they carry), or None."""
        return self.data.get("expected_error")

    @property
    def source(self) -> str:
        return f"{self.path.parent.name}/{self.path.name}" if self.path else "correction"


def export(model, names: list[str], **fields) -> dict:
    """A fitted scikit-learn `GradientBoostingRegressor` as the JSON `TreeCorrection` reads
    (its public `init_`, `learning_rate` and `estimators_[i, 0].tree_` arrays)."""
    init = model.init_
    if hasattr(init, "constant_"):
        base = float(init.constant_.ravel()[0])
    else:
        raise ValueError("export: the model's initial estimator has no constant")
    trees = []
    for est in model.estimators_[:, 0]:
        t = est.tree_
        trees.append({"feature": [int(v) for v in t.feature],
                      "threshold": [float(v) for v in t.threshold],
                      "left": [int(v) for v in t.children_left],
                      "right": [int(v) for v in t.children_right],
                      "value": [float(v) for v in t.value.reshape(-1)]})
    return {"format": FORMAT, "features": list(names), "init": base,
            "learning_rate": float(model.learning_rate), "trees": trees, **fields}


def correction_path(task, hardware: str) -> Path | None:
    if not getattr(task, "anchors_file", None):
        return None
    return Path(task.anchors_file).parent / f"correction_{hardware}.json"


@lru_cache(maxsize=32)
def _load(path: str, stamp: float) -> TreeCorrection | None:
    p = Path(path)
    return TreeCorrection(json.loads(p.read_text()), p)


def load_correction(task, hardware: str) -> TreeCorrection | None:
    """The task's fitted correction for `hardware` (used or not), or None."""
    path = correction_path(task, hardware.lower())
    if path is None or not path.exists():
        return None
    return _load(str(path), path.stat().st_mtime)


def fit_id(path: Path) -> str:
    """A correction file's identity: the first 12 hex digits of its bytes' sha256."""
    import hashlib
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()[:12]


def archive_path(task, hardware: str, fit: str) -> Path | None:
    if not getattr(task, "anchors_file", None):
        return None
    return Path(task.anchors_file).parent / "corrections" / f"correction_{hardware}_{fit}.json"


def archive(task, hardware: str) -> Path | None:
    """Keep the task's current fit for `hardware` in `corrections/` (where it is not kept
    yet), so the records priced with it replay after a refit; its path, or None."""
    path = correction_path(task, hardware.lower())
    if path is None or not path.exists():
        return None
    kept = archive_path(task, hardware.lower(), fit_id(path))
    if not kept.exists():
        kept.parent.mkdir(parents=True, exist_ok=True)
        kept.write_bytes(path.read_bytes())
    return kept


def load_fit(task, hardware: str, fit: str) -> TreeCorrection:
    """The fit `fit` (`fit_id`) of the task's correction for `hardware`: the current file
    where it is that fit, else the kept one; a ValueError where neither is."""
    if not (isinstance(fit, str) and len(fit) == 12
            and all(c in "0123456789abcdef" for c in fit)):
        raise ValueError(f"a correction fit is 12 hex digits (fit_id), got {fit!r}")
    hardware = hardware.lower()
    current = correction_path(task, hardware)
    if current is not None and current.exists() and fit_id(current) == fit:
        return load_correction(task, hardware)
    kept = archive_path(task, hardware, fit)
    if kept is None or not kept.exists() or fit_id(kept) != fit:
        raise ValueError(f"the {task.name} correction fit {fit} for {hardware} is neither "
                         f"{current} nor kept in {kept.parent if kept else 'corrections/'}: "
                         f"a record priced with it cannot be replayed")
    return _load(str(kept), kept.stat().st_mtime)


def correction_for(task, hardware: str, fit: str | None = None) -> TreeCorrection | None:
    """The correction pricing uses for `task` on `hardware`: None where no fit exists or
    its held-out evaluation kept the analytic model (`use: false`). With `fit`, that fit
    (`load_fit`) rather than the current one."""
    c = load_fit(task, hardware, fit) if fit is not None else load_correction(task, hardware)
    return c if c is not None and c.use else None


__all__ = ["DEFAULT_ESTIMATOR", "ESTIMATORS", "LEGACY_ESTIMATOR", "TreeCorrection",
           "archive", "archive_path", "check_estimator", "correction_for", "correction_path",
           "export", "fit_id", "load_correction", "load_fit", "structure"]
