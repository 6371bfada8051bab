"""Unit tests of evalplan.core.selection.facility_location (no database)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.sparse as sp

from evalplan.core.selection import TEXT_METHODS
from evalplan.core.selection.facility_location import (
    FacilityLocation,
    _row_top_t,
    build_similarity_graph,
    facility_location_value,
    greedy_facility_location,
    sparsity_t,
)


def naive_greedy(D: np.ndarray, k: int) -> tuple[list[int], list[float]]:
    """Reference: plain loops over a dense matrix (rows = clients, columns = facilities)."""
    n_rows, n_cols = D.shape
    cur = [0.0] * n_rows
    picked: list[int] = []
    gains: list[float] = []
    for _ in range(k):
        best, best_j = -1.0, -1
        for j in range(n_cols):
            if j in picked:
                continue
            g = 0.0
            for i in range(n_rows):
                g += max(0.0, float(D[i, j]) - cur[i])
            if g > best:  # strict: ties keep the lowest index
                best, best_j = g, j
        picked.append(best_j)
        gains.append(best)
        for i in range(n_rows):
            cur[i] = max(cur[i], float(D[i, best_j]))
    return picked, gains


def naive_value(D: np.ndarray, selected: list[int]) -> float:
    return float(sum(max(float(D[i, j]) for j in selected) for i in range(D.shape[0])))


def dyadic_graph(rng: np.random.Generator, n: int, density: float, diagonal: bool) -> np.ndarray:
    # multiples of 1/4: every sum is exact in floating point, so ties are real ties
    D = np.where(rng.random((n, n)) < density, rng.integers(0, 5, (n, n)) / 4.0, 0.0)
    if diagonal:
        np.fill_diagonal(D, 1.0)
    return D


@pytest.mark.parametrize("seed", range(12))
def test_lazy_greedy_equals_naive_greedy_with_ties(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n = int(rng.integers(2, 30))
    k = int(rng.integers(1, n + 1))
    D = dyadic_graph(rng, n, density=float(rng.uniform(0.1, 1.0)), diagonal=bool(seed % 2))
    expected, expected_gains = naive_greedy(D, k)
    # small pools and batches exercise the pool rebuild and the re-evaluation rounds
    for pool_size, batch_size in ((4096, 32), (1, 1), (3, 2), (5, 4)):
        for graph in (sp.csr_matrix(D), sp.csc_matrix(D)):
            ranking, gains = greedy_facility_location(graph, k, pool_size=pool_size, batch_size=batch_size,
                                                      max_batch_size=8)
            assert ranking.tolist() == expected
            assert gains.tolist() == expected_gains


def test_all_equal_gains_pick_lowest_indices() -> None:
    D = np.eye(6)
    ranking, gains = greedy_facility_location(sp.csr_matrix(D), 6, pool_size=2, batch_size=1)
    assert ranking.tolist() == [0, 1, 2, 3, 4, 5]
    assert gains.tolist() == [1.0] * 6


def test_zero_gain_tail_still_picks_k_lowest_index_items() -> None:
    D = np.zeros((5, 5))
    D[:, 3] = 1.0  # item 3 covers everything; afterwards every gain is 0
    ranking, gains = greedy_facility_location(sp.csr_matrix(D), 4)
    assert ranking.tolist() == [3, 0, 1, 2]
    assert gains.tolist() == [5.0, 0.0, 0.0, 0.0]


@pytest.mark.parametrize("seed", range(4))
def test_lazy_greedy_equals_naive_on_continuous_sparse_graphs(seed: int) -> None:
    rng = np.random.default_rng(100 + seed)
    n = 60
    D = sp.random(n, n, density=0.15, random_state=seed, format="csr").toarray()
    expected, expected_gains = naive_greedy(D, 15)
    ranking, gains = greedy_facility_location(sp.csr_matrix(D), 15, pool_size=int(rng.integers(1, 80)))
    assert ranking.tolist() == expected
    assert np.allclose(gains, expected_gains, rtol=1e-12)


def test_greedy_rejects_bad_graphs() -> None:
    with pytest.raises(ValueError, match="nonnegative"):
        greedy_facility_location(sp.csr_matrix(np.array([[1.0, -0.5], [0.0, 1.0]])), 1)
    with pytest.raises(ValueError, match="square"):
        greedy_facility_location(sp.csr_matrix(np.ones((2, 3))), 1)
    with pytest.raises(ValueError, match="larger than"):
        greedy_facility_location(sp.csr_matrix(np.eye(3)), 4)


def clustered(rng: np.random.Generator, n: int, d: int, n_bench: int) -> tuple[np.ndarray, np.ndarray]:
    centers = rng.standard_normal((n_bench * 3, d)) * 2
    topic = rng.integers(0, n_bench * 3, n)
    X = centers[topic] + rng.standard_normal((n, d))
    labels = rng.permutation(topic % n_bench)  # benchmarks interleaved: rows not sorted by label
    return X, labels


def dense_similarity(X: np.ndarray, labels: np.ndarray, stratify: bool) -> np.ndarray:
    Z = (X / np.linalg.norm(X, axis=1, keepdims=True)).astype(np.float32)
    S = np.clip(Z @ Z.T, 0.0, 1.0)
    np.fill_diagonal(S, 1.0)
    if stratify:
        S[labels[:, None] != labels[None, :]] = 0.0
    return S


@pytest.mark.parametrize("stratify", [True, False])
@pytest.mark.parametrize("t", [1, 4, 25, 500])
def test_graph_keeps_each_rows_top_t_of_the_cosine_similarities(stratify: bool, t: int) -> None:
    rng = np.random.default_rng(t)
    X, labels = clustered(rng, 240, 12, 4)
    G = build_similarity_graph(X, labels, t, stratify=stratify, chunk_elems=3000)
    assert isinstance(G, sp.csr_matrix) and G.shape == (240, 240)
    assert G.data.min() > 0 and G.data.max() <= 1.0
    S = dense_similarity(X, labels, stratify)
    D = G.toarray()
    assert np.all(np.diag(D) == 1.0)  # the diagonal is kept: an item covers itself
    for i in range(240):
        candidates = np.flatnonzero(labels == labels[i]) if stratify else np.arange(240)
        row, kept = S[i, candidates], D[i, candidates]
        n_kept = np.count_nonzero(kept)
        # entries <= 0 are not stored (cosines within 1e-6 of 0 may fall either way in float32)
        assert min(t, np.count_nonzero(row > 1e-6)) <= n_kept <= min(t, np.count_nonzero(row > -1e-6))
        assert np.allclose(kept[kept > 0], row[kept > 0], atol=1e-6)
        if n_kept < candidates.size:
            assert kept[kept > 0].min() >= row[kept == 0].max() - 1e-6
        if stratify:
            assert np.count_nonzero(D[i]) == n_kept  # nothing outside the benchmark


def brute_top_t(S: np.ndarray, t: int) -> np.ndarray:
    """Mask of each row's top-t positive entries, ties to the lowest column (stable sort)."""
    keep = np.zeros(S.shape, dtype=bool)
    for r in range(S.shape[0]):
        order = np.argsort(-S[r], kind="stable")[:t]
        keep[r, order[S[r, order] > 0]] = True
    return keep


@pytest.mark.parametrize("seed", range(6))
def test_row_top_t_is_exact_including_ties_and_sample_fallback(seed: int) -> None:
    rng = np.random.default_rng(seed)
    c, m, t = 20, 240, 40
    S = rng.integers(-3, 12, (c, m)).astype(np.float32) / 8  # many ties and non-positive values
    S[0, ::8] = 5.0  # the strided sample sees only these 30 large values: its bound is too high
    S[1] = 0.0       # nothing positive
    S[2, :5] = 1.0   # fewer than t positive entries
    S[2, 5:] = -1.0
    flat, vals, counts = _row_top_t(S.copy(), t)
    keep = brute_top_t(S, t)
    assert flat.tolist() == np.flatnonzero(keep).tolist()
    assert vals.tolist() == S.ravel()[np.flatnonzero(keep)].tolist()
    assert counts.tolist() == keep.sum(axis=1).tolist()
    assert counts[:3].tolist() == [t, 0, 5]


def test_stratified_graph_is_block_diagonal_and_unstratified_is_not() -> None:
    rng = np.random.default_rng(3)
    X, labels = clustered(rng, 200, 8, 3)
    same = labels[:, None] == labels[None, :]
    strat = build_similarity_graph(X, labels, 40, stratify=True).toarray()
    glob = build_similarity_graph(X, labels, 40, stratify=False).toarray()
    assert np.all(strat[~same] == 0)
    assert np.any(glob[~same] > 0)


def test_t_is_capped_at_the_block_size() -> None:
    rng = np.random.default_rng(4)
    X = np.abs(rng.standard_normal((30, 5)))  # all cosines positive
    labels = np.array([0] * 5 + [1] * 25)
    G = build_similarity_graph(X, labels, 10, stratify=True)
    counts = np.diff(G.indptr)
    assert counts[:5].tolist() == [5] * 5  # the whole small benchmark, not 10
    assert counts[5:].tolist() == [10] * 25


def test_ties_at_the_threshold_keep_the_lowest_columns() -> None:
    # basis vectors: cosines are exactly 0 or 1
    X = np.zeros((12, 3))
    X[np.arange(12), np.arange(12) % 2] = 1.0  # even rows e0, odd rows e1
    G = build_similarity_graph(X, None, 3, stratify=False)
    assert G.indices[G.indptr[4]:G.indptr[5]].tolist() == [0, 2, 4]  # 4 itself + the lowest ties
    assert G.indices[G.indptr[11]:G.indptr[12]].tolist() == [1, 3, 11]
    assert np.all(G.data == 1.0)


def test_graph_is_deterministic_and_independent_of_threads_and_chunks() -> None:
    rng = np.random.default_rng(5)
    X, labels = clustered(rng, 500, 16, 5)
    a = build_similarity_graph(X, labels, 30, n_threads=1, chunk_elems=1 << 22)
    b = build_similarity_graph(X, labels, 30, n_threads=3, chunk_elems=2000)
    c = build_similarity_graph(X, labels, 30)
    for other in (b, c):
        assert np.array_equal(a.indptr, other.indptr)
        assert np.array_equal(a.indices, other.indices)
        # the same edges; the float32 BLAS kernel chosen for a chunk shape may round the last bit
        # differently (seen with OpenBLAS on 2-core machines), so values agree to float32 precision
        assert np.allclose(a.data, other.data, rtol=2e-6, atol=1e-7)
    again = build_similarity_graph(X, labels, 30, n_threads=1, chunk_elems=1 << 22)
    assert np.array_equal(a.data, again.data)  # same settings, bit-identical


def test_sparsity_t() -> None:
    assert sparsity_t(1.0, 60_000, 200) == 300
    assert sparsity_t(0.25, 1000, 30) == math.ceil(0.25 * 1000 / 30)
    assert sparsity_t(100.0, 50, 2) == 50  # at most n


@pytest.mark.parametrize("stratify", [True, False])
def test_fit_selects_what_naive_greedy_selects_on_its_graph(stratify: bool) -> None:
    rng = np.random.default_rng(6)
    X, labels = clustered(rng, 90, 6, 3)
    fl = FacilityLocation(k=12, alpha=2.0, stratify=stratify).fit(X, labels)
    assert fl.t_ == math.ceil(2.0 * 90 / 12)
    D = fl.graph_.toarray().astype(np.float64)
    expected, expected_gains = naive_greedy(D, 12)
    assert fl.ranking_.tolist() == expected
    assert np.allclose(fl.gains_, expected_gains, rtol=1e-12)
    assert np.all(np.diff(fl.gains_) <= 1e-12)  # submodular: gains never increase
    value = naive_value(D, expected)
    assert fl.objective_ == pytest.approx(value, rel=1e-12)
    assert facility_location_value(fl.graph_, fl.ranking_) == pytest.approx(value, rel=1e-12)
    assert fl.gains_.sum() == pytest.approx(value, rel=1e-9)


def test_fit_is_deterministic_and_seed_independent() -> None:
    rng = np.random.default_rng(7)
    X, labels = clustered(rng, 150, 8, 3)
    a = FacilityLocation(k=20, seed=0).fit(X, labels)
    b = FacilityLocation(k=20, seed=99).fit(X, labels)
    assert np.array_equal(a.ranking_, b.ranking_)
    assert np.array_equal(a.gains_, b.gains_)


def test_parameters_are_validated_in_fit_not_init() -> None:
    bad = FacilityLocation(k=5, alpha=-1.0)  # the constructor only stores
    assert bad.alpha == -1.0
    X = np.random.default_rng(0).standard_normal((10, 3))
    with pytest.raises(ValueError, match="alpha"):
        bad.fit(X)
    with pytest.raises(ValueError, match="alpha"):
        bad.validate_params()
    with pytest.raises(ValueError, match="larger than"):
        FacilityLocation(k=11).fit(X)
    with pytest.raises(ValueError, match="labels"):
        FacilityLocation(k=2).fit(X, np.arange(9))
    with pytest.raises(ValueError, match="labels"):
        FacilityLocation(k=2).fit(X, -np.ones(10, dtype=int))
    with pytest.raises(ValueError):
        FacilityLocation(k=2).fit(np.full((10, 3), np.nan))


def test_registry_and_params() -> None:
    assert set(TEXT_METHODS) == {"facility_location", "random", "stratified_random", "dpp", "k_center", "k_means"}
    assert TEXT_METHODS["facility_location"] is FacilityLocation
    assert set(FacilityLocation.PARAMS) == {"alpha", "stratify"}
    for name, cls in TEXT_METHODS.items():
        est = cls(k=1, seed=0)
        assert set(cls.PARAMS) <= set(est.get_params()) - {"k", "seed"}, name
        with pytest.raises(TypeError):
            cls(k=1, seed=0, no_such_param=1)
