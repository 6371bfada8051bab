"""``random``: uniform random items without replacement, the sample mean, the exact finite-population interval.

The baseline every active method is measured against (docs/SEQUENTIAL.md). Items are drawn uniformly from the
unobserved ones (seeded by the session seed and n, so a replay is identical). The estimate is the sample mean;
its variance the finite-population one, ``(1 - n/N) s^2 / n``. The interval:

* binary scores: exact, by inverting the hypergeometric distribution of the number of successes in the sample
  (the finite-population analogue of Clopper-Pearson; Cochran 1977 §3.6): every population count ``K`` whose
  two one-sided tail probabilities of the observed count are both above ``alpha / 2``, divided by N;
* other scores: the normal interval with the finite-population correction (Cochran 1977 §2.15), the sample
  variance plus a floor ``span^2 / n`` (Chow & Robbins 1965; ``stopping.sequential_half_width``), ``span`` the
  width of the score range ([0, 1] when every reference score lies there, else the range of the reference
  and observed scores): never a zero-width interval after a few equal scores (all 0.5 after 2 items gave
  [0.500, 0.500] without it), and the interval the precision stop is measured valid at (docs/RESULTS.md).

Both are fixed-n intervals; a session that stops on precision with ``stop.anytime_valid`` gets the betting
confidence sequence of sampling without replacement instead (``stopping.BettingCS``). Observed items are
exact: all observed, the interval is the mean.
"""

from __future__ import annotations

import math

import numpy as np
from scipy.stats import hypergeom

from .base import ItemEstimator, z_of
from .config import SessionConfig
from .prior import BucketPrior
from .stopping import sequential_half_width


class RandomEstimator(ItemEstimator):
    """Uniform random items, sample mean, exact finite-population interval (module docstring)."""

    method = "random"

    def __init__(self, prior: BucketPrior, config: SessionConfig) -> None:
        super().__init__(prior, config)
        self._sum_sq = 0.0
        self._binary = True
        N = max(prior.n_items, 1)
        self.estimate = float(np.dot(prior.bucket_sizes, prior.bucket_means) / N)
        # before two scores: one item's variance over the references' scores (a prior guess, not a sample's)
        second = float(np.dot(prior.bucket_sizes, (prior.bucket_vectors ** 2).mean(axis=1)) / N)
        self._s2_ref = max(second - self.estimate ** 2, 0.0)
        self.variance = self._s2_ref
        V = prior.bucket_vectors
        unit = bool(V.size) and float(V.min()) >= 0.0 and float(V.max()) <= 1.0
        self._range = (0.0, 1.0) if unit or not V.size else (float(V.min()), float(V.max()))

    def _select(self, k: int) -> list[int]:
        rng = np.random.default_rng([self.config.seed, self.n_observed, 5])
        return [int(i) for i in rng.choice(np.flatnonzero(~self._observed), size=k, replace=False)]

    def _update(self, item: int, score: float) -> None:
        self._sum_sq += score * score
        self._binary = self._binary and score in (0.0, 1.0)
        self._range = (min(self._range[0], score), max(self._range[1], score))

    def _set_estimate(self) -> None:
        n, N = self.n_observed, self.n_items
        self.estimate = self._sum_s / n
        if n >= N:
            self.variance = 0.0
            return
        s2 = max(self._sum_sq - n * self.estimate ** 2, 0.0) / (n - 1) if n > 1 else self._s2_ref
        self.variance = (1.0 - n / N) * s2 / n

    def interval(self, level: float = 0.95) -> tuple[float, float]:
        n, N = self.n_observed, self.n_items
        if n >= N:
            return self.estimate, self.estimate
        if self._binary and n > 0:
            k = int(round(self._sum_s))
            alpha = 1.0 - level
            K = np.arange(N + 1)
            upper_tail = hypergeom.sf(k - 1, N, K, n)  # P(X >= k | K)
            lower_tail = hypergeom.cdf(k, N, K, n)  # P(X <= k | K)
            ok = np.flatnonzero((upper_tail > alpha / 2) & (lower_tail > alpha / 2))
            if ok.size:
                return float(ok[0]) / N, float(ok[-1]) / N
            return self.estimate, self.estimate
        span = self._range[1] - self._range[0]
        if n < 2:  # no sample variance yet: the references' item variance, plus the floor once a score is in
            half = z_of(level) * math.sqrt(self._s2_ref + (span * span if n else 0.0))
        else:
            s2 = max(self._sum_sq - n * self.estimate ** 2, 0.0) / (n - 1)
            half = sequential_half_width(n, s2, span, level, fpc=1.0 - n / N)
        return self.estimate - half, self.estimate + half
