"""``proeval_bq``: ProEval's BQ-SF estimator with its defaults (google-deepmind/proeval,
``proeval/sampler/bq.py``: ``BQPriorSampler(noise_variance=0.3, n_init=0)``, ``_bq_active_sampling``).

Re-implemented from the paper and the public code (none of it is copied):

* features: the reference models' scores, centred per item and scaled,
  ``x_i = (scores_i - u_i) / sqrt(M - 1)`` with ``u_i`` the reference mean (``setup_train_test_split``);
  the GP has the linear kernel ``k(i, j) = x_i^T x_j`` (the item covariance over references) and prior mean ``u``;
* posterior (weight space): ``P = (X_C X_C^T / s2 + I)^-1``,
  ``u_t = u + X^T P X_C (y_C - u_C) / s2`` (``_get_posterior``), ``s2 = 0.3``, no hyperparameter learning;
* estimate: ``mean(u_t)`` over all items (observed ones at their posterior mean, as ProEval);
  variance: ProEval's integral variance ``x_bar^T P x_bar`` (``x_bar`` the mean feature vector);
* selection (``_variance_improvement`` / ``_find_best_i_and_update``): with ``K`` starting at ``I`` and
  ``e = s2`` (ProEval passes the noise variance as ``e``), the next item maximizes
  ``e (q_i^T K s)^2 / (1 + e q_i^T K q_i)`` over unobserved ``q_i``, ``s = sum_i x_i``; then
  ``K <- K - e K q q^T K / (1 + e q^T K q)``. Ties go to the lowest item index (``np.argmax``).

Per observation O(B M + M^2) (ProEval recomputes ``P`` by inversion and ``Q K`` in O(N M^2); the
quadratic forms are kept up to date by the same rank-one updates here, which is the same arithmetic).
``bench/sessions/peer_equality.py`` runs ProEval's own code beside this one on a small case.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from .base import ItemEstimator, derived, store_derived
from .config import SessionConfig
from .prior import BucketPrior

NOISE_VARIANCE = 0.3  # BQPriorSampler's default


@dataclass(frozen=True)
class ProEvalFeatures:
    x: np.ndarray  # (B, M) centred, scaled reference scores by bucket
    u: np.ndarray  # (B,) prior mean by bucket
    x_bar: np.ndarray  # (M,) mean feature over items
    x_sum: np.ndarray  # (M,) sum of the features over items (ProEval's ``s``)
    u_mean: float


def proeval_features(prior: BucketPrior) -> ProEvalFeatures:
    cached = derived(prior, "proeval_features")
    if cached is not None:
        return cached  # type: ignore[no-any-return]
    V = prior.bucket_vectors
    Nb = prior.bucket_sizes.astype(np.float64)
    M = V.shape[1]
    u = V.mean(axis=1)
    x = (V - u[:, None]) / (math.sqrt(M - 1) if M > 1 else 1.0)
    x_sum = Nb @ x
    N = float(Nb.sum())
    return store_derived(prior, "proeval_features",  # type: ignore[no-any-return]
                         ProEvalFeatures(np.ascontiguousarray(x), u, x_sum / N, x_sum, float(Nb @ u / N)))


class ProEvalBQEstimator(ItemEstimator):
    method = "proeval_bq"

    def __init__(self, prior: BucketPrior, config: SessionConfig, noise_variance: float = NOISE_VARIANCE) -> None:
        super().__init__(prior, config)
        self.features = f = proeval_features(prior)
        M = f.x.shape[1]
        self.noise_variance = float(noise_variance)
        self._P = np.eye(M)  # (X_C X_C^T / s2 + I)^-1
        self._b = np.zeros(M)  # X_C (y_C - u_C)
        self._K = np.eye(M)  # the selection's matrix (k_t_inv)
        self._Ks = self._K @ f.x_sum
        self._quad = np.einsum("ij,ij->i", f.x, f.x)  # q_i^T K q_i per bucket
        self._w = prior.bucket_sizes.astype(np.float64)
        # items of each bucket in increasing index; pointer to the first unobserved one
        self._ptr = prior.bucket_offsets[:-1].copy()
        self._set_estimate()

    @property
    def hyperparameters(self) -> dict[str, Any]:
        return {"noise_variance": self.noise_variance}

    def _update(self, item: int, score: float) -> None:
        f = self.features
        b = int(self.prior.bucket_of_item[item])
        q = f.x[b]
        s2 = self.noise_variance
        g = self._P @ q  # posterior: Sherman-Morrison on (X X^T / s2 + I)
        self._P -= np.outer(g, g) / (s2 + float(q @ g))
        self._b += q * (score - f.u[b])
        e = s2  # selection: ProEval's update with e = noise variance
        kq = self._K @ q
        den = 1.0 + e * float(q @ kq)
        self._K -= e * np.outer(kq, kq) / den
        self._Ks = self._K @ f.x_sum
        self._quad -= e * (f.x @ kq) ** 2 / den
        self._w[b] -= 1.0

    def _set_estimate(self) -> None:
        f = self.features
        s2 = self.noise_variance
        self.estimate = float(f.u_mean + float(f.x_bar @ (self._P @ self._b)) / s2)
        self.variance = float(max(float(f.x_bar @ self._P @ f.x_bar), 0.0))

    def _first_unobserved(self, b: int, taken: set[int]) -> int:
        p = self.prior
        end = p.bucket_offsets[b + 1]
        j = int(self._ptr[b])
        while j < end and self._observed[p.items_by_bucket[j]]:
            j += 1
        self._ptr[b] = j
        while int(p.items_by_bucket[j]) in taken:
            j += 1
        return int(p.items_by_bucket[j])

    def _pick(self, scores: np.ndarray, w: np.ndarray, taken: set[int]) -> tuple[int, int]:
        """(bucket, item) of np.argmax over items: the lowest item index among the best buckets."""
        s = np.where(w > 0, scores, -np.inf)
        best = np.flatnonzero(s == s.max())
        items = [self._first_unobserved(int(b), taken) for b in best]
        k = int(np.argmin(items))
        return int(best[k]), items[k]

    def _select(self, k: int) -> list[int]:
        f = self.features
        e = self.noise_variance
        if k == 1:
            scores = e * (f.x @ self._Ks) ** 2 / (1.0 + e * self._quad)
            return [self._pick(scores, self._w, set())[1]]
        K, quad, w = self._K.copy(), self._quad.copy(), self._w.copy()
        picked: list[int] = []
        for _ in range(k):  # ProEval's update of K at selection time, before the score is known
            scores = e * (f.x @ (K @ f.x_sum)) ** 2 / (1.0 + e * quad)
            b, item = self._pick(scores, w, set(picked))
            picked.append(item)
            q = f.x[b]
            kq = K @ q
            den = 1.0 + e * float(q @ kq)
            K -= e * np.outer(kq, kq) / den
            quad -= e * (f.x @ kq) ** 2 / den
            w[b] -= 1.0
        return picked
