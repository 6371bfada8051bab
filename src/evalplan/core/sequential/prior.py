"""Bucket prior of BayesAME (papers/004, §3.1): items grouped by unique reference score vectors.

Computed once per (benchmark, reference set) and cacheable (``to_bytes``/``from_bytes``).

Squared distances ||phi_b - phi_b'||^2 are hyperparameter-free. When all reference scores lie on a
grid {k/m} (binary scores: m = 1) the squared distances are integers / m^2 taking at most
K_r*m^2 + 1 values ("levels"); we then precompute, for every bucket b, the size-weighted histogram
``level_hist[b, l] = sum_{b'} N_b' [level(b, b') = l]``. With it, the prior product ``Sigma w`` for
any (alpha, beta) costs O(B * levels) instead of O(B^2 K_r), which keeps refits cheap at B ~ 10^4.
"""

from __future__ import annotations

import io
from typing import Any

import numpy as np

_FORMAT = "evalplan.bucket_prior.v1"
_GRID_CANDIDATES = (1, 2, 3, 4, 5, 10)
_MAX_HIST_ENTRIES = 8_000_000  # B * levels (float64 -> 64 MB at most)
_CHUNK_ELEMS = 4_000_000  # chunk size (elements of a B-wide block) for O(B^2) passes


class BucketPrior:
    n_items: int
    n_buckets: int
    n_references: int
    bucket_of_item: np.ndarray  # (N,) int64
    bucket_sizes: np.ndarray  # (B,) int64
    bucket_vectors: np.ndarray  # (B, K_r) float64
    grid: int  # m > 0 if reference scores are multiples of 1/m (levels available), else 0

    def __init__(self, bucket_of_item: Any, bucket_sizes: Any, bucket_vectors: Any, grid: int = 0,
                 level_hist: Any = None) -> None:
        self.bucket_of_item = np.ascontiguousarray(bucket_of_item, dtype=np.int64)
        self.bucket_sizes = np.ascontiguousarray(bucket_sizes, dtype=np.int64)
        self.bucket_vectors = np.ascontiguousarray(bucket_vectors, dtype=np.float64)
        self.n_items = int(self.bucket_of_item.shape[0])
        self.n_buckets, self.n_references = (int(s) for s in self.bucket_vectors.shape)
        self.grid = int(grid)
        self._level_hist = None if level_hist is None else np.ascontiguousarray(level_hist, dtype=np.float64)
        self._int_cache: tuple[np.ndarray, np.ndarray] | None = None
        self.bucket_means = self.bucket_vectors.mean(axis=1)  # mu_b = phi_b^T 1 / K_r
        self._sq = np.einsum("ij,ij->i", self.bucket_vectors, self.bucket_vectors)
        order = np.argsort(self.bucket_of_item, kind="stable")
        self.items_by_bucket = order  # items grouped by bucket, increasing item index within bucket
        self.bucket_offsets = np.concatenate([[0], np.cumsum(self.bucket_sizes)])

    # ------------------------------------------------------------------ construction
    @classmethod
    def from_reference_scores(cls, reference_scores: np.ndarray) -> BucketPrior:
        ref = np.asarray(reference_scores, dtype=np.float64)
        if ref.ndim != 2 or ref.shape[0] < 1 or ref.shape[1] < 1:
            raise ValueError("reference_scores: must be a 2-D array K_r x N with K_r >= 1 and N >= 1")
        if not np.all(np.isfinite(ref)):
            raise ValueError("reference_scores: must not contain NaN or inf (fill missing scores first)")
        vectors, inverse, counts = np.unique(ref.T, axis=0, return_inverse=True, return_counts=True)
        inverse = np.asarray(inverse).reshape(-1)
        k_r = ref.shape[0]
        grid = 0
        for m in _GRID_CANDIDATES:
            scaled = vectors * m
            if np.all(np.abs(scaled - np.rint(scaled)) <= 1e-9):
                levels = k_r * m * m + 1
                if vectors.shape[0] * levels <= _MAX_HIST_ENTRIES and (np.abs(scaled).max() ** 2) * k_r < 2**23:
                    grid = m
                break
        return cls(inverse, counts, vectors, grid=grid)

    @property
    def n_levels(self) -> int:
        return self.n_references * self.grid * self.grid + 1 if self.grid else 0

    @property
    def level_hist(self) -> np.ndarray | None:
        """The (B, levels) histogram in grid mode, else None. Computed on first use (O(B^2 K_r)):
        only BayesAME's estimators read it, so a prior used by the item-level methods never pays it."""
        if self._level_hist is None and self.grid:
            self._level_hist = self._compute_level_hist()
        return self._level_hist

    @level_hist.setter
    def level_hist(self, value: np.ndarray | None) -> None:
        self._level_hist = None if value is None else np.ascontiguousarray(value, dtype=np.float64)

    @property
    def has_level_hist(self) -> bool:
        """Whether the histogram is computed (or needs none): ``to_bytes`` then includes it."""
        return not self.grid or self._level_hist is not None

    def _int_vectors(self) -> tuple[np.ndarray, np.ndarray]:
        """(m phi as float32, m^2 ||phi||^2) in grid mode, made on first use."""
        if self._int_cache is None:
            phi_int = np.rint(self.bucket_vectors * self.grid)
            self._int_cache = (phi_int.astype(np.float32), np.einsum("ij,ij->i", phi_int, phi_int))
        return self._int_cache

    def _compute_level_hist(self) -> np.ndarray:
        B, L = self.n_buckets, self.n_levels
        hist = np.zeros((B, L), dtype=np.float64)
        weights = self.bucket_sizes.astype(np.float64)
        chunk = max(1, _CHUNK_ELEMS // max(B, 1))
        for s in range(0, B, chunk):
            e = min(B, s + chunk)
            lev = self.levels_rows(np.arange(s, e))  # (e-s, B) int
            idx = (np.arange(e - s)[:, None] * L + lev).ravel()
            hist[s:e] = np.bincount(idx, weights=np.broadcast_to(weights, lev.shape).ravel(),
                                    minlength=(e - s) * L).reshape(e - s, L)
        return hist

    # ------------------------------------------------------------------ distances
    def levels_rows(self, buckets: np.ndarray) -> np.ndarray:
        """Integer levels m^2 ||phi_b - phi_b'||^2 for rows b in ``buckets`` (grid mode only)."""
        buckets = np.asarray(buckets, dtype=np.int64)
        phi_int32, sq_int = self._int_vectors()
        dots = phi_int32[buckets] @ phi_int32.T  # exact: small integers in float32
        lev = sq_int[buckets][:, None] + sq_int[None, :] - 2.0 * dots
        return np.asarray(np.rint(lev).astype(np.int64))

    def sqdist_rows(self, buckets: np.ndarray) -> np.ndarray:
        """||phi_b - phi_b'||^2 for rows b in ``buckets`` against all buckets: (len, B)."""
        buckets = np.asarray(buckets, dtype=np.int64)
        if self.grid:
            return self.levels_rows(buckets) / float(self.grid * self.grid)
        d2 = self._sq[buckets][:, None] + self._sq[None,
                                                   :] - 2.0 * (self.bucket_vectors[buckets] @ self.bucket_vectors.T)
        np.maximum(d2, 0.0, out=d2)
        d2[np.arange(len(buckets)), buckets] = 0.0
        return np.asarray(d2)

    def sqdist_row(self, b: int) -> np.ndarray:
        return np.asarray(self.sqdist_rows(np.array([b]))[0])

    def kernel_matvec(self, w: np.ndarray, alpha: float, beta: float) -> np.ndarray:
        """Sigma w for the prior covariance (never formed): O(B^2 K_r) in chunks."""
        B = self.n_buckets
        out = np.empty(B)
        chunk = max(1, _CHUNK_ELEMS // max(B, 1))
        scale = beta / self.n_references
        for s in range(0, B, chunk):
            e = min(B, s + chunk)
            k = self.sqdist_rows(np.arange(s, e))
            k *= -scale
            np.exp(k, out=k)
            out[s:e] = alpha * (k @ w)
        return out

    # ------------------------------------------------------------------ serialization
    def to_bytes(self) -> bytes:
        buf = io.BytesIO()
        arrays = dict(
            format=np.array(_FORMAT),
            bucket_of_item=self.bucket_of_item,
            bucket_sizes=self.bucket_sizes,
            bucket_vectors=self.bucket_vectors,
            grid=np.array(self.grid, dtype=np.int64),
        )
        if self._level_hist is not None:
            arrays["level_hist"] = self._level_hist
        np.savez_compressed(buf, **arrays)  # type: ignore[arg-type]  # numpy's stub mistypes **kwds
        return buf.getvalue()

    @classmethod
    def from_bytes(cls, data: bytes) -> BucketPrior:
        try:
            with np.load(io.BytesIO(data), allow_pickle=False) as z:
                if str(z["format"]) != _FORMAT:
                    raise ValueError("data: not a serialized BucketPrior (format mismatch)")
                hist = z["level_hist"] if "level_hist" in z.files else None
                prior = cls(z["bucket_of_item"], z["bucket_sizes"], z["bucket_vectors"],
                            grid=int(z["grid"]), level_hist=hist)
        except ValueError:
            raise
        except Exception as exc:  # zip/key errors
            raise ValueError(f"data: not a serialized BucketPrior ({exc})") from exc
        if prior.bucket_sizes.sum() != prior.n_items or prior.bucket_sizes.shape[0] != prior.n_buckets:
            raise ValueError("data: inconsistent BucketPrior arrays")
        return prior
