"""Tests of evalplan.core.sequential (single-target BayesAME, papers/004 §3.1) against a naive dense model."""

from __future__ import annotations

import math
import zlib

import numpy as np
import pytest

from evalplan.core.sequential import (
    Z975,
    BucketPrior,
    SequentialEstimator,
    SessionConfig,
    fit_alpha_beta,
    neg_log_marginal_likelihood,
)

TOL = 1e-9


# ---------------------------------------------------------------------------- naive reference
class Naive:
    """Dense textbook implementation: H (N x B), D (N x N), full B x B prior and posterior via solve."""

    def __init__(self, ref, alpha, beta, sigma2):
        ref = np.asarray(ref, float)
        self.Kr, self.N = ref.shape
        keys = {}
        self.bucket = np.array([keys.setdefault(tuple(ref[:, i]), len(keys)) for i in range(self.N)])
        B = len(keys)
        phi = np.zeros((B, self.Kr))
        for key, b in keys.items():
            phi[b] = key
        self.B = B
        self.H = np.zeros((self.N, B))
        self.H[np.arange(self.N), self.bucket] = 1.0
        self.Nb = self.H.sum(0)
        self.mu = phi.mean(1)
        diff = phi[:, None, :] - phi[None, :, :]
        self.Sigma = alpha * np.exp(-beta / self.Kr * (diff ** 2).sum(-1))
        self.D = np.diag(sigma2 * (self.H @ self.Nb))
        self.sigma2 = sigma2

    def posterior(self, C, s):
        C = list(C)
        if not C:
            return self.mu.copy(), self.Sigma.copy()
        HC = self.H[C]
        G = HC @ self.Sigma @ HC.T + self.D[np.ix_(C, C)]
        SH = self.Sigma @ HC.T
        mu = self.mu + SH @ np.linalg.solve(G, np.asarray(s) - HC @ self.mu)
        Sig = self.Sigma - SH @ np.linalg.solve(G, SH.T)
        return mu, Sig

    def est_var(self, C, s):
        mu, Sig = self.posterior(C, s)
        nb = self.H[list(C)].sum(0) if C else np.zeros(self.B)
        w = self.Nb - nb
        est = (np.sum(s) + w @ mu) / self.N
        var = np.sum(w * (self.sigma2 * self.Nb + Sig @ w)) / self.N ** 2
        return est, var

    def ig_items(self, C, s):
        """alpha_IG per unobserved item, two ways: the paper's closed form and 1/2 log(Var_C / Var_{C+i})."""
        mu, Sig = self.posterior(C, s)
        nb = self.H[list(C)].sum(0) if C else np.zeros(self.B)
        w = self.Nb - nb
        _, var = self.est_var(C, s)
        out_closed, out_direct = {}, {}
        for i in range(self.N):
            if i in C:
                continue
            b = self.bucket[i]
            num = Sig[b] @ w + self.sigma2 * self.Nb[b]
            out_closed[i] = -0.5 * math.log(1 - num ** 2 / (self.N ** 2 * var * (Sig[b, b] + self.sigma2 * self.Nb[b])))
            _, var_i = self.est_var(list(C) + [i], list(s) + [0.0])  # value-free
            out_direct[i] = 0.5 * math.log(var / var_i)
        return out_closed, out_direct


def binary_refs(rng, kr, n, p=0.5):
    return (rng.random((kr, n)) < p).astype(float)


def make_refs(kind, rng):
    if kind == "binary_unique":  # B = N (almost surely with 14 refs, 40 items)
        ref = binary_refs(rng, 14, 40)
        ref = ref[:, np.unique(ref.T, axis=0, return_index=True)[1]]
        return ref
    if kind == "continuous_unique":
        return rng.random((6, 35))
    if kind == "binary_few":  # B < N
        return binary_refs(rng, 3, 50)
    if kind == "continuous_few":
        base = rng.random((5, 8))
        return base[:, rng.integers(0, 8, size=45)]
    if kind == "grid_half":  # values in {0, .5, 1}: grid m = 2
        ref = rng.integers(0, 3, size=(9, 30)) / 2.0
        return ref[:, np.unique(ref.T, axis=0, return_index=True)[1]]
    raise KeyError(kind)


def target_scores(ref, rng, binary):
    lat = ref.mean(0) * 0.8 + 0.1 * rng.standard_normal(ref.shape[1])
    if binary:
        return (rng.random(ref.shape[1]) < np.clip(lat, 0.05, 0.95)).astype(float)
    return np.clip(lat + 0.1 * rng.standard_normal(ref.shape[1]), 0, 1)


# ---------------------------------------------------------------------------- prior
def test_buckets_and_prior_mean():
    ref = np.array([[1, 0, 1, 1, 0], [0, 0, 0, 1, 0]], float)
    p = BucketPrior.from_reference_scores(ref)
    assert p.n_items == 5 and p.n_buckets == 3 and p.n_references == 2
    assert p.bucket_sizes.sum() == 5
    for i in range(5):
        np.testing.assert_array_equal(p.bucket_vectors[p.bucket_of_item[i]], ref[:, i])
    assert sorted(p.bucket_sizes.tolist()) == [1, 2, 2]
    np.testing.assert_allclose(p.bucket_means, p.bucket_vectors.mean(1))
    assert p.grid == 1 and p.level_hist is not None
    # level_hist rows: size-weighted histogram of Hamming distances
    for b in range(p.n_buckets):
        d = ((p.bucket_vectors - p.bucket_vectors[b]) ** 2).sum(1).astype(int)
        expect = np.bincount(d, weights=p.bucket_sizes, minlength=p.n_levels)
        np.testing.assert_array_equal(p.level_hist[b], expect)


def test_sigma2_regime_rule():
    rng = np.random.default_rng(1)
    p_unique = BucketPrior.from_reference_scores(make_refs("binary_unique", rng))
    e = SequentialEstimator(p_unique, SessionConfig(method="bayesame"))
    assert e.hyperparameters == {"alpha": 1.0, "beta": 1.0, "sigma2": 1e-4}
    assert e.selection == "information_gain"
    p_few = BucketPrior.from_reference_scores(make_refs("binary_few", rng))
    e = SequentialEstimator(p_few, SessionConfig(method="bayesame"))
    assert e.hyperparameters["sigma2"] == 0.1 and e.selection == "random"
    # B = N - n0 is still the unique regime, B = N - n0 - 1 is not
    ref = np.zeros((1, 12))
    ref[0, :2] = 0.5  # 11 buckets for 12 items
    ref[0, 2:] = np.linspace(0, 1, 10) + 1e-3
    p = BucketPrior.from_reference_scores(ref)
    assert p.n_buckets == 11
    assert SequentialEstimator(p, SessionConfig(method="bayesame", n0=1)).selection == "information_gain"
    assert SequentialEstimator(p, SessionConfig(method="bayesame", n0=0)).selection == "random"


# ---------------------------------------------------------------------------- exactness vs naive
@pytest.mark.parametrize("kind", ["binary_unique", "continuous_unique", "binary_few", "continuous_few", "grid_half"])
@pytest.mark.parametrize("binary_target", [True, False])
def test_estimate_variance_match_naive_every_step(kind, binary_target):
    rng = np.random.default_rng([zlib.crc32(kind.encode()), int(binary_target)])
    ref = make_refs(kind, rng)
    prior = BucketPrior.from_reference_scores(ref)
    if kind.endswith("unique") or kind == "grid_half":
        assert prior.n_buckets == prior.n_items
    else:
        assert prior.n_buckets < prior.n_items - 10
    assert prior.grid == {"binary_unique": 1, "binary_few": 1, "grid_half": 2}.get(kind, 0)
    s_all = target_scores(ref, rng, binary_target)
    hp = {"alpha": 0.3, "beta": 2.5}
    method = "bayesame" if kind.endswith("unique") or kind == "grid_half" else "bayesame_rs"
    est = SequentialEstimator(prior, SessionConfig(method=method, hyperparameters=hp, refit_every=0,
                                                   epsilon1=0, epsilon2=0))
    naive = Naive(ref, hp["alpha"], hp["beta"], est.hyperparameters["sigma2"])
    e0, v0 = naive.est_var([], [])
    assert abs(est.estimate - e0) < TOL and abs(est.variance - v0) < TOL
    C, s = [], []
    while not est.stopped:
        (i,) = est.propose()
        est.observe(i, s_all[i])
        C.append(i)
        s.append(s_all[i])
        e, v = naive.est_var(C, s)
        assert abs(est.estimate - e) < TOL, (len(C), est.estimate, e)
        assert abs(est.variance - v) < TOL, (len(C), est.variance, v)
        lo, hi = est.ci
        assert abs(lo - (e - Z975 * math.sqrt(v))) < 1e-7 and abs(hi - (e + Z975 * math.sqrt(v))) < 1e-7
    assert est.stop_reason == "exhausted" and len(C) == prior.n_items
    assert abs(est.estimate - s_all.mean()) < TOL and est.variance < TOL
    assert [r["n"] for r in est.trajectory] == list(range(1, prior.n_items + 1))


def test_observing_unproposed_items_matches_naive():
    rng = np.random.default_rng(7)
    ref = rng.random((4, 30))
    prior = BucketPrior.from_reference_scores(ref)
    hp = {"alpha": 2.0, "beta": 0.7, "sigma2": 0.01}
    est = SequentialEstimator(prior, SessionConfig(method="bayesame", hyperparameters=hp, refit_every=0, epsilon1=0, epsilon2=0))
    naive = Naive(ref, 2.0, 0.7, 0.01)
    order = rng.permutation(30)
    s_all = rng.random(30)
    for k, i in enumerate(order[:20]):
        est.observe(int(i), s_all[i])
        e, v = naive.est_var(list(order[:k + 1]), list(s_all[order[:k + 1]]))
        assert abs(est.estimate - e) < TOL and abs(est.variance - v) < TOL


# ---------------------------------------------------------------------------- information gain
@pytest.mark.parametrize("kind", ["binary_unique", "continuous_unique"])
def test_information_gain_choice_matches_naive(kind):
    rng = np.random.default_rng(3)
    ref = make_refs(kind, rng)
    prior = BucketPrior.from_reference_scores(ref)
    s_all = target_scores(ref, rng, kind.startswith("binary"))
    hp = {"alpha": 0.5, "beta": 3.0}
    est = SequentialEstimator(prior, SessionConfig(method="bayesame", hyperparameters=hp, refit_every=0, epsilon1=0, epsilon2=0))
    naive = Naive(ref, 0.5, 3.0, 1e-4)
    C, s = [], []
    for _ in range(12):
        closed, direct = naive.ig_items(C, s)
        # the paper's closed form equals the definition 1/2 log(Var_C / Var_{C+i})
        for i in closed:
            assert abs(closed[i] - direct[i]) < 1e-7
        ig_fast = est.information_gain()
        for i in closed:
            assert abs(ig_fast[prior.bucket_of_item[i]] - closed[i]) < 1e-7
        (i,) = est.propose()
        assert closed[i] >= max(closed.values()) - 1e-9
        est.observe(i, s_all[i])
        C.append(i)
        s.append(s_all[i])
    assert np.all(np.isneginf(est.information_gain()[prior.bucket_of_item[C]]))


def test_batch_greedy_fantasized_matches_naive():
    rng = np.random.default_rng(11)
    ref = make_refs("continuous_unique", rng)
    prior = BucketPrior.from_reference_scores(ref)
    naive = Naive(ref, 0.5, 3.0, 1e-4)
    est = SequentialEstimator(prior, SessionConfig(method="bayesame", batch_size=4, hyperparameters={"alpha": 0.5, "beta": 3.0},
                                                   refit_every=0, epsilon1=0, epsilon2=0))
    s_all = rng.random(prior.n_items)
    C, s = [], []
    for _ in range(3):
        batch = est.propose()
        assert len(batch) == 4 and len(set(batch)) == 4 and not set(batch) & set(C)
        fant_C, fant_s = list(C), list(s)
        for i in batch:
            closed, _ = naive.ig_items(fant_C, fant_s)
            assert closed[i] >= max(closed.values()) - 1e-9
            fant_C.append(i)
            fant_s.append(0.123)  # any value: the variance does not depend on it
        for i in batch:
            est.observe(i, s_all[i])
            C.append(i)
            s.append(s_all[i])
        e, v = naive.est_var(C, s)
        assert abs(est.estimate - e) < TOL and abs(est.variance - v) < TOL


def test_batch_in_shared_buckets_and_random_regime():
    rng = np.random.default_rng(5)
    prior = BucketPrior.from_reference_scores(binary_refs(rng, 2, 40))  # <= 4 buckets
    est = SequentialEstimator(prior, SessionConfig(method="bayesame", batch_size=7, epsilon1=0, epsilon2=0))
    seen = set()
    while not est.stopped:
        batch = est.propose()
        assert len(batch) == len(set(batch)) and not set(batch) & seen
        assert len(batch) == min(7, 40 - len(seen))
        for i in batch:
            est.observe(i, float(rng.random() < 0.5))
            seen.add(i)
    assert est.stop_reason == "exhausted" and len(seen) == 40
    # IG mode with a bucket of several items: items in a bucket can be picked more than once per batch
    ref = np.concatenate([np.linspace(0, 1, 20)[None, :], np.full((1, 3), 0.5)], axis=1)
    prior = BucketPrior.from_reference_scores(ref)
    est = SequentialEstimator(prior, SessionConfig(method="bayesame", batch_size=5, n0=10))
    assert est.selection == "information_gain"
    for _ in range(3):
        batch = est.propose()
        assert len(set(batch)) == len(batch) == 5 and not any(est._observed[batch])
        for i in batch:
            est.observe(i, 0.5)


# ---------------------------------------------------------------------------- stopping
def test_effective_window():
    assert SessionConfig(method="bayesame").effective_window == 30
    assert SessionConfig(method="bayesame", batch_size=2).effective_window == 15
    assert SessionConfig(method="bayesame", batch_size=3).effective_window == 10
    assert SessionConfig(method="bayesame", batch_size=5).effective_window == 6
    assert SessionConfig(method="bayesame", batch_size=60).effective_window == 1
    assert SessionConfig(method="bayesame", batch_size=100).effective_window == 1


@pytest.mark.parametrize("batch_size", [1, 2, 3])
def test_stop_converged_after_window(batch_size):
    rng = np.random.default_rng(2)
    prior = BucketPrior.from_reference_scores(rng.random((5, 200)))
    cfg = SessionConfig(method="bayesame", epsilon1=10.0, epsilon2=10.0, window=6, batch_size=batch_size)
    est = SequentialEstimator(prior, cfg)
    W = cfg.effective_window
    assert W == max(1, round(6 / batch_size))
    while not est.stopped:
        for i in est.propose():
            est.observe(i, rng.random())
    assert est.stop_reason == "converged" and est.n_observed == W * batch_size
    assert est.propose() == []
    with pytest.raises(ValueError, match="item"):
        est.observe(int(np.flatnonzero(~est._observed)[0]), 0.5)


def test_stop_converged_requires_both_conditions():
    rng = np.random.default_rng(4)
    ref = rng.random((5, 300))
    prior = BucketPrior.from_reference_scores(ref)
    # eps2 tiny: never converges before exhaustion... capped by max_items
    est = SequentialEstimator(prior, SessionConfig(method="bayesame", epsilon1=1.0, epsilon2=1e-9, window=3, max_items=40))
    while not est.stopped:
        (i,) = est.propose()
        est.observe(i, rng.random())
    assert est.stop_reason == "max_items" and est.n_observed == 40
    # eps1 = 0 with varying scores: the estimate never stays constant
    est = SequentialEstimator(prior, SessionConfig(method="bayesame", epsilon1=0.0, epsilon2=10.0, window=3, max_items=25))
    while not est.stopped:
        (i,) = est.propose()
        est.observe(i, rng.random())
    assert est.stop_reason == "max_items"
    # a real run: converged with width and range below the thresholds
    truth = np.clip(ref.mean(0) + 0.01 * rng.standard_normal(300), 0, 1)
    est = SequentialEstimator(prior, SessionConfig(method="bayesame", epsilon1=0.01, epsilon2=0.05, window=10))
    while not est.stopped:
        (i,) = est.propose()
        est.observe(i, truth[i])
    assert est.stop_reason == "converged"
    last = [r["estimate"] for r in est.trajectory[-10:]]
    assert max(last) - min(last) <= 0.01 and 2 * Z975 * math.sqrt(est.variance) <= 0.05
    assert est.n_observed < 300


def test_stop_max_items_and_propose_cap():
    rng = np.random.default_rng(6)
    prior = BucketPrior.from_reference_scores(rng.random((3, 50)))
    est = SequentialEstimator(prior, SessionConfig(method="bayesame", batch_size=4, max_items=6, epsilon1=0, epsilon2=0))
    b1 = est.propose()
    assert len(b1) == 4
    for i in b1:
        est.observe(i, 1.0)
    b2 = est.propose()
    assert len(b2) == 2
    for i in b2:
        est.observe(i, 0.0)
    assert est.stopped and est.stop_reason == "max_items" and est.propose() == []


# ---------------------------------------------------------------------------- refit
def gp_data(rng, n_items=150, kr=8, alpha=0.05, beta=12.0, sigma2=1e-4):
    ref = rng.random((kr, n_items))
    prior = BucketPrior.from_reference_scores(ref)
    phi = prior.bucket_vectors
    d2 = ((phi[:, None] - phi[None]) ** 2).sum(-1)
    K = alpha * np.exp(-beta / kr * d2) + 1e-10 * np.eye(len(phi))
    theta = prior.bucket_means + np.linalg.cholesky(K) @ rng.standard_normal(len(phi))
    s = theta[prior.bucket_of_item] + math.sqrt(sigma2) * rng.standard_normal(n_items)
    return prior, s, d2


def test_refit_decreases_nll_and_gradient():
    rng = np.random.default_rng(8)
    prior, s, d2 = gp_data(rng)
    C = np.arange(100)
    b = prior.bucket_of_item[C]
    r = s[C] - prior.bucket_means[b]
    D2 = d2[np.ix_(b, b)] / prior.n_references
    noise = np.full(100, 1e-4)
    f0, grad = neg_log_marginal_likelihood(np.zeros(2), r, D2, noise)
    eps = 1e-6
    for j in range(2):
        x = np.zeros(2)
        x[j] = eps
        fp = neg_log_marginal_likelihood(x, r, D2, noise, with_grad=False)
        x[j] = -eps
        fm = neg_log_marginal_likelihood(x, r, D2, noise, with_grad=False)
        assert abs((fp - fm) / (2 * eps) - grad[j]) < 1e-4 * max(1, abs(grad[j]))
    a, bb, f = fit_alpha_beta(r, D2, noise)
    assert f < f0 - 1.0
    assert abs(neg_log_marginal_likelihood(np.log([a, bb]), r, D2, noise, with_grad=False) - f) < 1e-9
    assert a < 0.5  # moves towards the generating alpha = 0.05


def test_refit_in_session_then_matches_naive_and_replay_is_identical():
    rng = np.random.default_rng(9)
    prior, s, _ = gp_data(rng, n_items=120, kr=6)
    cfg = SessionConfig(method="bayesame", refit_every=20, epsilon1=0, epsilon2=0, max_items=70, seed=3)
    est = SequentialEstimator(prior, cfg)
    seq = []
    hps = []
    while not est.stopped:
        (i,) = est.propose()
        est.observe(i, s[i])
        seq.append(i)
        hps.append(est.hyperparameters)
    assert est.n_refits == 3
    assert hps[18] == {"alpha": 1.0, "beta": 1.0, "sigma2": 1e-4} and hps[19] != hps[18]
    # after the last refit the state equals the naive posterior at the refitted hyperparameters
    hp = est.hyperparameters
    naive = Naive(np.asarray(prior.bucket_vectors[prior.bucket_of_item].T), hp["alpha"], hp["beta"], hp["sigma2"])
    e, v = naive.est_var(seq, list(s[seq]))
    assert abs(est.estimate - e) < TOL and abs(est.variance - v) < TOL
    # replay into a fresh estimator: identical state, trajectory and proposals
    est2 = SequentialEstimator(prior, cfg)
    for i in seq:
        est2.observe(i, s[i])
    assert est2.trajectory == est.trajectory
    assert est2.hyperparameters == est.hyperparameters
    assert (est2.estimate, est2.variance, est2.ci, est2.stop_reason) == (est.estimate, est.variance, est.ci, est.stop_reason)
    # proposals are a function of (seed, observed sequence) only
    cfg2 = SessionConfig(method="bayesame", refit_every=20, epsilon1=0, epsilon2=0, seed=3, batch_size=3)
    x, y = SequentialEstimator(prior, cfg2), SequentialEstimator(prior, cfg2)
    for i in seq[:25]:
        x.observe(i, s[i])
        y.observe(i, s[i])
    assert x.propose() == y.propose() == x.propose()


def test_random_proposals_deterministic_per_seed_and_step():
    rng = np.random.default_rng(10)
    prior = BucketPrior.from_reference_scores(binary_refs(rng, 2, 100))
    a = SequentialEstimator(prior, SessionConfig(method="bayesame_rs", seed=5, batch_size=3))
    b = SequentialEstimator(prior, SessionConfig(method="bayesame_rs", seed=5, batch_size=3))
    c = SequentialEstimator(prior, SessionConfig(method="bayesame_rs", seed=6, batch_size=3))
    pa = a.propose()
    assert pa == b.propose() and pa != c.propose()
    expect = np.random.default_rng([5, 0]).choice(np.arange(100), size=3, replace=False).tolist()
    assert pa == expect


def test_fixed_hyperparameters_never_change_without_refit():
    rng = np.random.default_rng(12)
    prior, s, _ = gp_data(rng, n_items=80)
    hp = {"alpha": 0.2, "beta": 4.0, "sigma2": 0.002}
    est = SequentialEstimator(prior, SessionConfig(method="bayesame", hyperparameters=hp, refit_every=0, epsilon1=0, epsilon2=0))
    for _ in range(60):
        (i,) = est.propose()
        est.observe(i, s[i])
    assert est.hyperparameters == hp and est.n_refits == 0


# ---------------------------------------------------------------------------- serialization
def test_to_bytes_round_trip():
    rng = np.random.default_rng(13)
    for ref in (binary_refs(rng, 10, 60), rng.random((4, 30))):
        p = BucketPrior.from_reference_scores(ref)
        q = BucketPrior.from_bytes(p.to_bytes())
        for name in ("bucket_of_item", "bucket_sizes", "bucket_vectors"):
            np.testing.assert_array_equal(getattr(p, name), getattr(q, name))
        assert (q.n_items, q.n_buckets, q.grid) == (p.n_items, p.n_buckets, p.grid)
        if p.level_hist is not None:
            np.testing.assert_array_equal(p.level_hist, q.level_hist)
        s = rng.random(p.n_items)
        e1 = SequentialEstimator(p, SessionConfig(method="bayesame", max_items=15, refit_every=5))
        e2 = SequentialEstimator(q, SessionConfig(method="bayesame", max_items=15, refit_every=5))
        while not e1.stopped:
            (i,) = e1.propose()
            assert e2.propose() == [i]
            e1.observe(i, s[i])
            e2.observe(i, s[i])
        assert e1.trajectory == e2.trajectory
    with pytest.raises(ValueError, match="data"):
        BucketPrior.from_bytes(b"not a prior")


# ---------------------------------------------------------------------------- baselines
def test_rs_mean_interval_formula():
    rng = np.random.default_rng(14)
    prior = BucketPrior.from_reference_scores(rng.random((3, 80)))
    est = SequentialEstimator(prior, SessionConfig(method="rs_mean", epsilon1=0, epsilon2=0, seed=1))
    bayes_prior = SequentialEstimator(prior, SessionConfig(method="bayesame"))
    assert est.estimate == bayes_prior.estimate and est.variance == bayes_prior.variance
    s_all = (rng.random(80) < 0.4).astype(float)
    obs = []
    while not est.stopped:
        (i,) = est.propose()
        est.observe(i, s_all[i])
        obs.append(s_all[i])
        n = len(obs)
        x = np.array(obs)
        assert est.estimate == pytest.approx(x.mean(), abs=1e-12)
        z2h = 0.5 * 1.959963984540054 ** 2  # Agresti-Coull-style pseudo-count floor (rs_mean_s2)
        pt = (x.sum() + z2h) / (n + 2 * z2h)
        floor = (((x - pt) ** 2).sum() + z2h * (pt ** 2 + (1 - pt) ** 2)) / (n + 2 * z2h - 1)
        var = max(x.var(ddof=1) if n > 1 else 0.0, floor) / n * (1 - n / 80)
        assert est.variance == pytest.approx(var, abs=1e-12)
        lo, hi = est.ci
        assert lo == pytest.approx(x.mean() - 1.959963984540054 * math.sqrt(var), abs=1e-12)
        assert hi == pytest.approx(x.mean() + 1.959963984540054 * math.sqrt(var), abs=1e-12)
    assert est.stop_reason == "exhausted" and est.variance == 0.0


def test_bayesame_rs_is_random_with_bayes_estimator():
    rng = np.random.default_rng(15)
    ref = rng.random((4, 40))
    prior = BucketPrior.from_reference_scores(ref)
    est = SequentialEstimator(prior, SessionConfig(method="bayesame_rs", refit_every=0, seed=2,
                                                   hyperparameters={"alpha": 0.4, "beta": 2.0}))
    assert est.selection == "random"
    naive = Naive(ref, 0.4, 2.0, 1e-4)
    C, s = [], []
    for _ in range(10):
        (i,) = est.propose()
        assert i == int(np.random.default_rng([2, len(C)]).choice(np.flatnonzero(~np.isin(np.arange(40), C))))
        est.observe(i, 0.3)
        C.append(i)
        s.append(0.3)
        e, v = naive.est_var(C, s)
        assert abs(est.estimate - e) < TOL and abs(est.variance - v) < TOL


# ---------------------------------------------------------------------------- errors
@pytest.mark.parametrize("kwargs,field", [
    (dict(method="bogus"), "method"),
    (dict(epsilon1=-1), "epsilon1"),
    (dict(epsilon2=float("nan")), "epsilon2"),
    (dict(window=0), "window"),
    (dict(refit_every=-1), "refit_every"),
    (dict(max_items=0), "max_items"),
    (dict(batch_size=0), "batch_size"),
    (dict(batch_size=1.5), "batch_size"),
    (dict(seed=-1), "seed"),
    (dict(n0=-2), "n0"),
    (dict(hyperparameters={"gamma": 1.0}), "hyperparameters"),
    (dict(hyperparameters={"alpha": 0.0}), "hyperparameters"),
    (dict(hyperparameters=[1, 2]), "hyperparameters"),
])
def test_config_validation(kwargs, field):
    cfg = SessionConfig(**kwargs)
    with pytest.raises(ValueError, match=field):
        cfg.validate()
    prior = BucketPrior.from_reference_scores(np.eye(3))
    with pytest.raises(ValueError, match=field):
        SequentialEstimator(prior, cfg)


def test_observe_errors_and_bad_references():
    prior = BucketPrior.from_reference_scores(np.random.default_rng(0).random((2, 10)))
    est = SequentialEstimator(prior, SessionConfig(method="bayesame"))
    for item in (-1, 10, 2.5, "3", True):
        with pytest.raises(ValueError, match="item"):
            est.observe(item, 0.5)
    for score in (float("nan"), float("inf"), "x", None):
        with pytest.raises(ValueError, match="score"):
            est.observe(0, score)
    est.observe(np.int64(3), 1)
    with pytest.raises(ValueError, match="already observed"):
        est.observe(3, 0.0)
    assert est.n_observed == 1 and len(est.trajectory) == 1
    with pytest.raises(ValueError, match="reference_scores"):
        BucketPrior.from_reference_scores(np.array([[0.1, np.nan]]))
    with pytest.raises(ValueError, match="reference_scores"):
        BucketPrior.from_reference_scores(np.zeros(5))
    with pytest.raises(ValueError, match="prior"):
        SequentialEstimator("nope", SessionConfig(method="bayesame"))


# ---------------------------------------------------------------------------- fixes: NLL plateau, RS-Mean floor
def _binary_irt_problem(seed=0, kr=40, n_items=200, n=150):
    rng = np.random.default_rng(seed)
    ability, diff = rng.normal(size=kr), rng.normal(size=n_items)
    ref = (rng.random((kr, n_items)) < 1 / (1 + np.exp(-(ability[:, None] - diff[None, :])))).astype(float)
    s = (rng.random(n_items) < 1 / (1 + np.exp(1.0 + diff))).astype(float)  # target far below the references
    prior = BucketPrior.from_reference_scores(ref)
    b = prior.bucket_of_item[np.arange(n)]
    r = s[:n] - prior.bucket_means[b]
    D2 = prior.sqdist_rows(b)[:, b] / kr
    return r, D2, prior.bucket_sizes[b] * 1e-4


def test_fit_escapes_large_beta_plateau():
    """At beta = 1e4 all off-diagonal kernel entries underflow: dNLL/dbeta == 0 (a spurious stationary
    plateau). A single L-BFGS-B run started there (where the first projected step from (1, 1) lands on
    helm_lite_gsm) stays there; the multi-start fit finds the far better interior optimum."""
    from scipy.optimize import minimize

    from evalplan.core.sequential.hyper import LOG_BOUNDS
    r, D2, noise = _binary_irt_problem()
    corner = np.log([1e2, 1e4])
    _, g = neg_log_marginal_likelihood(corner, r, D2, noise)
    assert g[1] == 0.0
    single = minimize(neg_log_marginal_likelihood, corner, args=(r, D2, noise), jac=True, method="L-BFGS-B",
                      bounds=LOG_BOUNDS)
    assert math.exp(single.x[1]) == pytest.approx(1e4)
    a, bb, f = fit_alpha_beta(r, D2, noise, alpha0=1e2, beta0=1e4)
    assert bb < 100 and f < single.fun - 10
    a1, b1, f1 = fit_alpha_beta(r, D2, noise)  # paper start: same optimum
    assert abs(f1 - f) < 1e-6 and b1 == pytest.approx(bb, rel=1e-3)
    # never worse than any start, including the warm start
    fw = fit_alpha_beta(r, D2, noise, warm=(a, bb))[2]
    assert fw <= f + 1e-9
    assert fw <= neg_log_marginal_likelihood(np.log([a, bb]), r, D2, noise, with_grad=False) + 1e-9


def test_refit_passes_previous_hyperparameters_as_warm_start(monkeypatch):
    import evalplan.core.sequential.estimator as est_mod
    calls = []
    real = est_mod.fit_alpha_beta

    def spy(*args, **kw):
        calls.append(kw.get("warm"))
        return real(*args, **kw)

    monkeypatch.setattr(est_mod, "fit_alpha_beta", spy)
    rng = np.random.default_rng(21)
    prior, s, _ = gp_data(rng, n_items=80, kr=5)
    est = SequentialEstimator(prior, SessionConfig(method="bayesame", refit_every=10, epsilon1=0, epsilon2=0, max_items=30))
    hps = []
    while not est.stopped:
        (i,) = est.propose()
        est.observe(i, s[i])
        hps.append((est.hyperparameters["alpha"], est.hyperparameters["beta"]))
    assert calls[0] == (1.0, 1.0) and calls[1] == hps[18] and len(calls) == 3


def test_rs_mean_identical_scores_keep_a_positive_interval():
    rng = np.random.default_rng(22)
    prior = BucketPrior.from_reference_scores(rng.random((3, 1000)))
    est = SequentialEstimator(prior, SessionConfig(method="rs_mean", seed=0))  # default stopping rule
    for k in range(60):
        (i,) = est.propose()
        est.observe(i, 1.0)
        assert est.variance > 0.0
        if k == 29:  # 30 identical scores: Agresti-Coull p~ = 31.92 / 33.84
            pt = (30 + 1.92073) / (30 + 3.84146)
            assert math.sqrt(est.variance) > 0.5 * math.sqrt(pt * (1 - pt) / 33.84)
    assert not est.stopped  # the old s^2 = 0 interval had zero width and stopped at n = 30
    lo, hi = est.ci
    assert lo < 1.0 < hi
    # large n, non-degenerate: the floor does not bind (plain sample variance)
    x = (rng.random(500) < 0.5).astype(float)
    from evalplan.core.sequential.estimator import rs_mean_s2
    assert rs_mean_s2(x) == pytest.approx(x.var(ddof=1), rel=1e-12)
    assert 0.25 < rs_mean_s2(np.array([1.0])) < 0.35
