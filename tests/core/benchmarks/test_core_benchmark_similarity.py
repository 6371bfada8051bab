"""Unit tests of evalplan.core.benchmarks.benchmark_similarity (paper §4.4, eqs. 12-13)."""

from __future__ import annotations

import numpy as np
import pytest

from evalplan.core.benchmarks.benchmark_similarity import benchmark_ordering, benchmark_similarity


def brute_force_M(X: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """Dense prompt-level FL: f(A) = sum_i max_{j in A} max(0, cos), I_f = f(A) + f(B) - f(A u B)."""
    Z = X / np.linalg.norm(X, axis=1, keepdims=True)
    W = np.maximum(Z @ Z.T, 0.0)
    np.fill_diagonal(W, 1.0)
    B = int(labels.max()) + 1

    def f(items: np.ndarray) -> float:
        return float(W[:, items].max(axis=1).sum())

    A = [np.flatnonzero(labels == b) for b in range(B)]
    M = np.empty((B, B))
    for b in range(B):
        for c in range(B):
            mutual = f(A[b]) + f(A[c]) - f(np.concatenate([A[b], A[c]]))
            M[b, c] = mutual / min(f(A[b]), f(A[c]))
    return M


def naive_ordering(M: np.ndarray) -> tuple[list[int], list[float]]:
    B = M.shape[0]
    order: list[int] = []
    gains: list[float] = []
    for _ in range(B):
        best, best_j = -1.0, -1
        for j in range(B):
            if j in order:
                continue
            g = sum(max(0.0, M[b, j] - max([M[b, s] for s in order], default=0.0)) for b in range(B))
            if g > best + 1e-12:
                best, best_j = g, j
        order.append(best_j)
        gains.append(best)
    return order, gains


def data(seed: int, n: int = 150, n_bench: int = 5) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    centers = rng.standard_normal((n_bench, 8)) * 1.5
    labels = rng.integers(0, n_bench, n)
    labels[:n_bench] = np.arange(n_bench)
    return centers[labels] + rng.standard_normal((n, 8)), labels


@pytest.mark.parametrize("seed", range(3))
def test_matrix_equals_brute_force_dense_computation(seed: int) -> None:
    X, labels = data(seed)
    M = benchmark_similarity(X, labels, chunk_elems=500)
    assert M.shape == (5, 5)
    assert np.allclose(M, brute_force_M(X, labels), atol=1e-5)
    assert np.allclose(M, M.T)
    assert np.all(np.diag(M) == 1.0)
    assert np.all((M >= 0) & (M <= 1))


def test_duplicate_benchmarks_are_fully_similar_and_threads_do_not_matter() -> None:
    X, labels = data(4, n=80, n_bench=3)
    X2 = np.vstack([X, X[labels == 0]])  # benchmark 3 = a copy of benchmark 0
    labels2 = np.concatenate([labels, np.full(int(np.sum(labels == 0)), 3)])
    M1 = benchmark_similarity(X2, labels2, n_threads=1)
    M2 = benchmark_similarity(X2, labels2, n_threads=2, chunk_elems=300)
    assert M1[0, 3] == pytest.approx(1.0, abs=1e-6)
    assert np.allclose(M1, M2, atol=1e-6)


def test_ordering_equals_naive_greedy() -> None:
    X, labels = data(7, n=200, n_bench=6)
    M = benchmark_similarity(X, labels)
    order, gains = benchmark_ordering(M)
    expected, expected_gains = naive_ordering(M)
    assert order.tolist() == expected
    assert np.allclose(gains, expected_gains)
    assert sorted(order.tolist()) == list(range(6))


def test_ordering_hand_example() -> None:
    M = np.array([[1.0, 0.9, 0.0],
                  [0.9, 1.0, 0.1],
                  [0.0, 0.1, 1.0]])
    order, gains = benchmark_ordering(M)
    # gains of the first pick: columns sum to 1.9, 2.0, 1.1 -> benchmark 1; then 2 adds 0.9, 0 adds 0.1
    assert order.tolist() == [1, 2, 0]
    assert gains == pytest.approx([2.0, 0.9, 0.1])


def test_errors() -> None:
    with pytest.raises(ValueError, match="no items"):
        benchmark_similarity(np.eye(3), np.array([0, 0, 2]))
    with pytest.raises(ValueError):
        benchmark_ordering(np.array([[1.0, -0.1], [0.0, 1.0]]))
