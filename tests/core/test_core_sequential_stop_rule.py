"""The default precision stop (issue 33): ``interval_kind: "sequential"``, the Chow-Robbins fixed-width
interval with a variance floor from the score range and the betting sequence as an outer guard; and
``random``'s interval, never zero-width on continuous scores. Deterministic seeds: cannot flake."""

from __future__ import annotations

import math

import numpy as np
from test_core_sequential_refgp_v2 import population

from evalplan.core.sequential import BucketPrior, SessionConfig, make_estimator
from evalplan.core.sequential.active_design import (
    BERNOULLI_FLOOR,
    REMAINDER_POWER,
    STOP_RULES,
    ActiveDesignEstimator,
    run_active_design,
)
from evalplan.core.sequential.random_sampling import RandomEstimator
from evalplan.core.sequential.stopping import PrecisionSession, StopRule, sequential_half_width

Z = 1.959963984540054


def test_half_width_is_chow_robbins_with_the_floor_and_the_guard() -> None:
    assert math.isclose(sequential_half_width(25, 0.16, 1.0, 0.95), Z * math.sqrt((0.16 + 1 / 25) / 25))
    assert math.isclose(sequential_half_width(25, 0.16, 2.0, 0.95, fpc=0.5),
                        Z * math.sqrt(0.5 * (0.16 + 4 / 25) / 25))
    # a zero variance estimate still leaves the floor: never a zero-width interval
    assert sequential_half_width(10, 0.0, 1.0, 0.95) > 0.1
    # the guard: at least the confidence sequence's half-width / guard
    assert sequential_half_width(400, 0.01, 1.0, 0.95, guard_half_width=0.3, guard=2.0) == 0.15
    assert sequential_half_width(1, 0.0, 1.0, 0.95) == math.inf
    # the Bernoulli-scaled floor: 4 m (1 - m) at the smoothed mean, never 0 even at a mean of 1
    m = (20 * 1.0 + 1) / 22
    assert math.isclose(sequential_half_width(20, 0.0, 1.0, 0.95, unit_mean=1.0), Z * math.sqrt(4 * m * (1 - m) / 20 / 20))
    assert math.isclose(sequential_half_width(20, 0.0, 1.0, 0.95, unit_mean=0.5), sequential_half_width(20, 0.0, 1.0, 0.95))


def test_default_interval_kind_is_sequential_and_names_its_stop_rule() -> None:
    X, _ = population(20, 200, seed=3)
    prior = BucketPrior.from_reference_scores(X[1:])
    est = make_estimator(prior, SessionConfig(method="active_design", stop=StopRule(0.05).as_dict()))
    assert isinstance(est, ActiveDesignEstimator)
    state = est.design_state()
    assert state["interval_kind"] == "sequential" and state["stop_rule"] == STOP_RULES["sequential"]
    anytime = make_estimator(prior, SessionConfig(method="active_design", interval_kind="anytime"))
    assert anytime.design_state()["stop_rule"] == "betting_cs"


def test_sequential_interval_is_the_rule_on_the_terms() -> None:
    X, _ = population(20, 200, seed=5)
    prior = BucketPrior.from_reference_scores(X[1:])
    est = make_estimator(prior, SessionConfig(method="active_design", stop=StopRule(0.0).as_dict(), seed=2))
    assert isinstance(est, ActiveDesignEstimator)
    while est.n_observed < 60:
        item = est.propose()[0]
        est.observe(item, float(X[0][item]))
    th = np.array([t for t, _ in est.cs._terms])
    T = th.size
    w = np.array([(est.n_items / d.n_remaining) ** REMAINDER_POWER for d in est._draws[:T]])
    m = float(w @ th / w.sum())
    clt = float((w * w * (th - m) ** 2).sum() / w.sum() ** 2 * T / (T - 1))
    floor = float((w * w).sum() / w.sum() ** 2) / T  # span^2 / T per term, span = 1
    if BERNOULLI_FLOOR:  # scaled by the Bernoulli bound at the smoothed mean
        mt = (T * m + 1) / (T + 2)
        floor *= 4 * mt * (1 - mt)
    cs_half = (est.cs.high - est.cs.low) / 2
    half = max(Z * math.sqrt(clt + floor), cs_half / 2)
    lo, hi = est.interval(0.95)
    logical = est._logical()
    assert math.isclose(lo, max(m - half, logical[0]), abs_tol=1e-12)
    assert math.isclose(hi, min(m + half, logical[1]), abs_tol=1e-12)


def test_coverage_at_the_precision_stop_and_fewer_items_than_the_confidence_sequence() -> None:
    """Over 40 synthetic targets (binary 2PL, half of them above every reference): the default's 95% interval
    covers >= 93% at its own data-dependent stop, with fewer items in total than the betting sequence."""
    covered = items_seq = items_cs = 0
    for rep in range(40):
        X, _ = population(25, 250, seed=500 + rep, shifted=1.0 if rep % 2 else None)
        seq = run_active_design(X[1:], X[0], half_width=0.06, seed=rep)
        cs = run_active_design(X[1:], X[0], half_width=0.06, seed=rep, interval_kind="anytime")
        lo, hi = seq[-1]["ci"]
        covered += int(lo <= X[0].mean() <= hi)
        items_seq += len(seq)
        items_cs += len(cs)
    assert covered / 40 >= 0.925
    assert items_seq < 0.9 * items_cs


def test_a_constant_continuous_target_does_not_stop_at_once() -> None:
    """The early-stop failure the floor guards against: every score 0.5, the terms' variance is small; the
    naive fixed-n interval would stop at the minimum, the sequential one needs many more items."""
    rng = np.random.default_rng(0)
    refs = np.clip(rng.normal(0.5, 0.2, size=(15, 200)), 0, 1)
    target = np.full(200, 0.5)
    seq = run_active_design(refs, target, half_width=0.03, seed=1)
    assert len(seq) > 40
    lo, hi = seq[-1]["ci"]
    assert lo <= 0.5 <= hi


def test_random_is_never_zero_width_on_continuous_scores() -> None:
    """Issue 33: a model whose scores are all 0.5 got [0.500, 0.500] after 2 items (normal interval, s = 0)."""
    rng = np.random.default_rng(1)
    prior = BucketPrior.from_reference_scores(np.clip(rng.normal(0.5, 0.2, size=(10, 300)), 0, 1))
    est = RandomEstimator(prior, SessionConfig(method="random", stop=StopRule(0.03).as_dict()))
    session = PrecisionSession(est, rule=StopRule(0.03), score_range=(0.0, 1.0))
    for _ in range(2):
        session.observe(session.propose()[0], 0.5)
    lo, hi = session.ci
    assert hi - lo > 0.5
    while not session.stopped:
        session.observe(session.propose()[0], 0.5)
    # the floor alone (1/n) needs z^2 / n^2 (1 - n/N) <= h^2: dozens of items, not 10
    assert session.n_observed > 50 and session.stop_reason == "precision"


def test_random_binary_keeps_the_exact_interval() -> None:
    rng = np.random.default_rng(2)
    prior = BucketPrior.from_reference_scores((rng.random((10, 100)) < 0.6).astype(float))
    est = RandomEstimator(prior, SessionConfig(method="random", stop=StopRule(0.0).as_dict()))
    scores = (rng.random(100) < 0.6).astype(float)
    for _ in range(30):
        i = est.propose()[0]
        est.observe(i, float(scores[i]))
    lo, hi = est.interval(0.95)
    k = int(round(est._sum_s))
    assert lo <= k / 30 <= hi
    assert math.isclose(lo * 100, round(lo * 100)) and math.isclose(hi * 100, round(hi * 100))  # K / N
