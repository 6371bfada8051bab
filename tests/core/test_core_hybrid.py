"""Unit tests of evalplan.core.selection.hybrid (facility location within difficulty strata) and
evalplan.core.backtest.vs_random (backtest of a selection against random coresets). No database."""

from __future__ import annotations

import numpy as np
import pytest

from evalplan.core.backtest.vs_random import (
    compare_to_random,
    crossfit_errors,
    overall_errors,
    recommendation,
    reference_folds,
)
from evalplan.core.selection import REFERENCE_TEXT_METHODS, TEXT_METHODS
from evalplan.core.selection.baselines import stratified_counts
from evalplan.core.selection.facility_location import FacilityLocation
from evalplan.core.selection.hybrid import HybridFacilityLocation, difficulty_strata, item_difficulty


def data(seed: int = 0, n: int = 120, d: int = 6, n_bench: int = 1) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d)) + 0.2
    labels = np.sort(rng.integers(0, n_bench, n))
    return X, labels, rng.random(n)


def synthetic_scores(seed: int = 0, n_models: int = 40, n: int = 300) -> tuple[np.ndarray, np.ndarray]:
    """Binary scores with a strong item-difficulty effect: P(correct) = sigmoid(ability - hardness)."""
    rng = np.random.default_rng(seed)
    ability = rng.normal(0, 1, n_models)[:, None]
    hardness = rng.normal(0, 2, n)[None, :]
    p = 1 / (1 + np.exp(-(ability - hardness)))
    return (rng.random((n_models, n)) < p).astype(float), hardness.ravel()


# --------------------------------------------------------------------------- the hybrid selector

def test_registered_apart_from_the_paper_methods() -> None:
    assert REFERENCE_TEXT_METHODS == {"facility_location_hybrid": HybridFacilityLocation}
    assert "facility_location_hybrid" not in TEXT_METHODS
    assert TEXT_METHODS["facility_location"] is FacilityLocation
    assert set(HybridFacilityLocation.PARAMS) == {"strata", "alpha"}


@pytest.mark.parametrize(("n", "k", "strata"), [(120, 10, 5), (120, 7, 3), (50, 50, 5), (30, 2, 5), (9, 1, 4)])
def test_budget_respected_and_split_over_strata(n: int, k: int, strata: int) -> None:
    X, labels, d = data(n=n)
    fit = HybridFacilityLocation(k=k, strata=strata).fit(X, labels, difficulty=d)
    assert fit.ranking_.shape == (k,) and np.unique(fit.ranking_).size == k
    n_groups = min(strata, k)
    assert len(fit.groups_) == n_groups
    sizes = np.array([g["size"] for g in fit.groups_])
    picked = np.array([g["picked"] for g in fit.groups_])
    assert picked.sum() == k
    assert np.array_equal(picked, stratified_counts(sizes, k))
    assert np.array_equal(np.bincount(fit.strata_[fit.ranking_], minlength=n_groups), picked)
    assert sizes.max() - sizes.min() <= 1  # equal-size quantile bins


def test_strata_are_difficulty_quantiles() -> None:
    X, labels, d = data(n=100)
    fit = HybridFacilityLocation(k=10, strata=4).fit(X, labels, difficulty=d)
    ranges = [(g["low"], g["high"]) for g in fit.groups_]
    assert all(lo <= hi for lo, hi in ranges)
    assert all(ranges[i][1] <= ranges[i + 1][0] for i in range(len(ranges) - 1))
    for g, (lo, hi) in enumerate(ranges):
        members = d[fit.strata_ == g]
        assert members.min() == lo and members.max() == hi


def test_each_stratum_is_facility_location_on_its_items() -> None:
    X, labels, d = data(n=90)
    fit = HybridFacilityLocation(k=9, strata=3, alpha=2.0).fit(X, labels, difficulty=d)
    for g, info in enumerate(fit.groups_):
        rows = np.flatnonzero(fit.strata_ == g)
        own = FacilityLocation(k=info["picked"], alpha=2.0, stratify=False).fit(X[rows])
        in_group = [r for r in fit.ranking_.tolist() if fit.strata_[r] == g]
        assert in_group == rows[own.ranking_].tolist()  # same items, same order


def test_benchmarks_get_proportional_budgets_and_their_own_strata() -> None:
    X, labels, d = data(n=150, n_bench=3)
    fit = HybridFacilityLocation(k=12, strata=2).fit(X, labels, difficulty=d)
    per_bench = np.bincount(labels[fit.ranking_], minlength=3)
    assert np.array_equal(per_bench, stratified_counts(np.bincount(labels), 12))
    for g, info in enumerate(fit.groups_):
        assert set(labels[fit.strata_ == g].tolist()) == {info["benchmark"]}


def test_unknown_difficulty_is_its_own_stratum() -> None:
    X, labels, d = data(n=60)
    d[:12] = np.nan
    fit = HybridFacilityLocation(k=10, strata=4).fit(X, labels, difficulty=d)
    unknown = [g for g, info in enumerate(fit.groups_) if info["unknown"]]
    assert len(unknown) == 1 and fit.groups_[unknown[0]]["size"] == 12
    assert set(np.flatnonzero(fit.strata_ == unknown[0]).tolist()) == set(range(12))
    assert fit.groups_[unknown[0]]["picked"] == 2  # 10 * 12 / 60


def test_deterministic_and_seed_free() -> None:
    X, labels, d = data()
    a = HybridFacilityLocation(k=15, seed=3).fit(X, labels, difficulty=d)
    b = HybridFacilityLocation(k=15, seed=3).fit(X, labels, difficulty=d)
    c = HybridFacilityLocation(k=15, seed=4).fit(X, labels, difficulty=d)
    assert np.array_equal(a.ranking_, b.ranking_) and np.array_equal(a.gains_, b.gains_)
    assert np.array_equal(a.ranking_, c.ranking_)  # the method is deterministic; the seed is not used
    other = HybridFacilityLocation(k=15).fit(X, labels, difficulty=d[::-1].copy())
    assert not np.array_equal(np.sort(a.ranking_), np.sort(other.ranking_))  # the difficulty matters


def test_bad_inputs() -> None:
    X, labels, d = data(n=20)
    with pytest.raises(ValueError, match="difficulty"):
        HybridFacilityLocation(k=2).fit(X, labels)
    with pytest.raises(ValueError, match="shape"):
        HybridFacilityLocation(k=2).fit(X, labels, difficulty=d[:5])
    with pytest.raises(ValueError, match="finite"):
        HybridFacilityLocation(k=2).fit(X, labels, difficulty=np.full(20, np.inf))
    with pytest.raises(ValueError, match="strata"):
        HybridFacilityLocation(k=2, strata=0).validate_params()
    with pytest.raises(ValueError, match="alpha"):
        HybridFacilityLocation(k=2, alpha=-1.0).validate_params()
    with pytest.raises(ValueError, match="larger"):
        HybridFacilityLocation(k=21).fit(X, labels, difficulty=d)


def test_difficulty_strata_and_item_difficulty() -> None:
    Y = np.array([[1.0, 0.0, np.nan], [0.0, 0.0, np.nan]])
    assert np.allclose(item_difficulty(Y)[:2], [0.5, 0.0]) and np.isnan(item_difficulty(Y)[2])
    group, groups = difficulty_strata(np.array([0.9, 0.1, 0.5, 0.3]), np.zeros(4, dtype=np.int64),
                                      np.array([2]), strata=2)
    assert group.tolist() == [1, 0, 1, 0]
    assert [(g["low"], g["high"]) for g in groups] == [(0.1, 0.3), (0.5, 0.9)]


# --------------------------------------------------------------------------- vs_random

def test_a_selection_matching_the_difficulty_beats_random() -> None:
    Y, hardness = synthetic_scores()
    labels = np.zeros(Y.shape[1], dtype=np.int64)
    k = 20
    # systematic sample over the true difficulty order: a stratified design, much better than random
    order = np.argsort(hardness)
    good = order[np.linspace(0, order.size - 1, k).round().astype(int)]
    comparison = compare_to_random(overall_errors(Y, labels, 1, good), Y, labels, [k], draws=300, seed=1)
    assert comparison["rmse_ratio"] < 0.8
    assert comparison["p_beats_random"] >= 0.8
    assert recommendation("facility_location_hybrid", comparison, 1)["method"] == "facility_location_hybrid"


def test_a_biased_selection_loses_to_random_and_random_is_recommended() -> None:
    Y, hardness = synthetic_scores()
    labels = np.zeros(Y.shape[1], dtype=np.int64)
    k = 20
    easiest = np.argsort(hardness)[:k]  # every model's estimate is far too high
    comparison = compare_to_random(overall_errors(Y, labels, 1, easiest), Y, labels, [k], draws=300, seed=1)
    assert comparison["rmse_ratio"] > 2
    assert comparison["p_beats_random"] == 0.0
    rec = recommendation("facility_location", comparison, 1)
    assert rec["method"] == "random"
    assert rec["expected_rmse"] == comparison["random_rmse"]
    assert rec["interval"]["level"] == 0.95 and rec["interval"]["half_width"] > 0
    assert recommendation("facility_location", comparison, 3)["method"] == "stratified_random"


def test_recommendation_rule_is_the_rmse_ratio() -> None:
    base = {"rmse": 0.05, "random_rmse": 0.05, "p_beats_random": 0.45, "random_interval": {"level": 0.95,
                                                                                          "half_width": 0.1}}
    assert recommendation("facility_location_hybrid", {**base, "rmse_ratio": 0.9}, 1)["method"] == \
        "facility_location_hybrid"
    assert recommendation("facility_location_hybrid", {**base, "rmse_ratio": 1.0}, 1)["method"] == "random"
    assert recommendation("k_center", {**base, "rmse_ratio": float("nan")}, 1)["method"] == "random"
    assert recommendation("random", {**base, "rmse_ratio": 1.5}, 1)["method"] == "random"


def test_random_is_about_even_with_random() -> None:
    Y, _ = synthetic_scores()
    labels = np.zeros(Y.shape[1], dtype=np.int64)
    rng = np.random.default_rng(7)
    ps, ratios = [], []
    for _ in range(20):
        sel = rng.choice(Y.shape[1], 20, replace=False)
        c = compare_to_random(overall_errors(Y, labels, 1, sel), Y, labels, [20], draws=100, seed=2)
        ps.append(c["p_beats_random"])
        ratios.append(c["rmse_ratio"])
    assert 0.3 < np.mean(ps) < 0.7
    assert 0.8 < np.mean(ratios) < 1.2


def test_random_draws_keep_the_per_benchmark_counts() -> None:
    Y, _ = synthetic_scores(n=120)
    labels = np.repeat([0, 1, 2], 40)
    errors = overall_errors(Y, labels, 3, [0, 1, 40, 41, 42, 80])
    c = compare_to_random(errors, Y, labels, [2, 3, 1], draws=10)
    assert c["counts"] == [2, 3, 1] and c["draws"] == 10 and c["n_references"] == Y.shape[0]


def test_overall_errors_is_the_mean_over_benchmarks() -> None:
    Y = np.array([[1.0, 0.0, 1.0, 1.0], [0.0, 0.0, np.nan, 1.0]])
    labels = np.array([0, 0, 1, 1])
    # model 0: truth (0.5 + 1) / 2, estimate from items 0, 2 = (1 + 1) / 2; model 1: truth (0 + 1) / 2,
    # estimate: benchmark 1's only pick is missing, so the overall is benchmark 0's 0
    assert np.allclose(overall_errors(Y, labels, 2, [0, 2]), [0.25, -0.5])


def test_crossfit_never_scores_a_reference_on_its_own_selection() -> None:
    Y, hardness = synthetic_scores(n_models=30, n=100)
    labels = np.zeros(100, dtype=np.int64)
    seen: list[np.ndarray] = []

    def select(train: np.ndarray) -> np.ndarray:
        seen.append(train)
        return np.argsort(item_difficulty(Y[train]))[:10]

    errors = crossfit_errors(select, Y, labels, 1, n_folds=3, seed=5)
    folds = reference_folds(30, 3, 5)
    assert len(seen) == 3
    for train, test in zip(seen, folds):
        assert np.intersect1d(train, test).size == 0 and train.size + test.size == 30
        assert np.allclose(errors[test], overall_errors(Y[test], labels, 1, select(train)))
    with pytest.raises(ValueError, match="2 reference"):
        crossfit_errors(select, Y[:1], labels, 1)


def test_crossfitted_hybrid_beats_random_where_difficulty_carries_the_signal() -> None:
    Y, _ = synthetic_scores(n_models=45, n=400)
    labels = np.zeros(400, dtype=np.int64)
    X = np.random.default_rng(3).standard_normal((400, 8))  # embeddings without signal

    def select(train: np.ndarray) -> np.ndarray:
        return HybridFacilityLocation(k=20, strata=10).fit(X, labels, difficulty=item_difficulty(Y[train])).ranking_

    comparison = compare_to_random(crossfit_errors(select, Y, labels, 1, seed=0), Y, labels, [20], draws=300)
    assert comparison["rmse_ratio"] < 0.85 and comparison["p_beats_random"] >= 0.8
