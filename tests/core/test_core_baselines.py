"""Unit tests of evalplan.core.selection.baselines (no database)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from evalplan.core.selection import TEXT_METHODS
from evalplan.core.selection.baselines import (
    DPP,
    KCenter,
    KMeansSelection,
    RandomSelection,
    StratifiedRandom,
    stratified_counts,
)


def data(seed: int = 0, n: int = 120, d: int = 6, n_bench: int = 4) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    return rng.standard_normal((n, d)) + 0.2, rng.integers(0, n_bench, n)


@pytest.mark.parametrize("name", sorted(TEXT_METHODS))
def test_k_distinct_rows_and_determinism_per_seed(name: str) -> None:
    X, labels = data()
    cls = TEXT_METHODS[name]
    a = cls(k=15, seed=3).fit(X, labels)
    b = cls(k=15, seed=3).fit(X, labels)
    assert a.ranking_.shape == (15,) and a.gains_.shape == (15,)
    assert np.unique(a.ranking_).size == 15
    assert a.ranking_.min() >= 0 and a.ranking_.max() < X.shape[0]
    assert np.array_equal(a.ranking_, b.ranking_)
    assert np.array_equal(a.gains_, b.gains_, equal_nan=True)


@pytest.mark.parametrize("cls", [RandomSelection, StratifiedRandom])
def test_random_methods_depend_on_the_seed_and_have_no_gains(cls: type) -> None:
    X, labels = data()
    rankings = {tuple(cls(k=10, seed=s).fit(X, labels).ranking_) for s in range(5)}
    assert len(rankings) == 5
    assert np.all(np.isnan(cls(k=10, seed=0).fit(X, labels).gains_))


def test_random_selection_can_select_everything() -> None:
    X, _ = data(n=7)
    assert sorted(RandomSelection(k=7).fit(X).ranking_.tolist()) == list(range(7))


@pytest.mark.parametrize(("sizes", "k", "expected"), [
    ([50, 30, 20], 10, [5, 3, 2]),
    ([50, 30, 20], 7, [4, 2, 1]),        # quotas 3.5, 2.1, 1.4: remainders .5 > .4 > .1
    ([97, 2, 1], 5, [3, 1, 1]),          # proportional gives [5, 0, 0]; >= 1 each as k >= 3
    ([97, 2, 1], 2, [2, 0, 0]),          # k < number of benchmarks: purely proportional
    ([10, 10, 10, 10], 2, [1, 1, 0, 0]),  # equal remainders: lower index first
    ([3, 0, 5], 8, [3, 0, 5]),            # empty benchmark, everything selected
])
def test_stratified_counts(sizes: list[int], k: int, expected: list[int]) -> None:
    counts = stratified_counts(np.array(sizes), k)
    assert counts.tolist() == expected
    assert counts.sum() == k


def test_stratified_random_follows_the_counts_per_benchmark() -> None:
    rng = np.random.default_rng(1)
    labels = np.repeat([0, 1, 2], [97, 2, 1])[rng.permutation(100)]
    X = rng.standard_normal((100, 3))
    sel = StratifiedRandom(k=5, seed=2).fit(X, labels)
    assert np.bincount(labels[sel.ranking_], minlength=3).tolist() == [3, 1, 1]
    assert sel.counts_.tolist() == [3, 1, 1]


# ---------------------------------------------------------------- DPP against brute-force log-dets

def features(X: np.ndarray, kernel: str) -> np.ndarray:
    if kernel == "cov":
        return X - X.mean(axis=0)
    if kernel == "cos":
        return X / np.linalg.norm(X, axis=1, keepdims=True)
    return X


def logdet(K: np.ndarray, idx: list[int]) -> float:
    if not idx:
        return 0.0
    sign, value = np.linalg.slogdet(K[np.ix_(idx, idx)])
    assert sign > 0
    return float(value)


def naive_dpp_greedy(X: np.ndarray, kernel: str, k: int, reg: float, mi: bool) -> tuple[list[int], list[float]]:
    Phi = features(X, kernel)
    n = Phi.shape[0]
    K = Phi @ Phi.T + reg * np.eye(n)  # the explicit n x n kernel

    def f(A: list[int]) -> float:
        value = logdet(K, A)
        if mi:
            rest = [i for i in range(n) if i not in A]
            value += logdet(K, rest) - logdet(K, list(range(n)))
        return value

    picked: list[int] = []
    gains: list[float] = []
    for _ in range(k):
        base = f(picked)
        best, best_j = -np.inf, -1
        for j in range(n):
            # gains equal up to rounding (e.g. the unit diagonal of the cos kernel) are ties: lowest index
            if j not in picked and f(picked + [j]) - base > best + 1e-9:
                best, best_j = f(picked + [j]) - base, j
        picked.append(best_j)
        gains.append(best)
    return picked, gains


@pytest.mark.parametrize(("kernel", "mi"), list(itertools.product(["cov", "cos", "dot"], [False, True])))
def test_dpp_greedy_equals_brute_force_greedy(kernel: str, mi: bool) -> None:
    X, _ = data(seed=11, n=24, d=7)
    sel = DPP(k=6, kernel=kernel, mi=mi).fit(X)
    reg = 1.0 if mi else 1e-6  # documented defaults
    assert sel.reg_ == reg
    expected, expected_gains = naive_dpp_greedy(X, kernel, 6, reg, mi)
    assert sel.ranking_.tolist() == expected
    assert np.allclose(sel.gains_, expected_gains, atol=1e-8)


def test_dpp_with_explicit_reg_beyond_the_kernel_rank() -> None:
    X, _ = data(seed=12, n=15, d=3)  # rank of the cov kernel <= 3 < k
    sel = DPP(k=6, kernel="cov", reg=0.5).fit(X)
    expected, expected_gains = naive_dpp_greedy(X, "cov", 6, 0.5, False)
    assert sel.ranking_.tolist() == expected
    assert np.allclose(sel.gains_, expected_gains, atol=1e-8)


def test_dpp_parameter_validation() -> None:
    X, _ = data(n=10)
    with pytest.raises(ValueError, match="kernel"):
        DPP(k=2, kernel="rbf").fit(X)
    with pytest.raises(ValueError, match="reg"):
        DPP(k=2, mi=True, reg=0.0).fit(X)
    with pytest.raises(ValueError, match="reg"):
        DPP(k=2, reg=-1.0).validate_params()
    assert set(DPP.PARAMS) == {"kernel", "mi", "reg"}


# ---------------------------------------------------------------- k-center and k-means

def test_k_center_is_farthest_first_on_cosine_distance() -> None:
    X, _ = data(seed=5, n=80, d=5)
    sel = KCenter(k=10).fit(X)
    Z = X / np.linalg.norm(X, axis=1, keepdims=True)
    D = 1.0 - Z @ Z.T
    assert sel.ranking_[0] == int(np.argmax(Z @ Z.mean(axis=0)))  # the most central item
    assert np.isnan(sel.gains_[0])
    for s in range(1, 10):
        prev = sel.ranking_[:s]
        nearest = D[:, prev].min(axis=1)
        nearest[prev] = -np.inf
        assert sel.ranking_[s] == int(np.argmax(nearest))
        assert sel.gains_[s] == pytest.approx(nearest.max(), abs=1e-12)
    rest = np.setdiff1d(np.arange(80), sel.ranking_)
    assert sel.radius_ == pytest.approx(D[np.ix_(rest, sel.ranking_)].min(axis=1).max(), abs=1e-12)
    assert np.all(np.diff(sel.gains_[1:]) <= 1e-12)  # farthest-first radii never increase


def test_k_means_picks_the_item_nearest_each_centroid() -> None:
    X, _ = data(seed=6, n=150, d=4)
    sel = KMeansSelection(k=8, seed=1).fit(X)
    assert sel.weights_.sum() == 150
    assert np.all(np.diff(sel.weights_) <= 0)  # by cluster size, descending
    assert np.array_equal(sel.gains_, sel.weights_.astype(float))
    taken: list[int] = []
    for center, item in zip(sel.cluster_centers_, sel.ranking_):
        dist = ((X - center) ** 2).sum(axis=1)
        dist[taken] = np.inf
        assert item == int(np.argmin(dist))
        taken.append(int(item))


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_k_means_representatives_are_distinct_with_duplicate_points() -> None:
    X = np.repeat(np.array([[0.0, 0.0], [5.0, 5.0], [0.0, 5.0]]), [10, 10, 10], axis=0)
    sel = KMeansSelection(k=5, seed=0).fit(X)
    assert np.unique(sel.ranking_).size == 5
