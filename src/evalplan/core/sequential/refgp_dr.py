"""``refgp_dr``: a design-based (model-assisted) session: uniform random items, ``refgp_ivr``'s reference-score
model as the working model, and the difference estimator's honest variance (docs/SEQUENTIAL.md).

``refgp_ivr`` chooses items deterministically and trusts its model's variance; when the target is not in
the span of the references (extrapolation) that variance is far too small and the estimate biased. Here
the items are drawn uniformly at random from the unobserved ones (as ``rs_mean``) and the model only
*assists* (the difference / GREG estimator of survey sampling, Särndal, Swensson & Wretman 1992 §6.3;
the AIPW estimator of benchmark prediction):

    R_hat = (sum_{observed} y_i + sum_{unobserved} mu_i) / N + (1 - n/N) e_bar,
    Var[R_hat] = (1 - n/N) s_e^2 / n,

with ``mu`` the model's current posterior mean, ``e_i = y_i - mu_{-i}(i)`` the leave-one-out residual of
each observed item (the posterior mean without item i, so not optimistic: ``(y_i - mu_i) / (1 - h_i)``
with the leverage ``h_i = phi_i^T Sigma phi_i / nu_i``, from the per-bucket statistics in O(n_b D^2)),
``e_bar`` their mean and ``s_e^2`` their variance, shrunk towards ``rs_mean``'s per-item variance of the raw
scores (its Agresti-Coull-style floor included) with ``PSEUDO_COUNT`` pseudo-observations: no narrow interval
after a short run of well-predicted items, and the residuals' own variance once there are many. The
correction ``e_bar`` removes the model's bias; the interval is valid under the random design whatever the
model, and narrower than ``rs_mean``'s by the factor ``s_e / s_y`` the references explain. It needs the
caller to evaluate the proposed items: items the caller picks itself break the random design.
"""

from __future__ import annotations

import math

import numpy as np

from .estimator import rs_mean_s2
from .refgp import RefGPEstimator

PSEUDO_COUNT = 5.0  # weight, in observations, of the raw scores' variance in s_e^2


class RefGPDREstimator(RefGPEstimator):
    """Uniform random items, ``refgp_ivr``'s model as working model, difference estimator (module doc)."""

    method = "refgp_dr"

    def _select(self, k: int) -> list[int]:
        rng = np.random.default_rng([self.config.seed, self.n_observed])
        unobserved = np.flatnonzero(~self._observed)
        return [int(i) for i in rng.choice(unobserved, size=k, replace=False)]

    def loo_residuals(self) -> tuple[float, float]:
        """(sum, sum of squares) of the observed items' leave-one-out residuals (module docstring)."""
        obs = np.flatnonzero(self._cnt)
        P = self._phi[obs]
        pm = self._off[obs] + P @ self._m
        leverage = np.einsum("ij,ij->i", P @ self._Sigma, P) / self._nu[obs]
        inv = 1.0 / np.maximum(1.0 - leverage, 1e-6)
        cnt, ysum, yysum = self._cnt[obs], self._ysum[obs], self._yysum[obs]
        total = float(((ysum - cnt * pm) * inv).sum())
        squares = float(((yysum - 2.0 * ysum * pm + cnt * pm * pm) * inv * inv).sum())
        return total, squares

    def _set_estimate(self) -> None:
        super()._set_estimate()  # the model's estimate and variance: what n = 0 reports
        n = self.n_observed
        if n == 0:
            return
        N = float(self.n_items)
        total, squares = self.loo_residuals()
        mean = total / n
        ss = max(squares - n * mean * mean, 0.0)
        s2 = (ss + PSEUDO_COUNT * rs_mean_s2(np.asarray(self._scores))) / (n - 1 + PSEUDO_COUNT)
        fpc = max(1.0 - n / N, 0.0)
        self.estimate = float(self.estimate + fpc * mean)
        self.variance = float(fpc * s2 / n) if math.isfinite(s2) else float(self.variance)
