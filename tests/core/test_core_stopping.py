"""Precision stopping (evalplan.core.sequential.stopping): the rule, the range, the betting CS.

The betting CS is checked against values of ``confseq.betting.hedged_cs`` (gostevehoward/confseq @
70b1ef3, run from its own folder outside the project by the script recorded in the fixture's
``source``; tests/support/fixtures/confseq_hedged_cs.json) and by simulation of its time-uniform guarantee.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from evalplan.core.sequential import BucketPrior, SequentialEstimator, SessionConfig
from evalplan.core.sequential.stopping import BettingCS, PrecisionSession, StopRule, resolve_max_items

FIXTURE = Path(__file__).parents[1] / "support" / "fixtures" / "confseq_hedged_cs.json"


def test_betting_cs_equals_confseq_hedged_cs() -> None:
    cases = json.loads(FIXTURE.read_text())["cases"]
    assert {c["kind"] for c in cases} == {"binary", "three_valued", "continuous"}
    for case in cases:
        cs = BettingCS(case["N"], 1 - case["alpha"])
        lower, upper = [], []
        for x in case["x"]:
            cs.update(x)
            lo, hi = cs.interval()
            lower.append(lo)
            upper.append(hi)
        assert np.allclose(lower, case["lower"], atol=1e-12), case["kind"]
        assert np.allclose(upper, case["upper"], atol=1e-12), case["kind"]


def test_betting_cs_maps_the_score_range() -> None:
    rng = np.random.default_rng(3)
    x = rng.random(80)
    unit, scaled = BettingCS(200, 0.9), BettingCS(200, 0.9, score_range=(-5.0, 15.0))
    for v in x:
        unit.update(v)
        scaled.update(-5.0 + 20.0 * v)
    lo, hi = unit.interval()
    assert scaled.interval() == pytest.approx((-5.0 + 20 * lo, -5.0 + 20 * hi))
    with pytest.raises(ValueError, match="score_range"):
        BettingCS(10, 0.95, score_range=(0.0, math.inf))


def test_betting_cs_covers_uniformly_over_time() -> None:
    """P(the population mean leaves the CS at any t <= n) <= 1 - level, over random orders."""
    rng = np.random.default_rng(0)
    N, n, runs, level = 300, 150, 200, 0.9
    pop = (rng.random(N) < 0.35).astype(float)
    truth = pop.mean()
    misses = 0
    for _ in range(runs):
        cs = BettingCS(N, level)
        ever_out = False
        for x in rng.permutation(pop)[:n]:
            cs.update(x)
            lo, hi = cs.interval()
            ever_out |= not lo <= truth <= hi
        misses += ever_out
    assert misses / runs <= 1 - level + 0.03, misses  # binomial slack (sd ~ 2% at 200 runs)


def test_stop_rule_checks_every_field() -> None:
    assert StopRule.from_dict({"half_width": 0.02}).as_dict() == {
        "half_width": 0.02, "level": 0.95, "min_items": 10, "anytime_valid": False}
    bad = [({"half_width": -0.1}, "stop.half_width"), ({}, "stop.half_width"),
           ({"half_width": "x"}, "stop.half_width"), ({"half_width": 0.1, "level": 1.0}, "stop.level"),
           ({"half_width": 0.1, "level": 0}, "stop.level"), ({"half_width": 0.1, "min_items": 0}, "stop.min_items"),
           ({"half_width": 0.1, "min_items": 2.5}, "stop.min_items"),
           ({"half_width": 0.1, "anytime_valid": "yes"}, "stop.anytime_valid"),
           ({"half_width": 0.1, "colour": 1}, "stop.colour"), ([0.1], "stop")]
    for given, field in bad:
        with pytest.raises(ValueError, match=f"^{field}:"):
            StopRule.from_dict(given)


def test_max_items_fraction() -> None:
    assert resolve_max_items({"fraction": 0.1}, 756) == 76
    assert resolve_max_items({"fraction": 0.1}, 750) == 75
    assert resolve_max_items({"fraction": 1e-6}, 100) == 1
    assert resolve_max_items(5, 100) == 5 and resolve_max_items(None, 100) is None
    for bad, field in (({"fraction": 0}, "max_items.fraction"), ({"fraction": 1.5}, "max_items.fraction"),
                       ({"share": 0.1}, "max_items"), (0, "max_items"), (True, "max_items")):
        with pytest.raises(ValueError, match=f"^{field}:"):
            resolve_max_items(bad, 100)


def _prior(seed: int = 0, n_items: int = 400, n_refs: int = 12) -> tuple[BucketPrior, np.ndarray]:
    rng = np.random.default_rng(seed)
    difficulty = rng.normal(0, 1.2, n_items)
    ability = np.linspace(-1.5, 1.5, n_refs)
    refs = (rng.random((n_refs, n_items)) < 1 / (1 + np.exp(-(ability[:, None] - difficulty)))).astype(float)
    target = (rng.random(n_items) < 1 / (1 + np.exp(-(0.2 - difficulty)))).astype(float)
    return BucketPrior.from_reference_scores(refs), target


def _run(session: PrecisionSession, target: np.ndarray) -> PrecisionSession:
    while not session.stopped:
        (item,) = session.propose()
        session.observe(item, float(target[item]))
    return session


@pytest.mark.parametrize("method", ["bayesame", "bayesame_rs", "rs_mean"])
def test_precision_rule_stops_every_method_at_its_half_width(method: str) -> None:
    prior, target = _prior()
    rule = StopRule(half_width=0.06, level=0.9, min_items=15)
    config = SessionConfig(method=method, stop=rule.as_dict(), level=0.9)
    s = _run(PrecisionSession(SequentialEstimator(prior, config), rule=rule, score_range=(0.0, 1.0)), target)
    assert s.stop_reason == "precision" and s.n_observed >= 15
    lo, hi = s.ci
    assert (hi - lo) / 2 <= 0.06 and 0.0 <= lo <= s.estimate <= hi <= 1.0
    prev = s.trajectory[-2]["ci"]
    assert (prev[1] - prev[0]) / 2 > 0.06 or s.trajectory[-2]["n"] < 15  # it stopped at the first chance
    assert s.level == 0.9


def test_half_width_zero_never_stops_on_precision_and_intervals_stay_in_range() -> None:
    prior, target = _prior(1, n_items=120)
    rule = StopRule(half_width=0.0, min_items=1)
    config = SessionConfig(method="bayesame", stop=rule.as_dict())
    s = _run(PrecisionSession(SequentialEstimator(prior, config), rule=rule, score_range=(0.0, 1.0)), target)
    assert s.stop_reason == "exhausted" and s.n_observed == 120
    assert all(0.0 <= r["ci"][0] <= r["estimate"] <= r["ci"][1] <= 1.0 for r in s.trajectory)


@pytest.mark.slow
def test_without_a_rule_bayesame_keeps_the_papers_rule() -> None:
    prior, target = _prior(2)
    config = SessionConfig(method="bayesame")
    wrapped = _run(PrecisionSession(SequentialEstimator(prior, config), score_range=(0.0, 1.0)), target)
    plain = SequentialEstimator(prior, config)
    while not plain.stopped:
        (item,) = plain.propose()
        plain.observe(item, float(target[item]))
    assert wrapped.stop_reason == plain.stop_reason and wrapped.n_observed == plain.n_observed
    assert wrapped.inner.estimate == plain.estimate


def test_anytime_valid_draws_uniformly_and_reports_the_cs() -> None:
    prior, target = _prior(3)
    rule = StopRule(half_width=0.1, anytime_valid=True)
    config = SessionConfig(method="bayesame", stop=rule.as_dict())
    s = PrecisionSession(SequentialEstimator(prior, config), rule=rule, score_range=(0.0, 1.0), seed=4)
    cs = BettingCS(prior.n_items, 0.95)
    picked = []
    while not s.stopped:
        (item,) = s.propose()
        picked.append(item)
        s.observe(item, float(target[item]))
        cs.update(float(target[item]))
        assert s.ci == cs.interval()
        assert s.ci[0] <= s.estimate <= s.ci[1]
    assert s.stop_reason == "precision" and len(set(picked)) == len(picked)
    assert (s.ci[1] - s.ci[0]) / 2 <= 0.1
