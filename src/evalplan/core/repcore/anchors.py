"""Coreset selection via consensus clustering (paper 003, §2.3, eqs. 3-5).

``consensus_embeddings`` averages the aligned embeddings ``z_{m,i}`` over the source models and
L2-normalizes them (eq. 3). ``SphericalKMeansAnchors`` partitions the items into ``k`` clusters
maximizing the within-cluster cosine similarity to the centroids (eq. 4: spherical k-means —
normalize, assign each item to the centroid of maximal cosine, centroid = normalized mean of
its members) and takes as anchor the member with the highest cosine to its centroid (eq. 5).

The paper does not state the initialization, restarts or iteration cap; ours: k-means++
seeding (on cosine distance), ``n_init=10`` restarts keeping the best objective, at most
``max_iter=100`` Lloyd iterations (stopping when no assignment changes).

``input="correctness"`` is the Table 4 / Appendix C.3 ablation ("0/1 K-means+Ridge"): the
caller passes the items x sources binary correctness matrix and the items are clustered "in
this discrete space" with ordinary (Euclidean) k-means, anchor = the member nearest to its
centroid. Cosine is not used there because an item no source (or every source) solves gives
a zero (or constant) vector whose direction carries no information.

Ties (equal similarities) go to the lowest cluster / item index. An empty cluster is reseeded
with the item farthest from its centroid; if one is still empty at the end (possible only
when there are fewer distinct rows than ``k``) it takes the worst-fitting member of the
largest cluster, so the ``k`` anchors are always distinct items.
"""

from __future__ import annotations

import numpy as np

_EPS = 1e-12


def _normalize_rows(x: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    return np.asarray(x / np.maximum(norms, _EPS))


def consensus_embeddings(embeddings: list[np.ndarray]) -> np.ndarray:
    """Eq. 3: ``e_i = mean_m z_{m,i}``, returned L2-normalized (``N x d_z``, float64)."""
    if len(embeddings) == 0:
        raise ValueError("need at least one source's embeddings")
    shape = embeddings[0].shape
    if any(e.shape != shape for e in embeddings) or len(shape) != 2:
        raise ValueError("all embeddings must be N x d_z arrays of one shape")
    mean = np.mean(np.stack([np.asarray(e, dtype=np.float64) for e in embeddings]), axis=0)
    return _normalize_rows(mean)


class SphericalKMeansAnchors:
    """Anchor selection by spherical k-means on consensus embeddings (§2.3, eqs. 4-5).

    Args:
        k: number of clusters = anchors (coreset size K).
        seed: seed of the k-means++ seeding.
        n_init: restarts; the one with the best objective is kept.
        max_iter: Lloyd iterations per restart.
        input: ``"embeddings"`` (default: rows are L2-normalized, cosine similarity) or
            ``"correctness"`` (Table 4 ablation: raw 0/1 rows, Euclidean k-means).

    Learned attributes: ``ranking_`` (anchor row indices, ordered by cluster size descending,
    ties by anchor index), ``gains_`` (cluster sizes as float, same order), ``weights_``
    (cluster sizes as int, same order), ``labels_`` (cluster of each item; cluster ``j`` is
    the one of ``ranking_[j]``), ``cluster_centers_`` (same order), ``anchor_similarity_``
    (cosine — or minus the Euclidean distance for ``"correctness"`` — of each anchor to its
    centroid), ``objective_`` (eq. 4's sum of cosines; minus the sum of squared distances
    for ``"correctness"``), ``n_iter_``.
    """

    def __init__(
        self,
        k: int,
        seed: int = 0,
        n_init: int = 10,
        max_iter: int = 100,
        input: str = "embeddings",
    ) -> None:
        self.k = k
        self.seed = seed
        self.n_init = n_init
        self.max_iter = max_iter
        self.input = input

    # similarity: larger is better for both metrics
    def _sim(self, x: np.ndarray, c: np.ndarray) -> np.ndarray:
        if self._cosine:
            return np.asarray(x @ c.T)
        d2 = (x * x).sum(1)[:, None] - 2.0 * (x @ c.T) + (c * c).sum(1)[None, :]
        return np.asarray(-np.maximum(d2, 0.0))

    def _center(self, members: np.ndarray) -> np.ndarray:
        c = members.mean(0)
        if self._cosine:
            c = c / max(np.linalg.norm(c), _EPS)
        return np.asarray(c)

    def _seed_centers(self, x: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        n = x.shape[0]
        centers = [x[rng.integers(n)]]
        dist = -self._sim(x, centers[0][None, :])[:, 0]
        if self._cosine:
            dist = 1.0 + dist  # 1 - cos
        for _ in range(1, self.k):
            w = np.maximum(dist, 0.0)
            tot = w.sum()
            i = int(rng.choice(n, p=w / tot)) if tot > 0 else int(rng.integers(n))
            centers.append(x[i])
            d_new = -self._sim(x, x[i][None, :])[:, 0]
            if self._cosine:
                d_new = 1.0 + d_new
            dist = np.minimum(dist, d_new)
        return np.array(centers)

    def _lloyd(self, x: np.ndarray, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, float, int]:
        c = self._seed_centers(x, rng)
        labels = np.full(x.shape[0], -1)
        it = 0
        for it in range(1, int(self.max_iter) + 1):  # noqa: B007 - the count is read after the loop
            s = self._sim(x, c)
            new = s.argmax(1)
            best = s[np.arange(len(new)), new]
            for j in range(self.k):  # reseed empty clusters with the worst-fitting item
                if not np.any(new == j):
                    far = int(np.argmin(best))
                    new[far] = j
                    best[far] = np.inf
            if np.array_equal(new, labels):
                break
            labels = new
            c = np.array([self._center(x[labels == j]) for j in range(self.k)])
        s = self._sim(x, c)
        obj = float(s[np.arange(len(labels)), labels].sum())
        return labels, c, obj, it

    def fit(self, X: np.ndarray) -> SphericalKMeansAnchors:
        """Cluster the rows of ``X`` (``N x d``) and pick one anchor per cluster."""
        if self.input not in ("embeddings", "correctness"):
            raise ValueError('input must be "embeddings" or "correctness"')
        x = np.asarray(X, dtype=np.float64)
        if x.ndim != 2 or not np.isfinite(x).all():
            raise ValueError("X must be a finite 2-D array")
        n = x.shape[0]
        if not 1 <= int(self.k) <= n:
            raise ValueError(f"k must be in [1, {n}]")
        if int(self.n_init) < 1 or int(self.max_iter) < 1:
            raise ValueError("n_init and max_iter must be >= 1")
        self._cosine = self.input == "embeddings"
        if self._cosine:
            x = _normalize_rows(x)
        rng = np.random.default_rng(self.seed)
        best = None
        for _ in range(int(self.n_init)):
            labels, c, obj, it = self._lloyd(x, rng)
            if best is None or obj > best[2] + 1e-12:
                best = (labels, c, obj, it)
        assert best is not None  # n_init >= 1
        labels, centers, obj, n_iter = best
        labels = labels.copy()

        # guarantee k non-empty clusters (only needed with many duplicate rows)
        sim_own = self._sim(x, centers)[np.arange(n), labels]
        for j in range(self.k):
            if not np.any(labels == j):
                big = np.bincount(labels, minlength=self.k).argmax()
                members = np.flatnonzero(labels == big)
                worst = members[np.argmin(sim_own[members])]
                labels[worst] = j
                centers[j] = x[worst] if not self._cosine else _normalize_rows(x[worst][None])[0]
                sim_own[worst] = self._sim(x[worst][None], centers[j][None])[0, 0]

        anchors, sims, sizes = [], [], []
        for j in range(self.k):
            members = np.flatnonzero(labels == j)
            s = self._sim(x[members], centers[j][None, :])[:, 0]
            a = int(members[np.argmax(s)])  # lowest index among exact ties
            anchors.append(a)
            sims.append(float(s.max()))
            sizes.append(len(members))
        anchors_a = np.array(anchors)
        sizes_a = np.array(sizes)
        order = np.lexsort((anchors_a, -sizes_a))  # size desc, then anchor index
        remap = np.empty(self.k, dtype=int)
        remap[order] = np.arange(self.k)

        self.ranking_ = anchors_a[order]
        self.weights_ = sizes_a[order]
        self.gains_ = self.weights_.astype(float)
        self.labels_ = remap[labels]
        self.cluster_centers_ = centers[order]
        self.anchor_similarity_ = np.array(sims)[order]
        self.objective_ = obj
        self.n_iter_ = n_iter
        return self
