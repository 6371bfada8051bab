"""``active_design``: random items with recorded probabilities, model prediction + inverse-probability-weighted
residuals, an anytime-valid confidence sequence. The term's exact unbiasedness over the draw, coverage at a
data-dependent (precision) stop, coverage with a deliberately wrong working model, finite-population
exactness, reproducibility from the recorded probabilities (deterministic seeds: cannot flake)."""

from __future__ import annotations

import numpy as np
import pytest
from test_core_sequential_refgp_v2 import population

from evalplan.core.sequential import BucketPrior, SessionConfig, make_estimator
from evalplan.core.sequential.active_design import ActiveDesignEstimator, DesignCS, run_active_design
from evalplan.core.sequential.stopping import PrecisionSession, StopRule


def estimator(prior: BucketPrior, **config: object) -> ActiveDesignEstimator:
    est = make_estimator(prior, SessionConfig(method="active_design", **config))  # type: ignore[arg-type]
    assert isinstance(est, ActiveDesignEstimator)
    return est


def run(prior: BucketPrior, target: np.ndarray, n: int, **config: object) -> ActiveDesignEstimator:
    est = estimator(prior, stop=StopRule(0.0).as_dict(), **config)
    while est.n_observed < n and not est.stopped:
        for i in est.propose():
            est.observe(i, float(target[i]))
    return est


def test_each_term_is_unbiased_over_the_draw_whatever_the_model() -> None:
    """For a fixed past, sum_i q_i theta(i) over every unobserved item i is the benchmark mean exactly."""
    X, _ = population(20, 150, seed=1)
    prior = BucketPrior.from_reference_scores(X[1:])
    target = 1.0 - X[0]  # a target the references predict badly
    est = run(prior, target, 17)
    est._draw_batch(1)
    d = est._draws[-1]
    mu, sig = est._predictions()
    b_of = prior.bucket_of_item
    unobs = np.flatnonzero(~est._observed)
    n_r, tot = float(unobs.size), float(sig[b_of[unobs]].sum())
    q = (1 - est.uniform_share) * sig[b_of[unobs]] / tot + est.uniform_share / n_r
    assert np.isclose(q.sum(), 1.0)
    assert np.isclose(d.q, q[list(unobs).index(d.item)])
    theta = (est._sum_s + d.pred_sum + (target[unobs] - mu[b_of[unobs]]) / q) / est.n_items
    assert np.isclose(float(q @ theta), target.mean(), atol=1e-12)
    assert np.all(theta >= (est._sum_s + d.pred_sum + d.low) / est.n_items - 1e-12)
    assert np.all(theta <= (est._sum_s + d.pred_sum + d.high) / est.n_items + 1e-12)


@pytest.mark.slow
def test_coverage_at_a_precision_stop() -> None:
    """The 95% interval at the (data-dependent) first time its half-width is <= h covers >= 93%."""
    covered = stopped = 0
    for rep in range(60):
        X, _ = population(25, 300, seed=200 + rep)
        prior = BucketPrior.from_reference_scores(X[1:])
        trace = run_active_design(X[1:], X[0], half_width=0.06, seed=rep, interval_kind="anytime")
        lo, hi = trace[-1]["ci"]
        stopped += int((hi - lo) / 2 <= 0.06)
        covered += int(lo <= X[0].mean() <= hi)
        assert prior.n_items == 300
    assert stopped >= 50
    assert covered / 60 >= 0.93


@pytest.mark.slow
def test_a_wrong_working_model_still_covers_and_intervals_never_grow() -> None:
    """Targets that reverse the references' item difficulties (the model predicts them wrongly) and a target
    above every reference: the confidence sequence still covers at every n, and never widens."""
    missed = total = 0
    for rep in range(30):
        X, _ = population(25, 250, seed=400 + rep, shifted=1.5 if rep % 2 else None)
        target = X[0] if rep % 2 else 1.0 - X[0]
        trace = run_active_design(X[1:], target, budget=120, seed=rep, interval_kind="anytime")
        widths = [t["ci"][1] - t["ci"][0] for t in trace]
        assert all(b <= a + 1e-12 for a, b in zip(widths, widths[1:]))
        missed += sum(not (t["ci"][0] <= target.mean() <= t["ci"][1]) for t in trace) > 0
        total += 1
    assert missed / total <= 0.07


def test_all_items_observed_gives_the_exact_mean() -> None:
    X, _ = population(15, 80, seed=9, kind="ternary")
    prior = BucketPrior.from_reference_scores(X[1:])
    est = run(prior, X[0], 80)
    assert est.stop_reason == "exhausted"
    assert est.ci == (X[0].mean(), X[0].mean()) and np.isclose(est.estimate, X[0].mean()) and est.variance == 0.0


def test_reproducible_from_the_recorded_probabilities() -> None:
    """Same seed and scores, same items and probabilities; the design estimate is recomputed from the
    recorded draws (item, probability, prediction) alone."""
    X, _ = population(20, 200, seed=11)
    prior = BucketPrior.from_reference_scores(X[1:])
    a, b = run(prior, X[0], 40, seed=5), run(prior, X[0], 40, seed=5)
    assert a.observed_items == b.observed_items
    assert [t["probability"] for t in a.trajectory] == [t["probability"] for t in b.trajectory]
    assert all(0 < t["probability"] <= 1 for t in a.trajectory)
    assert run(prior, X[0], 40, seed=6).observed_items != a.observed_items
    N = a.n_items
    thetas = [(d.known_sum + d.pred_sum + (X[0][d.item] - d.mu) / d.q) / N for d in a._draws if d.score is not None]
    cs = DesignCS(0.95, 0.0, 1.0)
    assert len(thetas) == a.cs.t == 40
    weights = [w for _, w in a.cs._terms]
    assert np.isclose(a.design_estimate, float(np.dot(weights, thetas) / np.sum(weights)))
    assert cs.t == 0


def test_an_item_not_proposed_is_known_but_enters_no_term_and_batches_work() -> None:
    X, _ = population(20, 120, seed=13)
    prior = BucketPrior.from_reference_scores(X[1:])
    est = estimator(prior, stop=StopRule(0.0).as_dict(), batch_size=3, seed=2)
    batch = est.propose()
    assert len(batch) == 3 and len(set(batch)) == 3
    other = next(i for i in range(120) if i not in batch)
    est.observe(other, float(X[0][other]))
    assert est.trajectory[-1]["probability"] is None and est.cs.t == 0
    assert est.propose() == batch  # the pending draws stay proposed
    for i in reversed(batch):  # out of order: terms wait for their batch-mates
        est.observe(i, float(X[0][i]))
    assert est.cs.t == 3 and all(t["probability"] is not None for t in est.trajectory[1:])


def test_fixed_n_interval_is_narrower_and_reported() -> None:
    X, _ = population(25, 400, seed=17)
    prior = BucketPrior.from_reference_scores(X[1:])
    anytime = run(prior, X[0], 80, seed=1, interval_kind="anytime")
    fixed = run(prior, X[0], 80, seed=1, interval_kind="fixed_n")
    assert anytime.observed_items == fixed.observed_items
    assert fixed.ci[1] - fixed.ci[0] < anytime.ci[1] - anytime.ci[0]
    assert fixed.design_state()["interval_kind"] == "fixed_n"
    assert anytime.design_state()["interval_kind"] == "anytime"


def test_extrapolation_raises_the_uniform_share() -> None:
    X, _ = population(25, 500, seed=19, shifted=3.0)
    prior = BucketPrior.from_reference_scores(X[1:])
    est = run(prior, X[0], 150, seed=3)
    assert est.extrapolation and est.uniform_share >= est.extrapolation_share
    assert est.hyperparameters["design"]["extrapolation"] is True


def test_precision_session_keeps_the_design_interval() -> None:
    X, _ = population(20, 200, seed=23)
    prior = BucketPrior.from_reference_scores(X[1:])
    rule = StopRule(0.08, anytime_valid=True)
    session = PrecisionSession(estimator(prior, stop=rule.as_dict()), rule=rule, score_range=(0.0, 1.0))
    assert session.cs is None  # the estimator's own confidence sequence, not the uniform one
    while not session.stopped:
        item = session.propose()[0]
        session.observe(item, float(X[0][item]))
    assert session.stop_reason == "precision" and session.ci == session.inner.ci
    assert "probability" in session.trajectory[-1]
