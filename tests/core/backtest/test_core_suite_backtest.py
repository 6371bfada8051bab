"""Multi-benchmark (suite) backtest on small generated data (evalplan.core.backtest.suite_backtest)."""

from __future__ import annotations

import numpy as np
import pytest

from evalplan.core.backtest.backtest import split_models
from evalplan.core.backtest.suite_backtest import OVERALL, run_suite_backtest, split_total_budget
from evalplan.core.coresets.intervals import interval_from_errors, pooled_errors


def _suite(seed: int = 0, n_models: int = 50, sizes=(40, 25)) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    ability = rng.normal(size=n_models)
    mats = []
    for n in sizes:
        diff = rng.normal(size=n)
        mats.append((rng.random((n_models, n)) < 1 / (1 + np.exp(-(ability[:, None] - diff)))).astype(float))
    return mats


def test_split_total_budget_is_proportional_with_at_least_one() -> None:
    sizes = [1000, 437, 567, 1000, 500]
    assert split_total_budget(sizes, 0.05) == [50, 22, 28, 50, 25]  # 175 = round(0.05 * 3504)
    assert sum(split_total_budget(sizes, 0.1)) == 350
    assert split_total_budget([1000, 3, 2], 0.002) == [1, 1, 1]  # max(B, round(2.01)) = 3


def test_suite_rows_per_scope_and_overall_is_the_mean() -> None:
    mats = _suite()
    rows = run_suite_backtest(mats, ["a", "b"], {"random": ["mean"], "mrmr": ["kernel_ridge"]}, budgets=(0.2,),
                              n_reference=20, seeds=[3], level=0.9)
    assert {(r["scope"], r["method"]) for r in rows} == {(s, m) for s in ("a", "b", OVERALL)
                                                          for m in ("random", "mrmr")}
    by = {(r["scope"], r["method"]): r for r in rows}
    assert by[("a", "mrmr")]["k"] == 8 and by[("b", "mrmr")]["k"] == 5 and by[(OVERALL, "mrmr")]["k"] == 13
    for r in rows:
        assert r["n_test"] == 30 and np.isfinite(r["rmse"]) and 0.0 <= r["coverage"] <= 1.0
        assert r["interval_width"] > 0
    # the random coreset + mean: recompute the overall estimate and its pooled interval by hand
    ref, test = split_models(np.mean([Y.mean(1) for Y in mats], axis=0), 20, "stratified",
                             np.random.default_rng(3))
    cols = [np.sort(np.random.default_rng([3, 7919]).choice(Y.shape[1], size=k, replace=False))
            for Y, k in zip(mats, (8, 5))]  # evalplan.core.backtest.backtest's seeded random coreset
    est = np.mean([Y[test][:, c].mean(1) for Y, c in zip(mats, cols)], axis=0)
    truth = np.mean([Y[test].mean(1) for Y in mats], axis=0)
    assert by[(OVERALL, "random")]["rmse"] == pytest.approx(float(np.sqrt(np.mean((est - truth) ** 2))))
    errors = np.vstack([Y[ref].mean(1) - Y[ref][:, c].mean(1) for Y, c in zip(mats, cols)])  # mean: no fit
    # the default "calibrated" rule: the fixed-coreset errors of a mean are the same errors (no fit)
    lo, hi = interval_from_errors(est, pooled_errors(errors), 0.9, pooled_errors(errors), "calibrated")
    assert by[(OVERALL, "random")]["coverage"] == pytest.approx(float(np.mean((lo <= truth) & (truth <= hi))))


def test_suite_rejects_misaligned_or_single_benchmark() -> None:
    mats = _suite()
    with pytest.raises(ValueError, match="same models"):
        run_suite_backtest([mats[0], mats[1][:40]], ["a", "b"], {"random": ["mean"]}, seeds=1)
    with pytest.raises(ValueError, match="at least two"):
        run_suite_backtest(mats[:1], ["a"], {"random": ["mean"]}, seeds=1)
