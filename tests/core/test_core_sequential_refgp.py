"""The refgp family as one class: ``RefGPEstimator(prior, config, mean=, variance=, selection=, directions=)``.
The presets keep their former names and behaviour (their own test files); here: every valid combination runs,
non-preset combinations compose as documented, the floor follows ``directions``, and invalid sets are refused
with an error naming ``method_params`` (deterministic seeds)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from test_core_sequential_refgp_v2 import population

from evalplan.core.sequential import BucketPrior, SessionConfig, make_estimator
from evalplan.core.sequential.calibration import calibration, factor_at
from evalplan.core.sequential.config import REFGP_CHOICES, REFGP_VARIANTS, refgp_params, refgp_variant
from evalplan.core.sequential.estimator import rs_mean_s2
from evalplan.core.sequential.methods import ALIASES
from evalplan.core.sequential.refgp import PSEUDO_COUNT, RefGPEstimator, floor_settings
from tests.core.test_core_sequential_methods import refgp_naive

COMBINATIONS = [(m, v, s) for m, v, s in itertools.product(*REFGP_CHOICES.values())
                if not (v == "design_loo" and s != "random")]


def refgp_config(**params: object) -> SessionConfig:
    return SessionConfig(method="refgp", epsilon2=0.0, method_params=dict(params))


def drive(est: RefGPEstimator, target: np.ndarray, n: int) -> None:
    while est.n_observed < n and not est.stopped:
        for i in est.propose():
            est.observe(i, float(target[i]))


def test_fifteen_combinations_and_the_one_refused() -> None:
    assert len(COMBINATIONS) == 15  # 3 means x (model | calibrated) x (ivr | random) + 3 means x design_loo/random
    for name, params in REFGP_VARIANTS.items():
        assert refgp_variant(params) == name and (params["mean"], params["variance"], params["selection"]) in COMBINATIONS
    assert refgp_variant({"mean": "logit_shift", "selection": "random"}) is None  # the rest: refgp_v3's


@pytest.mark.parametrize("mean,variance,selection", COMBINATIONS)
@pytest.mark.parametrize("directions", [4, 32])
def test_every_combination_runs_to_exhaustion(mean: str, variance: str, selection: str, directions: int) -> None:
    Y, _ = population(13, 40, seed=directions, kind="ternary")
    prior = BucketPrior.from_reference_scores(Y[1:])
    est = make_estimator(prior, refgp_config(mean=mean, variance=variance, selection=selection,
                                             directions=directions))
    assert isinstance(est, RefGPEstimator) and est.method == "refgp"  # no preset has 4 or 32 directions
    drive(est, Y[0], 40)
    assert est.stop_reason == "exhausted" and sorted(est.observed_items) == list(range(40))
    variances = [row["variance"] for row in est.trajectory]
    assert all(np.isfinite(variances)) and variances[-1] < variances[0]
    assert est.estimate == pytest.approx(Y[0].mean(), abs=1e-9) and est.variance == pytest.approx(0, abs=1e-12)
    assert est.hyperparameters["n_features"] <= directions
    assert ("delta" in est.hyperparameters) == (mean != "reference")
    keys = [k for k in prior._derived_cache if k.startswith("calibration:")]  # type: ignore[attr-defined]
    assert len(keys) == (variance == "calibrated")
    if keys:  # named by the uncalibrated parameter set, never by a preset's name
        assert keys[0].startswith(f"calibration:refgp[directions={directions},max_fit_buckets=")
        assert f"mean={mean}" in keys[0] and f"selection={selection}" in keys[0]


def test_the_floor_follows_the_directions_unless_given() -> None:
    assert floor_settings(16) == (0.1, 0.5, None) and floor_settings(17) == (1.0, 1.0, 384)
    Y, _ = population(21, 60, seed=1)
    prior = BucketPrior.from_reference_scores(Y[1:])
    cfg = SessionConfig(method="refgp_ivr", epsilon2=0.0)
    wide = RefGPEstimator(prior, cfg, directions=32)
    assert (wide.params["rho_factor"], wide.params["rho_sd"], wide.max_fit_buckets) == (1.0, 1.0, 384)
    assert wide.prior_sds.tolist() == [2.0, 2.0, 2.0, 2.0, 1.0]
    given = RefGPEstimator(prior, cfg, directions=64, mean="logit_shift", rho_factor=0.1, rho_sd=0.5,
                           max_fit_buckets=0)
    assert given.method == "refgp" and given.max_fit_buckets is None and given.params["max_fit_buckets"] == 0
    assert "refgp_features:64:0.1" in prior._derived_cache  # type: ignore[attr-defined]
    assert RefGPEstimator(prior, cfg, directions=64, mean="logit_shift").method == "refgp_v2"
    with pytest.raises(ValueError, match="rho_factor"):
        RefGPEstimator(prior, cfg, rho_sd=0.0)


@pytest.mark.parametrize("name", list(REFGP_VARIANTS))
def test_a_preset_by_name_and_by_parameters_is_the_same_session(name: str) -> None:
    Y, _ = population(16, 60, seed=2, kind="continuous")
    prior = BucketPrior.from_reference_scores(Y[1:])
    alias = make_estimator(prior, SessionConfig(method=name, epsilon2=0.0))
    public, params = ALIASES[name]
    assert public == "refgp" and params == REFGP_VARIANTS[name]
    direct = make_estimator(prior, refgp_config(**params))
    assert alias.method == direct.method == name and alias.params == direct.params
    for _ in range(25):
        items = alias.propose()
        assert items == direct.propose()
        for i in items:
            alias.observe(i, float(Y[0, i]))
            direct.observe(i, float(Y[0, i]))
        assert (alias.estimate, alias.variance, alias.hyperparameters) == (
            direct.estimate, direct.variance, direct.hyperparameters)


def test_logit_shift_calibrated_is_refgp_v2_with_its_own_calibrated_variance() -> None:
    """A non-preset: refgp_v2's mean and items, the variance times c(n)^2 from replays of refgp_v2 itself,
    cached under its own key (not refgp_v2's, not refgp_v3's)."""
    Y, _ = population(31, 120, seed=6)
    prior = BucketPrior.from_reference_scores(Y[1:])
    cal = make_estimator(prior, refgp_config(mean="logit_shift", variance="calibrated", directions=64))
    v2 = make_estimator(prior, SessionConfig(method="refgp_v2", epsilon2=0.0))
    assert cal.method == "refgp" and v2.method == "refgp_v2"
    key = ("calibration:refgp[directions=64,max_fit_buckets=384,mean=logit_shift,rho_factor=1.0,rho_sd=1.0,"
           "selection=ivr]:0.95:8:300:0")
    assert prior._derived_cache[key] is cal._curve  # type: ignore[attr-defined]
    assert [k for k in prior._derived_cache if k.startswith("calibration:")] == [key]  # type: ignore[attr-defined]
    assert cal._curve is calibration(prior, RefGPEstimator, "refgp", tag=key.split(":")[1])
    assert np.any(cal._curve > 1.0)
    for _ in range(40):
        items = cal.propose()
        assert items == v2.propose()
        for i in items:
            cal.observe(i, float(Y[0, i]))
            v2.observe(i, float(Y[0, i]))
        c = factor_at(cal._curve, cal.n_observed)
        assert cal.estimate == v2.estimate and cal.variance_inflation == c
        assert cal.variance == pytest.approx(c * c * v2.variance, rel=1e-12)


def test_random_items_with_the_model_variance_is_the_n_space_gp_on_refgp_drs_items() -> None:
    Y, _ = population(15, 40, seed=3, kind="continuous")
    prior = BucketPrior.from_reference_scores(Y[1:])
    est = make_estimator(prior, refgp_config(mean="reference", variance="model", selection="random", directions=16))
    dr = make_estimator(prior, SessionConfig(method="refgp_dr", epsilon2=0.0))
    drive(est, Y[0], 12)
    drive(dr, Y[0], 12)
    assert est.method == "refgp" and est.observed_items == dr.observed_items and est.n_refits >= 2
    e, v = refgp_naive(est)
    assert est.estimate == pytest.approx(e, abs=1e-9) and est.variance == pytest.approx(v, rel=1e-7)
    n, N = est.n_observed, est.n_items  # refgp_dr = this model's estimate + the LOO correction
    assert dr.estimate == pytest.approx(est.estimate + (1 - n / N) * dr.loo_residuals()[0] / n, abs=1e-12)


def test_evidence_mix_with_the_design_variance_corrects_the_weighted_prediction() -> None:
    """design_loo over evidence_mix: the model's (weighted) estimate plus the mean leave-one-out residual of the
    weighted predictions (the weight held at its current value), and the difference estimator's variance."""
    Y, _ = population(40, 200, seed=5, shifted=1.0)
    prior = BucketPrior.from_reference_scores(Y[1:])
    params = {"mean": "evidence_mix", "selection": "random", "directions": 64}
    est = make_estimator(prior, refgp_config(**params, variance="design_loo"))
    model = make_estimator(prior, refgp_config(**params, variance="model"))
    drive(est, Y[0], 30)
    drive(model, Y[0], 30)
    assert est.observed_items == model.observed_items and 0.0 < est.weight_shifted < 1.0
    w = est.weight_shifted
    obs = np.flatnonzero(est._cnt)
    P = est._phi[obs]
    mu = w * (est._off[obs] + P @ est._m) + (1 - w) * (P @ est._m_alt)
    assert np.allclose(est.predicted_means(obs), mu, rtol=0, atol=1e-13)
    h = np.einsum("ij,ij->i", P @ est._Sigma, P) / est._nu[obs]
    items = np.asarray(est.observed_items)
    y = Y[0, items]
    k = np.searchsorted(obs, prior.bucket_of_item[items])  # each item's row among the observed buckets
    e = (y - mu[k]) / (1 - h[k])  # its leave-one-out residual
    total, squares = est.loo_residuals()
    assert total == pytest.approx(e.sum(), rel=1e-9) and squares == pytest.approx((e * e).sum(), rel=1e-9)
    n, N = est.n_observed, est.n_items
    assert est.estimate == pytest.approx(model.estimate + (1 - n / N) * e.mean(), abs=1e-12)
    s2 = ((e - e.mean()) @ (e - e.mean()) + PSEUDO_COUNT * rs_mean_s2(y)) / (n - 1 + PSEUDO_COUNT)
    assert est.variance == pytest.approx((1 - n / N) * s2 / n, rel=1e-9)


@pytest.mark.parametrize("params,field", [
    ({"variance": "design_loo"}, "method_params.variance"),  # a design-based variance needs random items
    ({"variance": "design_loo", "selection": "ivr"}, "method_params.variance"),
    ({"mean": "nonsense"}, "method_params.mean"),
    ({"selection": ["ivr"]}, "method_params.selection"),
    ({"directions": 0}, "method_params.directions"),
    ({"directions": 129}, "method_params.directions"),
    ({"directions": "16"}, "method_params.directions"),
    ({"directions": True}, "method_params.directions"),
    ({"floor": "wide"}, "method_params.floor"),
])
def test_invalid_parameter_sets_are_refused_naming_method_params(params: dict, field: str) -> None:
    with pytest.raises(ValueError, match=field):
        refgp_params(params)
    with pytest.raises(ValueError, match=field):
        SessionConfig(method="refgp", method_params=params).validate()


def test_the_constructor_checks_its_parameters_too() -> None:
    Y, _ = population(12, 30, seed=0)
    prior = BucketPrior.from_reference_scores(Y[1:])
    with pytest.raises(ValueError, match="method_params.variance"):
        RefGPEstimator(prior, SessionConfig(method="refgp_ivr"), variance="design_loo")
    with pytest.raises(ValueError, match="method_params.mean"):
        RefGPEstimator(prior, SessionConfig(method="refgp_ivr"), mean="shifted")
    SessionConfig(method="refgp", method_params={"selection": "random", "directions": 128}).validate()
