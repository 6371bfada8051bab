"""Mutual-information estimators for mRMR coreset selection (paper §2.1-2.2, appendix E).

All values are in nats and clipped at 0 (true MI is non-negative; scikit-learn does the same).

* :func:`mi_binary_binary` / :func:`mi_binary_matrix` -- exact plug-in MI of 0/1 vectors
  (empirical joint distribution, ``0 log 0 = 0``), vectorized over the columns of ``X``.
* :func:`mi_discrete_continuous` / :func:`mi_ross_matrix` -- Ross (2014) kNN estimator
  (appendix E.3) with **exact 1-D distances**. It follows scikit-learn's private
  ``_compute_mi_cd`` (same neighbour radius ``nextafter(d_k, 0)``, same per-class
  ``k = min(k, n_class - 1)``, points whose class is a singleton dropped, same count of points
  within the radius) and equals it to 1e-12 wherever sklearn searches neighbours with a KD-tree;
  where it switches to brute force (a class of <= 2k+1 points, common with M = 30 references)
  sklearn's distances can be 1 ulp off, which at tied targets changes a count. We keep the exact
  value: matching sklearn there cost one sklearn call per column (~40 ms each with sklearn 1.9's
  OpenMP neighbour search on 2 cores: 14 s instead of 0.1 s for mRMR on 30 x 756). The matrix
  version is vectorized for 0/1 columns sharing one continuous target (sort the target once,
  k-th neighbour distances in 1-D via sliding windows, counts via ``searchsorted``). No noise or
  scaling is added here; :func:`sklearn_jitter` applies the scale + 1e-10 noise that
  ``mutual_info_regression`` applies to a continuous target.
* :func:`mi_ksg` -- Kraskov-Stögbauer-Grassberger estimator 1 (max-norm, strict ``<`` marginal
  counts); equals scikit-learn's ``_compute_mi_cc`` on the same (un-jittered) inputs.
* :func:`mi_ksg_pca` -- KSG with the local non-uniformity correction (LNC) of Gao, Ver Steeg &
  Galstyan (2015), appendix E.2. For each point ``z_i``: PCA of its k joint-space neighbours
  *centred at z_i* (eigenvectors of ``sum_j (z_j - z_i)(z_j - z_i)^T / k``); ``V̄_i`` is the
  volume of the PCA-aligned rectangle centred at ``z_i`` that contains the k neighbours
  (``prod_l 2 max_j |u_l . (z_j - z_i)|``), ``V_i = (2 d_i)^2`` the KSG max-norm box. Where
  ``V̄_i / V_i < alpha`` (local non-uniformity detected) the term ``log(V̄_i / V_i)`` is
  subtracted: ``I_LNC = I_KSG - mean_i 1[ratio_i < alpha] log ratio_i``. Points with a
  degenerate rectangle (zero extent, e.g. duplicated points) are not corrected. The base is
  KSG-1 (as in the paper's Eq. for ``I_PCA``), not the KSG-2 variant of the authors' code.
  ``alpha`` defaults to :data:`LNC_ALPHA` (see its comment for how it was chosen).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from scipy.spatial import cKDTree
from scipy.special import digamma
from sklearn.preprocessing import scale

# Default LNC threshold. Gao et al. choose alpha so that for locally *uniform* data the ratio
# V̄/V falls below alpha only rarely. Calibrated by simulation (independent uniform 2-D data,
# n=2000, 5 repeats): ~1st percentile of V̄/V was 0.081 (k=3), 0.256 (k=5), 0.459 (k=8);
# rounded down. Other k use LNC_ALPHA_FALLBACK unless ``alpha`` is passed.
LNC_ALPHA: dict[int, float] = {3: 0.08, 5: 0.25, 8: 0.45}
LNC_ALPHA_FALLBACK = 0.25


def _as_1d(a: Any, name: str) -> np.ndarray:
    arr = np.asarray(a, dtype=np.float64)
    if arr.ndim != 1:
        arr = arr.reshape(-1) if arr.ndim == 2 and 1 in arr.shape else arr
    if arr.ndim != 1:
        raise ValueError(f"{name} must be 1-D, got shape {np.shape(a)}")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} must be finite")
    return arr


def _check_binary(a: np.ndarray, name: str) -> None:
    if not np.all((a == 0) | (a == 1)):
        raise ValueError(f"{name} must contain only 0/1 values")


def _binary_columns_and_target(X: Any, y: Any) -> tuple[np.ndarray, np.ndarray]:
    """``(X as (n, m) 0/1 float columns, y as a finite 1-D array of length n)``, else ValueError."""
    X = np.asarray(X, dtype=np.float64)
    if X.ndim == 1:
        X = X[:, None]
    y = _as_1d(y, "y")
    if X.ndim != 2 or X.shape[0] != y.shape[0]:
        raise ValueError("X must be (n, m) with n == len(y)")
    _check_binary(X, "X")
    return X, y


# ---------------------------------------------------------------------------------------------
# plug-in MI for 0/1 data
# ---------------------------------------------------------------------------------------------

def mi_binary_matrix(X: Any, y: Any) -> np.ndarray:
    """Exact plug-in MI (nats) between each 0/1 column of ``X`` (n, m) and the 0/1 vector ``y``."""
    X, y = _binary_columns_and_target(X, y)
    _check_binary(y, "y")
    if X.shape[0] == 0:
        raise ValueError("need at least one sample")
    return mi_binary_from_counts(y @ X, X.sum(axis=0), float(y.sum()), float(X.shape[0]))


def mi_binary_from_counts(n11: np.ndarray, a1: np.ndarray, b1: float, n: float) -> np.ndarray:
    """Plug-in MI (nats) of 0/1 columns from their counts: ``n11`` = #(x=1, y=1), ``a1`` = #(x=1),
    ``b1`` = #(y=1), ``n`` samples (what :func:`mi_binary_matrix` computes; the counts are exact
    integers, so a caller that keeps the column sums gets the same values without copying columns)."""
    n11 = np.asarray(n11, dtype=np.float64)
    a1 = np.asarray(a1, dtype=np.float64)
    a0, b0 = n - a1, n - b1
    n10 = a1 - n11
    n01 = b1 - n11
    n00 = n - a1 - b1 + n11
    mi = np.zeros(n11.shape[0])
    for nab, na, nb in ((n11, a1, b1), (n10, a1, b0), (n01, a0, b1), (n00, a0, b0)):
        pos = nab > 0
        # p_ab log(p_ab / (p_a p_b)) = nab/n * log(n nab / (na nb)); nab > 0 implies na, nb > 0
        mi[pos] += nab[pos] / n * np.log(n * nab[pos] / (na[pos] * nb))
    return np.maximum(mi, 0.0)


def mi_binary_binary(x: Any, y: Any) -> float:
    """Exact plug-in MI (nats) of two 0/1 vectors."""
    return float(mi_binary_matrix(_as_1d(x, "x")[:, None], y)[0])


# ---------------------------------------------------------------------------------------------
# helpers: counts of points within a radius on a sorted 1-D sample
# ---------------------------------------------------------------------------------------------

def _count_within(sorted_vals: np.ndarray, centers: np.ndarray, radii: np.ndarray) -> np.ndarray:
    """#j with fl(|sorted_vals[j] - c|) <= r, for arrays of centers/radii (any equal shapes).

    ``searchsorted`` on ``c ± r`` can be off by a rounding; fl(v - c) is monotone in v, so the
    boundaries are fixed up by local checks until stable (exact semantics of a KD-tree count).
    """
    v = sorted_vals
    n = v.shape[0]
    hi = np.searchsorted(v, centers + radii, side="right")
    lo = np.searchsorted(v, centers - radii, side="left")
    for _ in range(64):
        changed = False
        # hi: first index with v - c > r
        m = (hi > 0) & ((v[np.maximum(hi - 1, 0)] - centers) > radii)
        if m.any():
            hi = np.where(m, hi - 1, hi)
            changed = True
        m = (hi < n) & ((v[np.minimum(hi, n - 1)] - centers) <= radii)
        if m.any():
            hi = np.where(m, hi + 1, hi)
            changed = True
        # lo: first index with c - v <= r
        m = (lo < n) & ((centers - v[np.minimum(lo, n - 1)]) > radii)
        if m.any():
            lo = np.where(m, lo + 1, lo)
            changed = True
        m = (lo > 0) & ((centers - v[np.maximum(lo - 1, 0)]) <= radii)
        if m.any():
            lo = np.where(m, lo - 1, lo)
            changed = True
        if not changed:
            break
    return np.asarray(hi - lo)


# ---------------------------------------------------------------------------------------------
# Ross (2014) discrete-continuous estimator
# ---------------------------------------------------------------------------------------------

def mi_discrete_continuous(x_discrete: Any, y_continuous: Any, k: int = 5) -> float:
    """Ross (2014) kNN MI between a discrete ``x`` and a continuous ``y`` (nats, clipped at 0),
    with exact 1-D distances (see the module docstring for how it relates to scikit-learn)."""
    return _ross_exact(x_discrete, y_continuous, k)


def _ross_exact(x_discrete: Any, y_continuous: Any, k: int = 5) -> float:
    """Own implementation of Ross (2014) with exact 1-D distances (see above)."""
    x = _as_1d(x_discrete, "x_discrete")
    c = _as_1d(y_continuous, "y_continuous")
    if x.shape != c.shape:
        raise ValueError("x_discrete and y_continuous must have the same length")
    k = _check_k(k)
    n = x.shape[0]
    radius = np.zeros(n)
    k_all = np.zeros(n)
    counts = np.zeros(n)
    for label in np.unique(x):
        mask = x == label
        cnt = int(mask.sum())
        counts[mask] = cnt
        if cnt > 1:
            kk = min(k, cnt - 1)
            vals = c[mask]
            order = np.argsort(vals, kind="stable")
            sv = vals[order]
            d = _kth_nn_dist_sorted(sv[:, None], np.zeros((cnt, 1), dtype=np.int64),
                                    np.full((cnt, 1), cnt - 1, dtype=np.int64), kk)[:, 0]
            r = np.empty(cnt)
            r[order] = d
            radius[mask] = np.nextafter(r, 0)
            k_all[mask] = kk
    keep = counts > 1
    if not keep.any():
        return 0.0
    cs = np.sort(c[keep])
    m_all = _count_within(cs, c[keep], radius[keep])
    mi = (digamma(keep.sum()) + np.mean(digamma(k_all[keep])) - np.mean(digamma(counts[keep]))
          - np.mean(digamma(m_all)))
    return float(max(0.0, mi))


def _kth_nn_dist_sorted(V: np.ndarray, start: np.ndarray, end: np.ndarray, k: int) -> np.ndarray:
    """k-th nearest-neighbour distance in 1-D for every row p of the column-wise sorted blocks.

    ``V`` (n, m): within each column, rows ``start[p]..end[p]`` (inclusive) form the sorted
    block containing row p; every block has at least k+1 rows. The k nearest neighbours of a
    point in sorted 1-D data are a contiguous window, so
    ``d_k(p) = min_j max(V[p] - V[p-k+j], V[p+j] - V[p])`` over the windows inside the block.
    """
    n, m = V.shape
    P = np.broadcast_to(np.arange(n)[:, None], (n, m))
    best = np.full((n, m), np.inf)
    for j in range(k + 1):
        lo = P - k + j
        hi = P + j
        valid = (lo >= start) & (hi <= end)
        lo_c = np.clip(lo, 0, n - 1)
        hi_c = np.clip(hi, 0, n - 1)
        d = np.maximum(V - np.take_along_axis(V, lo_c, axis=0),
                       np.take_along_axis(V, hi_c, axis=0) - V)
        best = np.where(valid, np.minimum(best, d), best)
    return best


def mi_ross_matrix(X: Any, y: Any, k: int = 5) -> np.ndarray:
    """Ross MI of every 0/1 column of ``X`` (n, m) with the continuous ``y`` (vectorized).

    Equal (to float rounding of the means) to ``[mi_discrete_continuous(X[:, j], y, k)]``.
    """
    X, y = _binary_columns_and_target(X, y)
    k = _check_k(k)
    n, m = X.shape
    order = np.argsort(y, kind="stable")
    ys = y[order]
    Xs = X[order].astype(np.int8)
    perm = np.argsort(Xs, axis=0, kind="stable")      # class 0 rows then class 1, each by y
    V = ys[perm]                                       # (n, m) values, block-sorted
    c1 = Xs.sum(axis=0).astype(np.int64)
    c0 = n - c1
    P = np.arange(n)[:, None]
    in0 = P < c0[None, :]
    start = np.where(in0, 0, c0[None, :])
    end = np.where(in0, c0[None, :] - 1, n - 1)
    cnt = end - start + 1
    # full windows where the class has >= k+1 points
    big = cnt >= k + 1
    d = np.full((n, m), np.nan)
    if big.any():
        dk = _kth_nn_dist_sorted(V, start, end, k)
        d = np.where(big, dk, d)
    # classes with 2..k points: k_eff = cnt - 1 -> farthest point of the class
    small = (cnt > 1) & ~big
    if small.any():
        vs = np.take_along_axis(V, np.clip(start, 0, n - 1), axis=0)
        ve = np.take_along_axis(V, np.clip(end, 0, n - 1), axis=0)
        d = np.where(small, np.maximum(V - vs, ve - V), d)
    keep = cnt > 1
    k_eff = np.where(big, k, cnt - 1)
    r = np.nextafter(np.where(keep, d, 0.0), 0)
    m_cnt = _count_within(ys, V, r)                   # over all n points, self included
    # drop singleton-class points from the counts (sklearn removes them before counting)
    single1 = c1 == 1
    single0 = c0 == 1
    for single, cls in ((single1, 1), (single0, 0)):
        if single.any():
            cols = np.nonzero(single)[0]
            idx_row = np.argmax(Xs[:, cols] == cls, axis=0)        # row (y-sorted) of singleton
            ysing = ys[idx_row]
            inside = np.abs(ysing[None, :] - V[:, cols]) <= r[:, cols]
            m_cnt[:, cols] -= inside.astype(m_cnt.dtype)
    n_keep = keep.sum(axis=0)
    with np.errstate(invalid="ignore", divide="ignore"):
        dg_k = np.where(keep, digamma(np.maximum(k_eff, 1)), 0.0).sum(0)
        dg_c = np.where(keep, digamma(np.maximum(cnt, 1)), 0.0).sum(0)
        dg_m = np.where(keep, digamma(np.maximum(m_cnt, 1)), 0.0).sum(0)
        nk = np.maximum(n_keep, 1)
        mi = digamma(nk) + (dg_k - dg_c - dg_m) / nk
    mi = np.where(n_keep > 0, mi, 0.0)
    return np.maximum(mi, 0.0)


def sklearn_jitter(y: Any, random_state: Any) -> np.ndarray:
    """What ``mutual_info_regression`` does to a continuous variable before estimating:
    ``scale(y, with_mean=False)`` plus ``1e-10 * max(1, mean|y|)`` standard-normal noise.
    ``random_state`` is an int or a ``np.random.RandomState`` (consumed like sklearn does)."""
    rng = random_state if isinstance(random_state, np.random.RandomState) \
        else np.random.RandomState(random_state)
    y = scale(np.asarray(y, dtype=np.float64), with_mean=False)
    return np.asarray(y + 1e-10 * np.maximum(1, np.mean(np.abs(y), axis=0)) * rng.standard_normal(y.shape))


# ---------------------------------------------------------------------------------------------
# KSG and LNC (PCA-corrected) KSG
# ---------------------------------------------------------------------------------------------

def _check_k(k: Any) -> int:
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
        raise ValueError(f"k must be a positive integer, got {k!r}")
    return int(k)


def _ksg_raw(x: np.ndarray, y: np.ndarray, k: int) -> tuple[float, np.ndarray, np.ndarray, np.ndarray]:
    n = x.shape[0]
    if n < k + 1:
        raise ValueError(f"need more than k={k} samples, got {n}")
    Z = np.column_stack([x, y])
    dist, idx = cKDTree(Z).query(Z, k=k + 1, p=np.inf)
    eps = dist[:, k]                       # k-th neighbour distance (self at distance 0)
    r = np.nextafter(eps, 0)               # strict '<' as in KSG-1 (and sklearn)
    nx = _count_within(np.sort(x), x, r) - 1
    ny = _count_within(np.sort(y), y, r) - 1
    mi = digamma(n) + digamma(k) - np.mean(digamma(nx + 1)) - np.mean(digamma(ny + 1))
    return float(mi), eps, idx, Z


def mi_ksg(x: Any, y: Any, k: int = 8) -> float:
    """KSG estimator 1 (max-norm joint kNN, marginal counts strictly inside); nats, >= 0."""
    x = _as_1d(x, "x")
    y = _as_1d(y, "y")
    if x.shape != y.shape:
        raise ValueError("x and y must have the same length")
    return float(max(0.0, _ksg_raw(x, y, _check_k(k))[0]))


def lnc_log_ratios(Z: np.ndarray, idx: np.ndarray, eps: np.ndarray) -> np.ndarray:
    """log(V̄_i / V_i) per point (NaN where the PCA rectangle or the box is degenerate)."""
    nb = idx[:, 1:]
    D = Z[nb] - Z[:, None, :]                             # (n, k, 2), centred at z_i
    C = np.einsum("nki,nkj->nij", D, D) / nb.shape[1]
    _, U = np.linalg.eigh(C)                               # (n, 2, 2) eigenvectors in columns
    proj = np.einsum("nki,nil->nkl", D, U)
    half = np.abs(proj).max(axis=1)                        # (n, 2) half-widths
    with np.errstate(divide="ignore", invalid="ignore"):
        log_vbar = np.log(2 * half).sum(axis=1)
        log_v = 2 * np.log(2 * eps)
        out = log_vbar - log_v
    out[~np.isfinite(out)] = np.nan
    return np.asarray(out)


def mi_ksg_pca(x: Any, y: Any, k: int = 8, alpha: float | None = None) -> float:
    """LNC / PCA-corrected KSG (Gao, Ver Steeg & Galstyan 2015); nats, >= 0.

    ``alpha``: non-uniformity threshold on ``V̄/V`` (default :data:`LNC_ALPHA` for ``k``).
    """
    x = _as_1d(x, "x")
    y = _as_1d(y, "y")
    if x.shape != y.shape:
        raise ValueError("x and y must have the same length")
    k = _check_k(k)
    if alpha is None:
        alpha = LNC_ALPHA.get(k, LNC_ALPHA_FALLBACK)
    if not 0 < alpha <= 1:
        raise ValueError(f"alpha must be in (0, 1], got {alpha}")
    mi, eps, idx, Z = _ksg_raw(x, y, k)
    lr = lnc_log_ratios(Z, idx, eps)
    corr = np.where(np.isfinite(lr) & (lr < np.log(alpha)), lr, 0.0)
    return float(max(0.0, mi - float(np.mean(corr))))


def mi_ksg_matrix(X: Any, y: Any, k: int = 8, pca: bool = False) -> np.ndarray:
    """KSG (or LNC-KSG when ``pca``) MI of every column of ``X`` (n, m) with ``y``."""
    X = np.asarray(X, dtype=np.float64)
    if X.ndim == 1:
        X = X[:, None]
    f = mi_ksg_pca if pca else mi_ksg
    return np.array([f(X[:, j], y, k) for j in range(X.shape[1])])
