"""The design-based coreset (issue 25 §3): stratified draw with known inclusion probabilities and the
difference estimator, whose interval holds for a target unlike every reference."""

from __future__ import annotations

import numpy as np
import pytest

from evalplan.core.coresets.design_coreset import DesignCoreset, design_coreset, design_estimate, neyman_allocation


def population(n_models: int = 40, n_items: int = 400, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Binary 2PL-like scores of references of ability in [-1, 1] and the item difficulties."""
    rng = np.random.default_rng(seed)
    difficulty = rng.normal(0.0, 1.5, n_items)
    ability = np.linspace(-1.0, 1.0, n_models)
    p = 1.0 / (1.0 + np.exp(-(ability[:, None] - difficulty[None, :])))
    return (rng.random(p.shape) < p).astype(float), difficulty


def test_neyman_allocation_is_proportional_bounded_and_exact() -> None:
    counts = neyman_allocation(np.array([100, 100, 10, 100]), np.array([0.5, 0.1, 0.5, 0.0]), 40)
    assert counts.sum() == 40
    assert counts[0] > counts[1] >= counts[3] >= 2 and counts[2] <= 10
    whole = neyman_allocation(np.array([3, 50]), np.array([10.0, 0.1]), 20)  # a small, variable stratum is taken whole
    assert whole.tolist() == [3, 17]
    with pytest.raises(ValueError, match="below 2 items per stratum"):
        neyman_allocation(np.array([10, 10, 10]), np.ones(3), 5)
    with pytest.raises(ValueError, match="between 1 and"):
        neyman_allocation(np.array([10]), np.ones(1), 11)


def test_draw_records_its_inclusion_probabilities_and_is_seeded() -> None:
    Y, _ = population()
    d = design_coreset(Y, 40, seed=3, score_range=(0.0, 1.0))
    assert d.items.size == 40 and np.unique(d.items).size == 40 and d.n_items == 400
    drawn = np.bincount(d.strata, minlength=d.stratum_sizes.size)
    assert np.allclose(d.inclusion, drawn[d.strata] / d.stratum_sizes[d.strata])
    assert np.isclose((1.0 / d.inclusion).sum(), 400.0)  # Horvitz-Thompson weights add up to N
    means = Y.mean(axis=0)  # strata are contiguous in the references' item means
    assert all(means[d.item_strata == h].max() <= means[d.item_strata == h + 1].min()
               for h in range(d.stratum_sizes.size - 1))
    assert np.array_equal(design_coreset(Y, 40, seed=3, score_range=(0.0, 1.0)).items, d.items)
    assert not np.array_equal(design_coreset(Y, 40, seed=4, score_range=(0.0, 1.0)).items, d.items)


def test_every_item_gives_the_truth_with_no_uncertainty() -> None:
    Y, _ = population(n_items=60)
    d = design_coreset(Y, 60, score_range=(0.0, 1.0))
    target = Y[-1]
    e = design_estimate(d, target[d.items], level=0.9)
    assert e.estimate == pytest.approx(target.mean()) and e.std_error == 0.0
    assert e.lower == pytest.approx(target.mean()) and e.upper == pytest.approx(target.mean())


def test_interval_covers_a_target_better_than_every_reference() -> None:
    """Over 300 draws of 80 items of 400, a target two logits above the best reference: the estimate is unbiased
    and the 90% interval covers near its level (the references only design and assist; validity is the
    draw's; at 40 items the normal approximation of a near-ceiling binary mean covers about 0.84)."""
    Y, difficulty = population(seed=1)
    rng = np.random.default_rng(7)
    target = (rng.random(difficulty.size) < 1.0 / (1.0 + np.exp(-(3.0 - difficulty)))).astype(float)
    assert target.mean() > Y.mean(axis=1).max()
    truth = float(target.mean())
    hits, errors = [], []
    for seed in range(300):
        d = design_coreset(Y, 80, seed=seed, score_range=(0.0, 1.0))
        e = design_estimate(d, target[d.items], level=0.9)
        hits.append(e.lower <= truth <= e.upper)
        errors.append(e.estimate - truth)
    assert 0.85 <= np.mean(hits) <= 0.97
    assert abs(np.mean(errors)) < 0.01  # bias: GREG is approximately design-unbiased
    plain = design_estimate(design_coreset(Y, 40, seed=0, score_range=(0.0, 1.0)), target[:40] * 0 + 1.0, level=0.9)
    assert plain.upper <= 1.0 and plain.lower < 1.0  # clipped to the range, never a zero-width interval at the edge


def test_bad_inputs_are_refused() -> None:
    Y, _ = population(n_items=30)
    with pytest.raises(ValueError, match="2 to 30 items"):
        design_coreset(Y, 1)
    with pytest.raises(ValueError, match="finite"):
        design_coreset(np.full((3, 10), np.nan), 4)
    d = design_coreset(Y, 10, score_range=(0.0, 1.0))
    with pytest.raises(ValueError, match="one per coreset item"):
        design_estimate(d, np.zeros(9))
    with pytest.raises(ValueError, match="level"):
        design_estimate(d, np.zeros(10), level=1.0)


def test_take_all_stratum_enters_exactly_and_the_rest_is_drawn() -> None:
    """Items fixed beforehand (a method's selection) form a stratum with inclusion probability 1: in the
    coreset, no variance of their own, and the draw keeps covering a target above every reference."""
    Y, difficulty = population(seed=1)
    fixed = [5, 17, 40, 41, 99, 250, 399]
    d = design_coreset(Y, 47, seed=2, score_range=(0.0, 1.0), take_all=fixed)
    assert d.items.size == 47 and set(fixed) <= set(d.items.tolist())
    assert np.all(d.inclusion[np.isin(d.items, fixed)] == 1.0) and np.all(d.inclusion[~np.isin(d.items, fixed)] < 1)
    assert np.isclose((1.0 / d.inclusion).sum(), 400.0)
    assert DesignCoreset.from_state(d.state()).state() == d.state()
    whole = design_coreset(Y[:, :10], 10, take_all=range(10))  # every item taken whole: the exact mean
    e = design_estimate(whole, Y[-1, :10][whole.items])
    assert e.estimate == pytest.approx(Y[-1, :10].mean()) and e.std_error == 0.0
    rng = np.random.default_rng(7)
    target = (rng.random(difficulty.size) < 1.0 / (1.0 + np.exp(-(3.0 - difficulty)))).astype(float)
    truth = float(target.mean())
    hits = []
    for seed in range(200):
        d = design_coreset(Y, 80, seed=seed, score_range=(0.0, 1.0), take_all=np.arange(0, 400, 10))
        e = design_estimate(d, target[d.items], level=0.9)
        hits.append(e.lower <= truth <= e.upper)
    assert 0.85 <= np.mean(hits) <= 0.98
    with pytest.raises(ValueError, match=r"42 to 400 items \(40 taken whole, at least 2 drawn\)"):
        design_coreset(Y, 41, take_all=np.arange(0, 400, 10))
    with pytest.raises(ValueError, match="take_all: distinct item indices"):
        design_coreset(Y, 41, take_all=[3, 3])


def test_a_given_working_model_shift_keeps_the_estimate_unbiased() -> None:
    """``delta`` given (a level set by another predictor, issue 35's difference estimator): the fitted shift gives
    the same estimate as fitting it, and a wrong shift fixed before the draw stays design-unbiased (only wider)."""
    Y, difficulty = population(seed=2)
    target = Y[-1]
    d = design_coreset(Y, 80, seed=0, score_range=(0.0, 1.0))
    fitted = design_estimate(d, target[d.items], level=0.9)
    again = design_estimate(d, target[d.items], level=0.9, delta=fitted.delta)
    assert again.estimate == pytest.approx(fitted.estimate) and again.std_error == pytest.approx(fitted.std_error)
    errors = [design_estimate(design_coreset(Y, 80, seed=s, score_range=(0.0, 1.0)),
                              target[design_coreset(Y, 80, seed=s, score_range=(0.0, 1.0)).items],
                              level=0.9, delta=fitted.delta - 1.5).estimate - target.mean() for s in range(200)]
    assert abs(np.mean(errors)) < 0.01
