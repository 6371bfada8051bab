"""Extrapolation from the coreset to the full benchmark (paper 003, §2.4, eqs. 6-8), the
item-level Agreement metric (Appendix C.1) and a leave-one-source-out interval.

* ``x_i`` (eq. 6): the mean correctness of item ``i`` over the source models
  (:func:`source_mean_correctness`).
* ``g_t`` (eq. 7): a ridge regression of the target's 0/1 correctness on the single feature
  ``x_i`` over the anchors (with intercept, penalty ``ridge_alpha`` on the slope — the
  convention of ``sklearn.linear_model.Ridge``). The paper writes eq. 7 as plain least squares
  "with a Ridge regression model" and gives no alpha; our default is 1.0 (sklearn's default).
* eq. 8: ``Acc_hat = (sum_{anchors} y_{t,i} + sum_{others} s_hat_{t,i}) / |I|``; predictions are
  clipped to [0, 1] (``clip=True``; not in the paper, it only keeps scores valid probabilities).

The interval (not in the paper) is calibrated on the source models: each source in turn plays
the target, with ``x`` recomputed from the *other* sources, and its eq. 8 estimate error
against its true full score is recorded; the interval is ``estimate +- q`` where ``q`` is the
``ceil((M+1) level)``-th smallest of the ``M`` absolute errors (split-conformal finite-sample
correction, i.e. the empirical quantile at ``ceil((M+1) level) / M``). When that rank exceeds
``M`` the interval is the whole [0, 1]. Caveats: the anchors are kept fixed (they were chosen
with every source included, so the calibration is slightly optimistic), the sources are not
exchangeable with the targets when the source pool is not a random sample of models, and the
leave-one-out ``x`` averages ``M-1`` sources instead of ``M``.
"""

from __future__ import annotations

import math

import numpy as np


def source_mean_correctness(source_correctness: np.ndarray) -> np.ndarray:
    """Eq. 6: ``x_i = mean_m y_{m,i}`` from an ``M x N`` 0/1 matrix."""
    y = np.asarray(source_correctness, dtype=np.float64)
    if y.ndim != 2 or y.shape[0] < 1:
        raise ValueError("source_correctness must be M x N with M >= 1")
    return np.asarray(y.mean(axis=0))


def ridge_1d(x: np.ndarray, y: np.ndarray, alpha: float) -> tuple[float, float]:
    """Closed-form ridge with intercept on one feature: ``(coef, intercept)``; identical to
    ``sklearn.linear_model.Ridge(alpha).fit(x[:, None], y)``."""
    x = np.asarray(x, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    xm, ym = x.mean(), y.mean()
    xc = x - xm
    denom = float(xc @ xc) + float(alpha)
    coef = float(xc @ (y - ym)) / denom if denom > 0 else 0.0
    return coef, float(ym - coef * xm)


def agreement(pred: np.ndarray, truth: np.ndarray, threshold: float = 0.5) -> float:
    """Appendix C.1 Agreement: fraction of items whose thresholded prediction
    (``pred >= threshold`` -> 1) equals the 0/1 ground truth."""
    p = np.asarray(pred, dtype=np.float64)
    t = np.asarray(truth)
    if p.shape != t.shape or p.size == 0:
        raise ValueError("pred and truth must be non-empty and of one shape")
    return float(np.mean((p >= threshold).astype(int) == (t >= 0.5).astype(int)))


def _check_anchor_idx(anchor_idx: np.ndarray, n: int) -> np.ndarray:
    a = np.asarray(anchor_idx).astype(int).ravel()
    if a.size == 0:
        raise ValueError("need at least one anchor")
    if a.min() < 0 or a.max() >= n:
        raise ValueError("anchor index out of range")
    if np.unique(a).size != a.size:
        raise ValueError("anchor indices must be distinct")
    return a


class RepCoreExtrapolator:
    """Ridge extrapolation ``g_t`` from the anchors to all items and the eq. 8 estimate.

    Learned attributes: ``coef_``, ``intercept_`` (of ``g_t``), ``estimate_`` (eq. 8),
    ``item_predictions_`` (length-N: the observed ``y`` on anchors, clipped ``g_t(x_i)``
    elsewhere), ``anchor_idx_``, ``n_items_``.
    """

    def __init__(self, ridge_alpha: float = 1.0, clip: bool = True) -> None:
        self.ridge_alpha = ridge_alpha
        self.clip = clip

    def predict(self, x: np.ndarray) -> np.ndarray:
        """``g_t(x)`` (clipped to [0, 1] when ``clip``)."""
        p = self.coef_ * np.asarray(x, dtype=np.float64) + self.intercept_
        return np.clip(p, 0.0, 1.0) if self.clip else p

    def fit(self, anchor_idx: np.ndarray, y_anchor: np.ndarray, x: np.ndarray) -> RepCoreExtrapolator:
        """Fit ``g_t`` on ``(x_i, y_{t,i})`` over the anchors and compute eq. 8."""
        if self.ridge_alpha < 0:
            raise ValueError("ridge_alpha must be >= 0")
        x = np.asarray(x, dtype=np.float64).ravel()
        a = _check_anchor_idx(anchor_idx, x.size)
        ya = np.asarray(y_anchor, dtype=np.float64).ravel()
        if ya.shape != a.shape:
            raise ValueError("y_anchor must have one value per anchor")
        self.coef_, self.intercept_ = ridge_1d(x[a], ya, self.ridge_alpha)
        pred = self.predict(x)
        pred[a] = ya
        self.item_predictions_ = pred
        self.estimate_ = float(pred.sum() / x.size)
        self.anchor_idx_ = a
        self.n_items_ = x.size
        return self

    def loo_errors(self, anchor_idx: np.ndarray, source_correctness: np.ndarray) -> np.ndarray:
        """Signed eq. 8 errors (estimate - true full score) of each source treated as the
        target, with ``x`` from the other sources (needs ``M >= 2``)."""
        y = np.asarray(source_correctness, dtype=np.float64)
        if y.ndim != 2 or y.shape[0] < 2:
            raise ValueError("need an M x N source matrix with M >= 2")
        m_src, n = y.shape
        a = _check_anchor_idx(anchor_idx, n)
        total = y.sum(axis=0)
        errs = np.empty(m_src)
        for m in range(m_src):
            x_loo = (total - y[m]) / (m_src - 1)
            est = RepCoreExtrapolator(self.ridge_alpha, self.clip).fit(a, y[m, a], x_loo)
            errs[m] = est.estimate_ - y[m].mean()
        return errs

    def loo_interval(
        self,
        anchor_idx: np.ndarray,
        source_correctness: np.ndarray,
        x: np.ndarray | None = None,
        level: float = 0.9,
    ) -> tuple[float, float]:
        """``(lo, hi)`` = fitted ``estimate_ +- q`` clipped to [0, 1], where ``q`` is the
        ``ceil((M+1) level)``-th smallest |LOO error| (see the module docstring).

        ``x`` (the full-pool eq. 6 feature the estimate was fitted with) is only checked
        for length; the LOO feature is recomputed from ``source_correctness``."""
        if not hasattr(self, "estimate_"):
            raise RuntimeError("fit the target first")
        if x is not None and np.asarray(x).size != self.n_items_:
            raise ValueError("x must have one value per item")
        q = conformal_quantile(np.abs(self.loo_errors(anchor_idx, source_correctness)), level)
        return max(0.0, self.estimate_ - q), min(1.0, self.estimate_ + q)


def conformal_quantile(abs_errors: np.ndarray, level: float) -> float:
    """The ``ceil((M+1) level)``-th smallest of ``M`` absolute errors; ``inf`` when that
    rank exceeds ``M`` (too few calibration models for the level)."""
    if not 0 < level < 1:
        raise ValueError("level must be in (0, 1)")
    e = np.sort(np.asarray(abs_errors, dtype=np.float64).ravel())
    rank = math.ceil((e.size + 1) * level - 1e-12)
    return math.inf if rank > e.size else float(e[rank - 1])


def loo_interval(
    anchor_idx: np.ndarray,
    source_correctness: np.ndarray,
    x: np.ndarray,
    level: float = 0.9,
    *,
    estimate: float,
    ridge_alpha: float = 1.0,
    clip: bool = True,
) -> tuple[float, float]:
    """Functional form of :meth:`RepCoreExtrapolator.loo_interval` around a given
    ``estimate``."""
    ext = RepCoreExtrapolator(ridge_alpha, clip)
    q = conformal_quantile(np.abs(ext.loo_errors(anchor_idx, source_correctness)), level)
    if np.asarray(x).size != np.asarray(source_correctness).shape[1]:
        raise ValueError("x must have one value per item")
    return max(0.0, estimate - q), min(1.0, estimate + q)
