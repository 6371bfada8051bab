"""Benchmark-benchmark similarity from prompt embeddings and the conditional benchmark ordering
(paper §4.4, "Benchmark level similarity using Submodular Mutual Information", eqs. 12-13).

With the dense prompt-level facility location ``f(A) = sum_i max_{j in A} w_ij``,
``w_ij = max(0, cos(e_i, e_j))`` over *all* prompts (not block-diagonal), and
``m_b(i) = max_{j in A_b} w_ij`` for the prompts ``A_b`` of benchmark ``b``:

* ``f(A_b) = sum_i m_b(i)`` and ``I_f(A_b; A_b') = f(A_b) + f(A_b') - f(A_b u A_b')
  = sum_i min(m_b(i), m_b'(i))``;
* ``M_bb' = I_f(A_b; A_b') / min(f(A_b), f(A_b'))`` (eq. 12), ``M_bb = 1``.

``m`` (B x n) is computed exactly by chunked float32 matmuls, never forming the n x n matrix.
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
from threadpoolctl import threadpool_limits  # a scikit-learn dependency

from evalplan.core.selection.base import check_embeddings, check_labels
from evalplan.core.selection.facility_location import _normalize_rows


def benchmark_coverage(embeddings: Any, labels: Any, *, chunk_elems: int = 1 << 22,
                       n_threads: int | None = None) -> np.ndarray:
    """``m[b, i] = max_{j in A_b} max(0, cos(e_i, e_j))`` as a ``(B, n)`` float32 array (``m[b(i), i] = 1``)."""
    X = check_embeddings(embeddings, dtype=np.float32)
    n = X.shape[0]
    y = check_labels(labels, n)
    B = int(y.max()) + 1
    sizes = np.bincount(y, minlength=B)
    if np.any(sizes == 0):
        raise ValueError(f"benchmarks {np.flatnonzero(sizes == 0).tolist()} have no items")
    Z = _normalize_rows(X)
    del X
    order = np.argsort(y, kind="stable")
    Zs = Z[order]
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    m = np.empty((B, n), dtype=np.float32)
    step = max(1, min(n, chunk_elems // n))

    def work(i0: int) -> None:
        i1 = min(n, i0 + step)
        S = Z[i0:i1] @ Zs.T
        cover = np.maximum.reduceat(S, starts, axis=1)
        np.maximum(cover, 0.0, out=cover)
        np.minimum(cover, 1.0, out=cover)
        m[:, i0:i1] = cover.T

    chunks = list(range(0, n, step))
    workers = n_threads or min(8, len(os.sched_getaffinity(0)))
    if workers > 1 and len(chunks) > 1:
        with threadpool_limits(limits=1, user_api="blas"), ThreadPoolExecutor(workers) as pool:
            list(pool.map(work, chunks))
    else:
        for i0 in chunks:
            work(i0)
    m[y, np.arange(n)] = 1.0  # an item covers itself exactly
    return m


def benchmark_similarity(embeddings: Any, labels: Any, **kwargs: Any) -> np.ndarray:
    """``M`` (B x B) of eq. 12, symmetric, ``M_bb = 1``, entries in ``[0, 1]`` (§4.4)."""
    m = benchmark_coverage(embeddings, labels, **kwargs)
    B = m.shape[0]
    f = m.sum(axis=1, dtype=np.float64)
    inter = np.empty((B, B), dtype=np.float64)
    for b in range(B):
        inter[b, b:] = np.minimum(m[b], m[b:]).sum(axis=1, dtype=np.float64)
        inter[b:, b] = inter[b, b:]
    M = inter / np.minimum(f[:, None], f[None, :])
    np.clip(M, 0.0, 1.0, out=M)
    np.fill_diagonal(M, 1.0)
    return np.asarray(M)


def benchmark_ordering(M: Any) -> tuple[np.ndarray, np.ndarray]:
    """Greedy order of all ``B`` benchmarks for ``G(S) = sum_b max_{b' in S} M_bb'`` (eq. 13).

    Rank ``r`` is the benchmark with the largest marginal gain given the ``r - 1`` before it (ties:
    lowest index). Returns ``(order, gains)``.
    """
    M = np.asarray(M, dtype=np.float64)
    if M.ndim != 2 or M.shape[0] != M.shape[1]:
        raise ValueError(f"M must be square, got shape {M.shape}")
    if not np.all(np.isfinite(M)) or np.any(M < 0):
        raise ValueError("M must be finite and nonnegative")
    B = M.shape[0]
    cur = np.zeros(B)
    available = np.ones(B, dtype=bool)
    order = np.empty(B, dtype=np.int64)
    gains = np.empty(B, dtype=np.float64)
    for r in range(B):
        g = np.maximum(M - cur[:, None], 0.0).sum(axis=0)  # gain of facility b' over clients b
        g[~available] = -np.inf
        j = int(np.argmax(g))
        order[r], gains[r] = j, g[j]
        available[j] = False
        np.maximum(cur, M[:, j], out=cur)
    return order, gains
