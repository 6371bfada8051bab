"""Tuning the sparsity ``alpha`` of facility location on calibration models (paper §3.1, §4.1)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from evalplan.core.coresets.metrics import coreset_errors
from evalplan.core.selection.base import check_embeddings, check_k, check_labels
from evalplan.core.selection.facility_location import FacilityLocation

DEFAULT_GRID: tuple[float, ...] = (0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0)


def fill_missing_with_model_means(scores: Any) -> np.ndarray:
    """Replace NaN by the model's (row's) mean observed score; rows without any score are dropped."""
    Y = np.asarray(scores, dtype=np.float64)
    if Y.ndim != 2:
        raise ValueError(f"calibration scores must be (models, items), got shape {Y.shape}")
    observed = ~np.isnan(Y)
    Y = Y[observed.any(axis=1)]
    observed = observed[observed.any(axis=1)]
    means = np.where(observed, Y, 0.0).sum(axis=1) / observed.sum(axis=1)
    return np.where(observed, Y, means[:, None])


def tune_alpha(
    embeddings: Any,
    labels: Any,
    k: int,
    calibration_scores: Any,
    capabilities: Sequence[str],
    grid: Sequence[float] = DEFAULT_GRID,
    stratify: bool = True,
) -> tuple[float, list[dict[str, Any]]]:
    """Pick ``alpha`` from ``grid`` minimizing Cap-MRE of the FL coreset on calibration models (§4.1).

    ``calibration_scores`` is models x items (NaN allowed: filled with each model's mean observed
    score for the evaluation, as the paper does for held-out models); ``capabilities`` maps
    benchmark index -> capability name. Ties on Cap-MRE go to the lower MRE, then the smaller alpha;
    a NaN error ranks last. Returns ``(best_alpha, table)`` with one
    ``{"alpha", "t", "cap_mre", "mre"}`` row per grid value, in grid order.
    """
    X = check_embeddings(embeddings, dtype=np.float32)
    y = check_labels(labels, X.shape[0])
    k = check_k(k, X.shape[0])
    if not len(grid) or any(not (isinstance(a, (int, float)) and math.isfinite(a) and a > 0) for a in grid):
        raise ValueError(f"grid must be a non-empty sequence of positive numbers, got {grid!r}")
    Y = np.asarray(calibration_scores, dtype=np.float64)
    if Y.ndim != 2 or Y.shape[1] != X.shape[0]:
        raise ValueError(f"calibration scores must be (models, {X.shape[0]}), got shape {Y.shape}")
    Y = fill_missing_with_model_means(Y)
    if Y.shape[0] == 0:
        raise ValueError("calibration scores have no model with an observed score")

    table: list[dict[str, Any]] = []
    for alpha in grid:
        fl = FacilityLocation(k=k, alpha=float(alpha), stratify=stratify).fit(X, y)
        errors = coreset_errors(Y, y, capabilities, fl.ranking_)
        table.append({"alpha": float(alpha), "t": fl.t_, "cap_mre": errors["cap_mre"], "mre": errors["mre"]})

    def key(row: dict[str, Any]) -> tuple[float, float, float]:
        def v(x: float) -> float:
            return math.inf if math.isnan(x) else x
        return v(row["cap_mre"]), v(row["mre"]), row["alpha"]

    best = min(table, key=key)
    return best["alpha"], table
