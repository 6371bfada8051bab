"""``refgp_dr`` (``RefGPEstimator(variance="design_loo", selection="random")``): uniform random items,
``refgp_ivr``'s model as working model, the difference estimator with leave-one-out residuals. The LOO formula
against brute-force refits, the estimator's algebra, exhaustion, and coverage on synthetic replays where the target
sits above every reference (deterministic seeds: cannot flake)."""

from __future__ import annotations

import numpy as np
import pytest
from test_core_sequential_refgp_v2 import population

from evalplan.core.sequential import BucketPrior, SessionConfig, make_estimator
from evalplan.core.sequential.estimator import rs_mean_s2
from evalplan.core.sequential.refgp import PSEUDO_COUNT, RefGPEstimator


def session(prior: BucketPrior, target: np.ndarray, n: int, **config: object) -> RefGPEstimator:
    est = make_estimator(prior, SessionConfig(method="refgp_dr", epsilon2=0.0, **config))  # type: ignore[arg-type]
    assert isinstance(est, RefGPEstimator) and est.method == "refgp_dr"
    while est.n_observed < n and not est.stopped:
        for i in est.propose():
            est.observe(i, target[i])
    return est


def test_leave_one_out_residuals_match_refitting_without_the_item() -> None:
    X, _ = population(30, 120, seed=3, kind="continuous")
    prior = BucketPrior.from_reference_scores(X[1:])
    target = X[0]
    est = session(prior, target, 25, refit_every=0)  # fixed hyperparameters: LOO is exact
    items, scores = est.observed_items, np.asarray(est._scores)
    brute = []
    for k, item in enumerate(items):
        other = make_estimator(prior, SessionConfig(method="refgp_dr", epsilon2=0.0, refit_every=0))
        for j, (i2, s2) in enumerate(zip(items, scores)):
            if j != k:
                other._update(i2, float(s2))  # the posterior without ``item`` (same hyperparameters)
        b = int(prior.bucket_of_item[item])
        brute.append(scores[k] - float(other._off[b]) - float(other._phi[b] @ other._m))
    total, squares = est.loo_residuals()
    assert np.isclose(total, sum(brute), rtol=1e-8, atol=1e-10)
    assert np.isclose(squares, float(np.sum(np.square(brute))), rtol=1e-8, atol=1e-10)


def test_estimate_is_the_difference_estimator() -> None:
    X, _ = population(40, 200, seed=5)
    prior = BucketPrior.from_reference_scores(X[1:])
    est = session(prior, X[0], 30)
    n, N = est.n_observed, est.n_items
    unobserved = ~est._observed
    mu = est._off[prior.bucket_of_item] + est._phi[prior.bucket_of_item] @ est._m
    total, squares = est.loo_residuals()
    e_bar = total / n
    expected = (sum(est._scores) + mu[unobserved].sum()) / N + (1 - n / N) * e_bar
    assert np.isclose(est.estimate, expected)
    s2 = (squares - n * e_bar ** 2 + PSEUDO_COUNT * rs_mean_s2(np.asarray(est._scores))) / (n - 1 + PSEUDO_COUNT)
    assert np.isclose(est.variance, (1 - n / N) * s2 / n)


def test_items_are_uniform_and_seeded_and_exhaustion_gives_the_mean() -> None:
    X, _ = population(20, 60, seed=7, kind="ternary")
    prior = BucketPrior.from_reference_scores(X[1:])
    a, b = session(prior, X[0], 60, seed=11), session(prior, X[0], 60, seed=11)
    assert a.observed_items == b.observed_items and sorted(a.observed_items) == list(range(60))
    assert session(prior, X[0], 20, seed=12).observed_items != a.observed_items[:20]
    assert a.stopped and a.stop_reason == "exhausted"
    assert np.isclose(a.estimate, X[0].mean()) and a.variance == 0.0


@pytest.mark.slow
def test_interval_covers_a_target_above_every_reference() -> None:
    """Extrapolation (the target's ability above every reference's): the random design keeps the 95%
    interval honest where the working model is biased."""
    covered, total = 0, 0
    for rep in range(40):
        X, _ = population(25, 300, seed=100 + rep, shifted=1.0)
        prior = BucketPrior.from_reference_scores(X[1:])
        est = session(prior, X[0], 40, seed=rep)
        lo, hi = est.ci
        covered += int(lo <= X[0].mean() <= hi)
        total += 1
    assert covered / total >= 0.88
