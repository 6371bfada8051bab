"""Benchmark-level subset selection (paper 000 §4.4): greedy selectors, eq. 8 imputation,
eq. 9 test R², eqs. 10-11 residual variance fraction. Small generated data only."""

from __future__ import annotations

import numpy as np
import pytest

from evalplan.core.benchmarks.benchmark_selection import (
    BenchmarkSelector,
    GaussianImputer,
    greedy_entropy,
    greedy_facility_location,
    greedy_mutual_information,
    residual_variance_fraction,
    test_r2,
)


def random_pd(n: int, seed: int, rank_extra: int = 3) -> np.ndarray:
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n + rank_extra, n))
    return X.T @ X / (n + rank_extra) + 0.05 * np.eye(n)


def naive_greedy(f, n: int, k: int) -> list[int]:
    chosen: list[int] = []
    for _ in range(k):
        base = f(chosen)
        best, best_gain = None, -np.inf
        for v in range(n):
            if v in chosen:
                continue
            g = f(chosen + [v]) - base
            if g > best_gain:
                best, best_gain = v, g
        chosen.append(best)
    return chosen


def logdet(m: np.ndarray, idx: list[int]) -> float:
    if not idx:
        return 0.0
    sign, val = np.linalg.slogdet(m[np.ix_(idx, idx)])
    assert sign > 0
    return val


@pytest.mark.parametrize("seed", range(6))
def test_greedy_entropy_equals_naive(seed):
    n, k = 8, 6
    cov = random_pd(n, seed)
    order, gains = greedy_entropy(cov, k)
    expect = naive_greedy(lambda A: 0.5 * logdet(cov, A), n, k)
    assert order.tolist() == expect
    for j in range(k):
        np.testing.assert_allclose(
            gains[j], 0.5 * logdet(cov, expect[: j + 1]) - 0.5 * logdet(cov, expect[:j]), atol=1e-10
        )


@pytest.mark.parametrize("seed", range(6))
def test_greedy_mutual_information_equals_naive(seed):
    n, k = 8, 7
    cov = random_pd(n, 100 + seed)
    full = logdet(cov, list(range(n)))

    def mi(A):
        rest = [v for v in range(n) if v not in A]
        return 0.5 * logdet(cov, A) + 0.5 * logdet(cov, rest) - 0.5 * full

    order, gains = greedy_mutual_information(cov, k)
    expect = naive_greedy(mi, n, k)
    assert order.tolist() == expect
    for j in range(k):
        np.testing.assert_allclose(gains[j], mi(expect[: j + 1]) - mi(expect[:j]), atol=1e-9)


@pytest.mark.parametrize("seed", range(6))
def test_greedy_facility_location_equals_naive(seed):
    n, k = 9, 7
    sim = np.maximum(random_pd(n, 200 + seed), 0.0)

    def fl(A):
        return float(sim[:, A].max(axis=1).sum()) if A else 0.0

    order, gains = greedy_facility_location(sim, k)
    expect = naive_greedy(fl, n, k)
    assert order.tolist() == expect
    np.testing.assert_allclose(np.cumsum(gains), [fl(expect[: j + 1]) for j in range(k)], atol=1e-10)


def test_selector_uses_clipped_correlation_for_fl_and_ridged_correlation_for_logdet():
    rng = np.random.default_rng(3)
    S = rng.normal(size=(30, 6)) @ rng.normal(size=(6, 6)) * 5 + 40
    sel = BenchmarkSelector(k=4, method="facility_location").fit(S)
    np.testing.assert_allclose(sel.cov_, np.corrcoef(S, rowvar=False), atol=1e-12)
    assert sel.ranking_.tolist() == greedy_facility_location(np.maximum(sel.cov_, 0), 4)[0].tolist()
    for method, fn in [("entropy", greedy_entropy), ("mutual_information", greedy_mutual_information)]:
        s = BenchmarkSelector(k=4, method=method, ridge=1e-3).fit(S)
        assert s.ridge_ == pytest.approx(1e-3)
        assert s.ranking_.tolist() == fn(s.cov_ + 1e-3 * np.eye(6), 4)[0].tolist()


def test_imputation_is_exact_gaussian_conditional_mean():
    # constructed Gaussian: x = L z + mu. Eq. 8 with the true (mu, Sigma) equals the regression of
    # the unobserved block on the observed block; compare with least squares on a large sample.
    rng = np.random.default_rng(0)
    n = 6
    Sigma = random_pd(n, 7)
    mu = rng.normal(size=n) * 3
    X = rng.multivariate_normal(mu, Sigma, size=200_000)
    A = [4, 1]
    rest = [0, 2, 3, 5]
    imp = GaussianImputer(mu, Sigma, A)
    x_new = rng.multivariate_normal(mu, Sigma, size=5)[:, A]
    pred = imp.predict(x_new)
    np.testing.assert_array_equal(pred[:, A], x_new)
    # exact formula
    expect = mu[rest] + (x_new - mu[A]) @ np.linalg.solve(Sigma[np.ix_(A, A)], Sigma[np.ix_(A, rest)])
    np.testing.assert_allclose(pred[:, rest], expect, atol=1e-12)
    # Monte Carlo: empirical regression of X_rest on X_A
    design = np.column_stack([np.ones(len(X)), X[:, A]])
    beta, *_ = np.linalg.lstsq(design, X[:, rest], rcond=None)
    mc = np.column_stack([np.ones(len(x_new)), x_new]) @ beta
    np.testing.assert_allclose(pred[:, rest], mc, atol=0.03)


def test_selector_predict_raw_units_equals_raw_covariance_conditional_mean():
    rng = np.random.default_rng(1)
    S = rng.normal(size=(40, 5)) @ rng.normal(size=(5, 5)) + rng.normal(size=5) * 10
    sel = BenchmarkSelector(k=2, method="entropy").fit(S)
    raw_cov = np.cov(S, rowvar=False)
    A = sel.ranking_.tolist()
    T = rng.normal(size=(4, 5)) + S.mean(axis=0)
    got = sel.predict(T[:, A])
    expect = GaussianImputer(S.mean(axis=0), raw_cov, A).predict(T[:, A])
    np.testing.assert_allclose(got, expect, atol=1e-9)


def test_singular_sigma_aa_uses_tiny_ridge():
    v = np.array([1.0, 2.0, 3.0])
    cov = np.outer(v, v)  # rank 1: Sigma_AA for A = {0, 1} is singular
    pred = GaussianImputer(np.zeros(3), cov, [0, 1]).predict(np.array([[1.0, 2.0]]))
    np.testing.assert_allclose(pred[0, 2], 3.0, rtol=1e-4)
    assert residual_variance_fraction(cov, [0, 1]) == pytest.approx(0.0, abs=1e-4)


def test_r2_constant_predictor_is_zero_and_perfect_is_one():
    rng = np.random.default_rng(2)
    S = rng.normal(size=(10, 5)) + 3
    mean = rng.normal(size=5)
    scale = rng.uniform(0.5, 2, size=5)
    const = np.tile(mean, (10, 1))
    for sc in (None, scale):
        assert test_r2(S, const, mean, [1], scale=sc) == pytest.approx(0.0, abs=1e-15)
        assert test_r2(S, S, mean, [1], scale=sc) == 1.0
    # selected columns are ignored entirely
    bad = S.copy()
    bad[:, 1] += 100
    assert test_r2(S, bad, mean, [1]) == 1.0


def test_r2_standardized_matches_manual():
    rng = np.random.default_rng(4)
    S, P = rng.normal(size=(7, 4)), rng.normal(size=(7, 4))
    m, s = rng.normal(size=4), rng.uniform(1, 3, size=4)
    r = [0, 2, 3]
    y, yh = (S[:, r] - m[r]) / s[r], (P[:, r] - m[r]) / s[r]
    assert test_r2(S, P, m, [1], scale=s) == pytest.approx(1 - ((yh - y) ** 2).sum() / (y**2).sum())


def test_residual_variance_fraction_bounds_and_formula():
    cov = random_pd(7, 11)
    assert residual_variance_fraction(cov, []) == pytest.approx(1.0)
    assert residual_variance_fraction(cov, list(range(7))) == 0.0
    A, rest = [2, 5], [0, 1, 3, 4, 6]
    schur = cov[np.ix_(rest, rest)] - cov[np.ix_(rest, A)] @ np.linalg.solve(cov[np.ix_(A, A)], cov[np.ix_(A, rest)])
    assert residual_variance_fraction(cov, A) == pytest.approx(np.trace(schur) / np.trace(cov))
    # monotone non-increasing along a greedy ranking
    order, _ = greedy_entropy(cov, 7)
    rv = [residual_variance_fraction(cov, order[:j]) for j in range(8)]
    assert all(a >= b - 1e-12 for a, b in zip(rv, rv[1:]))


@pytest.mark.parametrize("method", ["facility_location", "entropy", "mutual_information"])
def test_determinism_and_prefix_consistency(method):
    rng = np.random.default_rng(5)
    S = rng.normal(size=(25, 9)) @ rng.normal(size=(9, 9))
    a = BenchmarkSelector(k=6, method=method, seed=3).fit(S)
    b = BenchmarkSelector(k=6, method=method, seed=3).fit(S)
    assert a.ranking_.tolist() == b.ranking_.tolist()
    np.testing.assert_array_equal(a.gains_, b.gains_)
    c = BenchmarkSelector(k=3, method=method, seed=3).fit(S)
    assert c.ranking_.tolist() == a.ranking_[:3].tolist()
    assert len(set(a.ranking_.tolist())) == 6


def test_entropy_first_pick_is_a_tie_broken_by_seed():
    # on a correlation matrix every benchmark has unit variance: the first entropy pick is a tie
    rng = np.random.default_rng(6)
    S = rng.normal(size=(50, 8)) @ rng.normal(size=(8, 8))
    firsts = {int(BenchmarkSelector(k=1, method="entropy", seed=s).fit(S).ranking_[0]) for s in range(30)}
    assert len(firsts) > 1


def test_nan_training_cells_are_column_mean_imputed():
    rng = np.random.default_rng(7)
    S = rng.normal(size=(20, 4))
    S_nan = S.copy()
    S_nan[3, 1] = np.nan
    filled = S.copy()
    filled[3, 1] = np.nanmean(S_nan[:, 1])
    a = BenchmarkSelector(k=2).fit(S_nan)
    b = BenchmarkSelector(k=2).fit(filled)
    np.testing.assert_allclose(a.cov_, b.cov_)
    np.testing.assert_allclose(a.mean_, b.mean_)
    with pytest.raises(ValueError):
        a.predict(np.array([[np.nan, 1.0]]))
    all_nan = S.copy()
    all_nan[:, 2] = np.nan
    with pytest.raises(ValueError):
        BenchmarkSelector(k=2).fit(all_nan)


def test_bad_method_raises():
    with pytest.raises(ValueError):
        BenchmarkSelector(k=1, method="dpp").fit(np.random.default_rng(0).normal(size=(5, 3)))
