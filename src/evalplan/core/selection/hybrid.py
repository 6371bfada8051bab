"""Facility location stratified by reference-model item difficulty (``facility_location_hybrid``).

Not a paper's method: an extension of papers/000 §3.1 for when some models' scores exist. Items are
split, within each benchmark, into ``strata`` equal-size groups by their *difficulty* (the mean score
of the reference models on the item; a higher value is an easier item), plus one group of the items
no reference has a score on. Each benchmark gets a share of the budget proportional to its size, each
group a share of its benchmark's budget proportional to its size (``stratified_counts``: largest
remainder, at least one per group when the budget allows), and facility location (§3.1, eqs. 1-2,
``FacilityLocation`` with ``stratify=False`` on the group's items, ``t = ceil(alpha n_g / k_g)``)
picks the group's items. The coreset mean is then (up to rounding of the allocation) the classic
proportionally allocated stratified estimator, whose sampling variance drops by the share of the
score variance that difficulty explains; facility location spreads the picks of a group over its
region of embedding space instead of drawing them at random.

The ranking interleaves the groups proportionally (the ``r``-th pick of a group of ``k_g`` at
``(r + 1) / k_g``), so a prefix of it is again roughly stratified; ``gains_`` are the facility-location
gains within each group (comparable only inside a group).
"""

from __future__ import annotations

import math
from typing import Any, ClassVar

import numpy as np

from evalplan.core.selection.base import ParamSpec, TextSelector, check_embeddings, check_k, check_labels
from evalplan.core.selection.baselines import stratified_counts
from evalplan.core.selection.facility_location import FacilityLocation

DEFAULT_STRATA = 5
MAX_STRATA = 1000


def difficulty_strata(difficulty: np.ndarray, labels: np.ndarray, per_benchmark: np.ndarray,
                      strata: int) -> tuple[np.ndarray, list[dict[str, Any]]]:
    """Group id of every item and one description per group (``benchmark``, ``size``, ``low``/``high``
    difficulty, ``unknown``). Within benchmark ``b`` the items with a difficulty are sorted by it (ties by
    index) and cut into ``min(strata, per_benchmark[b], n_known)`` near-equal groups; the items without
    one form one more group. Benchmarks with a zero budget get a single group."""
    group = np.full(labels.size, -1, dtype=np.int64)
    groups: list[dict[str, Any]] = []
    for b in range(int(labels.max()) + 1 if labels.size else 0):
        rows = np.flatnonzero(labels == b)
        if rows.size == 0:
            continue
        d = difficulty[rows]
        known = rows[~np.isnan(d)]
        unknown = rows[np.isnan(d)]
        if known.size:
            order = known[np.lexsort((known, difficulty[known]))]
            n_groups = max(1, min(strata, int(per_benchmark[b]), known.size))
            for part in np.array_split(order, n_groups):
                group[part] = len(groups)
                groups.append({"benchmark": b, "size": int(part.size), "low": float(difficulty[part[0]]),
                               "high": float(difficulty[part[-1]]), "unknown": False})
        if unknown.size:
            group[unknown] = len(groups)
            groups.append({"benchmark": b, "size": int(unknown.size), "low": None, "high": None, "unknown": True})
    return group, groups


class HybridFacilityLocation(TextSelector):
    """Facility location within difficulty strata of the reference models (module docstring).

    ``fit(embeddings, labels, difficulty)``: ``difficulty`` is the ``(n,)`` mean reference score of
    each item (NaN where no reference has one); it is required.

    Parameters: ``k``, ``strata`` (difficulty groups per benchmark, default 5), ``alpha`` (FL sparsity
    within a group, default 1), ``seed`` (unused: deterministic).

    Attributes: ``ranking_``, ``gains_``, ``strata_`` (group of every item), ``groups_`` (per group:
    benchmark, size, difficulty range, ``picked``).
    """

    PARAMS: ClassVar[dict[str, ParamSpec]] = {
        "strata": ParamSpec(int, "difficulty groups per benchmark (equal-size quantile bins of the reference "
                                 "models' mean item score); the budget is split across them by size",
                            default=DEFAULT_STRATA, minimum=1, maximum=MAX_STRATA),
        "alpha": ParamSpec(float, "facility-location sparsity within a group: each item keeps its top "
                                  "t = ceil(alpha * n_group / k_group) similarities",
                           minimum=0, exclusive_minimum=True),
    }
    _dtype = np.float32

    def __init__(self, k: int, strata: int = DEFAULT_STRATA, alpha: float = 1.0, seed: int = 0) -> None:
        self.k = k
        self.strata = strata
        self.alpha = alpha
        self.seed = seed

    def _validate_extra_params(self) -> None:
        if isinstance(self.strata, bool) or not isinstance(self.strata, (int, np.integer)) \
                or not 1 <= int(self.strata) <= MAX_STRATA:
            raise ValueError(f"strata must be an integer between 1 and {MAX_STRATA}, got {self.strata!r}")
        if isinstance(self.alpha, bool) or not isinstance(self.alpha, (int, float)) \
                or not math.isfinite(self.alpha) or self.alpha <= 0:
            raise ValueError(f"alpha must be a positive number, got {self.alpha!r}")

    def fit(self, embeddings: Any, labels: Any = None, difficulty: Any = None) -> HybridFacilityLocation:
        """Validate, select ``k`` rows within the difficulty strata; returns ``self``."""
        if difficulty is None:
            raise ValueError("facility_location_hybrid needs the items' difficulty (reference models' mean scores)")
        self.validate_params()
        X = check_embeddings(embeddings, dtype=self._dtype)
        y = check_labels(labels, X.shape[0])
        k = check_k(self.k, X.shape[0])
        d = np.asarray(difficulty, dtype=np.float64)
        if d.shape != (X.shape[0],):
            raise ValueError(f"difficulty must have shape ({X.shape[0]},), got {d.shape}")
        if np.isinf(d).any():
            raise ValueError("difficulty must be finite or NaN (unknown)")
        self._difficulty = d
        self._store_selection(*self._select(X, y, k), k)
        del self._difficulty
        return self

    def _select(self, X: np.ndarray, labels: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        per_benchmark = stratified_counts(np.bincount(labels), k)
        group, groups = difficulty_strata(self._difficulty, labels, per_benchmark, int(self.strata))
        picks: list[tuple[float, int, int, float]] = []
        for b in np.flatnonzero(per_benchmark):
            ids = [g for g, info in enumerate(groups) if info["benchmark"] == b]
            counts = stratified_counts(np.array([groups[g]["size"] for g in ids]), int(per_benchmark[b]))
            for g, c in zip(ids, counts):
                groups[g]["picked"] = int(c)
                if c == 0:
                    continue
                rows = np.flatnonzero(group == g)
                fl = FacilityLocation(k=int(c), alpha=float(self.alpha), stratify=False).fit(X[rows])
                for r, (row, gain) in enumerate(zip(fl.ranking_, fl.gains_)):
                    picks.append(((r + 1) / int(c), g, int(rows[row]), float(gain)))
        for info in groups:
            info.setdefault("picked", 0)
        picks.sort(key=lambda p: (p[0], p[1]))
        self.strata_ = group
        self.groups_ = groups
        return np.array([p[2] for p in picks], dtype=np.int64), np.array([p[3] for p in picks])


def item_difficulty(scores: Any) -> np.ndarray:
    """``(items,)`` mean over the reference models (rows) of each item's observed scores; NaN where none."""
    Y = np.asarray(scores, dtype=np.float64)
    if Y.ndim != 2:
        raise ValueError(f"reference scores must be (models, items), got shape {Y.shape}")
    observed = ~np.isnan(Y)
    counts = observed.sum(axis=0)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(counts > 0, np.where(observed, Y, 0.0).sum(axis=0) / np.maximum(counts, 1), np.nan)
