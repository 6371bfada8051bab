"""Validation and summary statistics of a models x items score matrix (NaN = missing)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np


def score_matrix_stats(
    matrix: np.ndarray, model_names: list[str], item_ids: list[str]
) -> dict[str, Any]:
    """Per-model and per-item means, missing fractions, constant items and duplicate model rows.

    * A *constant item* has at least one observed score and all observed scores equal:
      it cannot discriminate between models (useless for score-based coresets).
    * *Duplicate model rows* are groups of models whose score vectors are identical,
      missing cells included (usually the same model uploaded under two names).
    """
    matrix = np.asarray(matrix, dtype=np.float64)
    n_models, n_items = matrix.shape
    if len(model_names) != n_models or len(item_ids) != n_items:
        raise ValueError("names do not match the matrix shape")
    observed = ~np.isnan(matrix)
    n_observed = int(observed.sum())
    n_cells = n_models * n_items

    with np.errstate(invalid="ignore", divide="ignore"):
        model_counts = observed.sum(axis=1)
        item_counts = observed.sum(axis=0)
        model_means = np.where(model_counts > 0, np.nansum(matrix, axis=1) / np.maximum(model_counts, 1), np.nan)
        item_means = np.where(item_counts > 0, np.nansum(matrix, axis=0) / np.maximum(item_counts, 1), np.nan)
        # ``initial`` keeps the reductions valid on a matrix without models (shape (0, n_items)).
        item_min = np.where(item_counts > 0, np.min(np.where(observed, matrix, np.inf), axis=0, initial=np.inf), np.nan)
        item_max = np.where(item_counts > 0, np.max(np.where(observed, matrix, -np.inf), axis=0, initial=-np.inf),
                            np.nan)

    constant = [
        {"item": item_ids[j], "value": float(item_min[j]), "n_observed": int(item_counts[j])}
        for j in np.flatnonzero((item_counts > 0) & (item_min == item_max))
    ]

    groups: dict[bytes, list[int]] = {}
    # inf marks missing (NaN would never compare equal); + 0.0 turns -0.0 into 0.0 so equal rows have equal bytes.
    filled = np.where(observed, matrix + 0.0, np.inf)
    for i in range(n_models):
        groups.setdefault(filled[i].tobytes(), []).append(i)
    duplicates = [[model_names[i] for i in idx] for idx in groups.values() if len(idx) > 1]

    def per_row(key: str, names: Sequence[str], means: np.ndarray, counts: np.ndarray, size: int
                ) -> list[dict[str, Any]]:
        """Mean, number of scores and missing fraction of each model (row) or item (column)."""
        return [{key: names[i], "mean": _num(means[i]), "n_scores": int(counts[i]),
                 "missing_fraction": 1.0 - counts[i] / size if size else 0.0} for i in range(len(names))]

    def _num(x: float) -> float | None:
        return None if np.isnan(x) else float(x)

    return {
        "n_models": n_models,
        "n_items": n_items,
        "n_scores": n_observed,
        "missing_fraction": (1.0 - n_observed / n_cells) if n_cells else 0.0,
        "mean": _num(float(np.nanmean(matrix))) if n_observed else None,
        "models": per_row("model", model_names, model_means, model_counts, n_items),
        "items": per_row("item", item_ids, item_means, item_counts, n_models),
        "constant_items": constant,
        "duplicate_models": duplicates,
    }
