"""Item-level predictions and Agreement (paper 003 App. C.1) on small generated data."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.kernel_ridge import KernelRidge
from sklearn.linear_model import Ridge

from evalplan.core.backtest.backtest import run_backtest
from evalplan.core.coresets.item_predictions import (
    _loo_lambda,
    agreement_per_target,
    anchor_item_predictions,
    regression_item_predictions,
)
from evalplan.core.coresets.predictors import LAMBDAS_BINARY, polynomial_kernel


def _binary(M: int = 40, N: int = 60, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    theta = rng.normal(size=(M, 1))
    b = rng.normal(size=N)
    return (rng.uniform(size=(M, N)) < 1 / (1 + np.exp(-(theta - b)))).astype(float)


def _brute_lambda(kind: str, X: np.ndarray, Y: np.ndarray) -> float:
    mses = []
    for lam in LAMBDAS_BINARY:
        err = []
        for i in range(len(X)):
            m = np.arange(len(X)) != i
            if kind == "kernel_ridge":
                f = KernelRidge(alpha=lam, kernel="poly", degree=2, coef0=1.0).fit(X[m], Y[m])
            else:
                f = Ridge(alpha=lam).fit(X[m], Y[m])
            err.append(Y[i] - f.predict(X[i:i + 1])[0])
        mses.append(np.mean(np.square(err)))
    return float(LAMBDAS_BINARY[int(np.argmin(mses))])


@pytest.mark.parametrize("kind", ["kernel_ridge", "ridge"])
def test_regression_item_predictions_equal_sklearn_multi_output(kind: str) -> None:
    Y = _binary()
    coreset = np.array([3, 10, 17, 25, 40, 51])
    X, Xt = Y[:30][:, coreset], Y[30:][:, coreset]
    lam = _brute_lambda(kind, X, Y[:30])
    if kind == "kernel_ridge":
        ref = KernelRidge(alpha=lam, kernel="poly", degree=2, coef0=1.0).fit(X, Y[:30])
    else:
        ref = Ridge(alpha=lam).fit(X, Y[:30])
    got = regression_item_predictions(kind, X, Y[:30], Xt)
    assert got.shape == (10, Y.shape[1])
    assert np.allclose(got, np.clip(ref.predict(Xt), 0, 1), atol=1e-8)


def test_loo_lambda_picks_the_brute_force_minimum() -> None:
    Y = _binary(seed=3)
    X = Y[:25][:, [1, 2, 8, 13, 21]]
    K = polynomial_kernel(X, X)
    ev, Q = np.linalg.eigh(K)
    assert _loo_lambda(np.clip(ev, 0, None), Q, Y[:25], np.asarray(LAMBDAS_BINARY)) == \
        _brute_lambda("kernel_ridge", X, Y[:25])


def test_anchor_predictions_copy_the_anchor_score() -> None:
    Xt = np.array([[1.0, 0.0], [0.0, 1.0]])
    labels = np.array([0, 0, 1, 1, 0])
    assert anchor_item_predictions(labels, Xt).tolist() == [[1, 1, 0, 0, 1], [0, 0, 1, 1, 0]]


def test_agreement_counts_thresholded_matches_and_uses_observed_coreset() -> None:
    truth = np.array([[1, 0, 1, 0], [0, 0, 1, 1]], dtype=float)
    pred = np.array([[0.9, 0.4, 0.2, 0.0], [0.0, 0.0, 0.0, 0.0]])
    # item 2 is in the coreset: its observed score replaces the prediction
    assert agreement_per_target(pred, truth, [2]).tolist() == [1.0, 0.75]
    assert agreement_per_target(pred, truth, []).tolist() == [0.75, 0.5]
    with pytest.raises(ValueError):
        agreement_per_target(pred[:, :3], truth, [])


def test_backtest_reports_agreement_for_item_level_predictors_only() -> None:
    Y = _binary(M=60, N=80, seed=1)
    rows = run_backtest(Y, ["random", "anchor_points", "irt"],
                        {"random": ["mean", "kernel_ridge"], "anchor_points": ["weighted_mean"], "irt": ["gp_irt"]},
                        budgets=(0.2,), n_reference=30, split="random", seeds=1, intervals=False,
                        method_params={"irt": {"epochs": 300, "dim": 1}})
    by = {r["predictor"]: r["agreement"] for r in rows}
    assert np.isnan(by["mean"])
    for name in ("kernel_ridge", "weighted_mean", "gp_irt"):
        # better than chance; the coreset (20% of items) alone guarantees >= 0.2
        assert 0.6 < by[name] <= 1.0, (name, by[name])
    cont = run_backtest(Y * 0.5 + 0.25, ["random"], {"random": ["ridge"]}, budgets=(0.2,), n_reference=30,
                        split="random", seeds=1, intervals=False)
    assert np.isnan(cont[0]["agreement"])  # not defined for non-binary scores
