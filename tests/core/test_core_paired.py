"""Paired comparison (``evalplan.core.sequential.paired``): the finite-population t interval, its coverage on a
synthetic population sampled without replacement, the anytime-valid sequence, bad input."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.stats import t

from evalplan.core.sequential.paired import (
    PairedSession,
    decision_of,
    normal_difference,
    paired_interval,
    paired_sequence,
)


def population(seed: int = 0, N: int = 600) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    difficulty = rng.normal(0, 1.2, N)
    a = (rng.random(N) < 1 / (1 + np.exp(difficulty - 0.2))).astype(float)
    b = (rng.random(N) < 1 / (1 + np.exp(difficulty - 0.5))).astype(float)
    return a, b


def test_interval_is_the_finite_population_t_interval() -> None:
    a, b = population()
    idx = np.random.default_rng(1).choice(a.size, 80, replace=False)
    got = paired_interval(a[idx], b[idx], n_population=a.size, level=0.9)
    d = b[idx] - a[idx]
    se = d.std(ddof=1) / math.sqrt(80) * math.sqrt((a.size - 80) / (a.size - 1))
    q = t.ppf(0.95, 79)
    assert got.mean == pytest.approx(d.mean()) and got.std_error == pytest.approx(se)
    assert got.interval == pytest.approx((d.mean() - q * se, d.mean() + q * se))
    assert got.b_better + got.a_better + got.ties == 80 and got.level == 0.9
    full = paired_interval(a, b, n_population=a.size)
    assert full.interval == (full.mean, full.mean) == pytest.approx((float((b - a).mean()),) * 2)
    infinite = paired_interval(a[idx], b[idx])
    assert infinite.std_error > got.std_error


def test_ties_only_do_not_claim_certainty() -> None:
    got = paired_interval(np.ones(20), np.ones(20), n_population=500)
    assert got.mean == 0 and got.interval[0] < -0.05 and got.interval[1] > 0.05


@pytest.mark.parametrize("n", [30, 150])
def test_coverage_without_replacement(n: int) -> None:
    a, b = population(2)
    truth = float((b - a).mean())
    rng = np.random.default_rng(3)
    hits = 0
    reps = 3000
    for _ in range(reps):
        idx = rng.choice(a.size, n, replace=False)
        lo, hi = paired_interval(a[idx], b[idx], n_population=a.size).interval
        hits += lo <= truth <= hi
    assert hits / reps >= 0.93


def test_sequence_holds_at_every_n_and_narrows() -> None:
    a, b = population(4)
    truth = float((b - a).mean())
    rng = np.random.default_rng(5)
    misses = 0
    for _ in range(20):
        order = rng.permutation(a.size)[:300]
        seq = paired_sequence(a[order], b[order], n_population=a.size, score_range=(0.0, 1.0), breaks=400)
        assert len(seq) == 300
        misses += any(not (lo - 1e-9 <= truth <= hi + 1e-9) for lo, hi in seq)
        widths = [hi - lo for lo, hi in seq]
        assert all(w2 <= w1 + 1e-12 for w1, w2 in zip(widths, widths[1:]))  # running intersection
        assert widths[-1] < 0.5 * widths[9]
    assert misses <= 2
    # wider than the fixed-n interval at the same n (the price of looking at every n)
    fixed = paired_interval(a[order], b[order], n_population=a.size)
    assert seq[-1][1] - seq[-1][0] > fixed.interval[1] - fixed.interval[0]


def test_normal_difference_and_bad_input() -> None:
    diff, (lo, hi) = normal_difference(0.5, 0.01**2, 0.6, 0.02**2)
    assert diff == pytest.approx(0.1) and hi - diff == pytest.approx(1.959964 * math.sqrt(0.0005), rel=1e-5)
    with pytest.raises(ValueError, match="no common items"):
        paired_interval([], [])
    with pytest.raises(ValueError, match="same length"):
        paired_interval([1, 0], [1])
    with pytest.raises(ValueError, match="smaller"):
        paired_interval([1, 0, 1], [0, 0, 1], n_population=2)
    with pytest.raises(ValueError, match="level"):
        paired_interval([1, 0], [0, 0], level=1.0)
    with pytest.raises(ValueError, match="score_range"):
        paired_sequence([1.0], [0.0], n_population=5, score_range=(1.0, 1.0))


# --------------------------------------------------------------------------- paired sessions (compare_to)


def _series(seed: int, n: int = 800, agreement: float = 0.93) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    c = (rng.random(n) < 0.6).astype(float)
    y = c.copy()
    flip = rng.random(n) > agreement
    y[flip] = 1.0 - y[flip]
    return c, y


def test_paired_session_decisions_are_right_when_the_sequence_covers() -> None:
    assert decision_of((0.01, 0.2), 0.02) == "better" and decision_of((-0.2, -0.01), None) == "worse"
    assert decision_of((-0.01, 0.015), 0.02) == "within" and decision_of((-0.01, 0.015), None) is None
    wrong = 0
    for seed in range(20):
        c, y = _series(seed)
        truth = float((y - c).mean())
        s = PairedSession(c, score_range=(0.0, 1.0), delta=0.05, seed=seed)
        while not s.stopped:
            item = s.propose()[0]
            s.observe(item, float(y[item]))
        lo, hi = s.difference_ci
        assert s.n_observed == len(s.trajectory) and s.moves and s.moves[-1]["n"] <= s.n_observed
        if s.stop_reason == "decision":
            right = {"better": truth > 0, "worse": truth < 0, "within": abs(truth) <= 0.05}[str(s.decision)]
            wrong += not right
        assert s.ci == (max(0.0, s.comparator_mean + lo), min(1.0, s.comparator_mean + hi))
    assert wrong <= 1


def test_paired_session_draws_from_the_comparators_items_only() -> None:
    c = np.full(50, np.nan)
    c[:20] = 1.0
    s = PairedSession(c, score_range=(0.0, 1.0), seed=3, min_items=50)
    seen = set()
    while not s.stopped:
        item = s.propose()[0]
        seen.add(item)
        s.observe(item, 1.0)
    assert seen == set(range(20)) and s.stop_reason == "exhausted" and s.difference == 0.0
    with pytest.raises(ValueError, match="delta"):
        PairedSession(c, score_range=(0.0, 1.0), delta=0.0)
    with pytest.raises(ValueError, match="bounded"):
        PairedSession(c, score_range=(0.0, float("inf")))
