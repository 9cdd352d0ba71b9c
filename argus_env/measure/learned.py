"""What the cost models get wrong, learned from the GPU tables, and how wrong they are.

The analytic models (`measure/model.py`, `tasks/<task>/model.py`) price a program from
its structure. The tables (`tasks/<task>/table_<gpu>*.csv`) hold what the GPU measured.
This module sets the two side by side:

* `samples(task)`: every recorded row that ran, with the program it timed (recovered from
  the row's configuration text and confirmed by its program hash when it still matches),
  the analytic model's time for it and the measured time.
* `Correction`: a gradient-boosted regressor (scikit-learn) on the configuration's fields,
  the problem sizes and the model's own estimate, predicting log(measured / model).
* `evaluate(task)`: the analytic model alone and with the correction, on programs and on
  shapes the fit never saw (grouped K-fold), as within-shape Spearman and |log error|.
* `expected_error(task, hardware)`: the figures `benchmarks/fit_cost_model.py` recorded in
  `tasks/<task>/model_error_<gpu>.json`, which every model-priced measurement carries.

Fitting needs scikit-learn (`pip install argus-env[learn]`); reading the recorded errors
does not (`measure/recorded.py` holds that, and the parsing of a row's configuration).
"""

from __future__ import annotations

import csv
import dataclasses
import math
from dataclasses import dataclass
from .recorded import (LEGACY_FIELDS, ConfigRecovery, error_file, expected_error,
                       parse_config_text, table_paths)

@dataclass
class Sample:
    shape: str
    sizes: dict
    config: object
    program_hash: str
    hash_matches: bool        # the row's program hash is that of the program rendered now
    measured_ms: float
    model_ms: float
    model_ok: bool


def samples(task, hardware: str = "h200", target=None, limit: int | None = None
            ) -> tuple[list[Sample], dict]:
    """The rows of `task`'s tables that ran (the first `limit` rows of each table, when
    given), each with the program it timed and the analytic model's time; and counts of
    what could not be used, by reason."""
    from .analytic import ModelBackend
    backend = ModelBackend(target if target is not None else hardware)
    recover = ConfigRecovery(task)
    out, skipped = [], {"failed on the GPU": 0, "configuration not recovered": 0,
                        "model refuses it": 0}
    for path in table_paths(task, hardware):
        with path.open() as f:
            for n, row in enumerate(csv.DictReader(f)):
                if limit is not None and n >= limit:
                    break
                if row.get("ok") != "True":
                    skipped["failed on the GPU"] += 1
                    continue
                config = recover(row)
                if config is None:
                    skipped["configuration not recovered"] += 1
                    continue
                sizes = {d: int(row[d]) for d in task.size_names() if row.get(d, "") != ""}
                program = task.bind(task.space.program(config), sizes)
                m = backend.measure(program, sizes, task)
                if not m.ok or not m.ms > 0:
                    skipped["model refuses it"] += 1
                out.append(Sample(row["shape"], sizes, config, row["program_hash"],
                                  program.hash == row["program_hash"], float(row["ms"]),
                                  float(m.ms) if m.ok else math.nan, bool(m.ok)))
    return out, skipped


def _value(v) -> float:
    if isinstance(v, bool):
        return float(v)
    if isinstance(v, (int, float)):
        return float(v)
    if v is None:
        return 0.0
    return float(sum(map(ord, str(v))) % 97 + 1)  # a stable code for a named choice


def features(s: Sample) -> list[float]:
    """The learner's inputs: the configuration's fields, log2 of every size, the model's
    log time."""
    cfg = [_value(getattr(s.config, f.name)) for f in dataclasses.fields(s.config)]
    dims = [math.log2(max(int(v), 1)) for _, v in sorted(s.sizes.items())]
    return cfg + dims + [math.log(s.model_ms)]


class Correction:
    """log(measured / model) predicted from `features`; `ms(sample)` the corrected time."""

    def __init__(self, seed: int = 0):
        try:
            from sklearn.ensemble import HistGradientBoostingRegressor
        except ImportError as e:  # pragma: no cover - depends on the installation
            raise ImportError("fitting the cost-model correction needs scikit-learn: "
                              "pip install 'argus-env[learn]'") from e
        self.model = HistGradientBoostingRegressor(max_iter=200, learning_rate=0.08,
                                                   max_leaf_nodes=15, min_samples_leaf=5,
                                                   l2_regularization=1.0, random_state=seed)

    def fit(self, train: list[Sample]) -> "Correction":
        self.model.fit([features(s) for s in train],
                       [math.log(s.measured_ms / s.model_ms) for s in train])
        return self

    def ms(self, batch: list[Sample]) -> list[float]:
        if not batch:
            return []
        pred = self.model.predict([features(s) for s in batch])
        return [s.model_ms * math.exp(float(p)) for s, p in zip(batch, pred)]


def _spearman(x: list[float], y: list[float]) -> float:
    from scipy.stats import spearmanr
    if len(x) < 3 or len(set(x)) < 2 or len(set(y)) < 2:
        return math.nan
    return float(spearmanr(x, y)[0])


def scores(batch: list[Sample], predicted_ms: list[float]) -> dict:
    """Within-shape Spearman (mean over shapes with 3+ programs, weighted by programs) and
    |log(predicted / measured)| (median, 90th percentile, largest)."""
    errors = sorted(abs(math.log(p / s.measured_ms)) for s, p in zip(batch, predicted_ms))
    by_shape: dict[str, list] = {}
    for s, p in zip(batch, predicted_ms):
        by_shape.setdefault(s.shape, []).append((p, s.measured_ms))
    rhos, weights = [], []
    for pairs in by_shape.values():
        rho = _spearman([a for a, _ in pairs], [b for _, b in pairs])
        if not math.isnan(rho):
            rhos.append(rho)
            weights.append(len(pairs))
    n = len(errors)
    return {"programs": n, "shapes": len(by_shape), "shapes_ranked": len(rhos),
            "spearman_within_shape": (sum(r * w for r, w in zip(rhos, weights)) / sum(weights)
                                      if rhos else None),
            "median_abs_log_error": errors[n // 2] if n else None,
            "p90_abs_log_error": errors[min(n - 1, int(0.9 * n))] if n else None,
            "max_abs_log_error": errors[-1] if n else None}


def _folds(keys: list, k: int) -> list[list[int]]:
    """Indices split into `k` folds by group key (every sample of a key in one fold)."""
    groups = sorted(set(keys), key=str)
    fold_of = {g: i % k for i, g in enumerate(groups)}
    return [[i for i, key in enumerate(keys) if fold_of[key] == f] for f in range(k)]


def cross_validated(batch: list[Sample], group, k: int = 5, seed: int = 0) -> list[float]:
    """Each sample's corrected time from a fit that never saw its group (`group(sample)`:
    the configuration for held-out programs, the shape for held-out shapes)."""
    keys = [group(s) for s in batch]
    k = max(2, min(k, len(set(keys))))
    out = [math.nan] * len(batch)
    for held in _folds(keys, k):
        if not held:
            continue
        hold = set(held)
        train = [s for i, s in enumerate(batch) if i not in hold]
        pred = Correction(seed).fit(train).ms([batch[i] for i in held])
        for i, p in zip(held, pred):
            out[i] = p
    return out


def evaluate(task, hardware: str = "h200") -> dict:
    """The analytic model alone, and with the correction on held-out programs and on
    held-out shapes, on every usable row of the task's tables."""
    rows, skipped = samples(task, hardware)
    usable = [s for s in rows if s.model_ok]
    result = {"task": task.name, "hardware": hardware, "rows_used": len(usable),
              "rows_skipped": {**skipped},
              "rows_hash_matching": sum(s.hash_matches for s in usable),
              "tables": [str(p.name) for p in table_paths(task, hardware)]}
    if len(usable) < 10:
        result["note"] = "too few rows to fit or rank"
        return result
    result["analytic"] = scores(usable, [s.model_ms for s in usable])
    result["corrected_heldout_programs"] = scores(
        usable, cross_validated(usable, lambda s: repr(s.config)))
    result["corrected_heldout_shapes"] = scores(
        usable, cross_validated(usable, lambda s: s.shape))
    return result


__all__ = ["ConfigRecovery", "Correction", "LEGACY_FIELDS", "Sample", "cross_validated",
           "error_file", "evaluate", "expected_error", "features", "parse_config_text",
           "samples", "scores", "table_paths"]
