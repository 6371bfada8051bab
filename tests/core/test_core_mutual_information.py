import numpy as np
import pytest
from scipy.special import digamma
from sklearn.feature_selection import mutual_info_regression
from sklearn.feature_selection._mutual_info import _compute_mi_cc, _compute_mi_cd
from sklearn.metrics import mutual_info_score

from evalplan.core.selection import mutual_information as M


def test_plugin_hand_computation():
    x = np.array([0, 0, 1, 1])
    y = np.array([0, 1, 1, 1])
    # p(0,0)=1/4, p(0,1)=1/4, p(1,1)=1/2; px=(1/2,1/2), py=(1/4,3/4)
    exp = 0.25 * np.log(0.25 / (0.5 * 0.25)) + 0.25 * np.log(0.25 / (0.5 * 0.75)) \
        + 0.5 * np.log(0.5 / (0.5 * 0.75))
    assert M.mi_binary_binary(x, y) == pytest.approx(exp, abs=1e-15)
    assert M.mi_binary_binary(x, x) == pytest.approx(np.log(2))
    assert M.mi_binary_binary(x, np.ones(4)) == 0.0


def test_plugin_matrix_matches_sklearn():
    rng = np.random.default_rng(1)
    X = (rng.random((50, 20)) < rng.random(20)).astype(float)
    y = (rng.random(50) < 0.3).astype(float)
    ref = [mutual_info_score(X[:, j], y) for j in range(20)]
    np.testing.assert_allclose(M.mi_binary_matrix(X, y), ref, atol=1e-12)
    with pytest.raises(ValueError):
        M.mi_binary_matrix(X + 0.5, y)


def _ross_naive(x, y, k):
    """Ross (2014) written out with exact O(n^2) distances (independent reference)."""
    x, y = np.asarray(x), np.asarray(y, dtype=float)
    labels, counts = np.unique(x, return_counts=True)
    keep = np.isin(x, labels[counts > 1])
    xk, yk = x[keep], y[keep]
    n = xk.size
    if n == 0:
        return 0.0
    psi_terms = []
    for i in range(n):
        same = yk[xk == xk[i]]
        kk = min(k, same.size - 1)
        d = np.sort(np.abs(same - yk[i]))[kk]  # index 0 is the point itself
        m = int(np.sum(np.abs(yk - yk[i]) <= np.nextafter(d, 0)))  # inside; ties at d = 0 count
        psi_terms.append((digamma(kk), digamma(same.size), digamma(m)))
    a = np.mean(psi_terms, axis=0)
    return max(0.0, digamma(n) + a[0] - a[1] - a[2])


@pytest.mark.parametrize("seed", range(20))
def test_ross_equals_sklearn(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(8, 300))
    k = int(rng.integers(1, 9))
    X = (rng.random((n, 6)) < rng.uniform(0.02, 0.98, 6)).astype(float)
    X[:, 0] = 0                     # constant column
    X[:, 1] = 0
    X[0, 1] = 1                     # singleton class
    y = rng.normal(size=n) if seed % 2 else rng.integers(0, 15, n) / 15.0  # with ties
    ref = np.array([_compute_mi_cd(y, X[:, j], k) for j in range(6)])
    exact = np.array([M.mi_discrete_continuous(X[:, j], y, k) for j in range(6)])
    # the vectorized matrix equals the per-column exact estimator everywhere
    np.testing.assert_allclose(M.mi_ross_matrix(X, y, k), exact, rtol=0, atol=1e-12)
    for j in range(6):
        c = X[:, j].sum()
        if min(c, n - c) > 2 * k + 1 or c in (0, n):  # sklearn uses a KD-tree (or nothing to search)
            assert exact[j] == pytest.approx(ref[j], abs=1e-12)
        # everywhere (including where sklearn's brute-force search computes distances as
        # sqrt(a^2 - 2ab + b^2), off by far more than an ulp for close points): the exact estimator
        assert exact[j] == pytest.approx(_ross_naive(X[:, j], y, k), abs=1e-12)


def test_ross_equals_mutual_info_regression():
    rng = np.random.default_rng(3)
    X = (rng.random((200, 30)) < 0.5).astype(float)
    y = X.mean(axis=1)              # many ties, like mRMR's relevance target
    ref = mutual_info_regression(X, y, discrete_features=True, n_neighbors=5, random_state=7)
    got = M.mi_ross_matrix(X, M.sklearn_jitter(y, 7), 5)
    np.testing.assert_allclose(got, ref, atol=1e-12)


def test_ksg_equals_sklearn_cc():
    rng = np.random.default_rng(4)
    for _ in range(10):
        x = rng.normal(size=150)
        y = np.round(x + rng.normal(size=150), 1)
        assert M.mi_ksg(x, y, 4) == _compute_mi_cc(x, y, 4)


def _gauss(n, rho, seed):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=n)
    y = rho * x + np.sqrt(1 - rho ** 2) * rng.normal(size=n)
    return x, y


def test_ksg_close_to_analytic_gaussian():
    rho = 0.8
    true = -0.5 * np.log(1 - rho ** 2)
    x, y = _gauss(2000, rho, 0)
    assert M.mi_ksg(x, y, 8) == pytest.approx(true, abs=0.03)
    assert M.mi_ksg_pca(x, y, 8) == pytest.approx(true, abs=0.05)
    xi, yi = np.random.default_rng(1).normal(size=(2, 2000))
    assert M.mi_ksg(xi, yi, 8) < 0.02


def test_lnc_reduces_bias_on_strong_dependence():
    rng = np.random.default_rng(5)
    n = 1000
    x = rng.normal(size=n)
    sigma = 1e-3
    y = x + sigma * rng.normal(size=n)
    true = 0.5 * np.log(1 + 1 / sigma ** 2)          # Gaussian channel, ~6.9 nats
    ksg = M.mi_ksg(x, y, 8)
    lnc = M.mi_ksg_pca(x, y, 8)
    assert abs(lnc - true) < 0.5 * abs(ksg - true)
    assert lnc > ksg


def test_lnc_no_correction_when_uniform_independent():
    u = np.random.default_rng(6).random((2, 2000))
    # alpha is the ~1% quantile of the ratio under uniformity: correction is small (~0.01)
    assert abs(M.mi_ksg_pca(u[0], u[1], 8) - M.mi_ksg(u[0], u[1], 8)) < 0.02


def test_input_validation():
    with pytest.raises(ValueError):
        M.mi_ksg(np.zeros(5), np.zeros(4))
    with pytest.raises(ValueError):
        M.mi_ksg(np.arange(5.0), np.arange(5.0), k=0)
    with pytest.raises(ValueError):
        M.mi_ksg_pca(np.arange(20.0), np.arange(20.0) ** 2, k=3, alpha=2.0)
