"""Unit tests of evalplan.core.coresets.metrics on hand-computed examples (paper §3.2, eqs. 3-5)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from evalplan.core.coresets.metrics import (
    benchmark_scores,
    cap_mre,
    capability_scores,
    coreset_errors,
    mre,
    overall_scores,
)

# items:          0    1    2    3
LABELS = np.array([0,   0,   1,   2])
Y = np.array([
    [1.0, 0.0, 1.0, 0.5],   # model 1: benchmarks 0.5, 1.0, 0.5 -> overall 2/3
    [0.0, 1.0, 0.5, 1.0],   # model 2: benchmarks 0.5, 0.5, 1.0 -> overall 2/3
])
CAPS = ["a", "a", "b"]      # benchmark -> capability


def test_benchmark_capability_and_overall_scores() -> None:
    full = benchmark_scores(Y, LABELS)
    assert full.tolist() == [[0.5, 1.0, 0.5], [0.5, 0.5, 1.0]]
    caps, names = capability_scores(full, CAPS)
    assert names == ["a", "b"]
    assert caps.tolist() == [[0.75, 0.5], [0.5, 1.0]]
    assert overall_scores(full) == pytest.approx([2 / 3, 2 / 3])
    part = benchmark_scores(Y, LABELS, [0, 3], n_benchmarks=3)
    assert part[:, [0, 2]].tolist() == [[1.0, 0.5], [0.0, 1.0]]
    assert np.all(np.isnan(part[:, 1]))  # benchmark 1 not covered
    assert overall_scores(part).tolist() == [0.75, 0.5]  # mean over covered benchmarks only (eq. 3)


def test_mre_and_cap_mre_hand_example() -> None:
    # pred overall (0.75, 0.5) vs true (2/3, 2/3): errors 0.125 and 0.25
    assert mre([0.75, 0.5], [2 / 3, 2 / 3]) == pytest.approx(0.1875)
    # capability a: |1 - .75| / .75 = 1/3 and |0 - .5| / .5 = 1 -> 2/3; capability b: exact -> 0
    assert cap_mre([[1.0, 0.5], [0.0, 1.0]], [[0.75, 0.5], [0.5, 1.0]]) == pytest.approx(1 / 3)


def test_coreset_errors_hand_example() -> None:
    out = coreset_errors(Y, LABELS, CAPS, [0, 3])
    assert out["mre"] == pytest.approx(0.1875)
    assert out["cap_mre"] == pytest.approx(1 / 3)
    assert (out["n_benchmarks_covered"], out["n_benchmarks"]) == (2, 3)
    assert (out["n_capabilities_covered"], out["n_capabilities"]) == (2, 2)


def test_full_selection_has_zero_error_and_signed_errors_cancel_in_mre_only() -> None:
    full = coreset_errors(Y, LABELS, CAPS, [0, 1, 2, 3])
    assert full["mre"] == 0.0 and full["cap_mre"] == 0.0
    # one model, capability a over-estimated by +0.25 and b under-estimated by -0.25: MRE sees 0
    assert mre([0.5], [0.5]) == 0.0
    assert cap_mre([[0.75, 0.25]], [[0.5, 0.5]]) == pytest.approx(0.5)


def test_uncovered_capability_and_zero_true_scores_are_left_out() -> None:
    out = coreset_errors(Y, LABELS, CAPS, [2])  # only benchmark 1 (capability a)
    assert out["n_capabilities_covered"] == 1
    # a: pred = benchmark 1 = (1.0, 0.5) vs true (0.75, 0.5): errors 1/3 and 0
    assert out["cap_mre"] == pytest.approx(1 / 6)
    assert mre([0.1, 0.5], [0.0, 0.25]) == pytest.approx(1.0)  # model with true 0 left out
    assert math.isnan(mre([np.nan], [0.5]))


def test_nan_scores_are_ignored_in_means() -> None:
    Yn = Y.copy()
    Yn[0, 1] = np.nan
    assert benchmark_scores(Yn, LABELS)[0].tolist() == [1.0, 1.0, 0.5]


def test_shape_errors() -> None:
    with pytest.raises(ValueError):
        benchmark_scores(Y, LABELS[:3])
    with pytest.raises(ValueError):
        coreset_errors(Y, LABELS, ["a", "b"], [0])
    with pytest.raises(ValueError):
        mre([1.0, 2.0], [1.0])
