"""Unit tests of evalplan.core.coresets.prediction (estimates and intervals from coreset scores)."""

from __future__ import annotations

import math

import pytest
from scipy.stats import norm

from evalplan.core.coresets.prediction import estimate_from_coreset

Z95 = norm.ppf(0.975)


def test_fpc_variance_hand_example_and_clipping() -> None:
    # 4 coreset items of a 10-item benchmark: mean .75, s^2 = .75 / 3 = .25,
    # Var = .25 / 4 * (1 - 4/10) = .0375
    out = estimate_from_coreset([1, 0, 1, 1], [0, 0, 0, 0], [10])
    b = out["benchmarks"][0]
    assert b["estimate"] == pytest.approx(0.75)
    assert b["std_error"] == pytest.approx(math.sqrt(0.0375))
    assert b["method"] == "fpc_sample_variance"
    assert (b["n_items"], b["n_total"]) == (4, 10)
    lo, hi = b["interval"]
    assert lo == pytest.approx(0.75 - Z95 * math.sqrt(0.0375))
    assert hi == 1.0  # 0.75 + 0.38 clipped to the score range


def test_level_changes_the_width() -> None:
    wide = estimate_from_coreset([1, 0, 1, 1], [0] * 4, [10], level=0.99)["benchmarks"][0]["interval"]
    narrow = estimate_from_coreset([1, 0, 1, 1], [0] * 4, [10], level=0.5)["benchmarks"][0]["interval"]
    assert wide[0] < narrow[0]
    assert narrow[0] == pytest.approx(0.75 - norm.ppf(0.75) * math.sqrt(0.0375))


def test_whole_benchmark_gives_a_zero_width_interval() -> None:
    b = estimate_from_coreset([0.2, 0.4, 0.9], [0, 0, 0], [3])["benchmarks"][0]
    assert b["estimate"] == pytest.approx(0.5)
    assert b["interval"] == [pytest.approx(0.5), pytest.approx(0.5)]
    assert b["std_error"] == 0.0 and b["method"] == "exact"


def test_single_item_never_claims_zero_width() -> None:
    binary = estimate_from_coreset([1.0], [0], [5])["benchmarks"][0]
    assert binary["method"] == "wilson"
    lo, hi = binary["interval"]
    # Wilson with n' = 1 / (1 - 1/5) = 1.25: [n' / (n' + z^2), 1]
    assert hi == 1.0 and lo == pytest.approx(1.25 / (1.25 + Z95 ** 2))
    unanimous = estimate_from_coreset([0.0, 0.0, 0.0], [0, 0, 0], [100])["benchmarks"][0]
    assert unanimous["interval"][0] == 0.0 and unanimous["interval"][1] > 0.3
    continuous = estimate_from_coreset([0.3], [0], [100])["benchmarks"][0]
    assert continuous["method"] == "worst_case_range"
    assert continuous["std_error"] == pytest.approx(math.sqrt(0.25 * (1 - 1 / 100)))  # (hi-lo)^2/4n * fpc
    unbounded = estimate_from_coreset([3.0], [0], [100], score_range=(None, None))["benchmarks"][0]
    assert unbounded["interval"] == [-math.inf, math.inf]


def test_one_benchmark_aggregate_is_that_benchmark() -> None:
    # issue 34: one 1-item benchmark gave the benchmark Wilson's [0.207, 1] but capability and overall
    # a normal interval around the mean, [0.603, 1]; an aggregate of one benchmark is that benchmark
    out = estimate_from_coreset([1.0], [0], [5], ["x"], benchmark_names=["b"])
    bench = out["benchmarks"]["b"]
    for aggregate in (out["capabilities"]["x"], out["overall"]):
        assert aggregate["estimate"] == bench["estimate"]
        assert aggregate["interval"] == bench["interval"]
        assert aggregate["std_error"] == bench["std_error"]
    # a capability of one covered benchmark beside an uncovered one is that benchmark too
    two = estimate_from_coreset([1.0], [0], [5, 8], ["x", "x"])
    assert two["capabilities"]["x"]["interval"] == two["benchmarks"][0]["interval"]
    assert two["overall"]["interval"] == two["benchmarks"][0]["interval"]


def test_capability_and_overall_combine_benchmark_variances() -> None:
    scores = [1, 0, 1, 1, 0.2, 0.6]
    labels = [0, 0, 0, 0, 1, 1]
    out = estimate_from_coreset(scores, labels, [10, 20, 7], ["x", "x", "y"], score_range=(0, 1))
    v0 = 0.0375                                   # as in the hand example
    v1 = 0.08 / 2 * (1 - 2 / 20)                  # s^2 = (0.2^2 + 0.2^2) / 1 = 0.08
    cap = out["capabilities"]["x"]
    assert cap["estimate"] == pytest.approx((0.75 + 0.4) / 2)
    assert cap["std_error"] == pytest.approx(math.sqrt((v0 + v1) / 4))
    assert (cap["n_benchmarks"], cap["n_benchmarks_total"]) == (2, 2)
    assert out["capabilities"]["y"]["estimate"] is None  # no coreset item in capability y
    overall = out["overall"]
    assert overall["estimate"] == pytest.approx(0.575)  # mean over the 2 covered benchmarks (eq. 3)
    assert (overall["n_benchmarks"], overall["n_benchmarks_total"]) == (2, 3)
    assert out["benchmarks"][2] == {"estimate": None, "interval": None, "std_error": None,
                                    "n_items": 0, "n_total": 7, "method": None}


def test_names_ranges_and_nan_scores() -> None:
    out = estimate_from_coreset([50.0, 70.0, float("nan")], [0, 0, 0], [30], benchmark_names=["mteb"],
                                score_range=[(0, 100)])
    b = out["benchmarks"]["mteb"]
    assert b["n_items"] == 2 and b["estimate"] == pytest.approx(60.0)
    assert 0.0 <= b["interval"][0] < 60.0 < b["interval"][1] <= 100.0


def test_input_errors() -> None:
    with pytest.raises(ValueError):
        estimate_from_coreset([1.0], [0, 0], [5])
    with pytest.raises(ValueError):
        estimate_from_coreset([1.0], [3], [5])
    with pytest.raises(ValueError):
        estimate_from_coreset([1.0, 1.0], [0, 0], [1])  # more coreset items than the benchmark has
    with pytest.raises(ValueError):
        estimate_from_coreset([1.0], [0], [5], level=1.5)
