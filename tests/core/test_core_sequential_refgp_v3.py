"""``refgp_v3`` (``RefGPEstimator(mean="evidence_mix", variance="calibrated", directions=64)``): the shifted and
unshifted prior means averaged by their prequential evidence, and the variance calibrated by replaying held-out
references (evalplan.core.sequential.calibration). Deterministic seeds."""

from __future__ import annotations

from functools import partial

import numpy as np
import pytest
from scipy.special import expit

from evalplan.core.sequential import BucketPrior, SessionConfig, make_estimator
from evalplan.core.sequential.base import derived
from evalplan.core.sequential.calibration import (
    MIN_REFERENCES,
    calibration,
    factor_at,
    held_out,
    inflation_curve,
    standardized_errors,
)
from evalplan.core.sequential.config import REFGP_VARIANTS
from evalplan.core.sequential.refgp import RefGPEstimator
from tests.core.test_core_sequential_refgp_v2 import population

# refgp_v3's model without the calibration (what the calibration replays, and active_design's working model)
V3_MODEL = partial(RefGPEstimator, **{**REFGP_VARIANTS["refgp_v3"], "variance": "model"})
V3_MODEL_PARAMS = {"mean": "evidence_mix", "variance": "model", "selection": "ivr", "directions": 64,
                   "rho_factor": 1.0, "rho_sd": 1.0, "max_fit_buckets": 384}


def drive(est: object, target: np.ndarray, n: int) -> None:
    while est.n_observed < n and not est.stopped:  # type: ignore[attr-defined]
        for i in est.propose():  # type: ignore[attr-defined]
            est.observe(i, target[i])  # type: ignore[attr-defined]


@pytest.mark.parametrize("kind", ["binary", "ternary", "continuous"])
def test_the_two_means_and_their_prequential_average(kind: str) -> None:
    """E[R] = w E_shift + (1 - w) E_unshifted, each the n-space GP posterior of its prior mean (the
    logit-shifted one, refgp_v2's, and the references' mean, refgp_ivr's), with shared hyperparameters;
    Var[R] = their common variance + w (1 - w) (E_shift - E_unshifted)^2; w = the prequential likelihood
    ratio of the one-step-ahead predictions (recomputed here by replaying the same session)."""
    Y, _ = population(16, 50, seed=4, kind=kind)
    prior = BucketPrior.from_reference_scores(Y[1:])
    est = V3_MODEL(prior, SessionConfig(method="refgp_v3", epsilon2=0.0))
    drive(est, Y[0], 14)
    assert est.n_refits >= 2
    phi = est.features.phi[prior.bucket_of_item]
    omega = est.features.omega[prior.bucket_of_item]
    t0, t1, s2, r2, rho2 = np.exp(est._theta)
    P0inv = np.diag(np.concatenate([[t0, t1], np.full(phi.shape[1] - 2, s2)]))
    K = phi @ P0inv @ phi.T + np.diag(r2 * omega + rho2)
    C = np.asarray(est.observed_items)
    U = np.setdiff1d(np.arange(50), C)
    y = Y[0, C]
    KCC_inv = np.linalg.inv(K[np.ix_(C, C)])
    base = phi @ est.features.m0
    mu = est._lo + (est._hi - est._lo) * expit(est._logits + est.delta)
    shifted = mu[prior.bucket_of_item] - prior.bucket_means[prior.bucket_of_item] + base
    means = []
    for mean in (shifted, base):
        mu_U = mean[U] + K[np.ix_(U, C)] @ KCC_inv @ (y - mean[C])
        means.append((y.sum() + mu_U.sum()) / 50)
    cov_U = K[np.ix_(U, U)] - K[np.ix_(U, C)] @ KCC_inv @ K[np.ix_(C, U)]
    w = est.weight_shifted
    assert 0.0 < w < 1.0
    assert est.estimate == pytest.approx(w * means[0] + (1 - w) * means[1], abs=1e-9)
    assert est.variance == pytest.approx(cov_U.sum() / 50 ** 2 + w * (1 - w) * (means[0] - means[1]) ** 2,
                                         rel=1e-7)
    # the weight: replay the session item by item, scoring each model's prediction before the item
    again = V3_MODEL(prior, SessionConfig(method="refgp_v3", epsilon2=0.0))
    score = np.zeros(2)
    for i in C:
        b = prior.bucket_of_item[i]
        pv = again._d[b] + again._nu[b]
        preds = (again._off[b] + again._phi[b] @ again._m, again._phi[b] @ again._m_alt)
        score -= 0.5 * (Y[0, i] - np.array(preds)) ** 2 / pv
        again.observe(int(i), Y[0, i])
    assert again.weight_shifted == pytest.approx(1 / (1 + np.exp(score[1] - score[0])), rel=1e-9)
    assert again.estimate == pytest.approx(est.estimate, abs=1e-12)


def test_inflation_curve_is_the_quantile_of_the_standardized_errors() -> None:
    rng = np.random.default_rng(0)
    wide = 3.0 * rng.normal(size=(8, 200))
    c = inflation_curve(wide, 0.95)
    assert c.shape == (200,) and np.all(np.abs(c[20:] - 3.0) < 0.6)
    n, win = 100, 1.25  # c(n) = 95% quantile of |z| over n/1.25 .. n*1.25, over the normal quantile
    vals = np.abs(wide[:, int(np.floor(n / win)) - 1:int(np.ceil(n * win))]).ravel()
    assert c[n - 1] == pytest.approx(np.quantile(vals, 0.95) / 1.959963984540054)
    assert np.all(inflation_curve(0.2 * rng.normal(size=(8, 50))) == 1.0)  # never narrows
    assert inflation_curve(np.zeros((0, 0))).tolist() == [1.0]
    assert factor_at(c, 0) == 1.0 and factor_at(c, 10_000) == c[-1]


def test_pseudo_targets_include_the_best_reference() -> None:
    means = np.linspace(0, 1, 40)
    h = held_out(means, 8, seed=0)
    assert len(h) == 8 == len(set(h.tolist())) and {39, 38} <= set(h.tolist())
    assert len(held_out(means[:9], 8, seed=0)) == 3  # at most a third of the references


def test_v3_is_the_model_with_its_variance_scaled_and_the_same_items() -> None:
    Y, _ = population(31, 120, seed=3)
    prior = BucketPrior.from_reference_scores(Y[1:])
    cfg = SessionConfig(method="refgp_v3", epsilon2=0.0)
    v3 = make_estimator(prior, cfg)
    assert isinstance(v3, RefGPEstimator) and v3.method == "refgp_v3" and v3.params["variance"] == "calibrated"
    model = V3_MODEL(prior, cfg)
    assert model.params == V3_MODEL_PARAMS and model.variance_inflation == 1.0
    curve = calibration(prior, V3_MODEL, "refgp_v3")
    assert curve is v3._curve and curve.shape[0] >= 1 and np.all(curve >= 1.0)
    assert any(k.startswith("calibration:refgp_v3") for k in prior._derived_cache)  # type: ignore[attr-defined]
    for _ in range(40):
        items = v3.propose()
        assert items == model.propose()
        for i in items:
            v3.observe(i, Y[0, i])
            model.observe(i, Y[0, i])
        c = factor_at(curve, v3.n_observed)
        assert v3.estimate == pytest.approx(model.estimate, abs=1e-12)
        assert v3.variance == pytest.approx(c * c * model.variance, rel=1e-9)
    assert make_estimator(prior, cfg)._curve is curve  # computed once per prior


def test_calibration_replays_held_out_references_with_their_true_errors() -> None:
    Y, _ = population(24, 80, seed=9)
    prior = BucketPrior.from_reference_scores(Y)
    Z = standardized_errors(prior, V3_MODEL, "refgp_v3", n_pseudo=4, n_steps=30)
    assert Z.shape == (4, 30) and np.isfinite(Z[:, :29]).all()
    h = held_out(Y.mean(axis=1), 4, seed=0)
    keep = np.setdiff1d(np.arange(24), h)
    est = V3_MODEL(BucketPrior.from_reference_scores(Y[keep]), SessionConfig(method="refgp_v3",
                       stop={"half_width": 0.0, "level": 0.95, "min_items": 1}))
    drive(est, Y[h[0]], 10)
    assert Z[0, 9] == pytest.approx((est.estimate - Y[h[0]].mean()) / np.sqrt(est.variance))


def test_few_references_are_not_calibrated_and_sessions_still_run() -> None:
    Y, _ = population(MIN_REFERENCES, 40, seed=2)
    prior = BucketPrior.from_reference_scores(Y[1:])
    est = make_estimator(prior, SessionConfig(method="refgp_v3", epsilon2=0.0))
    assert est._curve.tolist() == [1.0]
    drive(est, Y[0], 40)
    assert est.stop_reason == "exhausted" and est.variance == pytest.approx(0, abs=1e-12)
    assert derived(prior, "calibration:refgp_v3:0.95:8:300:0") is not None


@pytest.mark.slow
def test_coverage_on_a_synthetic_replay_is_near_nominal() -> None:
    """30 held-out models replayed as targets: the calibrated 95% interval covers >= 80% at n = 30, 60."""
    Y, _ = population(90, 250, seed=21)
    prior = BucketPrior.from_reference_scores(Y[30:])
    hits = {30: 0, 60: 0}
    for t in range(30):
        est = make_estimator(prior, SessionConfig(method="refgp_v3", epsilon2=0.0, seed=t))
        for n in hits:
            drive(est, Y[t], n)
            lo, hi = est.ci
            hits[n] += int(lo <= Y[t].mean() <= hi)
    assert min(hits.values()) >= 24, hits


def test_refgp_cal_is_refgp_ivr_with_the_calibrated_variance() -> None:
    Y, _ = population(31, 120, seed=6)
    prior = BucketPrior.from_reference_scores(Y[1:])
    cal = make_estimator(prior, SessionConfig(method="refgp_cal", epsilon2=0.0))
    ivr = make_estimator(prior, SessionConfig(method="refgp_ivr", epsilon2=0.0))
    assert cal.method == "refgp_cal" and ivr.method == "refgp_ivr"
    assert cal._curve is calibration(prior, RefGPEstimator, "refgp_cal")
    for _ in range(30):
        items = cal.propose()
        assert items == ivr.propose()
        for i in items:
            cal.observe(i, Y[0, i])
            ivr.observe(i, Y[0, i])
        assert cal.estimate == ivr.estimate
        assert cal.variance == pytest.approx(cal.variance_inflation ** 2 * ivr.variance, rel=1e-12)
