"""``active_design``'s factor and prequential working models (issue 33 item 4): the factor model recovers a planted
low-rank structure, its predictions and the prequential choice use observed scores only (predictable), the
design's interval still covers with them, and an unknown working model is a ValueError. Small generated data,
deterministic seeds."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.special import expit

from evalplan.core.sequential import BucketPrior, SessionConfig, factor_model
from evalplan.core.sequential.active_design import ActiveDesignEstimator, run_active_design
from evalplan.core.sequential.factor_model import FactorModel, fit_factor
from evalplan.core.sequential.stopping import StopRule


@pytest.fixture(autouse=True)
def small_grid(monkeypatch: pytest.MonkeyPatch) -> None:
    """A smaller grid of factor settings than the default, to keep the tests short."""
    monkeypatch.setattr(factor_model, "KS", (1, 2, 3))
    monkeypatch.setattr(factor_model, "LAMBDAS", (0.01,))


def planted(n_models: int, n_items: int, k: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Binary scores from a rank-k logistic model (models x items) and the true probabilities."""
    rng = np.random.default_rng(seed)
    U = rng.normal(0, 1.2, (n_models, k))
    V = rng.normal(0, 1.2, (n_items, k))
    b = rng.normal(0, 1.0, n_items)
    P = expit(U @ V.T + b)
    return (rng.random(P.shape) < P).astype(float), P


def design(prior: BucketPrior, working_model: str, seed: int = 0) -> ActiveDesignEstimator:
    config = SessionConfig(method="active_design", seed=seed, stop=StopRule(0.0).as_dict())
    return ActiveDesignEstimator(prior, config, score_range=(0.0, 1.0), working_model=working_model)


def test_factor_model_recovers_a_planted_low_rank_structure() -> None:
    """Fitted on 60 references of a rank-2 logistic matrix, the chosen k is small and, after 150 of the target's
    items, the predictions of its other items track the true probabilities (correlation > 0.9), with less than
    half the error of the references' item means (each item's factors are learnt from 60 binary scores)."""
    X, P = planted(61, 400, 2, seed=3)
    prior = BucketPrior.from_reference_scores(X[1:])
    fit = fit_factor(prior, (0.0, 1.0))
    assert 1 <= fit.k <= 3
    model = FactorModel(fit, prior.n_buckets, (0.0, 1.0))
    order = np.random.default_rng(0).permutation(400)
    for i in order[:150]:
        model.observe(int(prior.bucket_of_item[i]), float(X[0, i]))
    rest = order[150:]
    pred = model.predict()[0][prior.bucket_of_item[rest]]
    err = float(np.sqrt(np.mean((pred - P[0, rest]) ** 2)))
    base = float(np.sqrt(np.mean((X[1:, rest].mean(axis=0) - P[0, rest]) ** 2)))
    assert err < 0.5 * base and np.corrcoef(pred, P[0, rest])[0, 1] > 0.9, (err, base)
    d, nu = model.predict()[1], model.predict()[2]
    assert np.all(d >= 0) and np.all(nu > 0) and np.all(nu <= 0.25 + 1e-12)


def test_continuous_scores_get_a_dispersion_and_predictions_in_range() -> None:
    rng = np.random.default_rng(5)
    _, P = planted(31, 200, 2, seed=5)
    X = np.clip(P + 0.1 * rng.normal(size=P.shape), 0.0, 1.0) * 10.0  # scores in [0, 10]
    prior = BucketPrior.from_reference_scores(X[1:])
    fit = fit_factor(prior, (0.0, 10.0))
    assert 0.0 < fit.phi < 1.0  # less spread than a Bernoulli score
    model = FactorModel(fit, prior.n_buckets, (0.0, 10.0))
    for i in range(40):
        model.observe(int(prior.bucket_of_item[i]), float(X[0, i]))
    mu, d, nu = model.predict()
    assert np.all((mu >= 0.0) & (mu <= 10.0)) and np.all(nu > 0.0)
    assert np.corrcoef(mu[prior.bucket_of_item[40:]], P[0, 40:])[0, 1] > 0.8


@pytest.mark.parametrize("working_model", ["factor", "prequential"])
def test_predictions_and_the_choice_do_not_depend_on_unobserved_scores(working_model: str) -> None:
    """Two targets equal on the first 30 observed items and different everywhere else: the same draws, the same
    probabilities and predictions, the same prequential errors and answering model until then."""
    X, _ = planted(41, 300, 2, seed=7)
    prior = BucketPrior.from_reference_scores(X[2:])
    a = X[0].copy()
    b = 1.0 - a  # differs on every item
    ea, eb = design(prior, working_model), design(prior, working_model)
    for _ in range(30):
        ia, ib = ea.propose()[0], eb.propose()[0]
        assert ia == ib
        mu_a, sig_a = ea._predictions()
        mu_b, sig_b = eb._predictions()
        assert np.array_equal(mu_a, mu_b) and np.array_equal(sig_a, sig_b)
        assert ea.answering() == eb.answering()
        ea.observe(ia, float(a[ia]))
        b[ia] = a[ia]  # the second target agrees on what has been observed
        eb.observe(ib, float(b[ib]))
        assert ea.last_probability == eb.last_probability
    assert ea.prequential_error == eb.prequential_error
    assert ea.design_state()["answered_by"] in ("reference_gp_evidence_mix", "factor")
    if working_model == "prequential":
        state = ea.design_state()
        assert state["n_prequential"] == 30 and set(state["prequential_brier"]) == {"reference_gp_evidence_mix",
                                                                                    "factor"}
    else:
        assert ea.design_state()["answered_by"] == "factor" and ea.design_state()["factor"]["n_observed"] == 30


def test_prequential_errors_are_one_step_ahead() -> None:
    """The error added for an item is the candidate's prediction made before the item was observed."""
    X, _ = planted(41, 200, 2, seed=11)
    prior = BucketPrior.from_reference_scores(X[1:])
    est = design(prior, "prequential")
    for _ in range(5):
        i = est.propose()[0]
        b = int(prior.bucket_of_item[i])
        f_before = est.factor.predict_bucket(b) if est.factor is not None else np.nan
        g_before = float(np.clip(est.model.predicted_means(np.array([b]))[0], 0.0, 1.0))
        e_before = dict(est.prequential_error)
        est.observe(i, float(X[0, i]))
        assert np.isclose(est.prequential_error["factor"] - e_before["factor"], (X[0, i] - f_before) ** 2)
        assert np.isclose(est.prequential_error["reference_gp_evidence_mix"]
                          - e_before["reference_gp_evidence_mix"], (X[0, i] - g_before) ** 2)


@pytest.mark.slow
@pytest.mark.parametrize("working_model", ["factor", "prequential"])
def test_the_interval_still_covers(working_model: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Coverage of the default (sequential) interval at a ±0.06 precision stop over 24 generated targets, one
    in six a model the references predict badly (a reversed one). One factor setting (k = 2), to keep it short."""
    monkeypatch.setattr(factor_model, "KS", (2,))
    monkeypatch.setattr(factor_model, "LAMBDAS", (0.01,))
    covered = 0
    reps = 24
    for rep in range(reps):
        X, _ = planted(26, 250, 2, seed=100 + rep)
        target = 1.0 - X[0] if rep % 6 == 0 else X[0]
        trace = run_active_design(X[1:], target, half_width=0.06, seed=rep, working_model=working_model)
        lo, hi = trace[-1]["ci"]
        covered += lo - 1e-12 <= target.mean() <= hi + 1e-12
    assert covered >= reps - 3, covered


def test_an_unknown_working_model_is_a_value_error() -> None:
    X, _ = planted(11, 50, 1, seed=1)
    prior = BucketPrior.from_reference_scores(X[1:])
    with pytest.raises(ValueError, match="working_model"):
        design(prior, "svd")


def test_without_a_bounded_score_range_the_reference_gp_answers() -> None:
    rng = np.random.default_rng(2)
    X = rng.normal(size=(12, 60))
    prior = BucketPrior.from_reference_scores(X[1:])
    config = SessionConfig(method="active_design", seed=0, stop=StopRule(0.0).as_dict())
    est = ActiveDesignEstimator(prior, config, score_range=(-np.inf, np.inf), working_model="factor")
    assert est.factor is None and est.answering() == "reference_gp_evidence_mix"
    i = est.propose()[0]
    est.observe(i, float(X[0, i]))
    assert est.design_state()["answered_by"] == "reference_gp_evidence_mix"
