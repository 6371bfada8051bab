"""Score-based coreset selectors on a reference score matrix (paper 002 §2.4, paper 000 §4.2).

Every selector is scikit-learn style: ``__init__`` only stores parameters, ``fit(Y)`` takes the
``(models x items)`` reference score matrix ``Y`` (finite values only -- the caller imputes
missing scores) and sets

* ``ranking_``: ``(k,)`` int64 selected item (column) indices,
* ``gains_``: ``(k,)`` float criterion value per pick (NaN where a method has none),
* ``weights_``: ``(k,)`` aligned with ``ranking_`` where the method defines item weights.

The "full-benchmark score" of a model is its mean over all items, ``s = Y.mean(axis=1)``.

Methods (``SCORE_METHODS``)
---------------------------
* :class:`AnchorPoints` (002 §2.4, Vivek et al. 2024) -- k-medoids on the correlation distance
  ``d(i, j) = 1 - corr(Y[:, i], Y[:, j])`` (alternating "Voronoi iteration" k-medoids with
  k-medoids++ seeding and ``n_init`` restarts; ``weights_`` = cluster sizes / n).
* :class:`LassoSelection` (002 §2.4) -- follow the exact LARS-lasso path of ``s`` on the item
  columns until k coefficients are nonzero.
* :class:`RandomSearch` (002 §2.4 Search+/Search++, Zhang et al. 2025b) -- best of ``n_trials``
  random coresets by K-fold cross-validated RMSE of a (kernel) ridge predictor.
* :class:`Hardness` (000 §4.2) -- the k largest 1-PL (Rasch) difficulties, joint maximum
  likelihood.
* :class:`PointBiserial` (000 §4.2, "PBSC") -- the k largest correlations between an item's scores
  and the models' aggregate scores.
* ``MRMR`` (002 §2.1-2.2) -- re-exported from :mod:`evalplan.core.selection.mrmr`.

``PARAMS`` of each class (name -> ``ParamSpec(type, description)``) lists the user-settable
constructor parameters besides ``k`` and ``seed``. ``MRMR`` itself carries no ``PARAMS``
attribute (its module is not ours to change), so :data:`SCORE_PARAMS` holds the parameter specs of
every registered method, MRMR's included.
"""

from __future__ import annotations

import warnings
from abc import abstractmethod
from typing import Any, ClassVar

import numpy as np
from scipy.optimize import minimize
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import lars_path
from sklearn.model_selection import KFold
from sklearn.utils import check_array

from evalplan.core.coresets.predictors import KernelRidgePredictor, RidgePredictor
from evalplan.core.selection.base import CoresetSelector, ParamSpec, check_k
from evalplan.core.selection.mrmr import MRMR

__all__ = [
    "SCORE_METHODS", "SCORE_PARAMS", "MRMR_PARAMS", "AnchorPoints", "LassoSelection",
    "RandomSearch", "Hardness", "PointBiserial", "MRMR", "check_scores", "correlation_distance",
    "kmedoids_cost", "cv_rmse", "rasch_jml",
]


# ----------------------------------------------------------------------------- common
def check_scores(Y: Any, min_models: int = 2) -> np.ndarray:
    """``Y`` as a finite ``(models x items)`` float64 array with at least ``min_models`` rows."""
    return np.asarray(check_array(Y, dtype=np.float64, ensure_all_finite=True, ensure_min_samples=min_models,
                                  ensure_min_features=1, input_name="Y"))


def _standardize(Y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Columns centred and scaled to population std 1 (so ``z_i . z_j / M = corr``); constant
    columns become all-zero. Returns ``(Z, constant_mask)``."""
    Zc = Y - Y.mean(axis=0)
    sd = np.sqrt(np.mean(Zc**2, axis=0))
    const = sd <= 1e-12 * np.maximum(1.0, np.abs(Y).max(axis=0))
    Z = np.zeros_like(Zc)
    Z[:, ~const] = Zc[:, ~const] / sd[~const]
    return Z, const


def correlation_distance(Y: Any) -> np.ndarray:
    """Dense ``(n x n)`` item correlation distance ``1 - corr`` with zero diagonal; a constant item
    (undefined correlation) is at distance 1 from every other item. For tests / small n only."""
    Y = check_scores(Y)
    Z, _ = _standardize(Y)
    D = 1.0 - (Z.T @ Z) / Y.shape[0]
    np.fill_diagonal(D, 0.0)
    return np.asarray(D)


def kmedoids_cost(D: np.ndarray, medoids: Any) -> float:
    """Total distance of every item to its nearest medoid (medoids at distance 0 to themselves)."""
    medoids = np.asarray(medoids, dtype=np.int64)
    return float(np.min(D[:, medoids], axis=1).sum())


class _ScoreSelector(CoresetSelector):
    """Common ``fit`` of the score-based selectors (parameter checks from :class:`CoresetSelector`)."""

    _min_models: ClassVar[int] = 2

    def fit(self, Y: Any, y: Any = None) -> _ScoreSelector:
        """Select ``k`` items from the ``(models x items)`` matrix ``Y``; returns ``self``."""
        self.validate_params()
        Y = check_scores(Y, self._min_models)
        k = check_k(self.k, Y.shape[1])
        self._store_selection(*self._select(Y, k), k)
        return self

    @abstractmethod
    def _select(self, Y: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """``(ranking, gains)`` of ``k`` items (columns) of the score matrix ``Y``."""


def _check_pos_int(name: str, v: Any, minimum: int = 1) -> None:
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {v!r}")


def _top_k(score: np.ndarray, k: int) -> np.ndarray:
    """Indices of the k largest scores, descending, ties broken by the lower index."""
    order = np.lexsort((np.arange(score.size), -score))
    return order[:k]


# ----------------------------------------------------------------------------- Anchor Points
SWAP_MODES = ("auto", "always", "never")
#: ``swap="auto"`` runs the O(n^2 (M + k))-per-swap PAM SWAP phase only up to this many items.
SWAP_AUTO_MAX_ITEMS = 1000
#: items up to which AnchorPoints keeps the item correlation matrix (4,000^2 floats = 128 MB)
CORR_CACHE_MAX_ITEMS = 4000


class AnchorPoints(_ScoreSelector):
    """Anchor Points (Vivek et al. 2024; 002 §2.4): k-medoids over the items' response vectors
    ``Y[:, i]`` with the correlation distance ``d(i, j) = 1 - corr(Y[:, i], Y[:, j])`` (in [0, 2]).

    Algorithm: alternating (Voronoi-iteration, "PAM-style alternate") k-medoids. Each of ``n_init``
    restarts is seeded by k-medoids++ (first medoid uniform, then each next one with probability
    proportional to the squared distance to the nearest chosen medoid; uniform among non-medoids
    if all those distances are 0), then alternates (a) assign every item to its nearest medoid
    (ties -> lower medoid slot; a medoid always belongs to its own cluster) and (b) move each
    medoid to the cluster member minimising the summed distance to the other members (ties ->
    current medoid, then lower index), until the medoids stop changing or ``max_iter``. The restart
    with the lowest total distance (``inertia_``) is kept (ties -> earliest). The alternating
    iteration alone stalls in poor local optima on noisy correlation distances, so each restart is
    then polished by the PAM SWAP phase (Kaufman & Rousseeuw): apply the best single
    medoid/non-medoid exchange while it lowers the total distance (at most ``max_iter`` swaps;
    each pass costs O(n^2 (M + k)), computed in chunks without an n x n matrix). ``swap="auto"``
    does this only for n <= ``SWAP_AUTO_MAX_ITEMS``; ``"always"`` / ``"never"`` force it.
    Randomness: ``numpy.random.default_rng(seed)``, shared by the restarts in order.

    The distance is never materialised: with standardised columns ``z_i`` (population std,
    ``z_i.z_i = M``) ``d(i, j) = 1 - z_i.z_j / M``, so the cost of candidate medoid i of cluster C
    is ``|C| - z_i.S_C / M - d(i, i)``, ``S_C = sum_{j in C} z_j``: O(n M) memory, O(n k M) time per
    iteration.

    Constant items (zero variance over the reference models, correlation undefined) get ``z = 0``,
    i.e. distance exactly 1 to every other item (and 0 to themselves).

    Attributes: ``ranking_`` (the k medoids, by cluster size descending, ties -> lower index),
    ``weights_`` (cluster size / n, aligned with ``ranking_``, sums to 1), ``gains_`` (NaN: no
    per-pick criterion), ``labels_`` ((n,) position in ``ranking_`` of each item's medoid),
    ``inertia_`` (total correlation distance to the nearest medoid), ``n_iter_`` (alternating
    iterations of the kept restart), ``n_swaps_`` (PAM swaps applied).
    """

    PARAMS: ClassVar[dict[str, ParamSpec]] = {
        "n_init": ParamSpec(int, "number of k-medoids++ restarts (>= 1); the lowest total distance wins", maximum=1000),
        "max_iter": ParamSpec(int, "maximum alternating iterations per restart and PAM swaps (>= 1)", maximum=100000),
        "swap": ParamSpec(str, "PAM SWAP refinement: 'auto' (if n <= 1000 items), 'always' or 'never'"),
    }

    def __init__(self, k: int = 10, seed: int = 0, n_init: int = 5, max_iter: int = 100,
                 swap: str = "auto") -> None:
        self.k = k
        self.seed = seed
        self.n_init = n_init
        self.max_iter = max_iter
        self.swap = swap

    def _validate_extra_params(self) -> None:
        _check_pos_int("n_init", self.n_init)
        _check_pos_int("max_iter", self.max_iter)
        if self.swap not in SWAP_MODES:
            raise ValueError(f"swap must be one of {SWAP_MODES}, got {self.swap!r}")

    _corr: np.ndarray | None = None

    def _dist_to(self, Z: np.ndarray, M: int, cols: np.ndarray) -> np.ndarray:
        """(n, len(cols)) correlation distances, with d(c, c) = 0 for c in cols (columns of the item
        correlation matrix when :meth:`_select` computed it once, else products with ``Z``)."""
        C = self._corr
        D = 1.0 - (C[:, cols] if C is not None else (Z.T @ Z[:, cols]) / M)
        D[cols, np.arange(len(cols))] = 0.0
        return np.asarray(D)

    def _init_pp(self, Z: np.ndarray, M: int, k: int, rng: np.random.Generator) -> np.ndarray:
        n = Z.shape[1]
        medoids = [int(rng.integers(n))]
        dmin = self._dist_to(Z, M, np.array(medoids))[:, 0]
        for _ in range(1, k):
            w = np.maximum(dmin, 0.0) ** 2
            w[medoids] = 0.0
            tot = w.sum()
            if tot > 0:
                j = int(rng.choice(n, p=w / tot))
            else:
                free = np.setdiff1d(np.arange(n), medoids)
                j = int(rng.choice(free))
            medoids.append(j)
            dmin = np.minimum(dmin, self._dist_to(Z, M, np.array([j]))[:, 0])
        return np.asarray(medoids, dtype=np.int64)

    def _assign(self, Z: np.ndarray, M: int, medoids: np.ndarray) -> tuple[np.ndarray, float]:
        D = self._dist_to(Z, M, medoids)
        labels = np.argmin(D, axis=1)
        labels[medoids] = np.arange(medoids.size)
        cost = float(D[np.arange(D.shape[0]), labels].sum())
        return labels, cost

    def _run(self, Z: np.ndarray, M: int, self_d: np.ndarray, medoids: np.ndarray
             ) -> tuple[np.ndarray, np.ndarray, float, int]:
        labels, cost = self._assign(Z, M, medoids)
        it = 0
        for it in range(1, self.max_iter + 1):  # noqa: B007 - the count is read after the loop
            new = medoids.copy()
            for c in range(medoids.size):
                members = np.flatnonzero(labels == c)
                S = Z[:, members].sum(axis=1)
                within = members.size - (Z[:, members].T @ S) / M - self_d[members]
                best = within.min()
                cur = int(np.flatnonzero(members == medoids[c])[0])
                # keep the current medoid on (numerical) ties
                if within[cur] <= best + 1e-12 * max(1.0, abs(best)):
                    continue
                new[c] = members[int(np.argmin(within))]
            if np.array_equal(new, medoids):
                break
            new_labels, new_cost = self._assign(Z, M, new)
            if new_cost >= cost - 1e-12 * max(1.0, abs(cost)):
                break  # no improvement (guards against numerical cycling)
            medoids, labels, cost = new, new_labels, new_cost
        return medoids, labels, cost, it

    def _swap(self, Z: np.ndarray, M: int, medoids: np.ndarray, labels: np.ndarray, cost: float
              ) -> tuple[np.ndarray, np.ndarray, float, int]:
        """PAM SWAP phase: repeatedly apply the best (medoid out, item in) exchange while it lowers
        the total distance (steepest descent, ties -> lowest medoid slot then lowest item)."""
        n, k = Z.shape[1], medoids.size
        n_swaps = 0
        chunk = max(1, int(2**22 // max(n, 1)))
        while n_swaps < self.max_iter:
            Dm = self._dist_to(Z, M, medoids)                     # (n, k)
            part = np.partition(Dm, 1, axis=1) if k > 1 else None
            D1 = Dm[np.arange(n), labels]
            D2 = part[:, 1] if part is not None else np.full(n, np.inf)
            onehot = np.zeros((n, k))
            onehot[np.arange(n), labels] = 1.0
            is_med = np.zeros(n, dtype=bool)
            is_med[medoids] = True
            best_delta, best_mh = -1e-12 * max(1.0, abs(cost)), None
            for h0 in range(0, n, chunk):
                hs = np.arange(h0, min(n, h0 + chunk))
                hs = hs[~is_med[hs]]
                if not hs.size:
                    continue
                A = 1.0 - (self._corr[hs] if self._corr is not None else (Z[:, hs].T @ Z) / M)  # (h, n) d(h, j)
                A[np.arange(hs.size), hs] = 0.0
                gain = np.minimum(A - D1, 0.0)
                common = gain.sum(axis=1)
                B = np.minimum(A, D2) - D1 - gain
                delta = common[:, None] + B @ onehot            # (h, k)
                i, c = np.unravel_index(int(np.argmin(delta)), delta.shape)
                if delta[i, c] < best_delta:
                    best_delta, best_mh = float(delta[i, c]), (int(c), int(hs[i]))
            if best_mh is None:
                break
            medoids = medoids.copy()
            medoids[best_mh[0]] = best_mh[1]
            labels, cost = self._assign(Z, M, medoids)
            n_swaps += 1
        return medoids, labels, cost, n_swaps

    def _select(self, Y: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        M = Y.shape[0]
        Z, _ = _standardize(Y)
        self_d = 1.0 - np.sum(Z * Z, axis=0) / M  # 0 for normal items, 1 for constant ones
        rng = np.random.default_rng(self.seed)
        # the (n x n) correlations once (n <= CORR_CACHE_MAX_ITEMS) instead of a product per distance column
        self._corr = (Z.T @ Z) / M if Y.shape[1] <= CORR_CACHE_MAX_ITEMS else None
        best = None
        do_swap = self.swap == "always" or (self.swap == "auto" and Y.shape[1] <= SWAP_AUTO_MAX_ITEMS)
        for _ in range(self.n_init):
            med0 = self._init_pp(Z, M, k, rng)
            medoids, labels, cost, n_iter = self._run(Z, M, self_d, med0)
            n_swaps = 0
            if do_swap:
                medoids, labels, cost, n_swaps = self._swap(Z, M, medoids, labels, cost)
            if best is None or cost < best[2] - 1e-12 * max(1.0, abs(best[2])):
                best = (medoids, labels, cost, n_iter, n_swaps)
        assert best is not None  # n_init >= 1
        medoids, labels, cost, n_iter, n_swaps = best
        self._corr = None  # not a fitted attribute: (n x n) floats
        self.n_swaps_ = n_swaps
        n = Y.shape[1]
        sizes = np.bincount(labels, minlength=k)
        order = np.lexsort((medoids, -sizes))
        pos = np.empty(k, dtype=np.int64)
        pos[order] = np.arange(k)
        self.weights_ = sizes[order] / n
        self.labels_ = pos[labels]
        self.inertia_ = cost
        self.n_iter_ = n_iter
        return medoids[order], np.full(k, np.nan)


# ----------------------------------------------------------------------------- Lasso
class LassoSelection(_ScoreSelector):
    """Lasso coreset (002 §2.4): L1-penalised linear regression of the full-benchmark score
    ``s = Y.mean(axis=1)`` on the item columns; the penalty is decreased until k coefficients are
    nonzero, and those k items (with their linear model) are the coreset.

    Path: the exact piecewise-linear lasso path from ``sklearn.linear_model.lars_path(
    method="lasso")`` on the centred columns and centred ``s`` (intercept unpenalised, columns not
    rescaled). Constant columns are excluded from the path. The path is examined at every
    breakpoint and at every midpoint between consecutive breakpoints (the active set is constant
    strictly between breakpoints), from the largest penalty down:

    * the first point with exactly k nonzero coefficients is used;
    * if the path jumps over k (several variables enter at one breakpoint, e.g. duplicated
      columns), the first point with more than k nonzero coefficients is used and its k largest
      ``|coef|`` are kept (ties -> lower index); ``weights_`` are then that point's coefficients
      of those items (not refitted);
    * a lasso solution has at most ``rank(centred Y) <= M - 1`` nonzeros, so for large k the path
      may never reach k: the point with the most nonzeros (the first one, from the largest
      penalty) is used and the remaining items are filled in by decreasing
      ``|cov(Y[:, i], s)|`` (the LARS entry criterion; ties -> lower index; constant items last),
      with weight and gain 0.

    Attributes: ``ranking_`` (the path's items by ``|coef|`` descending, ties -> lower index, then
    fill items), ``gains_`` (``|coef|``), ``weights_`` (signed coefficients), ``intercept_``
    (so that ``Y[:, ranking_] @ weights_ + intercept_`` is the lasso fit of ``s``), ``alpha_``
    (lars_path scale: the penalty in ``||y - Xw||^2 / (2M) + alpha ||w||_1``), ``n_path_`` (number
    of items taken from the path, <= k).
    """

    PARAMS: ClassVar[dict[str, ParamSpec]] = {}

    def __init__(self, k: int = 10, seed: int = 0) -> None:
        self.k = k
        self.seed = seed

    def _select(self, Y: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        M, n = Y.shape
        s = Y.mean(axis=1)
        x_mean, s_mean = Y.mean(axis=0), s.mean()
        Xc, sc = Y - x_mean, s - s_mean
        const = np.ptp(Y, axis=0) == 0
        live = np.flatnonzero(~const)

        coef_full = np.zeros(n)
        alpha = 0.0
        n_path = 0
        if live.size and np.any(sc != 0):
            with warnings.catch_warnings():  # rank-deficient (M < n) designs drop regressors
                warnings.simplefilter("ignore", ConvergenceWarning)
                alphas, _, coefs = lars_path(Xc[:, live], sc, method="lasso")
            pts_a, pts_c = [], []
            for t in range(alphas.size):
                pts_a.append(alphas[t])
                pts_c.append(coefs[:, t])
                if t + 1 < alphas.size:
                    pts_a.append(0.5 * (alphas[t] + alphas[t + 1]))
                    pts_c.append(0.5 * (coefs[:, t] + coefs[:, t + 1]))
            C = np.column_stack(pts_c)
            scale = max(np.abs(C).max(), 1e-300)
            nz = np.abs(C) > 1e-12 * scale
            counts = nz.sum(axis=0)
            exact = np.flatnonzero(counts == k)
            over = np.flatnonzero(counts > k)
            if exact.size:
                p = int(exact[0])
            elif over.size:
                p = int(over[0])
            else:
                p = int(np.argmax(counts))
            c = np.where(nz[:, p], C[:, p], 0.0)
            coef_full[live] = c
            alpha = float(pts_a[p])
        chosen = np.flatnonzero(coef_full != 0)
        if chosen.size > k:
            chosen = chosen[_top_k(np.abs(coef_full[chosen]), k)]
        else:
            chosen = chosen[_top_k(np.abs(coef_full[chosen]), chosen.size)]
        n_path = chosen.size
        picked = list(chosen)
        if n_path < k:  # fill by |cov(item, s)|, constants last
            crit = np.abs(Xc.T @ sc) / M
            crit[const] = -np.inf
            crit[chosen] = np.nan
            rest = np.flatnonzero(~np.isnan(crit))
            picked += list(rest[_top_k(crit[rest], k - n_path)])
        ranking = np.asarray(picked, dtype=np.int64)
        w = np.zeros(k)
        w[:n_path] = coef_full[chosen]
        self.weights_ = w
        self.intercept_ = float(s_mean - x_mean[ranking] @ w)
        self.alpha_ = alpha
        self.n_path_ = int(n_path)
        return ranking, np.abs(w)


# ----------------------------------------------------------------------------- Search+
PREDICTORS = ("ridge", "kernel_ridge")


def _make_predictor(name: str) -> RidgePredictor | KernelRidgePredictor:
    if name == "ridge":
        return RidgePredictor()
    if name == "kernel_ridge":
        return KernelRidgePredictor()
    raise ValueError(f"predictor must be one of {PREDICTORS}, got {name!r}")


def _folds(M: int, cv: int, seed: int) -> list[tuple[np.ndarray, np.ndarray]]:
    n_splits = min(int(cv), M)
    return list(KFold(n_splits=n_splits, shuffle=True, random_state=seed).split(np.zeros(M)))


def _cv_rmse_folds(X: np.ndarray, y: np.ndarray, folds: list[tuple[np.ndarray, np.ndarray]], predictor: str) -> float:
    resid = np.empty_like(y)
    for tr, te in folds:
        p = _make_predictor(predictor).fit(X[tr], y[tr])
        resid[te] = y[te] - p.predict(X[te])
    return float(np.sqrt(np.mean(resid**2)))


def cv_rmse(Y: Any, items: Any, predictor: str = "ridge", cv: int = 5, seed: int = 0) -> float:
    """K-fold cross-validated RMSE of predicting ``Y.mean(axis=1)`` from ``Y[:, items]`` with the
    given predictor (the Search+ criterion; same folds as :class:`RandomSearch` with this seed)."""
    Y = check_scores(Y, 3)
    items = np.asarray(items, dtype=np.int64)
    return _cv_rmse_folds(Y[:, items], Y.mean(axis=1), _folds(Y.shape[0], cv, seed), predictor)


class RandomSearch(_ScoreSelector):
    """Search+ / Search++ (002 §2.4, from Zhang et al. 2025b): sample ``n_trials`` coresets of k
    distinct items uniformly at random (``numpy.random.default_rng(seed)``, one ``choice`` per
    trial; repeats possible), score each by the K-fold cross-validated RMSE of predicting the
    references' full-benchmark score ``Y.mean(axis=1)`` from their coreset scores with
    ``predictor`` (``"ridge"`` = :class:`RidgePredictor`, Search+; ``"kernel_ridge"`` =
    :class:`KernelRidgePredictor`, Search++; each predictor picks its own lambda by LOO inside the
    training folds), and keep the best (ties -> earliest trial).

    Differences from the paper, which samples 10,000 coresets and scores each by the test MAE of a
    single 75%/25% model split: default 1000 trials (cost is ``n_trials * cv`` predictor fits),
    K-fold CV (``KFold(min(cv, M), shuffle=True, random_state=seed)``, the same folds for every
    trial so scores are comparable) and RMSE pooled over all held-out models.

    Attributes: ``ranking_`` (best coreset in sampling order), ``gains_`` (NaN),
    ``best_score_`` (its CV RMSE), ``cv_scores_`` ((n_trials,) CV RMSE per trial),
    ``coresets_`` ((n_trials, k) the sampled coresets), ``best_trial_``, ``n_splits_``.
    Needs at least 3 reference models.
    """

    PARAMS: ClassVar[dict[str, ParamSpec]] = {
        "n_trials": ParamSpec(int, "number of random coresets evaluated (paper: 10000)", maximum=100000),
        "predictor": ParamSpec(str, "'ridge' (Search+) or 'kernel_ridge' (Search++)"),
        "cv": ParamSpec(int, "number of cross-validation folds over reference models (>= 2)", maximum=100),
    }
    _min_models = 3

    def __init__(self, k: int = 10, n_trials: int = 1000, predictor: str = "ridge", cv: int = 5,
                 seed: int = 0) -> None:
        self.k = k
        self.n_trials = n_trials
        self.predictor = predictor
        self.cv = cv
        self.seed = seed

    def _validate_extra_params(self) -> None:
        _check_pos_int("n_trials", self.n_trials)
        _check_pos_int("cv", self.cv, 2)
        if self.predictor not in PREDICTORS:
            raise ValueError(f"predictor must be one of {PREDICTORS}, got {self.predictor!r}")

    def _select(self, Y: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        M, n = Y.shape
        s = Y.mean(axis=1)
        folds = _folds(M, self.cv, self.seed)
        rng = np.random.default_rng(self.seed)
        coresets = np.empty((self.n_trials, k), dtype=np.int64)
        scores = np.empty(self.n_trials)
        for t in range(self.n_trials):
            c = rng.choice(n, size=k, replace=False)
            coresets[t] = c
            scores[t] = _cv_rmse_folds(Y[:, c], s, folds, self.predictor)
        best = int(np.argmin(scores))
        self.coresets_ = coresets
        self.cv_scores_ = scores
        self.best_trial_ = best
        self.best_score_ = float(scores[best])
        self.n_splits_ = len(folds)
        return coresets[best], np.full(k, np.nan)


# ----------------------------------------------------------------------------- Hardness (1-PL)
def rasch_jml(Y: np.ndarray, l2: float = 0.01, tol: float = 1e-6,
              max_iter: int = 1000) -> tuple[np.ndarray, np.ndarray, Any]:
    """Joint maximum likelihood 1-PL fit: ``P(y_mi = 1) = sigmoid(theta_m - beta_i)``.

    Minimises ``sum_mi [softplus(theta_m - beta_i) - y_mi (theta_m - beta_i)]
    + l2/2 (|theta|^2 + |beta|^2)`` (Bernoulli negative log-likelihood; fractional y in [0, 1] are
    used as soft labels) with L-BFGS-B and the analytic gradient, from all-zero start. The L2 term
    keeps all-correct / all-wrong items and models finite and fixes the location indeterminacy.
    Returns ``(theta, beta, scipy result)``.
    """
    M, n = Y.shape

    def f(x: np.ndarray) -> tuple[float, np.ndarray]:
        th, b = x[:M], x[M:]
        L = th[:, None] - b[None, :]
        val = np.sum(np.logaddexp(0.0, L) - Y * L) + 0.5 * l2 * (x @ x)
        G = 0.5 * (1.0 + np.tanh(0.5 * L)) - Y  # sigmoid(L) - y, overflow-free
        grad = np.concatenate([G.sum(axis=1), -G.sum(axis=0)]) + l2 * x
        return val, grad

    res = minimize(f, np.zeros(M + n), jac=True, method="L-BFGS-B",
                   options={"maxiter": max_iter, "gtol": tol, "ftol": 1e-13})
    return res.x[:M].copy(), res.x[M:].copy(), res


class Hardness(_ScoreSelector):
    """Hardness / IRT baseline (000 §4.2, after Polo et al. 2024): fit a 1-PL (Rasch) model to the
    reference matrix and select the k most difficult items (largest ``beta_i``).

    Fit: joint maximum likelihood (:func:`rasch_jml`, not marginal ML), small L2 penalty ``l2`` on
    abilities and difficulties. Scores must lie in [0, 1] (binary or fractional, e.g. pass@1);
    otherwise the whole matrix is min-max rescaled to [0, 1] first (a constant matrix -> all 0.5).
    Deterministic: ``seed`` is accepted for interface uniformity and unused. Items with identical
    columns get identical difficulties (the optimiser treats them symmetrically); ties -> lower
    index.

    Attributes: ``ranking_`` (by difficulty descending), ``gains_`` (their difficulties),
    ``difficulties_`` ((n,) all items), ``abilities_`` ((M,)), ``converged_``.
    """

    PARAMS: ClassVar[dict[str, ParamSpec]] = {
        "l2": ParamSpec(float, "L2 penalty (> 0) on abilities and difficulties of the JML 1-PL fit"),
    }

    def __init__(self, k: int = 10, seed: int = 0, l2: float = 0.01) -> None:
        self.k = k
        self.seed = seed
        self.l2 = l2

    def _validate_extra_params(self) -> None:
        if isinstance(self.l2, bool) or not isinstance(self.l2, (int, float, np.floating, np.integer)) \
                or not np.isfinite(self.l2) or self.l2 <= 0:
            raise ValueError(f"l2 must be a positive number, got {self.l2!r}")

    def _select(self, Y: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        if Y.min() < 0 or Y.max() > 1:
            lo, hi = Y.min(), Y.max()
            Y = (Y - lo) / (hi - lo) if hi > lo else np.full_like(Y, 0.5)
        theta, beta, res = rasch_jml(Y, l2=float(self.l2))
        self.difficulties_ = beta
        self.abilities_ = theta
        self.converged_ = bool(res.success)
        ranking = _top_k(beta, k)
        return ranking, beta[ranking]


# ----------------------------------------------------------------------------- PBSC
class PointBiserial(_ScoreSelector):
    """Point-biserial correlation selection ("PBSC", 000 §4.2, Joshi et al. 2026): ``r_i`` = Pearson
    correlation between item i's scores ``Y[:, i]`` and the models' aggregate scores
    ``s = Y.mean(axis=1)`` (uncorrected: s includes item i), top-k by ``r_i`` (ties -> lower index).

    Constant items (and every item, if ``s`` is constant) have undefined correlation and get
    ``r = -inf``: picked only when fewer than k items have a finite r, in index order.
    Deterministic; ``seed`` is unused.

    Attributes: ``ranking_``, ``gains_`` (their ``r``), ``correlations_`` ((n,) all items).
    """

    PARAMS: ClassVar[dict[str, ParamSpec]] = {}

    def __init__(self, k: int = 10, seed: int = 0) -> None:
        self.k = k
        self.seed = seed

    def _select(self, Y: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        M = Y.shape[0]
        s = Y.mean(axis=1)
        Z, const = _standardize(Y)
        sc = s - s.mean()
        ssd = np.sqrt(np.mean(sc**2))
        if ssd <= 1e-12 * max(1.0, np.abs(s).max()):
            r = np.full(Y.shape[1], -np.inf)
        else:
            r = np.clip(Z.T @ (sc / ssd) / M, -1.0, 1.0)
            r[const] = -np.inf
        self.correlations_ = r
        ranking = _top_k(r, k)
        return ranking, r[ranking]


# ----------------------------------------------------------------------------- registry
#: Parameter specs of :class:`~evalplan.core.selection.mrmr.MRMR` (it defines no ``PARAMS`` itself).
MRMR_PARAMS: dict[str, ParamSpec] = {
    "scheme": ParamSpec(str, "'miq' (relevance / redundancy, default) or 'mid' (relevance - redundancy)"),
    "estimator": ParamSpec(str, "MI estimator: 'auto', 'plugin', 'ross', 'ksg' or 'ksg_pca'"),
    "n_neighbors": ParamSpec(int, "kNN estimator neighbours (default 5 binary / 8 continuous)", maximum=10000),
}

SCORE_METHODS: dict[str, type] = {
    "anchor_points": AnchorPoints,
    "lasso": LassoSelection,
    "random_search": RandomSearch,
    "hardness": Hardness,
    "pbsc": PointBiserial,
    "mrmr": MRMR,
}

#: name -> PARAMS of every method in :data:`SCORE_METHODS` (MRMR's from :data:`MRMR_PARAMS`).
SCORE_PARAMS: dict[str, dict[str, ParamSpec]] = {
    name: getattr(cls, "PARAMS", MRMR_PARAMS) for name, cls in SCORE_METHODS.items()
}
