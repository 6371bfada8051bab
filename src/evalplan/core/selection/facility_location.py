"""Facility location on a sparsified cosine graph (paper §3.1, eqs. 1-2).

``f(A) = sum_i max_{j in A} w_ij`` with ``w_ij = max(0, cos(e_i, e_j))``. Each row ``i`` (a
*client*) keeps only its top ``t = ceil(alpha * n / k)`` entries; with ``stratify=True`` the
candidates of row ``i`` are the items of its own benchmark (block-diagonal graph, §4.3). Column
``j`` is a *facility*: its gain is ``sum_{i: w_ij > 0} max(0, w_ij - cur_i)``.

The diagonal is kept (``w_ii = 1``: an item covers itself), as apricot and submodlib do with a
precomputed kernel; it is always among a row's top-t entries.
"""

from __future__ import annotations

import math
import os
from concurrent.futures import ThreadPoolExecutor
from typing import Any, ClassVar

import numpy as np
import scipy.sparse as sp
from threadpoolctl import threadpool_limits  # a scikit-learn dependency

from evalplan.core.selection.base import ParamSpec, TextSelector, check_embeddings, check_k, check_labels

_SENTINEL = np.float32(2.0)  # written on the diagonal so that it is always kept; clipped back to 1
_TINY = np.float32(np.finfo(np.float32).tiny)  # keep only w_ij > 0
_SAMPLE_STRIDE = 8


def sparsity_t(alpha: float, n: int, k: int) -> int:
    """``t = ceil(alpha * n / k)`` (§3.1), at least 1 and at most ``n``."""
    return int(min(n, max(1, math.ceil(alpha * n / k - 1e-9))))


def _normalize_rows(X: np.ndarray) -> np.ndarray:
    """Unit rows in float32 (zero rows stay zero: similarity 0 to every other item)."""
    Z = np.array(X, dtype=np.float32, order="C", copy=True)
    norms = np.sqrt(np.einsum("ij,ij->i", Z, Z, dtype=np.float64)).astype(np.float32)
    norms[norms == 0] = 1.0
    Z /= norms[:, None]
    return Z


def _row_counts(mask: np.ndarray) -> np.ndarray:
    return np.asarray(mask.view(np.uint8).sum(axis=1, dtype=np.int64))


def _row_top_t(S: np.ndarray, t: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Top-``t`` positive entries of each row of ``S``: flat row-major positions (ascending), values
    and per-row counts.

    Exact: a lower bound of each row's t-th largest value is read from a strided column sample
    (``np.partition`` on 1/8 of the row), verified by counting the entries that reach it, and refined
    exactly among those few candidates. Ties at the threshold keep the lowest column indices.
    """
    c, m = S.shape
    if t >= m:
        mask = S >= _TINY
        flat = np.flatnonzero(mask)
        return flat, S.ravel()[flat], _row_counts(mask)
    s = _SAMPLE_STRIDE
    q = int(math.ceil(1.3 * t / s)) + 4
    sampled = m >= 2 * s * q
    if sampled:
        sub = S[:, ::s]
        ms = sub.shape[1]
        tau = np.partition(sub, ms - q, axis=1)[:, ms - q]
    else:
        tau = np.partition(S, m - t, axis=1)[:, m - t]
    np.maximum(tau, _TINY, out=tau)
    mask = S >= tau[:, None]
    counts = _row_counts(mask)
    if sampled:
        # a sampled bound is valid iff >= t entries reach it (or it already is the positivity floor)
        bad = np.flatnonzero((counts < t) & (tau > _TINY))
        if bad.size:
            tau[bad] = np.maximum(np.partition(S[bad], m - t, axis=1)[:, m - t], _TINY)
            mask[bad] = S[bad] >= tau[bad, None]
            counts[bad] = _row_counts(mask[bad])
    flat = np.flatnonzero(mask)
    del mask
    vals = S.ravel()[flat]
    over = counts > t
    if not over.any():
        return flat, vals, counts
    # exact t-th largest among each row's candidates (a superset of its top t), rows padded with -inf
    maxc = int(counts.max())
    starts = np.cumsum(counts) - counts
    rows = np.repeat(np.arange(c), counts)
    P = np.full((c, maxc), -np.inf, dtype=np.float32)
    P.ravel()[np.arange(flat.size) + np.repeat(np.arange(c) * maxc - starts, counts)] = vals
    kth = np.partition(P, maxc - t, axis=1)[:, maxc - t]
    kth[~over] = -np.inf
    kept = np.where(over, _row_counts(P >= kth[:, None]), counts)
    keep = vals >= kth[rows]
    for r in np.flatnonzero(kept > t):  # ties at the threshold: keep the lowest columns
        idx = np.arange(starts[r], starts[r] + counts[r])
        idx = idx[keep[idx]]
        ties = idx[vals[idx] == kth[r]]
        keep[ties[ties.size - (int(kept[r]) - t):]] = False
        kept[r] = t
    return flat[keep], vals[keep], kept


def build_similarity_graph(embeddings: Any, labels: Any, t: int, stratify: bool = True, *,
                           chunk_elems: int = 1 << 22, n_threads: int | None = None) -> sp.csr_matrix:
    """Sparse ``n x n`` graph ``w_ij = max(0, cos(e_i, e_j))`` keeping each row's top ``t`` entries (§3.1).

    With ``stratify=True`` only same-benchmark ``j`` are candidates for row ``i`` (block-diagonal,
    §4.3) and ``t`` is capped at the block size; otherwise all ``n`` items are candidates. Entries
    ``<= 0`` are not stored; the diagonal is ``1``. Built in row chunks of about ``chunk_elems``
    similarities (float32 BLAS matmul + exact top-t) on ``n_threads`` threads; column indices are
    sorted within each row; ``data`` is float32, ``indices``/``indptr`` int32 (int64 if needed).
    The result is bit-identical for the same settings; across chunk sizes / thread counts the BLAS
    kernel may round a similarity's last float32 bit differently.
    """
    X = check_embeddings(embeddings, dtype=np.float32)
    n = X.shape[0]
    y = check_labels(labels, n)
    t = check_k(t)
    Z = _normalize_rows(X)
    del X
    if stratify:
        order = np.argsort(y, kind="stable")
        sorted_labels = y[order]
        cuts = np.flatnonzero(np.diff(sorted_labels)) + 1
        bounds = np.concatenate([[0], cuts, [n]])
        contiguous = bool(np.all(order == np.arange(n)))
    else:
        order = np.arange(n)
        bounds = np.array([0, n])
        contiguous = True
    Zs = Z if contiguous else Z[order]
    if not contiguous:
        del Z

    sizes = np.diff(bounds)
    block_of_pos = np.repeat(np.arange(sizes.size), sizes)
    row_cap_sorted = np.minimum(t, sizes)[block_of_pos]  # per row, in sorted order
    row_cap = np.empty(n, dtype=np.int64)
    row_cap[order] = row_cap_sorted
    cap_start = np.concatenate([[0], np.cumsum(row_cap)])
    total_cap = int(cap_start[-1])
    index_dtype = np.int32 if max(n, total_cap) < np.iinfo(np.int32).max else np.int64
    out_idx = np.empty(total_cap, dtype=index_dtype)
    out_val = np.empty(total_cap, dtype=np.float32)
    counts = np.zeros(n, dtype=np.int64)

    tasks: list[tuple[int, int, int]] = []  # (block start, chunk start, chunk end) in sorted order
    for b0, b1 in zip(bounds[:-1], bounds[1:]):
        m = int(b1 - b0)
        step = max(16, min(m, chunk_elems // max(m, 1)))
        for c0 in range(int(b0), int(b1), step):
            tasks.append((int(b0), c0, min(int(b1), c0 + step)))

    def work(task: tuple[int, int, int]) -> None:
        b0, c0, c1 = task
        b1 = int(bounds[np.searchsorted(bounds, b0, side="right")])
        block = Zs[b0:b1]
        S = Zs[c0:c1] @ block.T
        c, m = S.shape
        S[np.arange(c), np.arange(c0 - b0, c1 - b0)] = _SENTINEL
        flat, vals, row_counts = _row_top_t(S, min(t, m))
        del S
        np.minimum(vals, 1.0, out=vals)
        starts = np.cumsum(row_counts) - row_counts
        # local column = flat - local_row * m, global column = order[b0 + local column]
        cols = flat - np.repeat(np.arange(c, dtype=np.int64) * m - b0, row_counts)
        if not contiguous:
            cols = order[cols]
        if contiguous and np.array_equal(row_counts, row_cap[c0:c1]):
            out_idx[cap_start[c0]:cap_start[c1]] = cols
            out_val[cap_start[c0]:cap_start[c1]] = vals
        else:
            glob_rows = order[c0:c1]
            dest = np.repeat(cap_start[glob_rows] - starts, row_counts) + np.arange(flat.size)
            out_idx[dest] = cols
            out_val[dest] = vals
        counts[order[c0:c1]] = row_counts

    workers = n_threads or min(8, len(os.sched_getaffinity(0)))
    if workers > 1 and len(tasks) > 1:
        # one BLAS thread per worker: measured 2.3x faster than one worker with threaded BLAS
        with threadpool_limits(limits=1, user_api="blas"), ThreadPoolExecutor(workers) as pool:
            for _ in pool.map(work, tasks):
                pass
    else:
        for task in tasks:
            work(task)

    indptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(counts, out=indptr[1:])
    if int(indptr[-1]) != total_cap:  # rows with fewer than t positive similarities: compact
        used = np.zeros(total_cap, dtype=bool)
        used_pos = np.repeat(cap_start[:-1] - indptr[:-1], counts) + np.arange(int(indptr[-1]))
        used[used_pos] = True
        out_idx = out_idx[used]
        out_val = out_val[used]
    graph = sp.csr_matrix((out_val, out_idx, indptr.astype(index_dtype)), shape=(n, n))
    graph.has_sorted_indices = True
    return graph


def _as_csc(graph: Any) -> sp.csc_matrix:
    if not sp.issparse(graph):
        graph = sp.csc_matrix(np.asarray(graph, dtype=np.float64))
    W = graph.tocsc() if graph.format != "csc" else graph
    if W.shape[0] != W.shape[1]:
        raise ValueError(f"graph must be square, got shape {W.shape}")
    if W.data.size and (not np.all(np.isfinite(W.data)) or W.data.min() < 0):
        raise ValueError("graph must have finite, nonnegative entries")
    return W


def _column_gains(W: sp.csc_matrix, cols: np.ndarray, cur: np.ndarray) -> np.ndarray:
    """Exact gains ``sum_i max(0, w_ij - cur_i)`` of the columns ``cols``, float64, summed per column
    in row order. Every evaluation goes through this one code path, so with ``cur`` only growing a
    re-evaluated gain never exceeds an earlier one, in floating point too."""
    sub = W[:, cols]  # scipy's C++ column gather, row order kept
    vals = cur.take(sub.indices)
    np.subtract(sub.data, vals, out=vals)  # w_ij - cur_i in float64
    np.maximum(vals, 0.0, out=vals)
    gains = np.zeros(cols.size, dtype=np.float64)
    ptr = sub.indptr
    nonempty = ptr[1:] > ptr[:-1]
    if vals.size:
        gains[nonempty] = np.add.reduceat(vals, ptr[:-1][nonempty])
    return gains


def greedy_facility_location(graph: Any, k: int, *, pool_size: int = 4096, batch_size: int = 32,
                             max_batch_size: int = 1024) -> tuple[np.ndarray, np.ndarray]:
    """Greedy maximization of ``f(A) = sum_i max_{j in A} w_ij`` (§3.1, eq. 2; Nemhauser et al.) on
    a nonnegative graph whose rows are clients and columns facilities (any precomputed sparse or
    dense matrix). Returns ``(ranking, gains)``.

    Exact lazy greedy (Minoux's accelerated greedy, vectorized): upper bounds of all gains are kept
    in an array; a *pool* holds the ``pool_size`` largest bounds and ``theta`` bounds everything
    outside it. Each round re-evaluates, in one numpy batch (doubling up to ``max_batch_size``), the
    stale pool entries that could still beat the best exactly-known gain; when none can and that
    gain exceeds ``theta`` it is the greedy choice, otherwise the pool is rebuilt. By submodularity
    stale gains are upper bounds, so the result is exactly naive greedy's, ties broken by the lowest
    index.
    """
    ranking, gains, _ = _lazy_greedy(_as_csc(graph), k, pool_size, batch_size, max_batch_size)
    return ranking, gains


def _lazy_greedy(W: sp.csc_matrix, k: int, pool_size: int = 4096, batch_size: int = 32,
                 max_batch_size: int = 1024) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Body of :func:`greedy_facility_location`; also returns the final coverage ``cur``."""
    n = W.shape[1]
    k = check_k(k, n)
    cur = np.zeros(W.shape[0], dtype=np.float64)
    # initial bounds: column sums in the data's dtype, inflated by the worst-case rounding error of
    # a sum of m nonnegative terms ((m - 1) u relative, any order); all start stale, so every
    # pick is made on exactly evaluated gains
    ub = np.zeros(n, dtype=np.float64)
    lengths = np.diff(W.indptr)
    nonempty = lengths > 0
    if W.nnz:
        ub[nonempty] = np.add.reduceat(W.data, W.indptr[:-1][nonempty])
    eps = float(np.finfo(W.data.dtype).eps) if W.data.dtype.kind == "f" else 0.0
    ub *= 1.0 + 2.0 * eps * (lengths + 1)
    fresh_at = np.full(n, -1, dtype=np.int64)  # step at which ub[j] was evaluated exactly
    available = np.ones(n, dtype=bool)
    ranking = np.empty(k, dtype=np.int64)
    gains = np.empty(k, dtype=np.float64)

    def rebuild() -> tuple[np.ndarray, float]:
        """Pool = the ``pool_size`` largest bounds (ties included); theta = max bound outside."""
        idx = np.flatnonzero(available)
        if idx.size <= pool_size:
            return idx, -np.inf
        vals = ub[idx]
        kth = np.partition(vals, idx.size - pool_size)[idx.size - pool_size]
        inside = vals >= kth
        outside = vals[~inside]
        return idx[inside], (float(outside.max()) if outside.size else -np.inf)

    pool, theta = rebuild()
    for step in range(k):
        size = batch_size
        while True:
            pu = ub[pool]
            fresh = fresh_at[pool] == step
            if fresh.any():
                g_best = pu[fresh].max()
                j_best = int(pool[fresh & (pu == g_best)].min())
                # stale entries whose bound could still beat (g_best, j_best)
                cand = pool[~fresh & ((pu > g_best) | ((pu == g_best) & (pool < j_best)))]
            else:
                g_best, j_best = -np.inf, -1
                cand = pool
            if cand.size == 0:
                if g_best > theta:
                    break
                pool, theta = rebuild()  # something outside the pool may be better
                continue
            if cand.size > size:
                cand = cand[np.argpartition(-ub[cand], size - 1)[:size]]
            ub[cand] = _column_gains(W, cand, cur)
            fresh_at[cand] = step
            size = min(2 * size, max_batch_size)
        ranking[step] = j_best
        gains[step] = g_best
        available[j_best] = False
        ub[j_best] = -np.inf
        pool = pool[pool != j_best]
        lo, hi = W.indptr[j_best], W.indptr[j_best + 1]
        rows = W.indices[lo:hi]
        cur[rows] = np.maximum(cur[rows], W.data[lo:hi])
    return ranking, gains, cur


def facility_location_value(graph: Any, selected: Any) -> float:
    """``f(A) = sum_i max_{j in A} w_ij`` for the columns ``selected`` of a nonnegative graph."""
    W = _as_csc(graph)
    sel = np.unique(np.asarray(selected, dtype=np.int64))
    if sel.size == 0:
        return 0.0
    if sel.min() < 0 or sel.max() >= W.shape[1]:
        raise ValueError("selected indices out of range")
    sub = W[:, sel]
    return float(np.asarray(sub.max(axis=1).todense(), dtype=np.float64).sum())


class FacilityLocation(TextSelector):
    """Facility-location coreset (§3.1): sparsified cosine graph + exact lazy greedy.

    Parameters: ``k`` (budget), ``alpha`` (sparsity, ``t = ceil(alpha n / k)``), ``stratify``
    (block-diagonal graph by benchmark), ``seed`` (unused: the method is deterministic).

    Attributes: ``ranking_``, ``gains_`` (marginal gains, non-increasing), ``graph_`` (CSR, rows =
    clients), ``objective_`` (``f(A)``), ``t_`` (the requested t; rows keep ``min(t_, block size)``).
    """

    PARAMS: ClassVar[dict[str, ParamSpec]] = {
        "alpha": ParamSpec(float, "sparsity > 0: each item keeps its top t = ceil(alpha * n / k) similarities"),
        "stratify": ParamSpec(bool, "true: similarities only within a benchmark (block-diagonal graph)"),
    }
    _dtype = np.float32

    def __init__(self, k: int, alpha: float = 1.0, stratify: bool = True, seed: int = 0) -> None:
        self.k = k
        self.alpha = alpha
        self.stratify = stratify
        self.seed = seed

    def _validate_extra_params(self) -> None:
        if isinstance(self.alpha, bool) or not isinstance(self.alpha, (int, float)) \
                or not math.isfinite(self.alpha) or self.alpha <= 0:
            raise ValueError(f"alpha must be a positive number, got {self.alpha!r}")
        if not isinstance(self.stratify, (bool, np.bool_)):
            raise ValueError(f"stratify must be a boolean, got {self.stratify!r}")

    def _select(self, X: np.ndarray, labels: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        n = X.shape[0]
        self.t_ = sparsity_t(float(self.alpha), n, k)
        self.graph_ = build_similarity_graph(X, labels, self.t_, stratify=bool(self.stratify))
        ranking, gains, cur = _lazy_greedy(_as_csc(self.graph_), k)
        self.objective_ = float(cur.sum())
        return ranking, gains
