"""mRMR coreset selection on a reference score matrix (paper §2.1-2.2, appendix E-F).

``MRMR(k, scheme, estimator, n_neighbors, seed).fit(Y)`` with ``Y`` the (models x items) score
matrix. The relevance of item i is ``I(Y[:, i]; s̄)`` with ``s̄`` the mean score of each model
over the benchmark; greedy selection starts from the most relevant item, then picks

* ``scheme="miq"`` (default): ``relevance / mean redundancy``,
* ``scheme="mid"``: ``relevance - mean redundancy``,

where the mean redundancy of a candidate is its mean MI with the items already selected. The
redundancy sums are updated incrementally: after each pick, ONE batched MI column (the new pick
vs all still-unselected items) is computed and added. The MIQ denominator is guarded by
``max(redundancy, MIQ_EPS)``, so a candidate with (estimated) zero redundancy gets a very large
score proportional to its relevance.

Estimators (``n_neighbors`` defaults: 5 for binary items, 8 for continuous ones)

================  =====================================  ==============================
estimator         item-item (redundancy)                 item-mean score (relevance)
================  =====================================  ==============================
auto, binary Y    exact plug-in                          Ross (2014) kNN
auto, cont. Y     KSG-1                                  KSG-1
"ross"            exact plug-in (binary Y required)      Ross
"plugin"          exact plug-in (binary Y required)      plug-in, treating the mean score
                                                         as discrete (overfits when models
                                                         have distinct means; for testing)
"ksg"             KSG-1                                  KSG-1
"ksg_pca"         LNC / PCA-corrected KSG                LNC / PCA-corrected KSG
================  =====================================  ==============================

Continuous variables entering a kNN estimator are preprocessed like scikit-learn's
``mutual_info_regression``: scaled by their std (no centering) and jittered with
``1e-10 * max(1, mean|v|)`` Gaussian noise from ``np.random.RandomState(seed)`` (first the item
columns, for the KSG estimators, then the mean score) -- ties (e.g. mean scores of binary items)
otherwise break kNN estimators. With the Ross estimator the relevance vector therefore equals
``mutual_info_regression(Y, s̄, discrete_features=True, n_neighbors=n_neighbors,
random_state=seed)``. ``seed`` only affects this jitter; ties in the criterion are broken by the
lowest item index, so ``fit`` is deterministic.

Constant items (zero variance across models) carry no information: all their MI values are set
to 0 and they are never selected while a non-constant item remains; if ``k`` exceeds the number
of non-constant items, they are appended in index order with criterion value 0.

Fitted attributes: ``ranking_`` (k selected item indices in pick order), ``gains_`` (criterion
value at each pick; the first pick's value is its relevance), ``relevance_`` (all items),
``n_neighbors_``, ``estimator_`` (resolved name), ``binary_``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from sklearn.base import BaseEstimator
from sklearn.utils import check_array

from evalplan.core.selection.base import check_k, check_seed
from evalplan.core.selection.mutual_information import (
    mi_binary_from_counts,
    mi_binary_matrix,
    mi_ksg_matrix,
    mi_ross_matrix,
    sklearn_jitter,
)

SCHEMES = ("miq", "mid")
ESTIMATORS = ("auto", "plugin", "ross", "ksg", "ksg_pca")
MIQ_EPS = 1e-12


def _plugin_discrete_target(X: np.ndarray, t: np.ndarray) -> np.ndarray:
    """Plug-in MI between 0/1 columns of X and a discrete target with arbitrary values."""
    n = X.shape[0]
    _, codes = np.unique(t, return_inverse=True)
    T = np.eye(codes.max() + 1)[codes]                 # (n, L) one-hot
    n1 = T.T @ X                                       # (L, m) count(x=1, t=l)
    nl = T.sum(0)[:, None]
    a1 = X.sum(0)[None, :]
    mi = np.zeros(X.shape[1])
    for nab, na in ((n1, a1), (nl - n1, n - a1)):
        with np.errstate(divide="ignore", invalid="ignore"):
            term = np.where(nab > 0, nab / n * np.log(n * nab / (na * nl)), 0.0)
        mi += term.sum(0)
    return np.maximum(mi, 0.0)


class MRMR(BaseEstimator):  # type: ignore[misc]  # scikit-learn ships no type stubs
    """Minimum-redundancy maximum-relevance item selection (see module docstring)."""

    def __init__(self, k: int = 10, scheme: str = "miq", estimator: str = "auto",
                 n_neighbors: int | None = None, seed: int = 0):
        self.k = k
        self.scheme = scheme
        self.estimator = estimator
        self.n_neighbors = n_neighbors
        self.seed = seed

    # -- helpers ------------------------------------------------------------------------------
    def _resolve(self, Y: np.ndarray) -> tuple[bool, str, int]:
        if self.scheme not in SCHEMES:
            raise ValueError(f"scheme must be one of {SCHEMES}, got {self.scheme!r}")
        if self.estimator not in ESTIMATORS:
            raise ValueError(f"estimator must be one of {ESTIMATORS}, got {self.estimator!r}")
        binary = bool(np.all((Y == 0) | (Y == 1)))
        est = self.estimator
        if est == "auto":
            est = "ross" if binary else "ksg"
        if est in ("plugin", "ross") and not binary:
            raise ValueError(f"estimator={est!r} needs binary (0/1) item scores")
        nn = self.n_neighbors
        if nn is None:
            nn = 5 if est in ("plugin", "ross") else 8
        if isinstance(nn, bool) or not isinstance(nn, (int, np.integer)) or nn < 1:
            raise ValueError(f"n_neighbors must be a positive integer, got {nn!r}")
        if est in ("ross", "ksg", "ksg_pca") and Y.shape[0] <= nn:
            raise ValueError(f"need more than n_neighbors={nn} models, got {Y.shape[0]}")
        return binary, est, int(nn)

    def prepare(self, Y: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray, bool, str, int]:
        """Validated inputs of the MI computations: (Y used for items, mean-score target)."""
        Y = np.asarray(check_array(Y, dtype=np.float64, ensure_all_finite=True, ensure_min_samples=2,
                                   input_name="Y"))
        binary, est, nn = self._resolve(Y)
        target = Y.mean(axis=1)
        rng = np.random.RandomState(check_seed(self.seed))
        Yi = Y
        if est in ("ksg", "ksg_pca"):
            Yi = sklearn_jitter(Y, rng)
        if est != "plugin":
            target = sklearn_jitter(target, rng)
        return Y, Yi, target, binary, est, nn

    def mi_column(self, Yi: np.ndarray, j: int, cols: np.ndarray, est: str, nn: int) -> np.ndarray:
        """MI between item j and the items ``cols`` (the batched redundancy column)."""
        if est in ("plugin", "ross"):
            return mi_binary_matrix(Yi[:, cols], Yi[:, j])
        return mi_ksg_matrix(Yi[:, cols], Yi[:, j], nn, pca=(est == "ksg_pca"))

    def relevance(self, Yi: np.ndarray, target: np.ndarray, est: str, nn: int) -> np.ndarray:
        if est == "plugin":
            return _plugin_discrete_target(Yi, target)
        if est == "ross":
            return mi_ross_matrix(Yi, target, nn)
        return mi_ksg_matrix(Yi, target, nn, pca=(est == "ksg_pca"))

    # -- fit ----------------------------------------------------------------------------------
    def fit(self, Y: Any, y: Any = None) -> MRMR:
        Y, Yi, target, binary, est, nn = self.prepare(Y)
        n_models, m = Y.shape
        k = check_k(self.k, m)
        const = np.ptp(Y, axis=0) == 0
        live = ~const

        rel = np.zeros(m)
        if live.any():
            rel[live] = self.relevance(Yi[:, live], target, est, nn)
        red_sum = np.zeros(m)
        # exact plug-in redundancy from counts: one product with every column per pick, no column copies
        colsum = Yi.sum(axis=0) if est in ("plugin", "ross") else None
        selected = np.zeros(m, dtype=bool)
        ranking, gains = [], []
        for t in range(k):
            cand = live & ~selected
            if not cand.any():                              # only constant items remain
                j = int(np.flatnonzero(~selected)[0])
                g = 0.0
            else:
                if t == 0:
                    score = rel
                else:
                    red = red_sum / t
                    score = (rel - red) if self.scheme == "mid" else rel / np.maximum(red, MIQ_EPS)
                score = np.where(cand, score, -np.inf)
                j = int(np.argmax(score))
                g = float(score[j])
            ranking.append(j)
            gains.append(g)
            selected[j] = True
            if t + 1 < k and live[j]:
                rest = np.flatnonzero(live & ~selected)
                if rest.size and colsum is not None:
                    n11 = (Yi[:, j] @ Yi)[rest]
                    red_sum[rest] += mi_binary_from_counts(n11, colsum[rest], float(colsum[j]), float(n_models))
                elif rest.size:
                    red_sum[rest] += self.mi_column(Yi, j, rest, est, nn)

        self.ranking_ = np.asarray(ranking, dtype=np.int64)
        self.gains_ = np.asarray(gains, dtype=np.float64)
        self.relevance_ = rel
        self.n_neighbors_ = nn
        self.estimator_ = est
        self.binary_ = binary
        return self
