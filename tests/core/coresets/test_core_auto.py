"""``evalplan.core.coresets.auto``: the nested-CV choice of a coreset method (issue 16 §1) on GENERATED data where
one candidate is clearly best, and the honest error = the outer folds' errors of the whole procedure."""

from __future__ import annotations

import numpy as np
import pytest

from evalplan.core.backtest.backtest import run_backtest
from evalplan.core.coresets.auto import (
    AveragePredictor,
    Candidate,
    SelectorSpec,
    _folds,
    _spec_errors,
    auto_select,
    fit_candidate,
    inner_table,
)
from evalplan.core.coresets.predictors import KernelRidgePredictor, RidgePredictor

MEAN_VS_RIDGE = (SelectorSpec("random", {}, ("mean", "ridge"), average=False),)


def offset_matrix(M: int = 30, N: int = 80, seed: int = 0) -> np.ndarray:
    """Continuous scores ``theta_m * s_i + b_i`` (+ small noise) with item offsets ``b_i`` spread wide:
    a random coreset's *mean* inherits the offsets' sampling error, a ridge on it does not."""
    rng = np.random.default_rng(seed)
    theta = rng.normal(0.0, 1.0, M)
    slope = rng.uniform(0.5, 1.5, N)
    offset = rng.normal(0.0, 3.0, N)
    return theta[:, None] * slope[None, :] + offset[None, :] + rng.normal(0.0, 0.05, (M, N))


def constant_half_matrix(M: int = 30, N: int = 60, seed: int = 0) -> np.ndarray:
    """Binary 2-PL scores where half the items are answered by nobody (no information): mRMR never
    picks them, a random coreset wastes about half its budget on them."""
    rng = np.random.default_rng(seed)
    theta = rng.normal(0.0, 1.0, M)
    b = rng.normal(0.0, 1.0, N)
    Y = (rng.random((M, N)) < 1.0 / (1.0 + np.exp(-(theta[:, None] - b[None, :])))).astype(float)
    Y[:, N // 2:] = 0.0
    return Y


def test_picks_the_clearly_better_predictor() -> None:
    Y = offset_matrix()
    res = auto_select(Y, k=8, seed=0, selectors=MEAN_VS_RIDGE, max_seconds=None)
    assert res.choice.predictor == "ridge", res.table
    rows = {r["predictor"]: r for r in res.table}
    assert rows["ridge"]["cv_rmse"] < 0.5 * rows["mean"]["cv_rmse"], rows
    assert all(o["chosen"] == "random+ridge" for o in res.outer)  # every outer fold makes the same choice
    # the stored model is the chosen one, fitted on all references
    X = Y[:, res.selection.idx]
    expected = RidgePredictor().fit(X, Y.mean(axis=1)).predict(X[:3])
    np.testing.assert_allclose(res.model.predict(X[:3]), expected)


def test_picks_the_clearly_better_selector() -> None:
    Y = constant_half_matrix()
    specs = (SelectorSpec("random", {}, ("ridge",), average=False), SelectorSpec("mrmr", {}, ("ridge",), average=False))
    res = auto_select(Y, k=4, seed=0, selectors=specs, max_seconds=None)
    rows = {r["selector"]: r["cv_rmse"] for r in res.table}
    assert res.choice.selector.method == "mrmr", res.table
    assert rows["mrmr"] < rows["random"], rows
    assert not set(res.selection.idx.tolist()) & set(range(30, 60))  # no uninformative item chosen


def test_honest_error_is_the_outer_folds_error_of_the_whole_procedure() -> None:
    """Recomputed by hand: per outer fold, the inner table on the training references only, its
    winner refitted there and applied to the held-out fold."""
    Y = offset_matrix(M=24, N=40, seed=3)
    specs = (SelectorSpec("random", {}, ("mean", "ridge", "kernel_ridge")),
             SelectorSpec("mrmr", {}, ("ridge", "kernel_ridge")))
    k, seed = 6, 2
    res = auto_select(Y, k=k, seed=seed, selectors=specs, outer_folds=4, inner_folds=3, max_seconds=None)
    y = Y.mean(axis=1)
    errors = np.full(Y.shape[0], np.nan)
    for (train, test), outer in zip(_folds(Y.shape[0], 4, seed), res.outer):
        table: dict[Candidate, np.ndarray] = {}
        for spec in specs:
            table.update(_spec_errors(spec, Y[train], k, seed, 3))
        chosen, _ = inner_table(table)
        assert outer["chosen"] == chosen.label and outer["test"] == test.tolist()
        sel, model = fit_candidate(chosen, Y[train], k, seed)
        errors[test] = y[test] - model.predict(Y[test][:, sel.idx])
    np.testing.assert_allclose(res.outer_errors, errors, atol=1e-12)
    assert res.honest_rmse == pytest.approx(float(np.sqrt(np.mean(errors**2))))
    assert not np.isnan(res.outer_errors).any()
    # the reported choice is the inner table on all references
    full: dict[Candidate, np.ndarray] = {}
    for spec in specs:
        full.update(_spec_errors(spec, Y, k, seed, 3))
    assert res.choice == inner_table(full)[0]
    summary = res.summary()
    assert summary["choice"]["label"] == res.choice.label and len(summary["cv_table"]) == 7
    assert summary["honest_rmse"] == pytest.approx(res.honest_rmse)


def test_average_candidate_error_is_the_mean_of_its_components_errors() -> None:
    Y = offset_matrix(M=20, N=30, seed=5)
    spec = SelectorSpec("random", {}, ("ridge", "kernel_ridge"))
    errs = _spec_errors(spec, Y, 5, 0, 4)
    avg = Candidate(spec, "average", ("ridge", "kernel_ridge"))
    np.testing.assert_allclose(errs[avg], (errs[Candidate(spec, "ridge")] + errs[Candidate(spec, "kernel_ridge")]) / 2)
    X, y = Y[:, :5], Y.mean(axis=1)
    both = AveragePredictor([RidgePredictor, KernelRidgePredictor]).fit(X, y).predict(X)
    np.testing.assert_allclose(both, (RidgePredictor().fit(X, y).predict(X)
                                      + KernelRidgePredictor().fit(X, y).predict(X)) / 2)


def test_time_cap_skips_costly_selectors_but_always_keeps_random() -> None:
    Y = constant_half_matrix(M=20, N=40)
    specs = (SelectorSpec("random", {}, ("mean",), average=False),
             SelectorSpec("random_search", {"n_trials": 400}, ("ridge",), average=False))
    res = auto_select(Y, k=4, seed=0, selectors=specs, max_seconds=1e-9)
    assert res.choice.selector.method == "random"
    assert [s["status"] for s in res.skipped] == ["skipped_time"]
    assert res.skipped[0]["selector"].startswith("random_search")


def test_bad_inputs() -> None:
    Y = offset_matrix(M=8, N=20)
    with pytest.raises(ValueError, match="at least 10 references"):
        auto_select(Y, k=3)
    with pytest.raises(ValueError, match="k must be"):
        auto_select(offset_matrix(), k=0)
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        auto_select(offset_matrix(), k=3, selectors=(SelectorSpec("irt", {}, ("gp_irt",)),))


def test_backtest_runs_auto_beside_the_other_methods() -> None:
    """``run_backtest`` with method ``auto`` (the bench's one-run comparison): same split, an
    interval from auto's outer-fold errors."""
    rng = np.random.default_rng(0)
    Y = np.vstack([offset_matrix(M=40, N=50, seed=1)])
    Y = (Y - Y.min()) / (Y.max() - Y.min())
    Y = Y + rng.normal(0, 1e-3, Y.shape)
    rows = run_backtest(Y, ["random", "auto"], {"random": ["mean"], "auto": ["auto"]}, budgets=(0.1,), n_reference=30,
                        split="random", seeds=1, method_params={"auto": {"selectors": MEAN_VS_RIDGE,
                                                                         "max_seconds": None}})
    by = {r["method"]: r for r in rows}
    assert by["auto"]["label"] == "auto" and by["auto"]["rmse"] < by["random"]["rmse"]
    assert 0.0 <= by["auto"]["coverage"] <= 1.0 and by["auto"]["interval_width"] > 0


def test_planner_takes_auto_as_an_opt_in_candidate() -> None:
    from evalplan.core.backtest.planner import DEFAULT_CANDIDATES, parse_candidate, plan_benchmark
    from evalplan.core.backtest.planner import Candidate as PlanCandidate

    assert parse_candidate("auto") == PlanCandidate("auto", "auto")
    assert all(c.method != "auto" for c in DEFAULT_CANDIDATES)
    Y = constant_half_matrix(M=20, N=40)
    plan = plan_benchmark(Y, half_width=0.5, level=0.8, candidates=[PlanCandidate("auto", "auto")],
                          fractions=(0.1, 0.2), seeds=1, params={"auto": {"selectors": ["random", "mrmr"],
                                                                          "max_seconds": None}})
    assert plan["method"] == "auto" and plan["reached"] and plan["evidence"][0]["label"] == "auto"
    # the evidence is auto's outer-fold errors at that budget
    res = auto_select(Y, k=plan["budget"], seed=0, selectors=["random", "mrmr"], max_seconds=None)
    row = next(r for r in plan["evidence"] if r["budget"] == plan["budget"])
    assert row["expected_rmse"] == pytest.approx(res.honest_rmse)


def test_fixed_errors_are_the_chosen_predictors_loo_on_the_chosen_coreset() -> None:
    """The "calibrated" interval's optimistic half (issue 16 §2): leave-one-reference-out errors of
    auto's stored choice on its stored coreset; the interval mixes them with the outer-fold errors."""
    from evalplan.core.coresets.intervals import calibrated_half_width, conformal_half_width, fixed_coreset_errors

    Y = offset_matrix(M=24, N=40, seed=3)
    res = auto_select(Y, k=6, seed=2, selectors=MEAN_VS_RIDGE, outer_folds=4, inner_folds=3, max_seconds=None)
    assert res.choice.predictor == "ridge"
    X, y = Y[:, res.selection.idx], Y.mean(axis=1)
    assert res.fixed_errors is not None
    np.testing.assert_allclose(res.fixed_errors, fixed_coreset_errors(RidgePredictor, X, y), atol=1e-12)
    # selection-blind, so smaller than the honest outer-fold errors here, and the calibrated width lies
    # between the two sets' own conformal widths
    assert np.sqrt(np.mean(res.fixed_errors**2)) < res.honest_rmse
    h = calibrated_half_width(res.outer_errors, res.fixed_errors, 0.8)
    assert conformal_half_width(res.fixed_errors, 0.8) < h < conformal_half_width(res.outer_errors, 0.8)


def test_backtest_and_planner_give_auto_the_calibrated_width() -> None:
    from evalplan.core.backtest.planner import Candidate as PlanCandidate
    from evalplan.core.backtest.planner import evaluate_candidate
    from evalplan.core.coresets.intervals import interval_from_errors

    rng = np.random.default_rng(0)
    Y = offset_matrix(M=40, N=50, seed=1)
    Y = (Y - Y.min()) / (Y.max() - Y.min()) + rng.normal(0, 1e-3, Y.shape)
    params = {"selectors": MEAN_VS_RIDGE, "max_seconds": None}
    widths = {}
    for rule in ("calibrated", "conformal"):
        rows = run_backtest(Y, ["auto"], {"auto": ["auto"]}, budgets=(0.1,), n_reference=30, split="random",
                            seeds=1, method_params={"auto": params}, interval=rule, level=0.9)
        widths[rule] = rows[0]["interval_width"]
    # the backtest's references and budget, redone by hand
    from evalplan.core.backtest.backtest import split_models
    ref, test = split_models(Y.mean(axis=1), 30, "random", np.random.default_rng(0))
    res = auto_select(Y[ref], k=5, seed=0, **params)
    for rule, fixed in (("calibrated", res.fixed_errors), ("conformal", None)):
        lo, hi = interval_from_errors(0.0, res.outer_errors, 0.9, fixed, rule)
        assert widths[rule] == pytest.approx(hi - lo, rel=1e-9), rule
    assert widths["calibrated"] != pytest.approx(widths["conformal"])
    # the planner's evidence: the calibrated width of auto at that budget (conformal with params.interval)
    for rule in ("calibrated", "conformal"):
        row = evaluate_candidate(Y[ref], PlanCandidate("auto", "auto"), 5, 0.9, [0], {**params, "interval": rule})
        fixed = res.fixed_errors if rule == "calibrated" else None
        lo, hi = interval_from_errors(0.0, res.outer_errors, 0.9, fixed, rule)
        assert row["interval_width"] == pytest.approx(hi - lo, rel=1e-9) and row["interval_rule"] == rule


def _cands() -> tuple[Candidate, Candidate]:
    mrmr = SelectorSpec("mrmr", {}, ("ridge", "kernel_ridge"))
    lasso = SelectorSpec("lasso", {}, ("ridge", "kernel_ridge"))
    return (Candidate(lasso, "ridge"), Candidate(mrmr, "average", ("ridge", "kernel_ridge")))


def test_prior_rule_keeps_the_prior_within_se_mult_standard_errors() -> None:
    """The prior (mRMR + average) is kept when the lowest-RMSE candidate beats it by noise, and
    dropped when it is beaten by many standard errors; ``min`` always takes the lowest RMSE."""
    other, prior = _cands()
    rng = np.random.default_rng(0)
    base = rng.normal(0.0, 1.0, 30)
    jitter = np.where(np.arange(30) % 2 == 0, 1.3, 0.75)  # the prior worse on half the references, better on half
    noisy = {other: base, prior: base * jitter}
    assert _rmse_of(noisy[other]) < _rmse_of(noisy[prior])
    assert inner_table(noisy, "min")[0] == other
    chosen, rows = inner_table(noisy, "prior", 2.0)
    assert chosen == prior, rows
    assert all("excess_se" in r for r in rows)
    clear = {other: base * 0.2, prior: base}  # other 5x better on every reference
    chosen, rows = inner_table(clear, "prior", 2.0)
    assert chosen == other, rows
    assert rows[1]["excess_se"] > 2.0
    with pytest.raises(ValueError, match="choice rule"):
        inner_table(clear, "best")


def _rmse_of(e: np.ndarray) -> float:
    return float(np.sqrt(np.mean(e**2)))


def test_auto_reports_its_rule_and_describes_an_average_choice() -> None:
    Y = constant_half_matrix()
    res = auto_select(Y, k=6, seed=0, max_seconds=None)
    s = res.summary()
    assert s["choice_rule"]["rule"] == "prior"
    assert s["choice_rule"]["prior"] == "mrmr+average(ridge+kernel_ridge)"
    assert s["choice"]["label"] == res.choice.label
    if res.choice.predictor == "average":
        assert "mean of the" in s["choice"]["description"]
    res_min = auto_select(Y, k=6, seed=0, max_seconds=None, choice="min")
    assert res_min.summary()["choice_rule"] == {"rule": "min", "se_mult": 2.0, "prior": None}
    with pytest.raises(ValueError, match="choice rule"):
        auto_select(Y, k=6, seed=0, choice="nope")
