"""Interval rules of app.core.intervals (issue 16 §2): the "calibrated" rule and the old "conformal" one."""

from __future__ import annotations

import math

import numpy as np
import pytest

from app.core.intervals import (
    DEFAULT_INTERVAL,
    calibrated_half_width,
    conformal_half_width,
    fixed_coreset_errors,
    interval_from_errors,
)
from app.core.predictors import KernelRidgePredictor


def test_calibrated_half_width_by_hand() -> None:
    cf = np.array([3.0, -1.0, 2.0, -2.0])
    fx = np.array([1.0, -0.5, 0.5, -1.0])
    rc, rf = math.sqrt(np.mean(cf**2)), math.sqrt(np.mean(fx**2))
    pooled = np.sort(np.abs(np.concatenate([cf / rc, fx / rf])))
    rank = math.ceil(9 * 0.8)  # (2M + 1) level, M = 4
    assert calibrated_half_width(cf, fx, 0.8) == pytest.approx(pooled[rank - 1] * math.sqrt(rc * rf))
    assert calibrated_half_width(cf, fx, 0.95) == math.inf  # rank 9 > 8 pooled errors
    lo, hi = interval_from_errors(np.array([0.5, 0.6]), cf, 0.8, fx, "calibrated")
    np.testing.assert_allclose(hi - lo, 2 * calibrated_half_width(cf, fx, 0.8))
    # "conformal" (and any rule without the fixed errors) is the old split-conformal rank
    for args in ((fx, "conformal"), (None, "calibrated"), (None, None)):
        lo, hi = interval_from_errors(0.0, cf, 0.8, *args)
        assert hi == conformal_half_width(cf, 0.8) == 3.0 and lo == -3.0  # rank ceil(5 * 0.8) = 4 of 4
    assert DEFAULT_INTERVAL == "calibrated"
    with pytest.raises(ValueError, match="unknown interval rule"):
        interval_from_errors(0.0, cf, 0.8, fx, "wide")
    assert calibrated_half_width(np.zeros(5), np.zeros(5), 0.9) == 0.0


def test_fixed_coreset_errors_are_leave_one_out_refits() -> None:
    rng = np.random.default_rng(3)
    X = rng.random((12, 5))
    y = X.mean(1) + rng.normal(0, 0.02, 12)
    e = fixed_coreset_errors(KernelRidgePredictor, X, y)
    for i in (0, 7):
        keep = np.arange(12) != i
        assert e[i] == pytest.approx(y[i] - KernelRidgePredictor().fit(X[keep], y[keep]).predict(X[i:i + 1])[0])


@pytest.mark.parametrize("tails", ["normal", "student5"])
def test_calibrated_coverage_is_nominal_where_conformal_over_covers(tails: str) -> None:
    """Synthetic calibration sets shaped like the issue's diagnosis: the cross-fitted errors are 25%
    too wide and the fixed-coreset errors 25% too narrow (their geometric mean is the targets' scale).
    Over 2,000 fixed-seed draws (30 references, 50 targets each) the calibrated interval's mean
    coverage is within 0.015 of nominal at 80/90/95% (its standard error is ~0.0015, so this is
    ten standard errors and deterministic for the seed); the old rule over-covers by > 0.03."""
    rng = np.random.default_rng(16)
    draw = (lambda n: rng.normal(size=n)) if tails == "normal" else (lambda n: rng.standard_t(5, size=n))
    M, T, R, c = 30, 50, 2000, 1.25
    for level in (0.8, 0.9, 0.95):
        cal, old = np.empty(R), np.empty(R)
        for r in range(R):
            cf, fx, target = c * draw(M), draw(M) / c, draw(T)
            cal[r] = np.mean(np.abs(target) <= calibrated_half_width(cf, fx, level))
            old[r] = np.mean(np.abs(target) <= conformal_half_width(cf, level))
        assert abs(cal.mean() - level) < 0.015, (tails, level, cal.mean())
        assert old.mean() > level + 0.03, (tails, level, old.mean())
