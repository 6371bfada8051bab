"""Does a text coreset beat random selection? A backtest on the reference models' scores.

``Y`` is references x items (NaN = missing), ``labels`` the benchmark index of each item. A model's
true score is the mean over benchmarks of its mean observed score on each (eq. 3 of papers/000), its
coreset estimate the same over the coreset's items -- what ``POST /v1/coresets/{id}/predict`` returns
for a text coreset. Errors are ``estimate - truth`` in score units.

* :func:`overall_errors`: the errors of one selection on every reference.
* :func:`crossfit_errors`: the errors of a *selection procedure* that used the references' scores
  (difficulty strata, a tuned alpha): the references are split into folds, the procedure is re-run on
  the other folds' scores and scored on the held-out fold, so no reference judges a coreset chosen
  with its own scores.
* :func:`compare_to_random`: ``draws`` random coresets with the same number of items per benchmark
  (uniform within each benchmark), the RMSE of each on the references; the coreset's RMSE against
  them as a ratio (``rmse_ratio`` = coreset RMSE / random RMSE pooled over draws) and as
  ``p_beats_random`` (the share of random draws whose RMSE is higher; ties count half). The random
  errors give random's own backtested interval: the half-width that holds ``level`` of the
  (draw, reference) errors.
* :func:`recommendation`: keep the method when its backtested RMSE is below random's
  (``rmse_ratio < threshold``, default 1: a lower expected squared error than a random coreset of the
  same size), else recommend ``random`` (``stratified_random`` across several benchmarks) with that
  interval. ``p_beats_random`` is reported, not used: it compares one coreset with the *median* random
  draw, and a method ~10% better than random in RMSE reaches only ~0.5 of it (docs/RESULTS.md).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from evalplan.core.coresets.metrics import benchmark_scores, overall_scores

DEFAULT_DRAWS = 200
DEFAULT_FOLDS = 3
KEEP_RATIO_THRESHOLD = 1.0


def truth(Y: np.ndarray, labels: np.ndarray, n_benchmarks: int) -> np.ndarray:
    """``(M,)`` full-benchmark overall score of each reference (NaN when it has none)."""
    return overall_scores(benchmark_scores(Y, labels, None, n_benchmarks))


def overall_errors(Y: np.ndarray, labels: np.ndarray, n_benchmarks: int, selected: Any,
                   true: np.ndarray | None = None) -> np.ndarray:
    """``(M,)`` coreset estimate minus full-benchmark truth per reference; NaN where either is undefined."""
    if true is None:
        true = truth(Y, labels, n_benchmarks)
    pred = overall_scores(benchmark_scores(Y, labels, selected, n_benchmarks))
    return np.asarray(pred - true)


def rmse(errors: np.ndarray) -> float:
    e = np.asarray(errors, dtype=np.float64)
    e = e[~np.isnan(e)]
    return float(np.sqrt(np.mean(e ** 2))) if e.size else float("nan")


def reference_folds(n_models: int, n_folds: int, seed: int) -> list[np.ndarray]:
    """``min(n_folds, n_models)`` seeded near-equal folds of the reference rows (sorted within a fold)."""
    perm = np.random.default_rng(seed).permutation(n_models)
    return [np.sort(f) for f in np.array_split(perm, max(1, min(n_folds, n_models)))]


def crossfit_errors(select: Callable[[np.ndarray], np.ndarray], Y: np.ndarray, labels: np.ndarray,
                    n_benchmarks: int, *, n_folds: int = DEFAULT_FOLDS, seed: int = 0) -> np.ndarray:
    """Errors of ``select`` (training reference rows -> selected item indices) on held-out folds."""
    Y = np.asarray(Y, dtype=np.float64)
    errors = np.full(Y.shape[0], np.nan)
    folds = reference_folds(Y.shape[0], n_folds, seed)
    if len(folds) < 2:
        raise ValueError("cross-fitting needs at least 2 reference models")
    for test in folds:
        train = np.setdiff1d(np.arange(Y.shape[0]), test)
        selected = np.asarray(select(train), dtype=np.int64)
        errors[test] = overall_errors(Y[test], labels, n_benchmarks, selected)
    return errors


def random_selections(labels: np.ndarray, counts: np.ndarray, draws: int, seed: int) -> list[np.ndarray]:
    """``draws`` uniform samples with ``counts[b]`` items of benchmark ``b`` each."""
    rng = np.random.default_rng(seed)
    pools = [np.flatnonzero(labels == b) for b in range(len(counts))]
    return [np.concatenate([rng.choice(pool, size=int(c), replace=False) for pool, c in zip(pools, counts) if c > 0])
            for _ in range(draws)]


def compare_to_random(errors: np.ndarray, Y: np.ndarray, labels: np.ndarray, counts: Any, *,
                      draws: int = DEFAULT_DRAWS, seed: int = 0, level: float = 0.95) -> dict[str, Any]:
    """The coreset's reference errors (``errors``) against ``draws`` random coresets of the same
    per-benchmark ``counts`` on the same references (module docstring)."""
    Y = np.asarray(Y, dtype=np.float64)
    labels = np.asarray(labels, dtype=np.int64)
    counts = np.asarray(counts, dtype=np.int64)
    B = len(counts)
    errors = np.asarray(errors, dtype=np.float64)
    if errors.shape != (Y.shape[0],):
        raise ValueError(f"errors must have shape ({Y.shape[0]},), got {errors.shape}")
    own = rmse(errors)
    true = truth(Y, labels, B)
    random_errors = np.stack([overall_errors(Y, labels, B, sel, true)
                              for sel in random_selections(labels, counts, draws, seed)])
    per_draw = np.array([rmse(e) for e in random_errors])
    pooled = rmse(random_errors.ravel())
    valid = per_draw[~np.isnan(per_draw)]
    p_beats = float((np.sum(valid > own) + 0.5 * np.sum(valid == own)) / valid.size) if valid.size else float("nan")
    abs_random = np.abs(random_errors[~np.isnan(random_errors)])
    return {
        "rmse": own,
        "random_rmse": pooled,
        "rmse_ratio": own / pooled if pooled > 0 else float("nan"),
        "p_beats_random": p_beats,
        "random_rmse_quantiles": {"q10": float(np.quantile(valid, 0.1)), "q50": float(np.quantile(valid, 0.5)),
                                  "q90": float(np.quantile(valid, 0.9))} if valid.size else None,
        "random_interval": {"level": level,
                            "half_width": float(np.quantile(abs_random, level)) if abs_random.size else None},
        "draws": int(draws),
        "n_references": int(np.sum(~np.isnan(errors))),
        "counts": [int(c) for c in counts],
    }


def recommendation(method: str, comparison: dict[str, Any], n_benchmarks: int,
                   threshold: float = KEEP_RATIO_THRESHOLD) -> dict[str, Any]:
    """``{"method", "reason", ...}``: ``method`` itself when its ``rmse_ratio`` to random is below ``threshold``,
    else ``random`` (``stratified_random`` for several benchmarks) with random's backtested interval."""
    p = comparison.get("p_beats_random")
    raw = comparison.get("rmse_ratio")
    ratio = float(raw) if raw is not None else float("nan")
    alternative = "random" if n_benchmarks == 1 else "stratified_random"
    if method in ("random", "stratified_random"):
        return {"method": method, "reason": "a random coreset: its interval assumes exactly this sampling"}
    known = bool(np.isfinite(ratio))
    if known and ratio < threshold:
        return {"method": method, "reason": f"backtested RMSE {comparison['rmse']:.4g} on the references is below "
                                            f"random's {comparison['random_rmse']:.4g} (ratio {ratio:.2f}; it beat "
                                            f"{p:.0%} of the random coresets of the same size)"}
    interval = comparison["random_interval"]
    return {
        "method": alternative,
        "reason": (f"{method}'s backtested RMSE on the references is not below random's (RMSE "
                   f"{comparison['rmse']:.4g} vs random {comparison['random_rmse']:.4g}, ratio {ratio:.2f}; it beat "
                   f"{p:.0%} of the random coresets of the same size): use {alternative} with the same budget; its "
                   "interval is valid for the simple random sample it is"
                   if known else f"no backtest; use {alternative}"),
        "expected_rmse": comparison["random_rmse"],
        "interval": interval,
    }
