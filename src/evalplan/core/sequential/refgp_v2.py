"""``refgp_v2``: ``refgp_ivr`` with a logit-shift prior mean, more reference directions and an honest
residual (docs/SEQUENTIAL.md, "refgp_v2").

Same model, selection and refits as :mod:`.refgp` (``f_i = mu_i(delta) + phi_i^T (beta - m0) + u_i +
e_i``: the GP part models the target's departure from ``mu``), with three changes measured on the
sequential backtest (docs/RESULTS.md):

* the prior mean of item ``i`` is ``mu_i(delta) = lo + (hi - lo) sigmoid(logit(u~_i) + delta)``, the
  references' (smoothed, rescaled) item mean shifted by one ability offset ``delta`` in logit space
  (a Rasch-like shift; ``delta = 0`` is the references' mean). ``delta`` is the MAP of the
  fractional-response likelihood of the observed scores under a N(0, 3^2) prior, refit with the
  hyperparameters (Newton on per-bucket sums, O(n_b)). A target above every reference (extrapolation)
  moves every item along its own logistic curve instead of by one additive constant;
* up to 64 reference directions instead of 16 (the residual ``omega`` left unexplained is smaller);
* the residual floor ``rho2`` is centred on the mean item variance over references (not a tenth of
  it) with a log-sd of 1: at small n the posterior no longer fits the selected items item by item;
* a refit evaluates the marginal likelihood on at most 384 observed buckets (a seeded uniform subset
  beyond that), so its cost stays bounded at O(384 D^2) per evaluation, D <= 66.
"""

from __future__ import annotations

import math

import numpy as np

from .base import derived, store_derived
from .prior import BucketPrior
from .refgp import PRIOR_SD, RefGPEstimator

DELTA_SD = 3.0  # prior sd of the logit shift
SMOOTH = 0.5  # pseudo-count of the smoothed reference item mean (finite logits at 0 and 1)


def logit_means(prior: BucketPrior) -> tuple[np.ndarray, float, float]:
    """(logit of the smoothed, [0, 1]-rescaled reference item mean per bucket, lo, hi)."""
    cached = derived(prior, "refgp_v2_logits")
    if cached is not None:
        return cached  # type: ignore[no-any-return]
    V = prior.bucket_vectors
    lo, hi = float(V.min()), float(V.max())
    span = hi - lo if hi > lo else 1.0
    M = V.shape[1]
    t = (V.mean(axis=1) - lo) / span
    t = (M * t + SMOOTH) / (M + 2.0 * SMOOTH)
    return store_derived(prior, "refgp_v2_logits",  # type: ignore[no-any-return]
                         (np.log(t) - np.log1p(-t), lo, lo + span))


def fit_delta(logits: np.ndarray, cnt: np.ndarray, ysum01: np.ndarray, delta0: float = 0.0,
              prior_sd: float = DELTA_SD) -> float:
    """argmax_delta sum_b [y_b log p_b + (c_b - y_b) log(1 - p_b)] - delta^2 / (2 prior_sd^2),
    ``p_b = sigmoid(logits_b + delta)``, ``y_b`` in [0, c_b] (Newton, concave objective)."""
    d = float(delta0)
    prec = 1.0 / prior_sd ** 2
    for _ in range(30):
        p = 1.0 / (1.0 + np.exp(-(logits + d)))
        g = float((ysum01 - cnt * p).sum()) - prec * d
        h = float((cnt * p * (1.0 - p)).sum()) + prec
        step = max(-2.0, min(2.0, g / h))
        d += step
        if abs(step) < 1e-9:
            break
    return d


class RefGPV2Estimator(RefGPEstimator):
    """``refgp_ivr`` with the logit-shift prior mean (the module docstring)."""

    method = "refgp_v2"
    k_max = 64
    rho_factor = 1.0
    prior_sds = np.array([PRIOR_SD] * 4 + [1.0])
    max_fit_buckets = 384
    delta_sd = DELTA_SD  # prior sd of the shift

    def __init__(self, prior: BucketPrior, config: object) -> None:
        self._logits, self._lo, self._hi = logit_means(prior)
        self.delta = 0.0
        super().__init__(prior, config)  # type: ignore[arg-type]
        self._set_offsets()
        self._install()
        self._set_estimate()

    @property
    def hyperparameters(self) -> dict[str, object]:
        return {**super().hyperparameters, "delta": float(self.delta)}

    def _set_offsets(self) -> None:
        mu = self._lo + (self._hi - self._lo) / (1.0 + np.exp(-(self._logits + self.delta)))
        self._off = mu - self.prior.bucket_means
        self._off_U = float(self._w @ self._off)

    def _refit_offset(self) -> None:
        obs = np.flatnonzero(self._cnt)
        cnt = self._cnt[obs]
        span = self._hi - self._lo
        y01 = np.clip((self._ysum[obs] - cnt * self._lo) / span, 0.0, cnt)
        d = fit_delta(self._logits[obs], cnt, y01, self.delta, self.delta_sd)
        if math.isfinite(d):
            self.delta = d
            self._set_offsets()
