"""RepCore core (paper 003 §2.2-2.4, Appendix C.1) on SYNTHETIC data."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from sklearn.linear_model import Ridge

from evalplan.core.repcore.alignment import AlignmentTrainer, split_items
from evalplan.core.repcore.anchors import SphericalKMeansAnchors, consensus_embeddings
from evalplan.core.repcore.extrapolation import (
    RepCoreExtrapolator,
    agreement,
    conformal_quantile,
    loo_interval,
    source_mean_correctness,
)
from evalplan.core.repcore.synthetic import make_synthetic_suite


# ------------------------------------------------------------------ synthetic
def test_synthetic_shapes_and_determinism():
    s = make_synthetic_suite(n_items=300, n_sources=4, n_targets=3, seed=3)
    assert len(s.source_states) == 4
    for h, w in zip(s.source_states, s.widths):
        assert h.shape == (300, w) and 64 <= w <= 256 and h.dtype == np.float32
    assert s.source_correctness.shape == (4, 300) and s.target_correctness.shape == (3, 300)
    assert set(np.unique(s.source_correctness)) <= {0.0, 1.0}
    assert s.difficulty.shape == (300,) and s.clusters.shape == (300,)
    assert s.abilities.shape == (7,)
    t = make_synthetic_suite(n_items=300, n_sources=4, n_targets=3, seed=3)
    for a, b in zip(s.source_states, t.source_states):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(s.target_correctness, t.target_correctness)
    u = make_synthetic_suite(n_items=300, n_sources=4, n_targets=3, seed=4)
    assert not np.array_equal(s.source_correctness, u.source_correctness)


def test_synthetic_widths_and_dtype():
    s = make_synthetic_suite(n_items=50, n_sources=2, n_targets=1, widths=[8, 12],
                             dtype=np.float16)
    assert [h.shape[1] for h in s.source_states] == [8, 12]
    assert all(h.dtype == np.float16 for h in s.source_states)
    with pytest.raises(ValueError):
        make_synthetic_suite(n_items=50, n_sources=2, widths=[8])


# ------------------------------------------------------------------ alignment
@pytest.fixture(scope="module")
def suite():
    return make_synthetic_suite(n_items=800, n_sources=5, n_targets=4, seed=1)


@pytest.fixture(scope="module")
def trained(suite):
    return AlignmentTrainer(epochs=30, seed=0, device="cpu").fit(
        suite.source_states, suite.source_correctness
    )


def test_split_is_70_10_20_and_disjoint():
    sp = split_items(1000, seed=5)
    assert (len(sp["train"]), len(sp["val"]), len(sp["test"])) == (700, 100, 200)
    allidx = np.concatenate(list(sp.values()))
    assert np.array_equal(np.sort(allidx), np.arange(1000))
    assert np.array_equal(split_items(1000, 5)["test"], sp["test"])


def test_alignment_outputs_and_auc(trained, suite):
    assert len(trained.embeddings_) == 5
    assert all(e.shape == (800, 32) and e.dtype == np.float32 for e in trained.embeddings_)
    print(f"synthetic test AUC = {trained.test_auc_:.3f} "
          f"(per source {np.round(trained.test_auc_per_source_, 3)})")
    assert trained.test_auc_ > 0.7  # clearly > 0.5 on the synthetic data
    assert len(trained.val_loss_) == trained.n_epochs_ >= 1
    assert set(trained.split_) == {"train", "val", "test"}


def test_alignment_deterministic_on_cpu(suite, trained):
    again = AlignmentTrainer(epochs=30, seed=0, device="cpu").fit(
        suite.source_states, suite.source_correctness
    )
    for a, b in zip(trained.embeddings_, again.embeddings_):
        np.testing.assert_array_equal(a, b)
    assert trained.val_loss_ == again.val_loss_
    other = AlignmentTrainer(epochs=3, seed=1, device="cpu").fit(
        suite.source_states, suite.source_correctness
    )
    assert not np.array_equal(other.embeddings_[0], trained.embeddings_[0])


def test_alignment_leaves_global_rng_and_flags_alone(suite):
    torch.manual_seed(123)
    expected = torch.rand(3)
    torch.manual_seed(123)
    AlignmentTrainer(epochs=1, seed=0, device="cpu").fit(
        suite.source_states, suite.source_correctness
    )
    assert torch.equal(torch.rand(3), expected)
    assert not torch.are_deterministic_algorithms_enabled()


def test_early_stopping_restores_best(suite):
    # a large lr overfits fast: validation loss stops improving long before 200 epochs
    tr = AlignmentTrainer(epochs=200, patience=3, lr=1e-2, seed=0, device="cpu").fit(
        suite.source_states, suite.source_correctness
    )
    assert tr.stopped_early_ and tr.stop_reason_ == "early_stopping"
    assert tr.n_epochs_ == tr.best_epoch_ + 1 + 3 < 200
    assert tr.val_loss_[tr.best_epoch_] == min(tr.val_loss_)
    # the restored model is the best-epoch one: its validation loss equals the recorded best
    assert math.isclose(
        tr._val_loss(suite.source_states, suite.source_correctness.astype(np.float32),
                     tr.split_["val"]),
        min(tr.val_loss_), rel_tol=1e-5,
    )


def test_progress_and_time_limit(suite):
    seen: list[float] = []
    tr = AlignmentTrainer(epochs=4, patience=100, seed=0, device="cpu").fit(
        suite.source_states, suite.source_correctness, progress=seen.append
    )
    assert seen[:4] == [0.25, 0.5, 0.75, 1.0] and seen[-1] == 1.0
    tr = AlignmentTrainer(epochs=50, patience=100, seed=0, device="cpu", time_limit_s=0.0).fit(
        suite.source_states, suite.source_correctness
    )
    assert tr.stop_reason_ == "time_limit" and tr.n_epochs_ == 1


def test_state_bytes_round_trip(trained, suite):
    blob = trained.state_dict_bytes()
    assert isinstance(blob, bytes) and len(blob) > 0
    re = AlignmentTrainer.from_state_bytes(blob, device="cpu")
    assert re.d_z == 32 and re.widths_ == trained.widths_
    for a, b in zip(re.transform(suite.source_states), trained.embeddings_):
        np.testing.assert_allclose(a, b, rtol=0, atol=1e-6)
    with pytest.raises(ValueError):
        re.transform([h[:, :3] for h in suite.source_states])


def test_alignment_accepts_float16(suite):
    states16 = [h.astype(np.float16) for h in suite.source_states]
    tr = AlignmentTrainer(epochs=2, seed=0, device="cpu").fit(states16, suite.source_correctness)
    assert tr.embeddings_[0].dtype == np.float32 and np.isfinite(tr.embeddings_[0]).all()


def test_alignment_input_validation(suite):
    with pytest.raises(ValueError):
        AlignmentTrainer().fit(suite.source_states, suite.source_correctness[:2])
    with pytest.raises(ValueError):
        AlignmentTrainer().fit(suite.source_states, suite.source_correctness * 2)


# ------------------------------------------------------------------ anchors
def test_consensus_embeddings_mean_then_normalize():
    a = np.array([[1.0, 0.0], [0.0, 2.0]]); b = np.array([[3.0, 0.0], [0.0, 0.0]])
    e = consensus_embeddings([a, b])
    np.testing.assert_allclose(e, [[1.0, 0.0], [0.0, 1.0]])


def _blobs(seed=0, n=400, k=5, d=8):
    rng = np.random.default_rng(seed)
    centers = rng.standard_normal((k, d))
    lab = rng.integers(0, k, n)
    return centers[lab] + 0.2 * rng.standard_normal((n, d))


def test_spherical_kmeans_anchors_are_max_cosine_members():
    X = _blobs()
    km = SphericalKMeansAnchors(5, seed=0).fit(X)
    Xn = X / np.linalg.norm(X, axis=1, keepdims=True)
    assert len(set(km.ranking_.tolist())) == 5
    assert np.all(np.diff(km.weights_) <= 0) and km.weights_.sum() == 400
    np.testing.assert_array_equal(km.gains_, km.weights_.astype(float))
    for j, a in enumerate(km.ranking_):
        members = np.flatnonzero(km.labels_ == j)
        assert a in members
        c = Xn[members].mean(0); c /= np.linalg.norm(c)
        np.testing.assert_allclose(km.cluster_centers_[j], c, atol=1e-10)  # converged
        cos = Xn[members] @ c
        assert Xn[a] @ c == pytest.approx(cos.max())
        # every item is assigned to its max-cosine centroid
        assert np.all(np.argmax(Xn[members] @ km.cluster_centers_.T, 1) == j)


def test_spherical_kmeans_deterministic_and_k_distinct():
    X = _blobs(seed=2, n=300, k=7)
    a = SphericalKMeansAnchors(20, seed=4).fit(X)
    b = SphericalKMeansAnchors(20, seed=4).fit(X)
    np.testing.assert_array_equal(a.ranking_, b.ranking_)
    np.testing.assert_array_equal(a.labels_, b.labels_)
    assert len(np.unique(a.ranking_)) == 20


def test_correctness_input_ablation_path():
    s = make_synthetic_suite(n_items=500, n_sources=10, n_targets=1, seed=0)
    Y = s.source_correctness.T  # items x sources, 0/1; includes all-zero rows
    km = SphericalKMeansAnchors(30, seed=0, input="correctness").fit(Y)
    assert len(np.unique(km.ranking_)) == 30 and km.weights_.sum() == 500
    for j, a in enumerate(km.ranking_):
        members = np.flatnonzero(km.labels_ == j)
        d = ((Y[members] - km.cluster_centers_[j]) ** 2).sum(1)
        assert ((Y[a] - km.cluster_centers_[j]) ** 2).sum() == pytest.approx(d.min())
    # few distinct rows: still k distinct anchors
    Y2 = np.repeat(np.eye(3), 10, axis=0)
    km2 = SphericalKMeansAnchors(5, seed=0, input="correctness").fit(Y2)
    assert len(np.unique(km2.ranking_)) == 5
    with pytest.raises(ValueError):
        SphericalKMeansAnchors(5, input="bogus").fit(Y2)
    with pytest.raises(ValueError):
        SphericalKMeansAnchors(31).fit(Y2)


# ------------------------------------------------------------------ extrapolation
def test_eq8_hand_example():
    x = np.array([0.0, 0.5, 1.0, 0.25, 0.75])
    anchors = np.array([0, 2])
    y_a = np.array([0.0, 1.0])
    ext = RepCoreExtrapolator(ridge_alpha=0.0).fit(anchors, y_a, x)
    # least squares through (0,0), (1,1): g(x) = x
    assert ext.coef_ == pytest.approx(1.0) and ext.intercept_ == pytest.approx(0.0)
    np.testing.assert_allclose(ext.item_predictions_, [0.0, 0.5, 1.0, 0.25, 0.75])
    assert ext.estimate_ == pytest.approx((0 + 1 + 0.5 + 0.25 + 0.75) / 5)
    # clipping: with alpha = 1, coef = 0.5 / (0.5 + 1) = 1/3, intercept = 0.5 - 1/6 = 1/3
    ext = RepCoreExtrapolator(ridge_alpha=1.0).fit(anchors, y_a, x)
    assert ext.coef_ == pytest.approx(1 / 3) and ext.intercept_ == pytest.approx(1 / 3)
    # out-of-range predictions are clipped to [0, 1]
    ext = RepCoreExtrapolator(ridge_alpha=0.0).fit(np.array([1, 3]), np.array([1.0, 0.0]),
                                                   np.array([0.0, 0.5, 1.0, 0.6]))
    # g(x) = 1 - 10 (x - 0.5): g(0) = 6 -> 1, g(1) = -4 -> 0
    np.testing.assert_allclose(ext.item_predictions_, [1.0, 1.0, 0.0, 0.0])
    assert ext.estimate_ == pytest.approx(0.5)


def test_ridge_matches_sklearn():
    rng = np.random.default_rng(0)
    x = rng.random(200); anchors = rng.choice(200, 25, replace=False)
    y = (rng.random(25) < x[anchors]).astype(float)
    for alpha in (0.0, 0.1, 1.0, 10.0):
        ext = RepCoreExtrapolator(ridge_alpha=alpha, clip=False).fit(anchors, y, x)
        sk = Ridge(alpha=alpha).fit(x[anchors, None], y)
        assert ext.coef_ == pytest.approx(float(sk.coef_[0]), abs=1e-10)
        assert ext.intercept_ == pytest.approx(float(sk.intercept_), abs=1e-10)
        rest = np.setdiff1d(np.arange(200), anchors)
        np.testing.assert_allclose(ext.item_predictions_[rest], sk.predict(x[rest, None]))


def test_extrapolator_validation():
    with pytest.raises(ValueError):
        RepCoreExtrapolator().fit(np.array([0, 0]), np.array([1.0, 1.0]), np.zeros(3))
    with pytest.raises(ValueError):
        RepCoreExtrapolator().fit(np.array([5]), np.array([1.0]), np.zeros(3))


def test_agreement_metric():
    pred = np.array([0.9, 0.4, 0.5, 0.1])
    truth = np.array([1, 1, 1, 0])
    assert agreement(pred, truth) == pytest.approx(0.75)  # 0.5 counts as 1
    assert agreement(pred, truth, threshold=0.95) == pytest.approx(0.25)


def test_conformal_quantile_rank():
    e = np.arange(1, 11) / 100.0  # 10 calibration errors
    assert conformal_quantile(e, 0.9) == pytest.approx(0.10)  # ceil(11*0.9)=10 -> max
    assert conformal_quantile(e, 0.8) == pytest.approx(0.09)  # ceil(8.8)=9
    assert conformal_quantile(e, 0.5) == pytest.approx(0.06)  # ceil(5.5)=6
    assert math.isinf(conformal_quantile(e, 0.95))            # ceil(10.45)=11 > 10


def test_loo_interval_hand_case():
    # 3 sources, 4 items, anchors {0, 1}, alpha 0 (plain least squares)
    Y = np.array([[1, 0, 1, 0],
                  [1, 1, 0, 0],
                  [0, 0, 1, 1]], dtype=float)
    anchors = np.array([0, 1])
    x = source_mean_correctness(Y)
    ext = RepCoreExtrapolator(ridge_alpha=0.0)
    errs = ext.loo_errors(anchors, Y)
    # source 0: x_-0 = [.5, .5, .5, .5]; zero variance -> g = mean(y_a) = .5;
    #   est = (1 + 0 + .5 + .5)/4 = .5, truth .5, err 0
    # source 1: x_-1 = [.5, 0, 1, .5]; fit (.5,1), (0,1) -> g = 1;
    #   est = (1 + 1 + 1 + 1)/4 = 1, truth .5, err .5
    # source 2: x_-2 = [1, .5, .5, 0]; fit (1,0), (.5,0) -> g = 0;
    #   est = (0 + 0 + 0 + 0)/4 = 0, truth .5, err -.5
    np.testing.assert_allclose(errs, [0.0, 0.5, -0.5], atol=1e-12)
    ext.fit(anchors, np.array([1.0, 0.0]), x)  # some target
    # level .5: rank ceil(4*.5) = 2 -> 2nd smallest |err| = .5
    lo, hi = ext.loo_interval(anchors, Y, x, level=0.5)
    assert (lo, hi) == (pytest.approx(max(0.0, ext.estimate_ - 0.5)),
                        pytest.approx(min(1.0, ext.estimate_ + 0.5)))
    # level .25: rank ceil(1) = 1 -> 0 -> a point interval
    lo, hi = ext.loo_interval(anchors, Y, x, level=0.25)
    assert lo == pytest.approx(ext.estimate_) and hi == pytest.approx(ext.estimate_)
    # level .9: rank 4 > 3 -> the whole [0, 1]
    assert ext.loo_interval(anchors, Y, x, level=0.9) == (0.0, 1.0)
    assert loo_interval(anchors, Y, x, 0.5, estimate=0.4, ridge_alpha=0.0) == (
        pytest.approx(0.0), pytest.approx(0.9))
