"""``refgp_v3``: ``refgp_v2``'s and ``refgp_ivr``'s prior means averaged by their prequential evidence,
and a variance calibrated on the references (docs/SEQUENTIAL.md, "refgp_v3").

Two changes to :mod:`.refgp_v2` (same features, selection, refit schedule and finite-population
variance):

* **Two prior means, averaged.** ``refgp_v2``'s logit-shifted mean ``mu(delta)`` helps a target far
  from the references (math_hard extrapolation, helm_lite_gsm) and hurts on MuSR, where its
  quasi-likelihood shift of the selected items came out at 1-2 logits for targets within 0.05 of the
  references' mean. Both models share the hyperparameters and so the posterior covariance (it does
  not depend on the scores or the mean); each keeps its posterior mean of ``beta`` (one extra O(D)
  rank-one update per observation). Before each observation both predict it, and the cumulative
  one-step-ahead Gaussian log predictive densities (the prequential form of the marginal likelihood,
  ``log p(y_1..n) = sum_t log p(y_t | y_<t)``) give the posterior weight ``w`` of the shifted mean
  (prior 1/2). The estimate is ``w E_shift + (1 - w) E_ref`` and the variance adds the models'
  disagreement, ``w (1 - w) (E_shift - E_ref)^2``. The hyperparameters are refit under the favoured mean.
* **Calibrated variance.** The reported variance is ``c(n)^2`` times the model's, ``c(n) >= 1`` the
  inflation measured by replaying held-out references as pseudo-targets (:mod:`.calibration`). The
  selection does not depend on the variance's scale, so the items proposed are the uncalibrated
  model's.
"""

from __future__ import annotations

import math

import numpy as np

from .base import derived, store_derived
from .calibration import Calibrated
from .config import SessionConfig
from .prior import BucketPrior
from .refgp import RefGPEstimator, prior_precision
from .refgp_v2 import DELTA_SD as V2_DELTA_SD
from .refgp_v2 import RefGPV2Estimator, logit_means

DELTA_SPREAD = 1.5  # the shift's prior sd, x the sd of the references' own shifts
DELTA_SD_MIN = 0.1


def delta_scale(prior: BucketPrior) -> float:
    """The prior sd of the logit shift, read off the references: ``DELTA_SPREAD`` x the sd of every
    reference's own shift (``refgp_v2``'s fit of its scores against the references' item means), at
    least ``DELTA_SD_MIN``. On MuSR (model means 0.32-0.54) it is about 0.4 logits, on math_hard
    (0.0-0.7) about 3. Cached per prior; O(30 B M)."""
    cached = derived(prior, "refgp_v3_delta_sd")
    if cached is not None:
        return float(cached)
    logits, lo, hi = logit_means(prior)
    V = prior.bucket_vectors
    Nb = prior.bucket_sizes.astype(np.float64)
    Y = np.clip((V - lo) / (hi - lo), 0.0, 1.0) * Nb[:, None]  # (B, M) per-bucket sums on [0, 1]
    d = np.zeros(V.shape[1])
    for _ in range(30):  # Newton for every reference at once (concave; refgp_v2's N(0, 3^2) prior)
        p = 1.0 / (1.0 + np.exp(-(logits[:, None] + d[None, :])))
        g = (Y - Nb[:, None] * p).sum(axis=0) - d / V2_DELTA_SD ** 2
        h = (Nb[:, None] * p * (1.0 - p)).sum(axis=0) + 1.0 / V2_DELTA_SD ** 2
        step = np.clip(g / h, -2.0, 2.0)
        d += step
        if float(np.abs(step).max()) < 1e-9:
            break
    sd = float(np.std(d, ddof=1)) if d.size > 1 else V2_DELTA_SD / DELTA_SPREAD
    return float(store_derived(prior, "refgp_v3_delta_sd", max(DELTA_SPREAD * sd, DELTA_SD_MIN)))


class RefGPV3Model(RefGPV2Estimator):
    """``refgp_v2`` and ``refgp_ivr``'s means averaged by their prequential evidence; uncalibrated."""

    method = "refgp_v3"

    def __init__(self, prior: BucketPrior, config: SessionConfig) -> None:
        self._m_alt = np.zeros(0)
        self._logscore = np.zeros(2)  # cumulative one-step-ahead log predictive: [shifted, unshifted]
        self.delta_sd = delta_scale(prior)
        super().__init__(prior, config)

    @property
    def weight_shifted(self) -> float:
        """Posterior weight of the shifted mean (prior 1/2): its prequential likelihood ratio."""
        d = float(self._logscore[1] - self._logscore[0])
        return 1.0 / (1.0 + math.exp(min(d, 700.0)))

    def _install(self) -> None:
        super()._install()
        obs = np.flatnonzero(self._cnt)
        p0 = prior_precision(self._theta, self._n_feat)
        b = p0 * self.features.m0 + self._phi[obs].T @ (self._ysum[obs] / self._nu[obs])
        self._m_alt = self._Sigma @ b

    def _update(self, item: int, score: float) -> None:
        bk = int(self.prior.bucket_of_item[item])
        phi = self._phi[bk]
        g = self._Sigma @ phi
        den = float(self._nu[bk]) + float(phi @ g)
        r_shift = score - float(self._off[bk]) - float(phi @ self._m)
        r_alt = score - float(phi @ self._m_alt)
        self._logscore -= 0.5 * np.array([r_shift, r_alt]) ** 2 / den  # the common log(den) cancels
        self._m_alt = self._m_alt + g * (r_alt / den)
        super()._update(item, score)

    def _map_theta(self, obs: np.ndarray) -> np.ndarray:
        """The hyperparameters of a refit (``refgp_v2``'s: the shift first, then these) fitted under the
        mean that the prequential evidence favours: with the shift's offsets, or with none."""
        if self.weight_shifted >= 0.5:
            return super()._map_theta(obs)
        off = self._off
        self._off = np.zeros_like(off)
        try:
            return super()._map_theta(obs)
        finally:
            self._off = off

    def _set_estimate(self) -> None:
        super()._set_estimate()
        if self._m_alt.size == 0:
            return
        N = float(self.n_items)
        e_alt = float((self._sum_s + float(self._S @ self._m_alt)) / N)
        w = self.weight_shifted
        e_shift = self.estimate
        self.estimate = w * e_shift + (1.0 - w) * e_alt
        self.variance += w * (1.0 - w) * (e_shift - e_alt) ** 2


class RefGPV3Estimator(Calibrated, RefGPV3Model):
    """:class:`RefGPV3Model` with the variance calibrated on the references (the module docstring)."""

    calibration_model = RefGPV3Model


class RefGPCalEstimator(Calibrated, RefGPEstimator):
    """``refgp_cal``: ``refgp_ivr`` (same estimate, same items) with the variance calibrated on the
    references (:mod:`.calibration`)."""

    method = "refgp_cal"
    calibration_model = RefGPEstimator
