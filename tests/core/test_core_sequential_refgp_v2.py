"""``refgp_v2`` (``RefGPEstimator(mean="logit_shift", directions=64)``): the n-space GP with the logit-shift
mean, the MAP of the shift, an extrapolation case and coverage on a synthetic replay (deterministic seeds: cannot
flake)."""

from __future__ import annotations

import copy

import numpy as np
import pytest
from scipy.optimize import minimize_scalar
from scipy.special import expit

from evalplan.core.sequential import BucketPrior, SessionConfig, make_estimator
from evalplan.core.sequential.refgp import RefGPEstimator
from evalplan.core.sequential.refgp_means import DELTA_SD


def population(n_models: int, n_items: int, seed: int, kind: str = "binary",
               shifted: float | None = None) -> tuple[np.ndarray, np.ndarray]:
    """2PL scores (models x items) and the abilities; ``shifted``: row 0 gets ability
    ``max(other abilities) + shifted`` (a target above every other model)."""
    rng = np.random.default_rng(seed)
    theta = rng.normal(0, 1, n_models)
    b = rng.normal(0, 1.2, n_items)
    a = np.exp(0.3 * rng.normal(size=n_items))
    if shifted is not None:
        theta[0] = theta[1:].max() + shifted
    P = expit(a * (theta[:, None] - b))
    if kind == "binary":
        return (rng.random(P.shape) < P).astype(float), theta
    if kind == "ternary":
        return np.round(2 * np.clip(P + 0.2 * rng.normal(size=P.shape), 0, 1)) / 2, theta
    return np.clip(P + 0.1 * rng.normal(size=P.shape), 0, 1), theta


def session(prior: BucketPrior, target: np.ndarray, n: int, **config: object) -> RefGPEstimator:
    est = make_estimator(prior, SessionConfig(method="refgp_v2", epsilon2=0.0, **config))  # type: ignore[arg-type]
    assert isinstance(est, RefGPEstimator) and est.method == "refgp_v2"
    assert est.params == {"mean": "logit_shift", "variance": "model", "selection": "ivr", "directions": 64,
                          "rho_factor": 1.0, "rho_sd": 1.0, "max_fit_buckets": 384}
    while est.n_observed < n and not est.stopped:
        for i in est.propose():
            est.observe(i, target[i])
    return est


@pytest.mark.parametrize("kind", ["binary", "ternary", "continuous"])
def test_matches_the_n_space_gp_with_the_shifted_mean_and_delta_is_the_map(kind: str) -> None:
    Y, _ = population(16, 50, seed=4, kind=kind)
    prior = BucketPrior.from_reference_scores(Y[1:])
    est = session(prior, Y[0], 14)
    assert est.n_refits >= 2
    # delta: the MAP of the fractional-response likelihood of the observed scores (scaled to [0, 1])
    it = np.asarray(est.observed_items)
    logits = est._logits[prior.bucket_of_item[it]]
    y01 = np.clip((Y[0, it] - est._lo) / (est._hi - est._lo), 0, 1)

    def neg_post(d: float) -> float:
        z = logits + d
        return float(-np.sum(y01 * z - np.logaddexp(0, z)) + 0.5 * d * d / DELTA_SD ** 2)

    ref = minimize_scalar(neg_post, bounds=(-10, 10), method="bounded", options={"xatol": 1e-10}).x
    # delta is refit at the last refit (not after every item): recompute it on those items
    other = copy.deepcopy(est)
    other._refit_offset()
    assert other.delta == pytest.approx(ref, abs=1e-5)
    # E[R], Var[R] = the n-space GP over all items with mean mu(delta) + the linear kernel
    phi = est.features.phi[prior.bucket_of_item]
    omega = est.features.omega[prior.bucket_of_item]
    t0, t1, s2, r2, rho2 = np.exp(est._theta)
    P0inv = np.diag(np.concatenate([[t0, t1], np.full(phi.shape[1] - 2, s2)]))
    mu = est._lo + (est._hi - est._lo) * expit(est._logits + est.delta)
    mean = mu[prior.bucket_of_item] - prior.bucket_means[prior.bucket_of_item] + phi @ est.features.m0
    K = phi @ P0inv @ phi.T + np.diag(r2 * omega + rho2)
    C = it
    U = np.setdiff1d(np.arange(50), C)
    y = Y[0, C]
    KCC_inv = np.linalg.inv(K[np.ix_(C, C)])
    mu_U = mean[U] + K[np.ix_(U, C)] @ KCC_inv @ (y - mean[C])
    cov_U = K[np.ix_(U, U)] - K[np.ix_(U, C)] @ KCC_inv @ K[np.ix_(C, U)]
    assert est.estimate == pytest.approx((y.sum() + mu_U.sum()) / 50, abs=1e-9)
    assert est.variance == pytest.approx(cov_U.sum() / 50 ** 2, rel=1e-7)
    # rank-one state == a fresh factorization of the same statistics
    m, Sigma = est._m.copy(), est._Sigma.copy()
    est._install()
    assert np.allclose(m, est._m, atol=1e-9) and np.allclose(Sigma, est._Sigma, atol=1e-9)


@pytest.mark.parametrize("n_refs", [10, 80])
def test_runs_to_exhaustion_with_few_and_many_references(n_refs: int) -> None:
    Y, _ = population(n_refs + 1, 60, seed=n_refs)
    est = session(BucketPrior.from_reference_scores(Y[1:]), Y[0], 60)
    assert est.stop_reason == "exhausted" and len(set(est.observed_items)) == 60
    assert est.estimate == pytest.approx(Y[0].mean(), abs=1e-9) and est.variance == pytest.approx(0, abs=1e-12)


def test_extrapolation_a_target_above_every_reference() -> None:
    """A target 1.5 above the best reference's ability: the logit shift follows it (delta > 0) and the
    95% interval covers the truth at n = 25, 50 and 100."""
    Y, _ = population(51, 400, seed=11, shifted=1.5)
    refs, target = Y[1:], Y[0]
    prior = BucketPrior.from_reference_scores(refs)
    truth = target.mean()
    assert truth > refs.mean(axis=1).max()
    v2 = session(prior, target, 0)
    for n in (25, 50, 100):
        while v2.n_observed < n:
            for i in v2.propose():
                v2.observe(i, target[i])
        lo, hi = v2.ci
        assert lo <= truth <= hi
    assert v2.delta > 0.5


@pytest.mark.slow
def test_coverage_on_a_synthetic_replay_is_near_nominal() -> None:
    """30 held-out models of one population replayed as targets: the 95% interval covers >= 80% of
    them at n = 30 and 60 (deterministic seeds; the binomial sd at 30 targets is 4%)."""
    Y, _ = population(90, 250, seed=21)
    prior = BucketPrior.from_reference_scores(Y[30:])
    hits = {30: 0, 60: 0}
    for t in range(30):
        est = make_estimator(prior, SessionConfig(method="refgp_v2", epsilon2=0.0, seed=t))
        for n in hits:
            while est.n_observed < n:
                for i in est.propose():
                    est.observe(i, Y[t, i])
            lo, hi = est.ci
            hits[n] += int(lo <= Y[t].mean() <= hi)
    assert min(hits.values()) >= 24, hits
