"""Tests of evalplan.core.sequential.multi_target (multi-target BayesAME, papers/004 §3.2) against a naive dense model."""

from __future__ import annotations

import math

import numpy as np
import pytest

from evalplan.core.sequential.config import SessionConfig
from evalplan.core.sequential.estimator import SequentialEstimator
from evalplan.core.sequential.multi_target import MultiTargetEstimator, kernel_kinds
from evalplan.core.sequential.prior import BucketPrior

TOL = 1e-9


# ---------------------------------------------------------------------------- naive reference
def naive_kernel(kind, alpha, beta, d2_scaled):
    x = beta * d2_scaled
    if kind == "se":
        return alpha * np.exp(-x)
    r = math.sqrt(3.0) * np.sqrt(x)
    return alpha * (1.0 + r) * np.exp(-r)


class NaiveMT:
    """Dense textbook LMC: full (T*B) prior covariance, H (n x T*B), D (n x n), posterior via solve."""

    def __init__(self, ref, kinds, alpha, beta, W, sigma2):
        ref = np.asarray(ref, float)
        self.Kr, self.N = ref.shape
        keys = {}
        self.bucket = np.array([keys.setdefault(tuple(ref[:, i]), len(keys)) for i in range(self.N)])
        self.B = B = len(keys)
        phi = np.zeros((B, self.Kr))
        for key, b in keys.items():
            phi[b] = key
        self.Nb = np.bincount(self.bucket, minlength=B).astype(float)
        self.T = T = W.shape[1]
        self.mu = np.tile(phi.mean(1), T)  # (T*B,)
        d2s = ((phi[:, None, :] - phi[None, :, :]) ** 2).sum(-1) / self.Kr
        self.Sigma = np.zeros((T * B, T * B))
        for l, kind in enumerate(kinds):
            self.Sigma += np.kron(np.outer(W[l], W[l]), naive_kernel(kind, alpha[l], beta[l], d2s))
        self.sigma2 = sigma2

    def _idx(self, t, i):
        return t * self.B + self.bucket[i]

    def posterior(self, obs):
        if not obs:
            return self.mu.copy(), self.Sigma.copy()
        H = np.zeros((len(obs), self.T * self.B))
        for j, (t, i, _s) in enumerate(obs):
            H[j, self._idx(t, i)] = 1.0
        D = np.diag([self.sigma2 * self.Nb[self.bucket[i]] for (_t, i, _s) in obs])
        s = np.array([o[2] for o in obs])
        G = H @ self.Sigma @ H.T + D
        SH = self.Sigma @ H.T
        mu = self.mu + SH @ np.linalg.solve(G, s - H @ self.mu)
        Sig = self.Sigma - SH @ np.linalg.solve(G, SH.T)
        return mu, Sig

    def est_var(self, obs):
        mu, Sig = self.posterior(obs)
        est, var = np.zeros(self.T), np.zeros(self.T)
        for t in range(self.T):
            nb = np.zeros(self.B)
            ssum = 0.0
            for (tt, i, s) in obs:
                if tt == t:
                    nb[self.bucket[i]] += 1
                    ssum += s
            w = self.Nb - nb
            sl = slice(t * self.B, (t + 1) * self.B)
            est[t] = (ssum + w @ mu[sl]) / self.N
            var[t] = (self.sigma2 * w @ self.Nb + w @ Sig[sl, sl] @ w) / self.N ** 2
        return est, var

    def nll(self, obs):
        idx = [self._idx(t, i) for (t, i, _s) in obs]
        G = self.Sigma[np.ix_(idx, idx)] + np.diag([self.sigma2 * self.Nb[self.bucket[i]] for (_t, i, _s) in obs])
        r = np.array([o[2] for o in obs]) - self.mu[idx]
        _sign, logdet = np.linalg.slogdet(G)
        return 0.5 * r @ np.linalg.solve(G, r) + 0.5 * logdet + 0.5 * len(obs) * math.log(2 * math.pi)


def make_data(seed=0, N=40, Kr=3, T=3, binary_ref=False, rho=0.9):
    rng = np.random.default_rng(seed)
    ref = (rng.random((Kr, N)) < 0.5).astype(float) if binary_ref else np.round(rng.random((Kr, N)), 3)
    base = ref.mean(0)
    shared = rng.standard_normal(N)
    truth = np.clip(base[None, :] + 0.15 * (rho * shared[None, :] + (1 - rho) * rng.standard_normal((T, N))), 0, 1)
    return ref, truth


def fixed_hp(T, L, seed=3):
    rng = np.random.default_rng(seed)
    return dict(alpha=rng.uniform(0.3, 1.5, L), beta=rng.uniform(0.5, 3.0, L),
                weights=rng.standard_normal((L, T)), sigma2=0.02)


def make_est(ref, T, L=2, hp=None, continuous=True, **cfg):
    cfg.setdefault("refit_every", 0)
    cfg.setdefault("method", "bayesame")
    est = MultiTargetEstimator(BucketPrior.from_reference_scores(ref), SessionConfig(**cfg), T, n_latent=L,
                               continuous=continuous)
    if hp is not None:
        est.set_hyperparameters(**hp)
    return est


def naive_for(ref, est):
    hp = est.hyperparameters
    return NaiveMT(ref, hp["kinds"], hp["alpha"], hp["beta"], hp["weights"], hp["sigma2"])


def run(est, truth, steps=None):
    k = 0
    while not est.all_stopped and (steps is None or k < steps):
        pairs = est.propose()
        if not pairs:
            break
        for t, i in pairs:
            if not est.stopped[t]:
                est.observe(t, i, truth[t, i])
                k += 1
    return est


# ---------------------------------------------------------------------------- posterior exactness
def test_kernel_kinds_half_se_half_matern():
    assert kernel_kinds(2) == ["se", "matern32"]
    assert kernel_kinds(4) == ["se", "se", "matern32", "matern32"]
    assert kernel_kinds(1) == ["se"]


@pytest.mark.parametrize("binary_ref,L", [(False, 2), (True, 2), (False, 3), (True, 4)])
def test_estimate_variance_match_naive_every_step(binary_ref, L):
    T = 3
    ref, truth = make_data(seed=1, N=36, T=T, binary_ref=binary_ref)
    est = make_est(ref, T, L=L, hp=fixed_hp(T, L), epsilon1=0, epsilon2=0, max_items=12)
    naive = naive_for(ref, est)
    e0, v0 = naive.est_var([])
    np.testing.assert_allclose(est.estimates, e0, atol=TOL)
    np.testing.assert_allclose(est.variances, v0, atol=TOL)
    steps = 0
    while not est.all_stopped:
        for t, i in est.propose():
            if est.stopped[t]:
                continue
            est.observe(t, i, truth[t, i])
            e, v = naive.est_var(est.observations)
            np.testing.assert_allclose(est.estimates, e, rtol=0, atol=TOL)
            np.testing.assert_allclose(est.variances, v, rtol=0, atol=TOL)
            steps += 1
    assert steps == 3 * 12 and list(est.stop_reasons) == ["max_items"] * 3


def test_information_gain_matches_naive_variance_reduction():
    T, L = 2, 2
    ref, truth = make_data(seed=2, N=30, T=T)
    est = make_est(ref, T, L=L, hp=fixed_hp(T, L, seed=5))
    run(est, truth, steps=10)
    naive = naive_for(ref, est)
    obs = est.observations
    _e, v = naive.est_var(obs)
    p = est.prior
    for t in range(T):
        ig = est.information_gain(t)
        for i in range(0, 30, 3):
            b = p.bucket_of_item[i]
            if (t, i) in {(o[0], o[1]) for o in obs}:
                assert ig[b] == -np.inf
                continue
            _e2, v2 = naive.est_var(obs + [(t, i, 0.123)])  # posterior variance does not depend on the value
            assert ig[b] == pytest.approx(0.5 * math.log(v[t] / v2[t]), rel=1e-6, abs=1e-9)


def test_single_target_equals_sequential_estimator():
    # T = 1 with L = 1 (one squared-exponential latent GP, w = 1) is exactly the single-target kernel
    # alpha exp(-beta/K_r d^2); L = 2 with w = (1, 0) switches the Matern-3/2 part off and must agree too.
    ref, truth = make_data(seed=4, N=40, T=1)
    hp = {"alpha": 0.7, "beta": 2.0, "sigma2": 0.01}
    cfg = SessionConfig(method="bayesame", hyperparameters=hp, refit_every=0, epsilon1=0, epsilon2=0)
    prior = BucketPrior.from_reference_scores(ref)
    for L, W in ((1, np.ones((1, 1))), (2, np.array([[1.0], [0.0]]))):
        single = SequentialEstimator(prior, cfg)
        multi = MultiTargetEstimator(prior, cfg, 1, n_latent=L, continuous=True)
        multi.set_hyperparameters(weights=W)
        assert multi.hyperparameters["sigma2"] == 0.01
        np.testing.assert_allclose(multi.information_gain(0), single.information_gain(), atol=TOL)
        for _ in range(15):
            t, i = multi.propose()[0]  # initial random items, then round-robin IG
            single.observe(i, truth[0, i])
            multi.observe(t, i, truth[0, i])
            assert multi.estimates[0] == pytest.approx(single.estimate, abs=TOL)
            assert multi.variances[0] == pytest.approx(single.variance, abs=TOL)
            ig_s, ig_m = single.information_gain(), multi.information_gain(0)
            finite = np.isfinite(ig_s)
            assert np.array_equal(finite, np.isfinite(ig_m))
            np.testing.assert_allclose(ig_m[finite], ig_s[finite], atol=1e-9)


# ---------------------------------------------------------------------------- selection order
def test_initial_random_phase_then_round_robin():
    T, N, seed = 3, 50, 7
    ref, truth = make_data(seed=3, N=N, T=T)
    est = make_est(ref, T, hp=fixed_hp(T, 2), seed=seed, epsilon1=0, epsilon2=0)
    assert est.selection == "information_gain"
    init = [int(i) for i in np.random.default_rng([seed, 0]).choice(N, size=5, replace=False)]
    assert est.init_items == init
    pairs = est.propose()
    assert pairs == [(t, i) for i in init for t in range(T)]  # same 10% items for every target
    for t, i in pairs[:4]:
        est.observe(t, i, truth[t, i])
    assert est.propose() == pairs[4:]  # still in the initial phase: the remaining initial pairs
    for t, i in pairs[4:]:
        est.observe(t, i, truth[t, i])
    assert not est.in_init_phase()
    order = []
    for _ in range(7):
        (t, i), = est.propose()
        b = est.prior.bucket_of_item[i]
        ig = est.information_gain(t)
        assert ig[b] == ig.max()  # max-information-gain item of that target
        assert not est._obs[t, i]
        order.append(t)
        est.observe(t, i, truth[t, i])
    assert order == [0, 1, 2, 0, 1, 2, 0]
    # batch_size = 2: the next two targets in the cycle, one item each
    est2 = make_est(ref, T, hp=fixed_hp(T, 2), seed=seed, epsilon1=0, epsilon2=0, batch_size=2)
    for t, i in est2.propose():
        est2.observe(t, i, truth[t, i])
    assert [t for t, _ in est2.propose()] == [0, 1]


def test_round_robin_skips_stopped_target_and_random_regime():
    T = 3
    ref, truth = make_data(seed=5, N=40, T=T)
    est = make_est(ref, T, hp=fixed_hp(T, 2), epsilon1=0, epsilon2=0, max_items=8)
    run(est, truth, steps=12)  # initial phase: 4 items x 3 targets
    extra = [i for i in range(40) if not est._obs[1, i]][:4]
    for i in extra:  # target 1 evaluated off-proposal up to max_items
        est.observe(1, i, truth[1, i])
    assert est.stopped[1] and est.stop_reasons[1] == "max_items"
    order = []
    for _ in range(4):
        (t, i), = est.propose()
        order.append(t)
        est.observe(t, i, truth[t, i])
    assert 1 not in order and order[:2] == [2, 0]  # pointer moved past the last observed target (1)
    # shared buckets (B < N - n0): random selection, as in the single-target rule with N0 = 10
    ref_b, truth_b = make_data(seed=5, N=60, T=2, binary_ref=True)
    est_b = make_est(ref_b, 2)
    assert not est_b.unique_regime and est_b.selection == "random"
    run(est_b, truth_b, steps=20)
    assert est_b.n_observed.sum() == 20


# ---------------------------------------------------------------------------- stopping
def test_per_target_stopping():
    T = 3
    ref, truth = make_data(seed=6, N=60, T=T)
    # loose thresholds: a target converges as soon as its initial items are done and W iterations passed
    est = make_est(ref, T, hp=fixed_hp(T, 2), epsilon1=1.0, epsilon2=10.0, window=8)
    init_n = len(est.init_items)  # 6
    pairs = est.propose()
    for t, i in pairs:
        est.observe(t, i, truth[t, i])
    assert not est.stopped.any()  # 6 < W = 8 iterations each
    (t, i), = est.propose()
    est.observe(t, i, truth[t, i])
    (t, i), = est.propose()
    est.observe(t, i, truth[t, i])
    assert est.stopped.tolist() == [False, False, False]
    assert est.n_observed.tolist() == [init_n + 1, init_n + 1, init_n]
    (t, i), = est.propose()
    assert t == 2
    est.observe(t, i, truth[t, i])
    assert est.stopped.tolist() == [False, False, False]
    (t, i), = est.propose()
    est.observe(t, i, truth[t, i])
    assert est.stopped.tolist() == [True, False, False] and est.stop_reasons[0] == "converged"
    assert not est.all_stopped
    with pytest.raises(ValueError, match="stopped"):
        est.observe(0, next(j for j in range(60) if not est._obs[0, j]), 0.5)
    assert [p[0] for p in est.propose()] == [1]
    run(est, truth)
    assert est.all_stopped and est.stop_reasons == ["converged"] * 3 and est.propose() == []
    assert est.n_observed.tolist() == [8, 8, 8]
    # trajectory: one entry per observation, for the observed target
    assert len(est.trajectory) == 24
    e = est.trajectory[-1]
    assert set(e) == {"target", "n", "estimate", "variance", "ci"}
    assert e["target"] == 2 and e["n"] == 8


def test_stop_requires_both_conditions_and_exhaustion():
    T = 2
    ref, truth = make_data(seed=7, N=20, T=T)
    est = make_est(ref, T, hp=fixed_hp(T, 2), epsilon1=1.0, epsilon2=1e-9, window=2)
    while not est.all_stopped:
        for t, i in est.propose():
            est.observe(t, i, truth[t, i])
            # eps1 is met from the start, the CI width only once the target has seen every item
            assert est.stopped[t] == (est.n_observed[t] == 20)
    assert est.n_observed.tolist() == [20, 20]
    # at N items the variance is 0, so the two-condition rule (checked first) fires together with exhaustion
    assert set(est.stop_reasons) <= {"converged", "exhausted"}
    assert np.allclose(est.estimates, truth.mean(1), atol=1e-12)
    assert np.all(est.variances < 1e-20)
    lo, hi = est.cis[0]
    assert lo <= est.estimates[0] <= hi


# ---------------------------------------------------------------------------- refit
def test_adamw_refit_lowers_nll_and_posterior_stays_exact():
    T = 3
    ref, truth = make_data(seed=8, N=80, T=T)
    est = make_est(ref, T, refit_every=50, epsilon1=0, epsilon2=0, continuous=False)
    assert est.learning_rate == 0.01 and est.hyperparameters["sigma2"] == 0.1
    hp0 = est.hyperparameters
    assert np.all(hp0["alpha"] == 1.0) and np.all(hp0["beta"] == 1.0)
    assert 0.02 < np.std(hp0["weights"]) < 0.5  # w ~ N(0, 0.01)
    run(est, truth, steps=50)
    assert est.n_refits == 1
    rec = est.refit_history[0]
    obs = est.observations[:50]
    kinds = est.hyperparameters["kinds"]
    before = NaiveMT(ref, kinds, rec["before"]["alpha"], rec["before"]["beta"], rec["before"]["weights"],
                     rec["before"]["sigma2"]).nll(obs)
    after_h = est.hyperparameters
    after = NaiveMT(ref, kinds, after_h["alpha"], after_h["beta"], after_h["weights"], after_h["sigma2"]).nll(obs)
    assert rec["nll_before"] == pytest.approx(before, rel=1e-9)
    assert rec["nll_after"] == pytest.approx(after, rel=1e-9)
    assert after < before - 1.0
    assert est.neg_log_marginal_likelihood() == pytest.approx(after, rel=1e-9)
    # the rebuilt posterior is the exact one under the new hyperparameters
    run(est, truth, steps=5)
    e, v = naive_for(ref, est).est_var(est.observations)
    np.testing.assert_allclose(est.estimates, e, atol=TOL)
    np.testing.assert_allclose(est.variances, v, atol=TOL)


def test_replay_is_deterministic():
    T = 2
    ref, truth = make_data(seed=9, N=70, T=T)

    def session(seed):
        return run(make_est(ref, T, refit_every=30, seed=seed, max_items=40, epsilon1=0, epsilon2=0), truth)

    a, b = session(3), session(3)
    assert a.observations == b.observations
    assert a.trajectory == b.trajectory
    for k in ("alpha", "beta", "weights"):
        assert np.array_equal(a.hyperparameters[k], b.hyperparameters[k])
    assert a.n_refits == b.n_refits >= 2
    # replaying the observation sequence into a fresh estimator reproduces the state and the proposals
    c = make_est(ref, T, refit_every=30, seed=3, max_items=40, epsilon1=0, epsilon2=0)
    for t, i, s in a.observations[:45]:
        c.observe(t, i, s)
    d = make_est(ref, T, refit_every=30, seed=3, max_items=40, epsilon1=0, epsilon2=0)
    for t, i, s in a.observations[:45]:
        d.observe(t, i, s)
    assert c.propose() == d.propose()
    assert np.array_equal(c.estimates, d.estimates) and np.array_equal(c.variances, d.variances)
    assert c.trajectory == a.trajectory[:45]
    assert session(4).init_items != a.init_items


# ---------------------------------------------------------------------------- correlation
def test_correlated_targets_share_information():
    T, L = 2, 2
    ref, truth = make_data(seed=10, N=40, T=T)
    items = [3, 11, 17, 25, 31]

    def after_target0(W):
        est = make_est(ref, T, L=L, hp=dict(alpha=[1.0, 0.5], beta=[1.0, 2.0], weights=W, sigma2=0.01))
        v0 = est.variances.copy()
        e0 = est.estimates.copy()
        for i in items:
            est.observe(0, i, truth[0, i])
        return est, v0, e0

    corr, v0, _ = after_target0(np.array([[1.0, 0.9], [0.3, 0.2]]))
    assert corr.variances[1] < 0.8 * v0[1]  # target B learns from target A's items
    assert corr.n_observed.tolist() == [5, 0]
    e, v = naive_for(ref, corr).est_var(corr.observations)
    np.testing.assert_allclose(corr.variances, v, atol=TOL)
    indep, v0i, e0i = after_target0(np.array([[1.0, 0.0], [0.0, 1.0]]))
    assert indep.variances[1] == pytest.approx(v0i[1], abs=1e-14)  # independent latent GPs: no transfer
    assert indep.estimates[1] == pytest.approx(e0i[1], abs=1e-14)
    assert indep.variances[0] < v0i[0]


# ---------------------------------------------------------------------------- errors
def test_errors():
    ref, truth = make_data(seed=11, N=20, T=2)
    est = make_est(ref, 2)
    est.observe(0, 3, 0.5)
    with pytest.raises(ValueError, match="already observed"):
        est.observe(0, 3, 0.5)
    est.observe(1, 3, 0.5)  # same item, other target: fine
    for args, msg in (((2, 0, 0.1), "target"), ((-1, 0, 0.1), "target"), ((0, 20, 0.1), "item"),
                      ((0, 1.5, 0.1), "item"), ((True, 1, 0.1), "target"), ((0, 1, float("nan")), "score"),
                      ((0, 1, "x"), "score")):
        with pytest.raises(ValueError, match=msg):
            est.observe(*args)
    prior = BucketPrior.from_reference_scores(ref)
    with pytest.raises(ValueError, match="method"):
        MultiTargetEstimator(prior, SessionConfig(method="rs_mean"), 2)
    with pytest.raises(ValueError, match="n_targets"):
        MultiTargetEstimator(prior, SessionConfig(method="bayesame"), 0)
    with pytest.raises(ValueError, match="weights"):
        est.set_hyperparameters(weights=np.ones((3, 2)))
