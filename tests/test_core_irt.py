"""Tests of app.core.irt: 2PL fit, IRT anchor selection, p-IRT / gp-IRT estimators."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.special import expit
from scipy.stats import spearmanr

from app.core.irt import (
    IRTPredictor,
    IRTSelection,
    estimate_theta,
    fit_2pl,
    irt_nll,
    item_curve,
)


def _synthetic(seed: int, m: int = 200, n: int = 300, t: int = 0):
    """2PL data: a ~ LogNormal(0, 0.3), b ~ N(0, 1.5^2), theta ~ N(0, 1); plus ``t`` held-out
    target models drawn from the same population."""
    rng = np.random.default_rng(seed)
    a = rng.lognormal(0.0, 0.3, n)
    b = rng.normal(0.0, 1.5, n)
    theta = rng.normal(0.0, 1.0, m + t)
    P = expit(np.outer(theta, a) - b)
    Y = (rng.random(P.shape) < P).astype(np.float64)
    return a, b, theta[:m], Y[:m], Y[m:]


@pytest.fixture(scope="module")
def data():
    return _synthetic(0, t=300)


def test_fit_2pl_recovers_parameters(data):
    a, b, theta, Y, _ = data
    ah, bh, th = fit_2pl(Y)
    assert ah.shape == (300, 1) and bh.shape == (300,) and th.shape == (200, 1)
    rho_b = spearmanr(bh, b)[0]
    rho_t = spearmanr(th[:, 0], theta)[0]
    rho_a = spearmanr(ah[:, 0], a)[0]
    assert rho_b > 0.9, rho_b
    assert rho_t > 0.9, rho_t
    assert rho_a > 0.5, rho_a  # discriminations are the hardest to recover with 200 models
    # fitted probabilities reproduce the item means
    P = item_curve(th, ah, bh)
    assert np.abs(P.mean(axis=0) - Y.mean(axis=0)).max() < 0.05


@pytest.mark.parametrize("dim", [1, 2])
def test_gradient_matches_finite_differences(dim):
    rng = np.random.default_rng(1)
    m, n = 7, 9
    Y = rng.random((m, n))  # soft labels
    Y[rng.random((m, n)) < 0.2] = np.nan
    mask = ~np.isnan(Y)
    Yz = np.where(mask, Y, 0.0)
    x = rng.normal(size=n * dim + n + m * dim)
    for msk in (None, mask):
        f0, g = irt_nll(x, Yz, dim, 0.7, msk)
        h = 1e-6
        num = np.empty_like(x)
        for i in range(x.size):
            e = np.zeros_like(x)
            e[i] = h
            num[i] = (irt_nll(x + e, Yz, dim, 0.7, msk)[0] - irt_nll(x - e, Yz, dim, 0.7, msk)[0]) / (2 * h)
        np.testing.assert_allclose(g, num, rtol=1e-5, atol=1e-6)


def test_fit_2pl_multidim_and_missing():
    _, _, _, Y, _ = _synthetic(2, m=60, n=80)
    Y = Y.copy()
    Y[np.random.default_rng(0).random(Y.shape) < 0.1] = np.nan
    a, b, th = fit_2pl(Y, dim=2, max_iter=300)
    assert a.shape == (80, 2) and th.shape == (60, 2)
    assert np.isfinite(a).all() and np.isfinite(b).all() and np.isfinite(th).all()


def test_fit_2pl_validation():
    with pytest.raises(ValueError):
        fit_2pl(np.array([[0.0, 2.0]]))
    with pytest.raises(ValueError):
        fit_2pl(np.zeros(3))
    with pytest.raises(ValueError):
        fit_2pl(np.zeros((3, 3)), dim=0)
    with pytest.raises(ValueError):
        fit_2pl(np.zeros((3, 3)), l2=0.0)


def test_irt_selection_distinct_deterministic(data):
    _, _, _, Y, _ = data
    s1 = IRTSelection(k=30, seed=0).fit(Y)
    s2 = IRTSelection(k=30, seed=0).fit(Y)
    assert s1.ranking_.shape == (30,)
    assert np.unique(s1.ranking_).size == 30
    np.testing.assert_array_equal(s1.ranking_, s2.ranking_)
    np.testing.assert_array_equal(s1.weights_, s2.weights_)
    assert np.isclose(s1.weights_.sum(), 1.0)
    assert np.all(np.diff(s1.weights_) <= 0)  # ranking by cluster size desc
    assert np.isnan(s1.gains_).all()
    np.testing.assert_allclose(s1.weights_, np.bincount(s1.labels_, minlength=30) / 300)
    # every selected item is in its own cluster
    np.testing.assert_array_equal(s1.labels_[s1.ranking_], np.arange(30))
    with pytest.raises(ValueError):
        IRTSelection(k=301).fit(Y)


def test_p_irt_beats_coreset_mean_and_gp_between(data):
    _, _, _, Y, Yt = data
    sel = IRTSelection(k=30, seed=0).fit(Y)
    pred = IRTPredictor().fit(Y, sel.ranking_, sel.weights_, item_params=(sel.a_, sel.b_, sel.theta_))
    assert 0.0 <= pred.lam_ <= 1.0 and pred.bias_ > 0
    yS = Yt[:, sel.ranking_]
    true = Yt.mean(axis=1)
    p_irt, gp = pred.predict(yS)
    mae_mean = np.abs(yS.mean(axis=1) - true).mean()
    mae_weighted = np.abs(pred.weighted_ - true).mean()
    mae_p = np.abs(p_irt - true).mean()
    mae_gp = np.abs(gp - true).mean()
    print(f"\nMAE over {len(true)} targets, k=30: coreset mean={mae_mean:.4f} "
          f"weighted={mae_weighted:.4f} p-IRT={mae_p:.4f} gp-IRT={mae_gp:.4f} lam={pred.lam_:.3f}")
    assert mae_p < mae_mean
    assert mae_p < mae_weighted
    # gp-IRT is a convex combination of the weighted anchor estimate and p-IRT, per target
    lo = np.minimum(pred.weighted_, p_irt) - 1e-12
    hi = np.maximum(pred.weighted_, p_irt) + 1e-12
    assert np.all((gp >= lo) & (gp <= hi))
    assert mae_gp <= max(mae_weighted, mae_p)


def test_p_irt_over_several_datasets():
    wins = []
    for seed in (1, 2, 3):
        _, _, _, Y, Yt = _synthetic(seed, t=200)
        sel = IRTSelection(k=30, seed=seed).fit(Y)
        pred = IRTPredictor(lam=0.5).fit(Y, sel.ranking_, sel.weights_,
                                         item_params=(sel.a_, sel.b_, sel.theta_))
        yS = Yt[:, sel.ranking_]
        true = Yt.mean(axis=1)
        p_irt, gp = pred.predict(yS)
        np.testing.assert_allclose(gp, 0.5 * pred.weighted_ + 0.5 * p_irt)
        mae_p, mae_mean = np.abs(p_irt - true).mean(), np.abs(yS.mean(axis=1) - true).mean()
        print(f"\nseed {seed}: coreset mean MAE={mae_mean:.4f} p-IRT MAE={mae_p:.4f}")
        wins.append(mae_p < mae_mean)
    assert all(wins)


def test_p_irt_definition(data):
    _, _, _, Y, Yt = data
    S = np.arange(0, 300, 10)
    pred = IRTPredictor(lam=0.0).fit(Y, S)
    p, gp = pred.predict(Yt[0, S])
    np.testing.assert_allclose(gp, p)
    th = estimate_theta(Yt[0, S], pred.a_[S], pred.b_[S], l2=pred.prior_l2_,
                        prior_mean=pred.prior_mean_)
    P = item_curve(th[None, :], pred.a_, pred.b_)[0]
    unseen = np.setdiff1d(np.arange(300), S)
    expected = 0.1 * Yt[0, S].mean() + 0.9 * P[unseen].mean()
    np.testing.assert_allclose(p[0], expected, rtol=1e-10)
    np.testing.assert_allclose(pred.weighted_, Yt[0, S].mean())
    # the whole benchmark as coreset: p-IRT is the observed mean
    full = IRTPredictor(lam=0.0).fit(Y, np.arange(300), item_params=(pred.a_, pred.b_))
    np.testing.assert_allclose(full.predict(Yt[0])[0], Yt[0].mean())


def test_edge_all_correct_and_all_wrong(data):
    _, _, _, Y, _ = data
    sel = IRTSelection(k=30, seed=0).fit(Y)
    pred = IRTPredictor().fit(Y, sel.ranking_, sel.weights_, item_params=(sel.a_, sel.b_, sel.theta_))
    p, gp = pred.predict(np.vstack([np.ones(30), np.zeros(30)]))
    assert np.isfinite(pred.theta_).all()
    assert np.all((p >= 0) & (p <= 1)) and np.all((gp >= 0) & (gp <= 1))
    assert p[0] > 0.7 and p[1] < 0.3
    assert p[0] > p[1]
    np.testing.assert_allclose(pred.weighted_, [1.0, 0.0])


def test_predictor_validation(data):
    _, _, _, Y, _ = data
    with pytest.raises(ValueError):
        IRTPredictor().fit(Y, [0, 0, 1])
    with pytest.raises(ValueError):
        IRTPredictor().fit(Y, [0, 400])
    with pytest.raises(ValueError):
        IRTPredictor(lam=1.5).fit(Y, [0, 1])
    pred = IRTPredictor(lam=0.3).fit(Y, [0, 1, 2])
    with pytest.raises(ValueError):
        pred.predict(np.ones(4))
    with pytest.raises(RuntimeError):
        IRTPredictor().predict(np.ones(3))
