"""Tests of evalplan.core.irt.irt, the tinyBenchmarks IRT pipeline: binarisation, py-irt's multidim 2PL by SVI,
the dimension heuristic, IRT anchor points, p-IRT / gp-IRT. (bench/coresets/tinybenchmarks_side_by_side.py
checks it against the authors' own code; these tests check the math and the contracts.)"""

from __future__ import annotations

import numpy as np
import pytest
from scipy.special import expit
from scipy.stats import spearmanr

from evalplan.core.irt.irt import (
    IRTPredictor,
    IRTSelection,
    binarize,
    estimate_theta,
    fit_multidim_2pl,
    gp_irt_lambda,
    irt_anchors,
    irt_predictor_for,
    merge_repeated_anchors,
    mirt_item_curve,
    select_dimension,
)

EPOCHS = 300  # enough for the small matrices here; the default (py-irt's) is 2000


def _synthetic(seed: int, m: int = 60, n: int = 200, t: int = 0):
    """1-D 2PL data (a ~ LogNormal(0, 0.3), b ~ N(0, 1.5^2), theta ~ N(0, 1)) plus ``t`` held-out
    targets from the same population."""
    rng = np.random.default_rng(seed)
    a = rng.lognormal(0.0, 0.3, n)
    b = rng.normal(0.0, 1.5, n)
    theta = rng.normal(0.0, 1.0, m + t)
    Y = (rng.random((m + t, n)) < expit(np.outer(theta, a) - b)).astype(np.float64)
    return b, theta[:m], Y[:m], Y[m:]


@pytest.fixture(scope="module")
def data():
    return _synthetic(0, t=80)


def test_item_curve_subtracts_the_difficulty_in_every_dimension():
    theta = np.array([[0.5, -1.0]])
    a = np.array([[1.0, 2.0], [0.0, 0.0]])
    b = np.array([0.3, -0.2])
    z = np.array([0.5 * 1.0 - 0.3 + (-1.0) * 2.0 - 0.3, 0.2 + 0.2])
    assert np.allclose(mirt_item_curve(theta, a, b)[0], 1.0 / (1.0 + np.exp(-z)))
    # each term is clipped at +-30 (tinyBenchmarks utils.item_curve)
    assert mirt_item_curve([[100.0]], [[1.0]], [0.0])[0, 0] == pytest.approx(1.0 / (1.0 + np.exp(-30.0)))


def test_binarize_keeps_binary_data_and_thresholds_soft_scores():
    Y = np.array([[0.0, 1.0, 1.0], [1.0, 0.0, 0.0]])
    Yb, c = binarize(Y)
    assert np.array_equal(Yb, Y) and c == pytest.approx(0.01)
    soft = np.array([[0.2, 0.9, 0.6, 0.1], [0.7, 0.8, 0.3, 0.4]])
    Yb, c = binarize(soft)
    gap = np.abs(Yb.mean(axis=1) - soft.mean(axis=1)).mean()
    for other in np.linspace(0.01, 0.99, 100):
        assert gap <= np.abs((soft > other).mean(axis=1) - soft.mean(axis=1)).mean() + 1e-12
    assert set(np.unique(Yb)) <= {0.0, 1.0}


@pytest.mark.slow
def test_svi_fit_recovers_the_items_and_is_deterministic(data):
    b, theta, Y, _ = data
    fit = fit_multidim_2pl(Y, 1, epochs=EPOCHS, seed=3)
    assert fit.a.shape == (200, 1) and fit.b.shape == (200,) and fit.theta.shape == (60, 1)
    sign = np.sign(np.mean(fit.a))
    assert spearmanr(sign * fit.theta[:, 0], theta)[0] > 0.8
    assert spearmanr(fit.b, b)[0] > 0.8
    again = fit_multidim_2pl(Y, 1, epochs=EPOCHS, seed=3)
    assert again is fit  # cached
    from evalplan.core.irt import irt
    irt._FIT_CACHE.clear()
    fresh = fit_multidim_2pl(Y, 1, epochs=EPOCHS, seed=3)
    assert np.array_equal(fresh.a, fit.a) and np.array_equal(fresh.theta, fit.theta)
    other = fit_multidim_2pl(Y, 1, epochs=EPOCHS, seed=4)
    assert not np.array_equal(other.a, fit.a)


def test_svi_fit_rejects_bad_input():
    with pytest.raises(ValueError, match="0/1"):
        fit_multidim_2pl(np.array([[0.5, 1.0]]), 1)
    with pytest.raises(ValueError, match="dim"):
        fit_multidim_2pl(np.zeros((3, 3)), 0)
    with pytest.raises(ValueError, match="epochs"):
        fit_multidim_2pl(np.zeros((3, 3)), 1, epochs=0)


def test_estimate_theta_is_the_maximum_likelihood_ability():
    rng = np.random.default_rng(2)
    a, b = rng.lognormal(0, 0.3, (40, 1)), rng.normal(0, 1, 40)
    y = (rng.random(40) < mirt_item_curve([[0.7]], a, b)[0]).astype(float)
    th = estimate_theta(y, a, b)
    grid = np.linspace(-4, 4, 2001)
    P = mirt_item_curve(grid[:, None], a, b)
    ll = (y * np.log(P + 1e-10) + (1 - y) * np.log(1 - P + 1e-10)).sum(axis=1)
    assert th[0] == pytest.approx(grid[np.argmax(ll)], abs=0.01)


def test_select_dimension_and_lambda(data):
    _, _, Y, _ = data
    best, errors = select_dimension(Y, (1, 2), epochs=EPOCHS)
    assert best in (1, 2) and set(errors) == {1, 2} and errors[best] == min(errors.values())
    assert all(0.0 <= e < 0.2 for e in errors.values())
    v = float(np.var(Y, axis=1).mean())
    assert gp_irt_lambda(0.03, Y, 20) == pytest.approx(0.03 ** 2 / (0.03 ** 2 + v / 80))
    assert gp_irt_lambda(0.0, Y, 20) == 0.0


def test_irt_anchor_points(data):
    _, _, Y, _ = data
    s1 = IRTSelection(k=20, dim=2, epochs=EPOCHS).fit(Y)
    s2 = IRTSelection(k=20, dim=2, epochs=EPOCHS).fit(Y)
    assert np.array_equal(s1.ranking_, s2.ranking_)
    assert len(set(s1.ranking_.tolist())) == 20
    assert s1.weights_.sum() == pytest.approx(1.0) and np.all(s1.weights_ > 0)
    assert s1.dim_ == 2 and s1.a_.shape == (200, 2) and s1.bias_ == s1.dim_errors_[2]
    with pytest.raises(ValueError, match="k must be"):
        IRTSelection(k=201).fit(Y)


def test_p_irt_and_gp_irt_formulas(data):
    _, _, Y, Yt = data
    sel = IRTSelection(k=20, dim=1, epochs=EPOCHS).fit(Y)
    pred = IRTPredictor().fit(Y, sel.ranking_, sel.weights_, item_params=(sel.a_, sel.b_), bias=sel.bias_)
    est = pred.predict(Yt[:, sel.ranking_])
    S = sel.ranking_
    unseen = np.setdiff1d(np.arange(200), S)
    for j in range(3):
        th = estimate_theta(Yt[j, S], sel.a_[S], sel.b_[S])
        P = mirt_item_curve(th[None, :], sel.a_, sel.b_)[0]
        p_irt = 20 / 200 * Yt[j, S].mean() + (1 - 20 / 200) * P[unseen].mean()
        assert est.p_irt[j] == pytest.approx(p_irt)
        w = sel.weights_ / sel.weights_.sum()
        assert est.gp_irt[j] == pytest.approx(pred.lam_ * Yt[j, S] @ w + (1 - pred.lam_) * p_irt)
    assert pred.lam_ == pytest.approx(gp_irt_lambda(sel.bias_, Y, 20))
    truth = Yt.mean(axis=1)
    rmse = {name: float(np.sqrt(np.mean((getattr(est, name) - truth) ** 2))) for name in ("p_irt", "gp_irt")}
    raw = float(np.sqrt(np.mean((Yt[:, S].mean(axis=1) - truth) ** 2)))
    assert max(rmse.values()) < 1.25 * raw, (rmse, raw)  # 60 references and 300 epochs: no better than the mean
    # the whole benchmark observed: p-IRT is the observed mean
    full = IRTPredictor(lam=0.0).fit(Y, np.arange(200), item_params=(sel.a_, sel.b_))
    assert full.predict(Yt[:2]).p_irt == pytest.approx(Yt[:2].mean(axis=1))


def test_merge_repeated_anchors():
    items, weights, listing = merge_repeated_anchors([5, 3, 5, 7], [0.1, 0.2, 0.3, 0.4])
    assert items.tolist() == [5, 3, 7] and weights == pytest.approx([0.4, 0.2, 0.4])
    assert listing.tolist() == [0, 1, 0, 2] and items[listing].tolist() == [5, 3, 5, 7]
    items, weights, listing = merge_repeated_anchors([4, 1, 2], [0.5, 0.25, 0.25])
    assert items.tolist() == [4, 1, 2] and listing.tolist() == [0, 1, 2]


def test_their_anchor_rule(data):
    """distinct_anchors=False is anchor_points.ipynb's argmin (an item may serve two centroids);
    the default keeps the coreset distinct; both give one listing entry per centroid."""
    from sklearn.metrics.pairwise import pairwise_distances

    _, _, Y, _ = data
    sel = IRTSelection(k=20, dim=1, epochs=EPOCHS).fit(Y)
    assert sel.listing_.tolist() == list(range(20))
    listed, w, km = irt_anchors(sel.a_, sel.b_, 20, 42, distinct=False)
    X = np.column_stack([sel.a_, sel.b_])
    assert listed.tolist() == pairwise_distances(km.cluster_centers_, X).argmin(axis=1).tolist()
    if len(set(listed.tolist())) == 20:  # no repeat: the distinct rule is the notebook's list, ties included
        assert sel.ranking_.tolist() == listed.tolist()
    theirs = IRTSelection(k=20, dim=1, epochs=EPOCHS, distinct_anchors=False).fit(Y)
    assert theirs.ranking_[theirs.listing_].tolist() == listed.tolist()
    assert theirs.weights_.sum() == pytest.approx(1.0) and theirs.listing_.size == 20


def test_predictor_counts_a_listed_item_once_per_listing(data):
    """Their estimates on an anchor list with a repeated item (estimating_performance.ipynb on
    ``Y_test[:, anchor_points]``): the item enters the ability likelihood and the p-IRT mean twice and
    p-IRT's n is the list's length, lambda's too; the anchor estimate sums its clusters' weights."""
    _, _, Y, Yt = data
    sel = IRTSelection(k=20, dim=1, epochs=EPOCHS).fit(Y)
    a, b = sel.a_, sel.b_
    items, w = np.array([10, 20, 30]), np.array([0.5, 0.2, 0.3])
    listing = np.array([0, 1, 0, 2])
    pred = IRTPredictor().fit(Y, items, w, item_params=(a, b), bias=sel.bias_, listing=listing)
    assert pred.lam_ == pytest.approx(gp_irt_lambda(sel.bias_, Y, 4))
    est = pred.predict(Yt[:3][:, items])
    L = items[listing]
    unseen = np.setdiff1d(np.arange(200), items)
    for j in range(3):
        th = estimate_theta(Yt[j, L], a[L], b[L])
        P = mirt_item_curve(th[None, :], a, b)[0]
        p_irt = 4 / 200 * Yt[j, L].mean() + (1 - 4 / 200) * P[unseen].mean()
        assert est.p_irt[j] == pytest.approx(p_irt)
        assert est.gp_irt[j] == pytest.approx(pred.lam_ * Yt[j, items] @ w + (1 - pred.lam_) * p_irt)
    with pytest.raises(ValueError, match="listing"):
        IRTPredictor(lam=0.5).fit(Y, items, item_params=(a, b), listing=[0, 0, 1])


def test_irt_predictor_for_any_selector(data):
    _, _, Y, Yt = data
    S = np.arange(0, 200, 10)
    pred = irt_predictor_for(Y, S, seed=0, dim=1, epochs=EPOCHS)
    assert pred.a_.shape == (200, 1) and 0.0 <= pred.lam_ <= 1.0
    assert pred.predict(Yt[:4, S]).gp_irt.shape == (4,)


def test_predictor_validation(data):
    _, _, Y, _ = data
    with pytest.raises(ValueError, match="distinct"):
        IRTPredictor(lam=0.5).fit(Y, [0, 0, 1], item_params=(np.ones((200, 1)), np.zeros(200)))
    with pytest.raises(ValueError, match="lam"):
        IRTPredictor(lam=1.5).fit(Y, [0, 1], item_params=(np.ones((200, 1)), np.zeros(200)))
    with pytest.raises(ValueError, match="bias"):
        IRTPredictor().fit(Y, [0, 1], item_params=(np.ones((200, 1)), np.zeros(200)))
    pred = IRTPredictor(lam=0.3).fit(Y, [0, 1, 2], item_params=(np.ones((200, 1)), np.zeros(200)))
    with pytest.raises(ValueError, match="shape"):
        pred.predict(np.ones(4))
    with pytest.raises(RuntimeError):
        IRTPredictor().predict(np.ones(3))
