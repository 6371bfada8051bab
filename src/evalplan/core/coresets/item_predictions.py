"""Item-level predictions from coreset results and the Agreement metric (paper 003 App. C.1).

A benchmark-level predictor only says how many items a target gets right; Agreement asks
whether it knows *which*: the fraction of items whose predicted 0/1 correctness (prediction
``>= 0.5``) equals the truth (Vivek et al. 2024, used by 003 App. C.1). Here it is computed over
**all** items of the benchmark, the coreset items carrying the target's observed scores, as
:class:`evalplan.core.repcore.extrapolation.RepCoreExtrapolator` does. How each predictor family
predicts an item it did not observe:

* ``ridge`` / ``kernel_ridge`` (002 §2.3 read item by item): the same regression, fitted with the
  item's reference scores as the response instead of the benchmark mean (a multi-output fit,
  one lambda for all items chosen by exact leave-one-out over the 002 App. D.1 grid).
* AnchorPoints (``weighted_mean``): an item takes the score of its cluster's anchor (the
  medoid), the prediction of Vivek et al. 2024.
* IRT (``p_irt`` / ``gp_irt``): the 2PL probability ``sigma(a_i . theta - b_i)`` at the target's
  fitted ability.
* ``mean``, ``aipw``: no item-level prediction (Random "does not extrapolate beyond the
  coreset", 003 §4): Agreement is NaN.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from evalplan.core.coresets.predictors import default_lambdas, polynomial_kernel, smoother_loo_residuals

__all__ = ["agreement_per_target", "anchor_item_predictions", "regression_item_predictions"]


def _loo_lambda(ev: np.ndarray, B: np.ndarray, Y: np.ndarray, lambdas: np.ndarray,
                intercept: bool = False) -> float:
    """The grid lambda with the smallest LOO MSE over all items (``smoother_loo_residuals``)."""
    mse = np.mean(smoother_loo_residuals(B, ev, Y, lambdas, intercept=intercept) ** 2, axis=(1, 2))
    return float(lambdas[int(np.argmin(mse))])


def regression_item_predictions(kind: str, X_ref: np.ndarray, Y_ref: np.ndarray, X_target: np.ndarray,
                                lambdas: Sequence[float] | None = None) -> np.ndarray:
    """(T, N) item predictions of a multi-output ``ridge`` or ``kernel_ridge`` (degree 2, coef0 1,
    gamma 1/k, as :class:`~evalplan.core.coresets.predictors.KernelRidgePredictor`) from the coreset scores.

    ``X_ref`` (M, k) reference coreset scores, ``Y_ref`` (M, N) reference item scores,
    ``X_target`` (T, k). Predictions are clipped to [0, 1] when ``Y_ref`` is.
    """
    X = np.asarray(X_ref, dtype=float)
    Y = np.asarray(Y_ref, dtype=float)
    Xt = np.asarray(X_target, dtype=float)
    lam_grid = np.asarray(default_lambdas(X) if lambdas is None else lambdas, dtype=float)
    if kind == "kernel_ridge":
        K = polynomial_kernel(X, X)
        ev, Q = np.linalg.eigh(K)
        ev = np.clip(ev, 0.0, None)
        lam = _loo_lambda(ev, Q, Y, lam_grid)
        alpha = Q @ ((Q.T @ Y) / (ev + lam)[:, None])
        pred = polynomial_kernel(Xt, X) @ alpha
    elif kind == "ridge":
        xm, ym = X.mean(axis=0), Y.mean(axis=0)
        Xc = X - xm
        U, s, Vt = np.linalg.svd(Xc, full_matrices=False)
        # LOO with an unpenalised intercept: the centered-X smoother plus 11^T/M (U is orthogonal to 1)
        lam = _loo_lambda(s**2, U, Y, lam_grid, intercept=True)
        coef = Vt.T @ ((s / (s**2 + lam))[:, None] * (U.T @ (Y - ym)))
        pred = (Xt - xm) @ coef + ym
    else:
        raise ValueError(f"no item-level regression for predictor {kind!r}")
    if Y.min() >= 0.0 and Y.max() <= 1.0:
        pred = np.clip(pred, 0.0, 1.0)
    return np.asarray(pred)


def anchor_item_predictions(labels: np.ndarray, X_target: np.ndarray) -> np.ndarray:
    """(T, N): item i takes the target's score on its anchor, ``X_target[:, labels[i]]``
    (``labels`` = position of each item's medoid in the coreset order)."""
    return np.asarray(X_target, dtype=float)[:, np.asarray(labels, dtype=np.int64)]


def agreement_per_target(pred: np.ndarray, truth: np.ndarray, coreset: np.ndarray,
                         threshold: float = 0.5) -> np.ndarray:
    """(T,) Agreement over all N items: coreset items take their observed scores, the others
    their prediction thresholded at ``threshold``; compared with the 0/1 truth ``truth`` (T, N)."""
    P = np.array(pred, dtype=float, copy=True)
    T = np.asarray(truth, dtype=float)
    if P.shape != T.shape:
        raise ValueError(f"pred {P.shape} and truth {T.shape} must have one shape")
    idx = np.asarray(coreset, dtype=np.int64)
    P[:, idx] = T[:, idx]
    return np.asarray(np.mean((P >= threshold) == (T >= 0.5), axis=1))
