"""Full-benchmark score predictors from coreset results (paper 002, §2.3, App. D.1, App. L.1).

Common interface (scikit-learn style)::

    fit(X_ref, y_ref) -> self     # X_ref: (M, k) coreset scores of the M reference models
                                  # y_ref: (M,)  their full-benchmark scores
    predict(X_target) -> (T,)     # X_target: (T, k) coreset scores of the target models

Predictors
----------
* :class:`MeanPredictor` - the coreset mean (the "Random" baseline, 002 §2.4).
* :class:`WeightedMeanPredictor` - a fixed weighted mean of the coreset items (Anchor Points,
  002 §2.4: weights = normalised cluster sizes).
* :class:`RidgePredictor` - linear ridge regression, 002 §2.3
  ``argmin_{w, w0} ||y - (w0 + Xw)||^2 + lam ||w||^2``. The intercept ``w0`` is unpenalised,
  implemented by **centering y and the columns of X** on the reference models (so it equals
  ``sklearn.linear_model.Ridge(alpha=lam, fit_intercept=True)``).
* :class:`KernelRidgePredictor` - kernel ridge regression, 002 §2.3
  ``alpha = (K + lam I_M)^{-1} y``, ``f(x) = sum_i alpha_i K(x, x_i)``, with the polynomial kernel
  ``K(x, z) = (gamma x.z + coef0)^degree``, degree 2, coef0 1 and **gamma = 1/k** (k = coreset
  size), i.e. exactly ``sklearn.kernel_ridge.KernelRidge(alpha=lam, kernel="poly", degree=2,
  coef0=1)`` with its default gamma, which is what the paper's reference implementation fits. No
  intercept besides the penalised constant feature carried by ``coef0`` (as in the equation).
  With gamma = 1/k the kernel sees the coreset *mean* co-success ``x.z / k`` in [0, 1], so the
  D.1 lambda grid is on the right scale whatever k is; with gamma = 1 (an earlier choice of ours)
  ``K`` grows like k^2 and the grid barely regularises: on openllm_v2_math_hard with M = 30 that
  made mRMR++ worse than the coreset mean (docs/DECISIONS.md). Default predictor for score-based
  coresets.
* :class:`AIPWPredictor` - augmented inverse-propensity-weighted estimator of Zhang, Dorner &
  Hardt (2025), used by 002 App. L.1 for out-of-distribution targets (see its docstring).

Lambda selection (002 App. D.1): exact leave-one-out CV over a grid, choosing the lambda with
minimal LOO RMSE. Grids: ``{0.1, 10^-0.5, 1, 10^0.5, 10}`` for binary metrics and
``{0.01, 10^-1.5, ..., 100}`` (half-decade steps) for continuous metrics. ``lambdas=None``
picks the binary grid when every reference coreset score is 0 or 1, else the continuous grid.

LOO is computed in closed form from **one** SVD (ridge) / eigendecomposition (KRR) shared by
all lambdas: for a penalised least-squares smoother ``y_hat = H y`` the LOO residual is
``(y_i - y_hat_i) / (1 - H_ii)``. For ridge, ``H = 11^T/M + U diag(s^2/(s^2+lam)) U^T`` (``Xc = U S V^T``,
the intercept being an unpenalised column). For KRR ``H = K (K + lam I)^{-1}`` (see
:func:`_krr_loo_predictions`). Both are checked against brute-force refits in the tests.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

#: 002 App. D.1, binary metrics.
LAMBDAS_BINARY: tuple[float, ...] = tuple(float(10.0**e) for e in (-1.0, -0.5, 0.0, 0.5, 1.0))
#: 002 App. D.1, continuous metrics (pass@k and non-pass@k).
LAMBDAS_CONTINUOUS: tuple[float, ...] = tuple(
    float(10.0**e) for e in (-2.0, -1.5, -1.0, -0.5, 0.0, 0.5, 1.0, 1.5, 2.0)
)

__all__ = [
    "LAMBDAS_BINARY",
    "LAMBDAS_CONTINUOUS",
    "PREDICTOR_CLASSES",
    "AIPWPredictor",
    "KernelRidgePredictor",
    "MeanPredictor",
    "RidgePredictor",
    "WeightedMeanPredictor",
    "default_lambdas",
    "polynomial_kernel",
    "smoother_loo_residuals",
]


# ----------------------------------------------------------------------------- helpers
def default_lambdas(X_ref: np.ndarray) -> tuple[float, ...]:
    """The 002 App. D.1 grid: binary grid if all coreset scores are in {0, 1}, else continuous."""
    X = np.asarray(X_ref, dtype=float)
    return LAMBDAS_BINARY if np.all((X == 0.0) | (X == 1.0)) else LAMBDAS_CONTINUOUS


def _check_fit(X_ref: np.ndarray, y_ref: np.ndarray, min_m: int = 1) -> tuple[np.ndarray, np.ndarray]:
    X = np.asarray(X_ref, dtype=float)
    y = np.asarray(y_ref, dtype=float).ravel()
    if X.ndim != 2:
        raise ValueError(f"X_ref must be 2-D (M x k), got shape {X.shape}")
    if X.shape[0] != y.shape[0]:
        raise ValueError(f"X_ref has {X.shape[0]} rows but y_ref has {y.shape[0]} entries")
    if X.shape[0] < min_m:
        raise ValueError(f"need at least {min_m} reference models, got {X.shape[0]}")
    if X.shape[1] < 1:
        raise ValueError("X_ref has no coreset columns")
    if not (np.all(np.isfinite(X)) and np.all(np.isfinite(y))):
        raise ValueError("X_ref / y_ref contain non-finite values")
    return X, y


def _check_target(X_target: np.ndarray, k: int) -> np.ndarray:
    X = np.asarray(X_target, dtype=float)
    if X.ndim == 1:
        X = X[None, :]
    if X.ndim != 2 or X.shape[1] != k:
        raise ValueError(f"X_target must be (T x {k}), got shape {np.shape(X_target)}")
    return X


def _lambda_grid(lambdas: Sequence[float] | None, X: np.ndarray) -> np.ndarray:
    lam = np.asarray(default_lambdas(X) if lambdas is None else lambdas, dtype=float).ravel()
    if lam.size == 0 or np.any(~np.isfinite(lam)) or np.any(lam <= 0):
        raise ValueError("lambdas must be a non-empty grid of positive finite values")
    return lam


def polynomial_kernel(
    A: np.ndarray, B: np.ndarray, degree: int = 2, coef0: float = 1.0, gamma: float | None = None
) -> np.ndarray:
    """``K[i, j] = (gamma * A_i . B_j + coef0) ** degree`` (002 §2.3 polynomial KRR).

    ``gamma=None`` means ``1 / n_features`` (scikit-learn's default, used by the paper's code).
    """
    if gamma is None:
        gamma = 1.0 / np.shape(A)[1]
    return np.asarray((gamma * (np.asarray(A, float) @ np.asarray(B, float).T) + coef0) ** degree)


def _one_minus(h: np.ndarray) -> np.ndarray:
    return np.maximum(1.0 - h, 1e-12)


def smoother_loo_residuals(B: np.ndarray, ev: np.ndarray, Y: np.ndarray, lam: np.ndarray,
                           intercept: bool = False) -> np.ndarray:
    """(L, M, T) exact leave-one-out residuals of the penalised least-squares smoothers
    ``H = [11^T/M] + B diag(ev/(ev+lam)) B^T``, one per grid ``lam``, for each column of ``Y`` (M, T).

    The LOO residual of a linear smoother is ``(y_i - (Hy)_i) / (1 - H_ii)``. Kernel ridge: ``B``,
    ``ev`` = eigenvectors / eigenvalues of K. Ridge with an unpenalised intercept
    (``intercept=True``): ``B``, ``ev`` = left singular vectors / squared singular values of the
    centred X, so ``B`` is orthogonal to 1 and the intercept adds ``11^T/M``.
    """
    F = ev[:, None] / (ev[:, None] + lam[None, :])  # (r, L) shrinkage factors
    M = Y.shape[0]
    Y_mean = Y.mean(axis=0) if intercept else np.zeros(Y.shape[1])
    BtY = B.T @ (Y - Y_mean)  # (r, T)
    out = np.empty((lam.size, M, Y.shape[1]))
    for j in range(lam.size):
        HY = Y_mean + B @ (F[:, j, None] * BtY)
        h = (B**2) @ F[:, j] + (1.0 / M if intercept else 0.0)
        out[j] = (Y - HY) / _one_minus(h)[:, None]
    return out


# ----------------------------------------------------------------------------- baselines
class MeanPredictor:
    """Coreset mean as the full-benchmark estimate (002 §2.4 "Random"). ``fit`` only checks shapes."""

    def fit(self, X_ref: np.ndarray, y_ref: np.ndarray) -> MeanPredictor:
        X, _ = _check_fit(X_ref, y_ref)
        self.n_features_in_ = X.shape[1]
        return self

    def predict(self, X_target: np.ndarray) -> np.ndarray:
        return np.asarray(_check_target(X_target, self.n_features_in_).mean(axis=1))


class WeightedMeanPredictor:
    """Weighted coreset mean (002 §2.4 Anchor Points: weights = cluster sizes, normalised to 1).

    Parameters
    ----------
    weights : (k,) non-negative item weights; normalised to sum to 1.
    """

    def __init__(self, weights: Sequence[float] | np.ndarray) -> None:
        self.weights = weights

    def fit(self, X_ref: np.ndarray, y_ref: np.ndarray) -> WeightedMeanPredictor:
        X, _ = _check_fit(X_ref, y_ref)
        w = np.asarray(self.weights, dtype=float).ravel()
        if w.shape[0] != X.shape[1]:
            raise ValueError(f"{w.shape[0]} weights for {X.shape[1]} coreset items")
        if np.any(w < 0) or not np.isfinite(w).all() or w.sum() <= 0:
            raise ValueError("weights must be non-negative, finite and not all zero")
        self.weights_ = w / w.sum()
        self.n_features_in_ = X.shape[1]
        return self

    def predict(self, X_target: np.ndarray) -> np.ndarray:
        return np.asarray(_check_target(X_target, self.n_features_in_) @ self.weights_)


# ----------------------------------------------------------------------------- ridge
def _ridge_loo(X: np.ndarray, y: np.ndarray, lam: np.ndarray) -> tuple[np.ndarray, dict[str, Any]]:
    """Exact LOO residuals (M x L) of ridge with unpenalised intercept, for every lambda."""
    x_mean, y_mean = X.mean(axis=0), y.mean()
    Xc, yc = X - x_mean, y - y_mean
    U, s, Vt = np.linalg.svd(Xc, full_matrices=False)
    Uty = U.T @ yc
    resid = smoother_loo_residuals(U, s**2, y[:, None], lam, intercept=True)[:, :, 0].T
    return resid, {"U": U, "s": s, "Vt": Vt, "Uty": Uty, "x_mean": x_mean, "y_mean": y_mean}


class RidgePredictor:
    """Ridge regression of the full score on the coreset scores (002 §2.3), lambda by exact LOO
    over the 002 App. D.1 grid (minimal LOO RMSE; ties -> first in grid order).

    Intercept: unpenalised, by centering y and the columns of X on the references.

    Attributes
    ----------
    lambda_ : chosen lambda.
    loo_mse_ : (L,) LOO mean squared error per grid lambda (grid in ``lambdas_``).
    coef_, intercept_ : fitted ``w``, ``w0``.
    """

    def __init__(self, lambdas: Sequence[float] | None = None) -> None:
        self.lambdas = lambdas

    def fit(self, X_ref: np.ndarray, y_ref: np.ndarray) -> RidgePredictor:
        X, y = _check_fit(X_ref, y_ref, min_m=2)
        lam = _lambda_grid(self.lambdas, X)
        resid, d = _ridge_loo(X, y, lam)
        self.lambdas_ = lam
        self.loo_residuals_ = resid
        self.loo_mse_ = np.mean(resid**2, axis=0)
        j = int(np.argmin(self.loo_mse_))
        self.lambda_ = float(lam[j])
        s = d["s"]
        self.coef_ = d["Vt"].T @ ((s / (s**2 + self.lambda_)) * d["Uty"])
        self.intercept_ = float(d["y_mean"] - d["x_mean"] @ self.coef_)
        self.n_features_in_ = X.shape[1]
        return self

    def predict(self, X_target: np.ndarray) -> np.ndarray:
        return np.asarray(_check_target(X_target, self.n_features_in_) @ self.coef_ + self.intercept_)


# ----------------------------------------------------------------------------- kernel ridge
def _krr_loo_predictions(Q: np.ndarray, ev: np.ndarray, y: np.ndarray, lam: np.ndarray) -> np.ndarray:
    """Exact LOO predictions (M x L) of KRR, for every lambda, from ``K = Q diag(ev) Q^T``.

    KRR is the linear smoother ``H = K (K + lam I)^{-1} = Q diag(ev/(ev+lam)) Q^T``; its LOO
    prediction at i is ``y_i - (y_i - (Hy)_i) / (1 - H_ii)``.
    """
    return np.asarray(y[:, None] - smoother_loo_residuals(Q, ev, y[:, None], lam)[:, :, 0].T)


class KernelRidgePredictor:
    """Polynomial kernel ridge regression (002 §2.3), the default for score-based coresets.

    ``f(x) = sum_i alpha_i K(x, x_i)``, ``alpha = (K + lam I)^{-1} y``,
    ``K(x, z) = (gamma x.z + coef0)^degree`` (defaults degree 2, coef0 1, gamma 1/k). lambda by
    exact LOO over the 002 App. D.1 grid from one eigendecomposition of K.

    Attributes
    ----------
    lambda_, loo_mse_ (per grid lambda, grid in ``lambdas_``), loo_residuals_, dual_coef_, gamma_.
    """

    def __init__(
        self,
        degree: int = 2,
        coef0: float = 1.0,
        lambdas: Sequence[float] | None = None,
        gamma: float | None = None,
    ) -> None:
        self.degree = degree
        self.coef0 = coef0
        self.lambdas = lambdas
        self.gamma = gamma

    def _kernel(self, A: np.ndarray, B: np.ndarray) -> np.ndarray:
        return polynomial_kernel(A, B, self.degree, self.coef0, self.gamma_)

    def fit(self, X_ref: np.ndarray, y_ref: np.ndarray) -> KernelRidgePredictor:
        X, y = _check_fit(X_ref, y_ref, min_m=2)
        lam = _lambda_grid(self.lambdas, X)
        self.gamma_ = 1.0 / X.shape[1] if self.gamma is None else float(self.gamma)
        K = self._kernel(X, X)
        ev, Q = np.linalg.eigh(K)
        ev = np.clip(ev, 0.0, None)  # K is PSD; drop round-off negatives
        loo_pred = _krr_loo_predictions(Q, ev, y, lam)
        resid = y[:, None] - loo_pred
        self.lambdas_ = lam
        self.loo_residuals_ = resid
        self.loo_mse_ = np.mean(resid**2, axis=0)
        j = int(np.argmin(self.loo_mse_))
        self.lambda_ = float(lam[j])
        self.dual_coef_ = Q @ ((Q.T @ y) / (ev + self.lambda_))
        self.X_fit_ = X
        self.n_features_in_ = X.shape[1]
        return self

    def predict(self, X_target: np.ndarray) -> np.ndarray:
        Xt = _check_target(X_target, self.n_features_in_)
        return np.asarray(self._kernel(Xt, self.X_fit_) @ self.dual_coef_)


# ----------------------------------------------------------------------------- AIPW
class AIPWPredictor:
    """AIPW estimator (Zhang, Dorner & Hardt 2025; 002 App. L.1) for out-of-distribution targets.

    What is implemented. For each target model t, a ridge regression over the **k coreset items**
    predicts t's score on an item from the reference models' scores on that item (the reference
    *columns*: item j has feature vector ``X_ref[:, j]`` in R^M, response ``X_target[t, j]``):
    ``f(item) = b + w . s_ref(item)``, intercept unpenalised, lambda by exact item-level LOO over
    ``lambdas`` (002 App. D.1 grid). The estimate is

        theta_hat = mean_{all items} f  +  mean_{coreset items} (s_t - f)
                  = (b + w . y_ref)      +  (xbar_t - (b + w . xbar_ref))
                  = xbar_t + w . (y_ref - xbar_ref),

    i.e. the ridge prediction of the full score from the reference columns (f is linear, so its
    mean over all N items only needs the references' full scores ``y_ref``) plus the residual
    correction "target's observed coreset mean minus the ridge model's implied coreset mean".
    Since an intercept-fitted ridge has in-sample residuals summing to zero, the correction is
    **cross-fitted** (the usual AIPW/PPI++ practice): the coreset items are split into
    ``n_folds`` folds, f is fitted on the other folds and the correction measured on the held-out
    fold; the estimate is the fold-size-weighted average of the per-fold estimates. With fewer
    than 2 coreset items (or 2 folds impossible) ``w`` = uniform 1/M, i.e. the coreset mean plus
    the references' average full-minus-coreset gap.

    Why it holds out of distribution. The level of the estimate is the target's own observed
    coreset mean; the references only contribute the *difference* ``y_ref - xbar_ref`` weighted
    by how much each reference resembles the target item-wise. If the coreset were a uniform
    random sample of items, the correction term has expectation zero for any fixed f, so the
    estimate is unbiased however wrong f is (the AIPW double-robustness argument); a target
    stronger than every reference is not pulled back into the reference range, unlike ridge/KRR
    on coreset scores, which can only interpolate between the references' full scores. For a
    greedily chosen (non-random) coreset this guarantee does not hold, only the weaker "level from
    the target, gap from the references" argument.
    """

    def __init__(
        self,
        lambdas: Sequence[float] | None = None,
        n_folds: int = 5,
        random_state: int | None = 0,
    ) -> None:
        self.lambdas = lambdas
        self.n_folds = n_folds
        self.random_state = random_state

    def fit(self, X_ref: np.ndarray, y_ref: np.ndarray) -> AIPWPredictor:
        X, y = _check_fit(X_ref, y_ref)
        self.X_ref_ = X
        self.y_ref_ = y
        self.gap_ = y - X.mean(axis=1)  # full score minus coreset mean, per reference
        self.lambdas_ = _lambda_grid(self.lambdas, X)
        self.n_features_in_ = X.shape[1]
        return self

    def _item_ridge(self, Z: np.ndarray, t: np.ndarray) -> tuple[np.ndarray, float]:
        """Ridge (unpenalised intercept) of item scores t (n,) on reference columns Z (n, M)."""
        if Z.shape[0] >= 3:
            resid, _ = _ridge_loo(Z, t, self.lambdas_)
            lam = float(self.lambdas_[int(np.argmin(np.mean(resid**2, axis=0)))])
        else:
            lam = float(self.lambdas_[-1])
        z_mean, t_mean = Z.mean(axis=0), t.mean()
        U, s, Vt = np.linalg.svd(Z - z_mean, full_matrices=False)
        w = Vt.T @ ((s / (s**2 + lam)) * (U.T @ (t - t_mean)))
        return w, float(t_mean - z_mean @ w)

    def predict(self, X_target: np.ndarray) -> np.ndarray:
        Xt = _check_target(X_target, self.n_features_in_)
        k = self.n_features_in_
        items = self.X_ref_.T  # (k, M) reference columns per coreset item
        n_folds = min(int(self.n_folds), k)
        out = np.empty(Xt.shape[0])
        self.weights_ = np.empty((Xt.shape[0], self.X_ref_.shape[0]))
        if n_folds < 2:
            w_unif = np.full(self.X_ref_.shape[0], 1.0 / self.X_ref_.shape[0])
            out[:] = Xt.mean(axis=1) + w_unif @ self.gap_
            self.weights_[:] = w_unif
            return out
        rng = np.random.default_rng(self.random_state)
        folds = np.array_split(rng.permutation(k), n_folds)
        ybar_all = self.y_ref_  # mean over all items of each reference column
        for ti, t in enumerate(Xt):
            est, w_avg = 0.0, np.zeros(self.X_ref_.shape[0])
            for f in folds:
                train = np.setdiff1d(np.arange(k), f)
                w, b = self._item_ridge(items[train], t[train])
                pred_all = b + w @ ybar_all
                corr = np.mean(t[f] - (b + items[f] @ w))
                est += len(f) / k * (pred_all + corr)
                w_avg += len(f) / k * w
            out[ti] = est
            self.weights_[ti] = w_avg
        return out


#: Predictors built without arguments, by their request name (``weighted_mean`` needs weights).
PREDICTOR_CLASSES: dict[str, type] = {
    "mean": MeanPredictor,
    "ridge": RidgePredictor,
    "kernel_ridge": KernelRidgePredictor,
    "aipw": AIPWPredictor,
}
