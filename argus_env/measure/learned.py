"""What the cost models get wrong, learned from the GPU tables, and how wrong they are.

The analytic models (`measure/model.py`, `tasks/<task>/model.py`) price a program from
its structure. The tables (`tasks/<task>/table_<gpu>*.csv`) hold what the GPU measured.
This module sets the two side by side:

* `samples(task)`: every recorded row that ran, with the program it timed (recovered from
  the row's configuration text and confirmed by its program hash when it still matches),
  the analytic model's time for it and the measured time.
* `Correction`: a gradient-boosted regressor (scikit-learn) on what the program executes
  (the structure the analytic model read), the problem sizes and the model's own estimate
  (`correction.structure`), predicting log(measured / model). `fit_export` fits it on
  every row and exports it for pricing (`measure/correction.py`).
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
    structure: dict = dataclasses.field(default_factory=dict)  # the correction's inputs


def samples(task, hardware: str = "h200", target=None, limit: int | None = None
            ) -> tuple[list[Sample], dict]:
    """The rows of `task`'s tables that ran (the first `limit` rows of each table, when
    given), each with the program it timed and the analytic model's time; and counts of
    what could not be used, by reason."""
    from .analytic import ModelBackend
    # the analytic model alone: the correction learns what it gets wrong
    backend = ModelBackend(target if target is not None else hardware, estimator="analytic")
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
                inputs = backend.correction_inputs(program, sizes, task) if m.ok else None
                ok = bool(m.ok) and m.ms > 0 and inputs is not None
                if not ok:
                    skipped["model refuses it"] += 1
                out.append(Sample(row["shape"], sizes, config, row["program_hash"],
                                  program.hash == row["program_hash"], float(row["ms"]),
                                  float(m.ms) if ok else math.nan, ok, inputs or {}))
    return out, skipped


def feature_names(batch: list[Sample]) -> list[str]:
    """Every input any sample has, sorted (a sample lacking one reads 0)."""
    return sorted(set().union(*(s.structure for s in batch))) if batch else []


#: the learner's settings (chosen once on the H100 tables' held-out folds, then fixed)
LEARNER = dict(n_estimators=300, learning_rate=0.05, max_depth=4, min_samples_leaf=5,
               subsample=0.8, loss="huber")


class Correction:
    """log(measured / model) predicted from what the program executes (`Sample.structure`,
    `correction.structure`); `ms(samples)` the corrected times. Fitted with scikit-learn's
    gradient boosting, and evaluated for pricing exactly as `correction.TreeCorrection`
    evaluates its export."""

    def __init__(self, seed: int = 0):
        try:
            from sklearn.ensemble import GradientBoostingRegressor
        except ImportError as e:  # pragma: no cover - depends on the installation
            raise ImportError("fitting the cost-model correction needs scikit-learn: "
                              "pip install 'argus-env[learn]'") from e
        self.model = GradientBoostingRegressor(random_state=seed, **LEARNER)
        self.names: list[str] = []
        self.range = (-math.inf, math.inf)

    def fit(self, train: list[Sample]) -> "Correction":
        from .correction import TreeCorrection
        self.names = feature_names(train)
        y = [math.log(s.measured_ms / s.model_ms) for s in train]
        self.model.fit([self._row(s.structure) for s in train], y)
        self.range = (min(y), max(y))
        self.trees = TreeCorrection(self.export())
        return self

    def _row(self, structure: dict) -> list[float]:
        return [structure.get(n, 0.0) for n in self.names]

    def export(self, **fields) -> dict:
        from .correction import export
        return export(self.model, self.names, log_ratio_range=list(self.range), **fields)

    def ms(self, batch: list[Sample]) -> list[float]:
        """Corrected times, as pricing computes them (the exported trees, the fit's range)."""
        return [s.model_ms * self.trees.factor(s.structure) for s in batch]


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


def decide(analytic: dict, corrected: dict, tolerance: float = 0.05) -> tuple[bool, str]:
    """Whether pricing uses a correction, from one held-out evaluation of both estimators
    (`scores`): its median |log error| must be lower and its within-shape Spearman no more
    than `tolerance` lower (or unranked on both)."""
    ea, ec = analytic.get("median_abs_log_error"), corrected.get("median_abs_log_error")
    ra, rc = analytic.get("spearman_within_shape"), corrected.get("spearman_within_shape")
    if ea is None or ec is None:
        return False, "no held-out programs to evaluate it on"
    if not ec < ea:
        return False, f"median |log error| {ec:.3f} is not below the analytic model's {ea:.3f}"
    if ra is not None and (rc is None or rc < ra - tolerance):
        return False, (f"within-shape Spearman {rc} falls more than {tolerance} below the "
                       f"analytic model's {ra:.3f}")
    return True, (f"median |log error| {ea:.3f} -> {ec:.3f}, within-shape Spearman "
                  f"{'-' if ra is None else f'{ra:.3f}'} -> {'-' if rc is None else f'{rc:.3f}'}")


def fit_export(task, hardware: str = "h200", heldout: list[Sample] | None = None,
               **fields) -> dict:
    """The correction fitted on every usable row of the task's tables, exported for pricing
    (`correction.TreeCorrection`) with the evaluation that decides whether pricing uses it:
    on `heldout` (programs timed on the GPU that the tables never held, e.g. random legal
    walks) where given, else on shapes the fit never saw (grouped cross-validation).
    The evaluation's corrected figures are the expected error a corrected price carries."""
    rows, _ = samples(task, hardware)
    usable = [s for s in rows if s.model_ok]
    if len(usable) < 10:
        raise ValueError(f"{task.name} on {hardware}: {len(usable)} usable table rows, too few "
                         f"to fit a correction")
    fitted = Correction(0).fit(usable)
    if heldout:
        test = [s for s in heldout if s.model_ok]
        basis = "held-out walks"
        analytic, corrected = (scores(test, [s.model_ms for s in test]),
                               scores(test, fitted.ms(test)))
    else:
        basis = "held-out shapes"
        analytic = scores(usable, [s.model_ms for s in usable])
        corrected = scores(usable, cross_validated(usable, lambda s: s.shape))
    use, why = decide(analytic, corrected)
    expected = {**{k: corrected.get(k) for k in ("median_abs_log_error", "p90_abs_log_error",
                                                 "spearman_within_shape", "programs")},
                "basis": basis}
    return fitted.export(task=task.name, hardware=hardware, rows=len(usable), use=use,
                         decision=why, expected_error=expected,
                         evaluation={"basis": basis, "analytic": analytic,
                                     "corrected": corrected}, **fields)


__all__ = ["ConfigRecovery", "Correction", "LEARNER", "LEGACY_FIELDS", "Sample",
           "cross_validated", "decide", "error_file", "evaluate", "expected_error", "feature_names",
           "fit_export", "parse_config_text", "samples", "scores", "table_paths"]
