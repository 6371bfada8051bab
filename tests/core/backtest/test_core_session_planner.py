"""``evalplan.core.backtest.session_planner`` (issue 33 item 5) on GENERATED data: held-out references replayed
as the default session and ``random``, per regime; the interval at each stop checked against the truth, the
regimes the references cannot form reported as skipped, the time allowance honoured, bad arguments refused."""

from __future__ import annotations

import numpy as np
import pytest

from evalplan.core.backtest.session_planner import plan_session, run_session, suite_session_items, upper_mean
from evalplan.core.sequential.prior import BucketPrior
from evalplan.core.sequential.stopping import StopRule
from support.helpers import two_pl as generated_two_pl


def two_pl(seed: int, n_models: int = 30, n_items: int = 160) -> np.ndarray:
    return generated_two_pl(seed, n_models, n_items)


def test_both_regimes_against_random() -> None:
    Y = two_pl(1)
    plan = plan_session(Y, 0.06, 0.95, n_targets=3)
    assert plan["method"] == "active_design" and plan["baseline"] == "random" and plan["stopped"] == "done"
    assert plan["n_items"] == 160 and plan["n_models"] == 30
    interp, extra = plan["regimes"]["random_models"], plan["regimes"]["best_models"]
    assert interp["regime"] == "interpolation" and extra["regime"] == "extrapolation"
    assert interp["n_references"] == 27 and extra["n_references"] == 30 - 3 - 6  # the 20% gap is discarded
    means = Y.mean(axis=1)
    best = set(np.argsort(-means)[:3].tolist())
    assert {r["target"] for r in extra["runs"]} == best
    for regime in (interp, extra):
        for runs in (regime["runs"], regime["random_runs"]):
            assert len(runs) == 3
            for r in runs:
                assert r["truth"] == pytest.approx(means[r["target"]])
                lo, hi = r["interval"]
                assert r["covered"] == (lo <= r["truth"] <= hi)
                assert 10 <= r["items"] <= 160
                if r["reached"]:
                    assert (hi - lo) / 2 <= 0.06 + 1e-12
        assert regime["items"] == pytest.approx(np.mean([r["items"] for r in regime["runs"]]))
        assert regime["random"]["items"] == pytest.approx(np.mean([r["items"] for r in regime["random_runs"]]))
        assert regime["vs_random"] == pytest.approx(regime["items"] / regime["random"]["items"])
        assert regime["share"] == pytest.approx(regime["items"] / 160)
        items = [r["items"] for r in regime["runs"]]
        assert regime["items_range"] == [min(items), max(items)]
        # the one-sided 90% Student-t bound of the mean over the 3 targets (t_0.9,2 = 1.8856)
        bound = np.mean(items) + 1.8856180831641267 * np.std(items, ddof=1) / np.sqrt(3)
        assert regime["items_upper"] == pytest.approx(min(bound, 160))
        assert regime["items_upper"] >= regime["items"] and regime["share_upper"] == regime["items_upper"] / 160
    assert plan["items"] == interp["items"] and plan["best_models"]["items"] == extra["items"]
    assert plan["items_upper"] == interp["items_upper"]
    assert plan["best_models"]["items_upper"] == extra["items_upper"]
    # deterministic: the same request answers the same plan
    again = plan_session(Y, 0.06, 0.95, n_targets=3)
    assert [r["items"] for r in again["regimes"]["best_models"]["runs"]] == [r["items"] for r in extra["runs"]]


def test_a_session_is_the_service_session() -> None:
    """``run_session`` posts the proposed items' scores until the stop: the items it reports are what a
    ``PrecisionSession`` with that rule observed, and a stop before the end has the half-width asked for."""
    Y = two_pl(2)
    prior = BucketPrior.from_reference_scores(Y[1:])
    n, est, lo, hi, reached = run_session(prior, Y[0], "random", StopRule(half_width=0.08), (0.0, 1.0), seed=0)
    assert reached and n < 160 and (hi - lo) / 2 <= 0.08 and lo <= est <= hi
    n_all, *_, reached_all = run_session(prior, Y[0], "active_design", StopRule(half_width=1e-9), (0.0, 1.0), 0)
    assert n_all == 160 and not reached_all  # never precise enough: every item, the exact mean


def test_continuous_scores_and_suite_total() -> None:
    rng = np.random.default_rng(3)
    Y = np.clip(two_pl(3, n_items=80) * 0.6 + rng.uniform(0, 0.4, (30, 80)), 0, 1)
    plan = plan_session(Y, 0.05, 0.9, n_targets=2, score_range=(0.0, 1.0))
    for regime in plan["regimes"].values():
        for r in regime["runs"] + regime["random_runs"]:
            assert r["interval"][1] - r["interval"][0] > 0  # no zero-width interval on continuous scores
    other = plan_session(two_pl(4, n_items=50), 0.05, 0.9, n_targets=2)
    total = suite_session_items([plan, other])
    assert total["n_items"] == 130
    assert total["items"] == pytest.approx(plan["items"] + other["items"])
    assert total["best_models_items"] == pytest.approx(plan["best_models"]["items"] + other["best_models"]["items"])
    assert total["items_upper"] == pytest.approx(plan["items_upper"] + other["items_upper"])


def test_too_few_references_and_the_time_allowance() -> None:
    small = plan_session(two_pl(5, n_models=3, n_items=40), 0.1, 0.9, n_targets=3)
    assert "skipped" in small["regimes"]["best_models"] and small["best_models"]["items"] is None
    assert small["regimes"]["random_models"]["targets"] == 1  # at most M - 2 targets
    timed = plan_session(two_pl(6), 0.03, 0.95, n_targets=5, max_seconds=1e-9)
    assert timed["stopped"] == "max_seconds"
    assert timed["regimes"]["random_models"]["targets"] == 1  # the target that was running finishes
    assert "skipped" in timed["regimes"]["best_models"]


@pytest.mark.parametrize("kwargs, message", [({"half_width": 0.0}, "half_width"), ({"n_targets": 0}, "n_targets"),
                                             ({"n_targets": 41}, "n_targets")])
def test_bad_arguments(kwargs: dict, message: str) -> None:
    args = {"half_width": 0.05, "n_targets": 2, **kwargs}
    with pytest.raises(ValueError, match=message):
        plan_session(two_pl(7), args.pop("half_width"), **args)


def test_every_item_observed_covers_despite_round_off() -> None:
    """A session that never reaches the half-width observes every item: its interval is the mean, which must
    count as covering the truth even where the two sums differ in the last bit (they did: 47.26706395130024 vs
    47.26706395130028 on unbounded scores)."""
    rng = np.random.default_rng(0)
    Y = rng.normal(50, 10, (25, 120)) + rng.normal(0, 5, (25, 1))
    plan = plan_session(Y, 0.001, 0.95, score_range=(-np.inf, np.inf), n_targets=2)
    for regime in plan["regimes"].values():
        for r in regime["runs"] + regime["random_runs"]:
            assert r["items"] == 120 and not r["reached"] and r["covered"]


def test_upper_bound_of_the_mean() -> None:
    assert upper_mean([100.0], 500) is None
    assert upper_mean([100.0, 100.0, 100.0], 500) == pytest.approx(100.0)
    assert upper_mean([100.0, 300.0], 900) == pytest.approx(200.0 + 3.077683537175253 * 141.4213562373095 / np.sqrt(2))
    assert upper_mean([100.0, 300.0], 250) == 250.0  # never above every item
