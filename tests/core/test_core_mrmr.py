import numpy as np
import pytest
from sklearn.feature_selection import mutual_info_regression

from evalplan.core.selection import mutual_information as M
from evalplan.core.selection.mrmr import MIQ_EPS, MRMR


def _binary(n=60, m=25, seed=0):
    rng = np.random.default_rng(seed)
    th = rng.normal(size=n)
    b = rng.normal(size=m)
    return (rng.random((n, m)) < 1 / (1 + np.exp(-(th[:, None] - b)))).astype(float)


def _naive(sel: MRMR, Y):
    """Recompute every relevance and redundancy from scratch at each step (pairwise calls)."""
    Y, Yi, target, binary, est, nn = sel.prepare(Y)
    m = Y.shape[1]
    const = np.ptp(Y, axis=0) == 0

    def mi(a, b):
        if est in ("plugin", "ross"):
            return M.mi_binary_binary(a, b)
        return (M.mi_ksg_pca if est == "ksg_pca" else M.mi_ksg)(a, b, nn)

    def relv(j):
        if const[j]:
            return 0.0
        if est == "ross":
            return M.mi_discrete_continuous(Yi[:, j], target, nn)
        return (M.mi_ksg_pca if est == "ksg_pca" else M.mi_ksg)(Yi[:, j], target, nn)

    rel = np.array([relv(j) for j in range(m)])
    chosen, gains = [], []
    for _ in range(sel.k):
        best, bj = -np.inf, None
        for j in range(m):
            if j in chosen or const[j]:
                continue
            if not chosen:
                s = rel[j]
            else:
                red = np.mean([mi(Yi[:, j], Yi[:, c]) for c in chosen])
                s = rel[j] - red if sel.scheme == "mid" else rel[j] / max(red, MIQ_EPS)
            if s > best:
                best, bj = s, j
        chosen.append(bj)
        gains.append(best)
    return np.array(chosen), np.array(gains), rel


@pytest.mark.parametrize("scheme", ["miq", "mid"])
def test_greedy_equals_naive_binary(scheme):
    Y = _binary()
    sel = MRMR(k=8, scheme=scheme).fit(Y)
    r, g, rel = _naive(sel, Y)
    np.testing.assert_array_equal(sel.ranking_, r)
    np.testing.assert_allclose(sel.gains_, g, rtol=1e-10)
    np.testing.assert_allclose(sel.relevance_, rel, atol=1e-12)


@pytest.mark.parametrize("scheme,est", [("miq", "ksg"), ("mid", "ksg"), ("miq", "ksg_pca")])
def test_greedy_equals_naive_continuous(scheme, est):
    rng = np.random.default_rng(2)
    Z = rng.normal(size=(40, 3))
    Y = Z @ rng.normal(size=(3, 12)) + 0.5 * rng.normal(size=(40, 12))
    sel = MRMR(k=5, scheme=scheme, estimator=est).fit(Y)
    r, g, _ = _naive(sel, Y)
    np.testing.assert_array_equal(sel.ranking_, r)
    np.testing.assert_allclose(sel.gains_, g, rtol=1e-10)


def test_incremental_redundancy():
    Y = _binary(seed=3)
    sel = MRMR(k=4, scheme="mid").fit(Y)
    rank = sel.ranking_
    # criterion of the 4th pick = relevance - mean MI with the first three
    red = np.mean([M.mi_binary_binary(Y[:, rank[3]], Y[:, c]) for c in rank[:3]])
    assert sel.gains_[3] == pytest.approx(sel.relevance_[rank[3]] - red, abs=1e-12)
    assert sel.gains_[0] == sel.relevance_[rank[0]] == sel.relevance_.max()


def test_relevance_equals_mutual_info_regression():
    Y = _binary(seed=4)
    sel = MRMR(k=3, seed=11).fit(Y)
    ref = mutual_info_regression(Y, Y.mean(1), discrete_features=True, n_neighbors=5,
                                 random_state=11)
    # sklearn searches neighbours with a KD-tree when both classes have > 2k+1 points; there it
    # is the same estimator (elsewhere its brute-force distances are rounded, see the MI module)
    c = Y.sum(axis=0)
    kd = np.minimum(c, Y.shape[0] - c) > 2 * 5 + 1
    assert kd.sum() >= 10
    np.testing.assert_allclose(sel.relevance_[kd], ref[kd], atol=1e-12)
    np.testing.assert_allclose(sel.relevance_, M.mi_ross_matrix(Y, M.sklearn_jitter(Y.mean(1), 11), 5),
                               atol=1e-12)
    assert sel.estimator_ == "ross" and sel.n_neighbors_ == 5 and sel.binary_


def test_constant_items_last():
    Y = _binary(m=10, seed=5)
    Y[:, 2] = 1.0
    Y[:, 7] = 0.0
    sel = MRMR(k=10).fit(Y)
    assert set(sel.ranking_[-2:]) == {2, 7}
    assert sel.relevance_[2] == sel.relevance_[7] == 0
    np.testing.assert_array_equal(sel.gains_[-2:], 0.0)
    assert len(set(sel.ranking_)) == 10


def test_determinism_and_validation():
    Y = _binary(seed=6)
    a = MRMR(k=6).fit(Y)
    b = MRMR(k=6).fit(Y.copy())
    np.testing.assert_array_equal(a.ranking_, b.ranking_)
    np.testing.assert_array_equal(a.gains_, b.gains_)
    with pytest.raises(ValueError):
        MRMR(k=3, scheme="bad").fit(Y)
    with pytest.raises(ValueError):
        MRMR(k=3, estimator="ross").fit(Y + 0.5)
    with pytest.raises(ValueError):
        MRMR(k=Y.shape[1] + 1).fit(Y)
    assert MRMR(k=3, estimator="auto").fit(Y + 0.25).estimator_ == "ksg"
    assert MRMR(k=3, estimator="plugin").fit(Y).ranking_.shape == (3,)
