import itertools

import numpy as np
import pytest
from scipy.stats import spearmanr

from evalplan.core.selection.base import ParamSpec
from evalplan.core.selection.mrmr import MRMR
from evalplan.core.selection.score_based import (
    SCORE_METHODS,
    SCORE_PARAMS,
    AnchorPoints,
    Hardness,
    LassoSelection,
    PointBiserial,
    RandomSearch,
    correlation_distance,
    cv_rmse,
    kmedoids_cost,
    rasch_jml,
)


def _rasch(M=40, n=60, seed=0):
    rng = np.random.default_rng(seed)
    th = rng.normal(size=M)
    b = rng.normal(scale=1.5, size=n)
    Y = (rng.random((M, n)) < 1 / (1 + np.exp(-(th[:, None] - b)))).astype(float)
    return Y, th, b


def _kwargs(name):
    return {"n_trials": 30} if name == "random_search" else {}


@pytest.mark.parametrize("name", sorted(SCORE_METHODS))
def test_k_distinct_and_deterministic(name):
    Y, _, _ = _rasch()
    Y[:, 5] = 1.0  # a constant item must not break anything
    cls = SCORE_METHODS[name]
    a = cls(k=7, **_kwargs(name)).fit(Y)
    b = cls(k=7, **_kwargs(name)).fit(Y.copy())
    assert a.ranking_.shape == (7,) and np.unique(a.ranking_).size == 7
    assert a.ranking_.min() >= 0 and a.ranking_.max() < Y.shape[1]
    assert a.gains_.shape == (7,)
    np.testing.assert_array_equal(a.ranking_, b.ranking_)
    np.testing.assert_array_equal(a.gains_, b.gains_)


def test_registry_params():
    assert SCORE_METHODS["mrmr"] is MRMR
    assert set(SCORE_PARAMS) == set(SCORE_METHODS)
    for name, params in SCORE_PARAMS.items():
        for pname, spec in params.items():
            assert isinstance(spec, ParamSpec)
            assert pname in SCORE_METHODS[name]().get_params()


@pytest.mark.parametrize("name", ["anchor_points", "lasso", "random_search", "hardness", "pbsc"])
def test_rejects_nan_and_large_k(name):
    Y, _, _ = _rasch(M=10, n=12)
    cls = SCORE_METHODS[name]
    Yn = Y.copy()
    Yn[0, 0] = np.nan
    with pytest.raises(ValueError):
        cls(k=3, **_kwargs(name)).fit(Yn)
    with pytest.raises(ValueError):
        cls(k=13, **_kwargs(name)).fit(Y)


# ----------------------------------------------------------------------------- anchor points
def test_anchor_points_brute_force_optimum_tiny():
    rng = np.random.default_rng(3)
    Y = rng.normal(size=(6, 9))
    D = correlation_distance(Y)
    np.testing.assert_allclose(D, 1 - np.corrcoef(Y.T) - np.diag(np.diag(1 - np.corrcoef(Y.T))), atol=1e-12)
    for k in (2, 3):
        best = min(kmedoids_cost(D, c) for c in itertools.combinations(range(9), k))
        ap = AnchorPoints(k=k, seed=1).fit(Y)
        assert kmedoids_cost(D, ap.ranking_) == pytest.approx(best, abs=1e-10)
        assert ap.inertia_ == pytest.approx(best, abs=1e-10)


def test_anchor_points_beats_random_medoids_and_weights():
    Y, _, _ = _rasch(M=30, n=80, seed=4)
    D = correlation_distance(Y)
    ap = AnchorPoints(k=6, seed=0).fit(Y)
    rng = np.random.default_rng(0)
    rand = [kmedoids_cost(D, rng.choice(80, 6, replace=False)) for _ in range(300)]
    assert ap.inertia_ == pytest.approx(kmedoids_cost(D, ap.ranking_))
    assert ap.inertia_ < min(rand)
    # also the alternating phase alone beats a typical random medoid set
    alt = AnchorPoints(k=6, seed=0, swap="never").fit(Y)
    assert alt.inertia_ < np.median(rand)
    assert ap.inertia_ <= alt.inertia_ + 1e-12
    # weights: cluster sizes as fractions, aligned with ranking_, each item to its nearest medoid
    assert ap.weights_.sum() == pytest.approx(1.0)
    assert np.all(np.diff(ap.weights_) <= 0)
    np.testing.assert_allclose(ap.weights_, np.bincount(ap.labels_, minlength=6) / 80)
    np.testing.assert_allclose(D[np.arange(80), ap.ranking_[ap.labels_]], D[:, ap.ranking_].min(axis=1))


def test_anchor_points_constant_items_distance_one():
    rng = np.random.default_rng(0)
    Y = rng.normal(size=(8, 5))
    Y[:, 2] = 0.3
    D = correlation_distance(Y)
    assert np.all(D[2, np.arange(5) != 2] == 1.0) and D[2, 2] == 0.0
    ap = AnchorPoints(k=5).fit(Y)
    assert sorted(ap.ranking_) == list(range(5)) and ap.inertia_ == pytest.approx(0.0)


# ----------------------------------------------------------------------------- lasso
def test_lasso_exactly_k_nonzero_simple():
    rng = np.random.default_rng(0)
    M, n = 50, 12
    Y = rng.normal(size=(M, n))
    # make the mean score depend strongly on items 0..2 only (scale them up)
    Y[:, :3] *= 10.0
    k = 3
    sel = LassoSelection(k=k).fit(Y)
    assert sel.n_path_ == k
    assert np.all(sel.weights_ != 0)
    assert set(sel.ranking_) == {0, 1, 2}
    # it is a lasso solution with exactly k nonzero coefficients at alpha_: KKT check
    s = Y.mean(axis=1)
    Xc, sc = Y - Y.mean(0), s - s.mean()
    w = np.zeros(n)
    w[sel.ranking_] = sel.weights_
    corr = Xc.T @ (sc - Xc @ w) / M
    np.testing.assert_allclose(np.abs(corr[sel.ranking_]), sel.alpha_, rtol=1e-6)
    rest = np.setdiff1d(np.arange(n), sel.ranking_)
    assert np.all(np.abs(corr[rest]) <= sel.alpha_ + 1e-10)
    pred = Y[:, sel.ranking_] @ sel.weights_ + sel.intercept_
    np.testing.assert_allclose(pred, Xc @ w + s.mean())


def test_lasso_k_beyond_path_is_filled():
    Y, _, _ = _rasch(M=8, n=20)
    sel = LassoSelection(k=15).fit(Y)
    assert sel.n_path_ <= 7 < 15
    assert np.unique(sel.ranking_).size == 15
    assert np.all(sel.weights_[sel.n_path_:] == 0)


# ----------------------------------------------------------------------------- Search+
@pytest.mark.parametrize("predictor", ["ridge", "kernel_ridge"])
def test_random_search_best_is_min_of_evaluated(predictor):
    rng = np.random.default_rng(1)
    Y = rng.random((20, 30))
    rs = RandomSearch(k=4, n_trials=25, predictor=predictor, cv=5, seed=3).fit(Y)
    assert rs.cv_scores_.shape == (25,) and rs.coresets_.shape == (25, 4)
    assert np.all(rs.best_score_ <= rs.cv_scores_)
    np.testing.assert_array_equal(rs.ranking_, rs.coresets_[rs.best_trial_])
    assert np.all(np.isnan(rs.gains_))
    # each stored score is the CV RMSE of that coreset (recomputed independently)
    for t in (0, 7, rs.best_trial_):
        assert rs.cv_scores_[t] == pytest.approx(cv_rmse(Y, rs.coresets_[t], predictor, 5, 3))
    # the best is no worse than the first trial (a single random coreset), recomputed
    assert rs.best_score_ <= cv_rmse(Y, rs.coresets_[0], predictor, 5, 3)


# ----------------------------------------------------------------------------- hardness
def test_hardness_recovers_rasch_difficulties():
    Y, th, b = _rasch(M=300, n=40, seed=2)
    h = Hardness(k=8).fit(Y)
    rho = spearmanr(h.difficulties_, b)[0]
    assert rho > 0.9
    assert spearmanr(h.abilities_, th)[0] > 0.9
    assert h.converged_
    np.testing.assert_array_equal(h.ranking_, np.argsort(-h.difficulties_, kind="stable")[:8])
    np.testing.assert_allclose(h.gains_, h.difficulties_[h.ranking_])
    # most of the truly hardest items are picked
    assert len(set(h.ranking_) & set(np.argsort(-b)[:8])) >= 6


def test_rasch_jml_gradient():
    Y, _, _ = _rasch(M=6, n=5)
    M = 6
    def f(x):
        L = x[:M, None] - x[None, M:]
        return np.sum(np.logaddexp(0, L) - Y * L) + 0.005 * x @ x
    theta, beta, res = rasch_jml(Y, l2=0.01)
    # at the optimum the gradient vanishes
    from scipy.optimize import approx_fprime
    g = approx_fprime(np.concatenate([theta, beta]), f, 1e-7)
    assert np.abs(g).max() < 1e-4


# ----------------------------------------------------------------------------- PBSC
def test_pbsc_matches_corrcoef():
    Y, _, _ = _rasch(M=25, n=30, seed=5)
    Y[:, 4] = 0.0
    s = Y.mean(axis=1)
    r = np.array([np.corrcoef(Y[:, i], s)[0, 1] if np.ptp(Y[:, i]) > 0 else -np.inf
                  for i in range(30)])
    sel = PointBiserial(k=29).fit(Y)
    np.testing.assert_allclose(sel.correlations_, r, atol=1e-12)
    assert sel.ranking_[-1] == 4 and sel.gains_[-1] == -np.inf   # constant item only when needed
    top = PointBiserial(k=5).fit(Y)
    np.testing.assert_array_equal(top.ranking_, np.lexsort((np.arange(30), -r))[:5])
    np.testing.assert_allclose(top.gains_, r[top.ranking_], atol=1e-12)
