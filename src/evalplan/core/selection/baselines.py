"""Baseline selectors of paper §4.2: random, stratified random, DPP (MAP and MI), k-center, k-means.

All follow :class:`~evalplan.core.selection.base.TextSelector`: ``fit(embeddings, labels)`` sets
``ranking_`` (row indices in selection order) and ``gains_`` (marginal objective gains; NaN where
there is no objective). Apart from :class:`StratifiedRandom` they ignore the benchmark labels
(global selection, as in the paper's baselines).
"""

from __future__ import annotations

import math
from typing import ClassVar

import numpy as np
from sklearn.cluster import KMeans
from sklearn.metrics import pairwise_distances_argmin
from sklearn.preprocessing import normalize

from evalplan.core.selection.base import ParamSpec, TextSelector


class _SeededSampler(TextSelector):
    """A random baseline: no parameters besides ``k`` and ``seed``."""

    PARAMS: ClassVar[dict[str, ParamSpec]] = {}

    def __init__(self, k: int, seed: int = 0) -> None:
        self.k = k
        self.seed = seed


class RandomSelection(_SeededSampler):
    """Uniform sample of ``k`` rows without replacement (``numpy.random.default_rng(seed)``).

    ``ranking_`` is the sampling order; ``gains_`` are NaN (no objective).
    """

    def _select(self, X: np.ndarray, labels: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        rng = np.random.default_rng(self.seed)
        return rng.choice(X.shape[0], size=k, replace=False), np.full(k, np.nan)


def stratified_counts(sizes: np.ndarray, k: int) -> np.ndarray:
    """Per-benchmark counts proportional to ``sizes`` (largest remainder, ties to the lower index),
    with at least one item per non-empty benchmark when ``k`` >= their number, never above a size."""
    sizes = np.asarray(sizes, dtype=np.int64)
    n = int(sizes.sum())
    if not 1 <= k <= n:
        raise ValueError(f"k={k} must be between 1 and the number of items {n}")
    quota = k * sizes / n
    counts = np.floor(quota).astype(np.int64)
    remainder = quota - counts
    order = np.lexsort((np.arange(sizes.size), -remainder))  # largest remainder first
    counts[order[: k - int(counts.sum())]] += 1
    nonempty = sizes > 0
    if k >= int(nonempty.sum()):
        for b in np.flatnonzero(nonempty & (counts == 0)):
            # take one from the benchmark most above its quota (it has >= 2, so it keeps one)
            surplus = np.where(counts >= 2, counts - quota, -np.inf)
            donor = int(np.argmax(surplus))
            counts[donor] -= 1
            counts[b] += 1
    return counts


class StratifiedRandom(_SeededSampler):
    """Random sample stratified by benchmark: counts from :func:`stratified_counts` (proportional to
    benchmark size, largest remainder, >= 1 per benchmark when ``k >= B``), uniform within each
    benchmark. ``ranking_`` is a random order of the sample; ``gains_`` are NaN."""

    def _select(self, X: np.ndarray, labels: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        rng = np.random.default_rng(self.seed)
        sizes = np.bincount(labels)
        self.counts_ = stratified_counts(sizes, k)
        picks = [rng.choice(np.flatnonzero(labels == b), size=int(c), replace=False)
                 for b, c in enumerate(self.counts_) if c > 0]
        chosen = np.concatenate(picks)
        return rng.permutation(chosen), np.full(k, np.nan)


def _dpp_features(X: np.ndarray, kernel: str) -> np.ndarray:
    """``Phi`` with ``K = Phi Phi^T`` (§4.2): centered (cov), unit rows (cos) or raw (dot)."""
    if kernel == "cov":
        return np.asarray(X - X.mean(axis=0))
    if kernel == "cos":
        return np.asarray(normalize(X))  # zero rows stay zero
    return X.copy()


class DPP(TextSelector):
    """Greedy MAP of a DPP with a linear kernel in feature space (§4.2), never forming ``n x n``.

    ``K = Phi Phi^T + reg * I`` with ``Phi`` the mean-centered (``kernel="cov"``), unit-normalized
    (``"cos"``) or raw (``"dot"``) embeddings.

    * ``mi=False``: maximize ``log det K_A`` with the incremental-Cholesky greedy of Chen, Zhang &
      Zhou (2018): ``O(n (d + k))`` per step. Default ``reg = 1e-6``: a jitter that keeps the
      objective finite once ``k`` exceeds the kernel's rank (``<= d``).
    * ``mi=True``: maximize ``f(A) = log det K_A + log det K_{V-A} - log det K_V`` (non-monotone).
      ``K_{V-A}`` of a low-rank kernel is singular, hence default ``reg = 1.0``. Its term is computed
      in the ``d x d`` feature space: ``log det K_{V-A} = (|V-A| - d) log reg + log det M_A`` with
      ``M_A = reg I + Phi^T Phi - sum_{a in A} phi_a phi_a^T`` (Sylvester), so adding ``j`` changes
      it by ``log(1 - phi_j^T M_A^{-1} phi_j) - log reg`` (determinant lemma); ``M_A^{-1}`` and the
      quadratic forms are updated by Sherman-Morrison, ``O(n d + d^2)`` per step. Always picks ``k``
      items, even when the best gain is negative.

    ``gains_`` are the marginal gains of the objective (natural log); ties go to the lowest index.
    """

    PARAMS: ClassVar[dict[str, ParamSpec]] = {
        "kernel": ParamSpec(str, "'cov' (centered embeddings), 'cos' (normalized) or 'dot' (raw)"),
        "mi": ParamSpec(bool, "true: mutual-information variant log det K_A + log det K_(V-A) - log det K_V"),
        "reg": ParamSpec(float, "ridge added to the kernel diagonal; default 1e-6 (MAP) or 1.0 (mi)"),
    }
    KERNELS: ClassVar[tuple[str, ...]] = ("cov", "cos", "dot")

    def __init__(self, k: int, kernel: str = "cov", mi: bool = False, reg: float | None = None,
                 seed: int = 0) -> None:
        self.k = k
        self.kernel = kernel
        self.mi = mi
        self.reg = reg
        self.seed = seed

    def _validate_extra_params(self) -> None:
        if self.kernel not in self.KERNELS:
            raise ValueError(f"kernel must be one of {list(self.KERNELS)}, got {self.kernel!r}")
        if not isinstance(self.mi, (bool, np.bool_)):
            raise ValueError(f"mi must be a boolean, got {self.mi!r}")
        if self.reg is not None:
            if isinstance(self.reg, bool) or not isinstance(self.reg, (int, float)) or not math.isfinite(self.reg):
                raise ValueError(f"reg must be a finite number, got {self.reg!r}")
            if self.reg < 0 or (self.mi and self.reg <= 0):
                raise ValueError(f"reg must be {'> 0 with mi=True' if self.mi else '>= 0'}, got {self.reg!r}")

    def _select(self, X: np.ndarray, labels: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        reg = float(self.reg) if self.reg is not None else (1.0 if self.mi else 1e-6)
        self.reg_ = reg
        Phi = _dpp_features(X, self.kernel)
        n, d = Phi.shape
        sq_norms = np.einsum("ij,ij->i", Phi, Phi)
        if self.kernel == "cos":  # exactly 1 (0 for a zero row), so that ties are real ties
            sq_norms = (sq_norms > 0).astype(np.float64)
        d2 = sq_norms + reg  # Schur complements K_jj - k_jA K_A^-1 k_Aj
        C = np.zeros((k, n), dtype=np.float64)  # rows of the incremental Cholesky factor
        available = np.ones(n, dtype=bool)
        if self.mi:
            Minv = np.linalg.inv(reg * np.eye(d) + Phi.T @ Phi)
            q = np.einsum("ij,ij->i", Phi @ Minv, Phi)  # phi_i^T M_A^-1 phi_i
            log_reg = math.log(reg)
        ranking = np.empty(k, dtype=np.int64)
        gains = np.empty(k, dtype=np.float64)
        with np.errstate(divide="ignore", invalid="ignore"):
            for s in range(k):
                score = np.log(np.maximum(d2, 0.0))
                if self.mi:
                    score += np.log(np.maximum(1.0 - q, 0.0)) - log_reg
                score[~available] = -np.inf
                score[np.isnan(score)] = -np.inf
                j = int(np.argmax(score))
                if not available[j]:  # every available gain is -inf (zero volume): lowest index
                    j = int(np.flatnonzero(available)[0])
                ranking[s], gains[s] = j, score[j]
                available[j] = False
                dj = math.sqrt(d2[j]) if d2[j] > 0 else 0.0
                if dj > 0:
                    col = Phi @ Phi[j]
                    col[j] += reg
                    e = (col - C[:s].T @ C[:s, j]) / dj
                    C[s] = e
                    d2 -= e * e
                if self.mi:
                    u = Minv @ Phi[j]
                    denom = 1.0 - q[j]
                    Minv += np.outer(u, u) / denom
                    q += (Phi @ u) ** 2 / denom
        return ranking, gains


class KCenter(TextSelector):
    """Greedy k-center, farthest-first traversal on cosine distance ``1 - cos`` (§4.2; Sener &
    Savarese 2018): a 2-approximation of the min-max cover radius.

    The first pick is the item most similar to the mean unit embedding (the most central item,
    deterministic); each next pick is the item farthest from the picks so far (ties: lowest index).
    ``gains_[s]`` is the distance of pick ``s`` to its nearest earlier pick, i.e. the cover radius
    just before it (NaN for the first pick); ``radius_`` is the final cover radius. ``seed`` is
    unused (deterministic).
    """

    PARAMS: ClassVar[dict[str, ParamSpec]] = {}

    def __init__(self, k: int, seed: int = 0) -> None:
        self.k = k
        self.seed = seed

    def _select(self, X: np.ndarray, labels: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        Z = normalize(X)
        n = Z.shape[0]
        ranking = np.empty(k, dtype=np.int64)
        gains = np.full(k, np.nan)
        j = int(np.argmax(Z @ Z.mean(axis=0)))
        dist = np.full(n, np.inf)
        available = np.ones(n, dtype=bool)
        for s in range(k):
            if s > 0:
                masked = np.where(available, dist, -np.inf)
                j = int(np.argmax(masked))
                gains[s] = masked[j]
            ranking[s] = j
            available[j] = False
            np.minimum(dist, np.maximum(1.0 - Z @ Z[j], 0.0), out=dist)
        rest = dist[available]
        self.radius_ = float(rest.max()) if rest.size else 0.0
        return ranking, gains


def nearest_distinct_items(centers: np.ndarray, X: np.ndarray) -> np.ndarray:
    """The row of ``X`` nearest (Euclidean) each center, in center order; a row already taken by an
    earlier center is replaced by the nearest free row, so the result has no repeats."""
    nearest = pairwise_distances_argmin(centers, X)
    taken = np.zeros(X.shape[0], dtype=bool)
    ranking = np.empty(len(centers), dtype=np.int64)
    for r, c in enumerate(centers):
        j = int(nearest[r])
        if taken[j]:
            dist = ((X - c) ** 2).sum(axis=1)
            dist[taken] = np.inf
            j = int(np.argmin(dist))
        taken[j] = True
        ranking[r] = j
    return ranking


class KMeansSelection(TextSelector):
    """k-means representatives (§4.2, "n-k-means clustering" as in tinyBenchmarks).

    ``sklearn.cluster.KMeans(n_clusters=k, random_state=seed, n_init="auto")`` on the embeddings,
    then the item nearest (Euclidean) to each centroid; centroids are visited by cluster size
    (descending, ties by cluster index) and one whose nearest item is taken gets its next nearest,
    so the ``k`` items are distinct. ``ranking_`` is in that order; ``weights_`` (int) and
    ``gains_`` (float) are the cluster sizes; ``cluster_centers_`` are the centroids in that order.
    """

    PARAMS: ClassVar[dict[str, ParamSpec]] = {}

    def __init__(self, k: int, seed: int = 0) -> None:
        self.k = k
        self.seed = seed

    def _select(self, X: np.ndarray, labels: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        km = KMeans(n_clusters=k, random_state=self.seed, n_init="auto").fit(X)
        sizes = np.bincount(km.labels_, minlength=k)
        order = np.lexsort((np.arange(k), -sizes))
        centers = km.cluster_centers_[order]
        ranking = nearest_distinct_items(centers, X)
        self.weights_ = sizes[order]
        self.cluster_centers_ = centers
        return ranking, self.weights_.astype(np.float64)
