"""``fluid_irt``: Fluid Benchmarking (allenai/fluid-benchmarking, ``fluid_benchmarking/engine.py`` and
``estimators.py``): a 2PL IRT model of the references, the ability of the target by MAP
(prior N(0, 1), D = 1, theta in [-4, 4], Newton with backtracking, bisection fallback), and the next
item by maximum Fisher information ``a^2 P (1 - P)`` at the current ability (start ability 0; ties
to the lowest index).

Re-implemented from the public code (none of it is copied). Two parts are not the peer's and say so:

* the IRT parameters: the peer fits them with py-irt (pyro SVI, hierarchical priors); here they are
  :func:`evalplan.core.irt.irt_jml.fit_2pl` (L2-regularised joint maximum likelihood) on the references, mapped to
  the peer's ``a (theta - b)`` form; ``bench/sessions/peer_equality.py`` checks the engine against the
  peer's with the same parameters;
* the benchmark mean: the peer reports the ability; here
  ``E[R] = (sum_observed y + sum_unobserved P_i(theta)) / N`` with the delta-method variance
  ``(sum_U a_i P_i (1 - P_i))^2 / (I(theta) + 1) + sum_U P_i (1 - P_i)``, over ``N^2``.

Scores are mapped to [0, 1] by the references' range; non-binary scores enter the MAP score
equation as fractional responses (the peer accepts only 0/1).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy.special import expit

from evalplan.core.irt.irt_jml import fit_2pl

from .base import ItemEstimator, derived, store_derived
from .config import SessionConfig
from .prior import BucketPrior

MU0, SIGMA0, D_SCALE = 0.0, 1.0, 1.0
THETA_RANGE = (-4.0, 4.0)
TOL, MAX_ITER = 1e-6, 100


@dataclass(frozen=True)
class IrtItems:
    a: np.ndarray  # (N,) discrimination
    b: np.ndarray  # (N,) difficulty, in the a (theta - b) form
    lo: float
    hi: float


def irt_items(prior: BucketPrior) -> IrtItems:
    """2PL parameters of every item from the references (once per prior and process)."""
    cached = derived(prior, "fluid_irt_items")
    if cached is not None:
        return cached  # type: ignore[no-any-return]
    V = prior.bucket_vectors
    lo, hi = min(0.0, float(V.min())), max(1.0, float(V.max()))
    Y = ((V - lo) / (hi - lo))[prior.bucket_of_item].T  # (models, items)
    a, b, _theta = fit_2pl(Y, dim=1, l2=1.0)
    a1 = a[:, 0]
    a1 = np.where(np.abs(a1) < 1e-8, 1e-8, a1)
    return store_derived(prior, "fluid_irt_items", IrtItems(a1, b / a1, lo, hi))  # type: ignore[no-any-return]


def ability_map(y: np.ndarray, a: np.ndarray, b: np.ndarray, theta0: float) -> float:
    """The peer's MAP ability (``estimators.ability_estimate``, method ``map``, its defaults)."""
    inv_s2 = 1.0 / (SIGMA0 * SIGMA0)
    low, high = THETA_RANGE

    def score(t: float) -> float:
        P = expit(D_SCALE * a * (t - b))
        return float((MU0 - t) * inv_s2 + D_SCALE * np.sum(a * (y - P)))

    def score_prime(t: float) -> float:
        P = expit(D_SCALE * a * (t - b))
        return float(-inv_s2 - D_SCALE ** 2 * np.sum(a * a * P * (1.0 - P)))

    theta = float(np.clip(theta0, low, high))
    for _ in range(MAX_ITER):
        T = score(theta)
        if abs(T) < TOL:
            return theta
        Tp = score_prime(theta)
        if not np.isfinite(Tp) or Tp == 0.0:
            break
        new = theta - T / Tp
        if new < low or new > high or not np.isfinite(new):
            new = float(np.clip(new, low, high))
        for _bt in range(15):
            T_new = score(new)
            if abs(T_new) < abs(T) or not np.isfinite(T_new):
                break
            new = 0.5 * (new + theta)
        theta = new
    sL, sH = score(low), score(high)
    if sL * sH <= 0:
        lo, hi = low, high
        for _ in range(80):
            mid = 0.5 * (lo + hi)
            sM = score(mid)
            if abs(sM) < TOL:
                return mid
            if sL * sM > 0:
                lo, sL = mid, sM
            else:
                hi = mid
        return 0.5 * (lo + hi)
    return high if (sL > 0 and sH > 0) else low


class FluidIRTEstimator(ItemEstimator):
    method = "fluid_irt"

    def __init__(self, prior: BucketPrior, config: SessionConfig) -> None:
        super().__init__(prior, config)
        self.irt = irt_items(prior)
        self.theta = 0.0  # start ability
        self._set_estimate()

    @property
    def hyperparameters(self) -> dict[str, Any]:
        return {"theta": self.theta}

    def _update(self, item: int, score: float) -> None:
        pass  # the ability is re-estimated from all responses in _after_observe

    def _after_observe(self) -> None:
        it = np.asarray(self._items)
        irt = self.irt
        y = (np.asarray(self._scores) - irt.lo) / (irt.hi - irt.lo)
        self.theta = ability_map(y, irt.a[it], irt.b[it], self.theta)

    def fisher_information(self) -> np.ndarray:
        a, b = self.irt.a, self.irt.b
        P = expit(D_SCALE * a * (self.theta - b))
        return np.asarray(D_SCALE ** 2 * a * a * P * (1.0 - P))

    def _select(self, k: int) -> list[int]:
        fi = np.where(self._observed, -np.inf, self.fisher_information())
        if k == 1:
            return [int(np.argmax(fi))]
        order = np.argsort(-fi, kind="stable")
        return [int(i) for i in order[:k]]

    def _set_estimate(self) -> None:
        irt = self.irt
        N = float(self.n_items)
        U = ~self._observed
        P = expit(D_SCALE * irt.a * (self.theta - irt.b))
        pq = P * (1.0 - P)
        info = float(np.sum((D_SCALE * irt.a[~U]) ** 2 * pq[~U])) + 1.0 / (SIGMA0 * SIGMA0)
        slope = float(np.sum(D_SCALE * irt.a[U] * pq[U]))
        span = irt.hi - irt.lo
        mean01 = (float(np.sum((np.asarray(self._scores) - irt.lo) / span)) + float(P[U].sum())) / N
        var01 = (slope * slope / info + float(pq[U].sum())) / (N * N)
        self.estimate = float(irt.lo + span * mean01)
        self.variance = float(span * span * var01)
