"""The item-level session methods (``refgp_ivr``, ``proeval_bq``, ``fluid_irt``) against naive
closed forms, on binary, three-valued and continuous scores, with few and many references."""

from __future__ import annotations

import copy

import numpy as np
import pytest
from scipy.optimize import minimize_scalar
from scipy.special import expit

from evalplan.core.sequential import BucketPrior, SessionConfig, make_estimator
from evalplan.core.sequential.fluid_irt import FluidIRTEstimator
from evalplan.core.sequential.proeval_bq import ProEvalBQEstimator
from evalplan.core.sequential.refgp import RefGPEstimator

ITEM_METHODS = ("refgp_v3", "refgp_cal", "refgp_v2", "refgp_ivr", "refgp_dr", "proeval_bq", "fluid_irt")


def scores(kind: str, n_models: int, n_items: int, seed: int = 0) -> np.ndarray:
    """(models x items) scores from a 2PL population; ``kind`` binary, ternary or continuous."""
    rng = np.random.default_rng(seed)
    p = expit(rng.normal(0, 1, n_models)[:, None] * np.exp(0.3 * rng.normal(size=n_items))
              - rng.normal(0, 1, n_items))
    if kind == "binary":
        return (rng.random(p.shape) < p).astype(float)
    if kind == "ternary":
        return np.round(2 * np.clip(p + 0.2 * rng.normal(size=p.shape), 0, 1)) / 2
    return np.clip(p + 0.1 * rng.normal(size=p.shape), 0, 1)


def run(method: str, Y: np.ndarray, n: int, **config: object) -> tuple:
    prior = BucketPrior.from_reference_scores(Y[1:])
    est = make_estimator(prior, SessionConfig(method=method, epsilon2=0.0, **config))  # type: ignore[arg-type]
    target = Y[0]
    while est.n_observed < n and not est.stopped:
        for i in est.propose():
            est.observe(i, target[i])
    return est, target


@pytest.mark.parametrize("method", ITEM_METHODS)
@pytest.mark.parametrize("kind", ["binary", "ternary", "continuous"])
@pytest.mark.parametrize("n_models", [11, 81])
def test_runs_to_exhaustion_and_narrows(method: str, kind: str, n_models: int) -> None:
    Y = scores(kind, n_models, 60, seed=n_models)
    est, target = run(method, Y, 60)
    assert est.stopped and est.stop_reason == "exhausted" and est.n_observed == 60
    variances = [row["variance"] for row in est.trajectory]
    assert all(np.isfinite(variances)) and variances[-1] < variances[0]
    assert len(set(est.observed_items)) == 60
    if method != "proeval_bq":  # ProEval's estimate is the posterior mean of every item, not the observed one
        assert est.estimate == pytest.approx(target.mean(), abs=1e-9) and est.variance == pytest.approx(0, abs=1e-12)


@pytest.mark.parametrize("method", ITEM_METHODS)
def test_batches_are_distinct_unobserved_items(method: str) -> None:
    est, _ = run(method, scores("binary", 20, 50), 10, batch_size=4)
    batch = est.propose()
    assert len(batch) == 4 == len(set(batch)) and not set(batch) & set(est.observed_items)


def refgp_naive(est: RefGPEstimator) -> tuple[float, float]:
    """E[R], Var[R] by the n-space GP formulas: K = Phi P0^-1 Phi^T + diag(r2 omega + rho2) over all items."""
    phi = est.features.phi[est.prior.bucket_of_item]
    omega = est.features.omega[est.prior.bucket_of_item]
    t0, t1, s2, r2, rho2 = np.exp(est._theta)
    P0inv = np.diag(np.concatenate([[t0, t1], np.full(phi.shape[1] - 2, s2)]))
    mean = phi @ est.features.m0
    K = phi @ P0inv @ phi.T + np.diag(r2 * omega + rho2)
    C = np.asarray(est.observed_items)
    U = np.setdiff1d(np.arange(phi.shape[0]), C)
    y = np.asarray(est._scores)
    KCC_inv = np.linalg.inv(K[np.ix_(C, C)])
    mu_U = mean[U] + K[np.ix_(U, C)] @ KCC_inv @ (y - mean[C])
    cov_U = K[np.ix_(U, U)] - K[np.ix_(U, C)] @ KCC_inv @ K[np.ix_(C, U)]
    N = phi.shape[0]
    return (y.sum() + mu_U.sum()) / N, cov_U.sum() / N ** 2


@pytest.mark.parametrize("kind", ["binary", "continuous"])
def test_refgp_matches_the_n_space_gp_and_the_variance_reduction_is_exact(kind: str) -> None:
    Y = scores(kind, 15, 40, seed=3)
    est, target = run("refgp_ivr", Y, 12)
    assert est.n_refits >= 2  # hyperparameters learned as data arrive
    e, v = refgp_naive(est)
    assert est.estimate == pytest.approx(e, abs=1e-9) and est.variance == pytest.approx(v, rel=1e-7)
    # rank-one state == fresh factorization of the same statistics
    m, Sigma, d = est._m.copy(), est._Sigma.copy(), est._d.copy()
    est._install()
    assert np.allclose(m, est._m, atol=1e-9) and np.allclose(Sigma, est._Sigma, atol=1e-9)
    assert np.allclose(d, est._d, atol=1e-9)
    # the evidence is the n-space Gaussian likelihood (+ the hyperprior)
    from scipy.stats import multivariate_normal

    from evalplan.core.sequential.refgp import PRIOR_SDS, neg_log_evidence
    C = np.asarray(est.observed_items)
    phiC = est.features.phi[est.prior.bucket_of_item[C]]
    t0, t1, s2, r2, rho2 = np.exp(est._theta)
    P0inv = np.diag(np.concatenate([[t0, t1], np.full(phiC.shape[1] - 2, s2)]))
    cov = phiC @ P0inv @ phiC.T + np.diag(r2 * est.features.omega[est.prior.bucket_of_item[C]] + rho2)
    ll = multivariate_normal(phiC @ est.features.m0, cov).logpdf(np.asarray(est._scores))
    obs = np.flatnonzero(est._cnt)
    nle = neg_log_evidence(est._theta, est._phi[obs], est.features.omega[obs], est._cnt[obs], est._ysum[obs],
                           est._yysum[obs], est.features.m0, est.features.centers)
    pen = 0.5 * float((((est._theta - est.features.centers) / PRIOR_SDS) ** 2).sum())
    assert nle == pytest.approx(-ll + pen, rel=1e-8)
    # Delta_j = Var[R] now - Var[R] after observing j (no refit), for every candidate bucket
    delta = est.variance_reduction()
    N2 = est.n_items ** 2
    p = est.prior
    for b in np.flatnonzero(np.isfinite(delta))[:8]:
        j = int(next(i for i in p.items_by_bucket[p.bucket_offsets[b]:p.bucket_offsets[b + 1]]
                     if not est._observed[i]))
        other = copy.deepcopy(est)
        other._next_refit = 10 ** 9
        other.observe(j, target[j])
        assert (est.variance - other.variance) * N2 == pytest.approx(delta[b], rel=1e-6)
    chosen = est.propose()[0]
    assert delta[p.bucket_of_item[chosen]] == pytest.approx(np.max(delta[np.isfinite(delta)]))


def test_proeval_bq_is_proevals_arithmetic() -> None:
    """Naive ProEval (bq.py ``_get_posterior`` + ``_variance_improvement`` with explicit inverses)."""
    Y = scores("binary", 12, 45, seed=5)
    pre = Y[1:].T  # (items, models), ProEval's prediction matrix
    M = pre.shape[1]
    u = pre.mean(axis=1)
    X = ((pre.T - u) / np.sqrt(M - 1))  # (M, N) test_x
    y = Y[0]
    s2 = 0.3
    est = make_estimator(BucketPrior.from_reference_scores(Y[1:]), SessionConfig(method="proeval_bq", epsilon2=0.0))
    assert isinstance(est, ProEvalBQEstimator)
    labeled: list[int] = []
    K = np.eye(M)
    for _t in range(20):
        unl = [i for i in range(45) if i not in labeled]
        Q = X[:, unl].T
        v = X.T.sum(axis=0) @ K
        sc = s2 * (Q @ v) ** 2 / (1 + s2 * np.einsum("ij,ij->i", Q, Q @ K))
        best = unl[int(np.argmax(sc))]
        qk = (Q @ K)[int(np.argmax(sc))]
        K = K - s2 * np.outer(qk, qk) / (1 + s2 * float(X[:, best] @ K @ X[:, best]))
        assert est.propose() == [best]
        labeled.append(best)
        est.observe(best, y[best])
        Xc = X[:, labeled]
        kinv = np.linalg.inv(Xc @ Xc.T / s2 + np.eye(M))
        u_t = u + (X.T @ kinv @ Xc @ (y[labeled] - u[labeled])) / s2
        mu_x = X.mean(axis=1)
        assert est.estimate == pytest.approx(u_t.mean(), abs=1e-10)
        assert est.variance == pytest.approx(float(mu_x @ kinv @ mu_x), rel=1e-9)


def test_fluid_irt_ability_is_the_map_and_selection_the_max_information() -> None:
    Y = scores("binary", 30, 80, seed=7)
    est, target = run("fluid_irt", Y, 15)
    assert isinstance(est, FluidIRTEstimator)
    a, b = est.irt.a, est.irt.b
    it = np.asarray(est.observed_items)
    y = target[it]

    def neg_post(t: float) -> float:
        z = a[it] * (t - b[it])
        return float(-np.sum(y * z - np.logaddexp(0, z)) + 0.5 * t * t)

    ref = minimize_scalar(neg_post, bounds=(-4, 4), method="bounded", options={"xatol": 1e-10}).x
    assert est.theta == pytest.approx(ref, abs=1e-5)
    P = expit(a * (est.theta - b))
    info = np.where(est._observed, -np.inf, a * a * P * (1 - P))
    assert est.propose() == [int(np.argmax(info))]
    U = ~est._observed
    assert est.estimate == pytest.approx((y.sum() + P[U].sum()) / 80)


def test_hyperparameters_are_for_bayesame_methods_only() -> None:
    with pytest.raises(ValueError, match="hyperparameters"):
        SessionConfig(method="refgp_ivr", hyperparameters={"alpha": 1.0}).validate()
