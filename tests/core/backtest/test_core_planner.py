"""The budget planner (evalplan.core.backtest.planner, issue 16 §4) on GENERATED 2-PL data: the plan is the
smallest budget reached in its own evidence, the evidence is the backtest's cross-fitted errors,
an impossible precision falls back to the full benchmark, and bad inputs raise."""

from __future__ import annotations

import math

import numpy as np
import pytest

from evalplan.core.backtest.backtest import _selection_aware_errors, impute_item_mean
from evalplan.core.backtest.planner import (
    FULL,
    Candidate,
    budget_grid,
    evaluate_candidate,
    min_references,
    parse_candidate,
    plan_benchmark,
    plan_suite,
)
from evalplan.core.coresets.intervals import calibrated_half_width, fixed_coreset_errors, interval_from_errors
from evalplan.core.coresets.predictors import KernelRidgePredictor
from evalplan.core.selection.score_based import SCORE_METHODS
from support.helpers import two_pl as generated_two_pl


def two_pl(seed: int, n_models: int = 40, n_items: int = 120) -> np.ndarray:
    return generated_two_pl(seed, n_models, n_items)


def test_budget_grid_and_min_references() -> None:
    assert budget_grid(100, (0.01, 0.05, 0.05, 0.5, 0.999)) == [2, 5, 50, 99]
    assert budget_grid(3, (0.1, 0.9)) == [2]
    assert min_references(0.9) == 9 and min_references(0.95) == 19 and min_references(0.5) == 3
    # M = min_references(level) is the first M with a finite conformal quantile
    for level in (0.8, 0.9, 0.95):
        m = min_references(level)
        assert math.ceil((m + 1) * level - 1e-9) <= m and math.ceil(m * level - 1e-9) > m - 1


def test_parse_candidate() -> None:
    assert parse_candidate("random") == Candidate("random", "mean")
    assert parse_candidate("anchor_points") == Candidate("anchor_points", "weighted_mean")
    assert parse_candidate("mrmr") == Candidate("mrmr", "kernel_ridge")
    assert parse_candidate(" lasso : ridge ") == Candidate("lasso", "ridge")
    for bad in ("nope", "random:kernel_ridge", "mrmr:gp_irt"):
        with pytest.raises(ValueError):
            parse_candidate(bad)


def test_evidence_is_the_backtests_cross_fitted_errors() -> None:
    Y = two_pl(1)
    row = evaluate_candidate(Y, Candidate("pbsc", "kernel_ridge"), 12, 0.9, [0, 1])
    old = evaluate_candidate(Y, Candidate("pbsc", "kernel_ridge"), 12, 0.9, [0, 1], {"interval": "conformal"})
    s = Y.mean(axis=1)
    rmse, width, width_old = [], [], []
    for seed in (0, 1):
        e = _selection_aware_errors("pbsc", "kernel_ridge", Y, s, 12, seed, {}, {})
        rmse.append(np.sqrt(np.mean(e**2)))
        # the width the coreset will report: the default "calibrated" rule, with the fixed-coreset
        # leave-one-reference-out errors of the coreset selected on all the references
        idx = SCORE_METHODS["pbsc"](k=12, seed=seed).fit(Y).ranking_
        fixed = fixed_coreset_errors(KernelRidgePredictor, Y[:, idx], s)
        lo, hi = interval_from_errors(0.0, e, 0.9, fixed, "calibrated")
        width.append(hi - lo)
        assert hi == pytest.approx(calibrated_half_width(e, fixed, 0.9))
        lo, hi = interval_from_errors(0.0, e, 0.9)  # params.interval "conformal": the old rule
        width_old.append(hi - lo)
    assert row["expected_rmse"] == pytest.approx(np.mean(rmse), rel=1e-12)
    assert row["interval_width"] == pytest.approx(np.mean(width), rel=1e-12)
    assert row["half_width"] == pytest.approx(row["interval_width"] / 2)
    assert row["interval_rule"] == "calibrated" and old["interval_rule"] == "conformal"
    assert old["interval_width"] == pytest.approx(np.mean(width_old), rel=1e-12)
    assert old["expected_rmse"] == pytest.approx(row["expected_rmse"], rel=1e-12)
    assert row["interval_width"] != pytest.approx(old["interval_width"])  # the rules differ on these data
    assert row["budget"] == 12 and row["n_seeds"] == 2 and row["expected_rmse_se"] > 0
    with pytest.raises(ValueError, match="unknown interval rule"):
        evaluate_candidate(Y, Candidate("pbsc", "kernel_ridge"), 12, 0.9, [0], {"interval": "wide"})


def test_random_evidence_is_the_random_coresets_interval() -> None:
    Y = two_pl(2)
    row = evaluate_candidate(Y, Candidate("random", "mean"), 30, 0.95, [0])
    idx = np.sort(np.random.default_rng([0, 7919]).choice(Y.shape[1], size=30, replace=False))
    err = Y.mean(axis=1) - Y[:, idx].mean(axis=1)
    assert row["expected_rmse"] == pytest.approx(np.sqrt(np.mean(err**2)), rel=1e-12)
    # the finite-population normal interval: 2 z sqrt(s^2 / n (1 - n / N)) per model (none unanimous here)
    s2 = Y[:, idx].var(axis=1, ddof=1)
    assert np.all(s2 > 0)
    widths = 2 * 1.959963984540054 * np.sqrt(s2 / 30 * (1 - 30 / Y.shape[1]))
    assert row["interval_width"] == pytest.approx(widths.mean(), rel=1e-9)


def test_plan_is_the_smallest_reached_budget_of_its_evidence() -> None:
    Y = two_pl(3)
    cands = [Candidate("random", "mean"), Candidate("pbsc", "kernel_ridge")]
    plan = plan_benchmark(Y, 0.06, 0.9, cands, seeds=2)
    assert plan["stopped"] == "reached" and plan["reached"] and plan["method"] in ("random", "pbsc")
    ev = plan["evidence"]
    reached = [r for r in ev if r["reached"]]
    assert reached and all(r["half_width"] <= 0.06 for r in reached)
    assert all(r["half_width"] > 0.06 for r in ev if not r["reached"])
    assert plan["budget"] == min(r["budget"] for r in reached)
    at_best = [r for r in reached if r["budget"] == plan["budget"]]
    chosen = min(at_best, key=lambda r: r["expected_rmse"])
    assert (plan["method"], plan["predictor"]) == (chosen["method"], chosen["predictor"])
    assert plan["expected_rmse"] == chosen["expected_rmse"] and plan["interval_width"] == chosen["interval_width"]
    # every candidate not reached at the plan's budget or below was tried there or at a larger budget
    grid = budget_grid(Y.shape[1])
    assert {r["budget"] for r in ev} <= set(grid)
    # bisection: a failed budget below a reached one of the same candidate has no reached budget under it
    for c in cands:
        mine = sorted((r["budget"], r["reached"]) for r in ev if r["method"] == c.method)
        firsts = [b for b, ok in mine if ok]
        if firsts:
            assert all(not ok for b, ok in mine if b < firsts[0])
    # a looser target needs no more items
    loose = plan_benchmark(Y, 0.12, 0.9, cands, seeds=2)
    assert loose["budget"] <= plan["budget"]


def test_unreachable_precision_is_the_full_benchmark() -> None:
    Y = two_pl(4, n_items=60)
    plan = plan_benchmark(Y, 1e-6, 0.9, [Candidate("random", "mean")], seeds=1)
    assert plan["method"] == FULL and plan["budget"] == 60 and plan["expected_rmse"] == 0.0
    assert plan["stopped"] == "grid_exhausted" and plan["evidence"]
    assert not any(r["reached"] for r in plan["evidence"])
    timed = plan_benchmark(Y, 1e-6, 0.9, [Candidate("random", "mean")], seeds=1, max_seconds=1e-9)
    assert timed["stopped"] == "max_seconds" and timed["method"] == FULL


def test_plan_suite_totals() -> None:
    a = plan_benchmark(two_pl(5, n_items=80), 0.1, 0.9, [Candidate("random", "mean")], seeds=1)
    b = plan_benchmark(two_pl(6, n_items=40), 0.1, 0.9, [Candidate("random", "mean")], seeds=1)
    suite = plan_suite({"a": a, "b": b})
    assert suite["split"] == {"a": a["budget"], "b": b["budget"]}
    assert suite["total_items"] == a["budget"] + b["budget"] and suite["n_items"] == 120
    assert suite["fraction"] == pytest.approx(suite["total_items"] / 120)


def test_bad_inputs_raise() -> None:
    Y = two_pl(7)
    for kwargs in ({"half_width": 0.0}, {"half_width": -1.0}, {"half_width": math.nan}, {"level": 1.0},
                   {"candidates": []}, {"seeds": []}):
        args = {"half_width": 0.05, "level": 0.9, "candidates": [Candidate("random", "mean")], **kwargs}
        with pytest.raises(ValueError):
            plan_benchmark(Y, args["half_width"], args["level"], args["candidates"],
                           seeds=kwargs.get("seeds", 1))
    with pytest.raises(ValueError, match="at least 19"):
        plan_benchmark(Y[:10], 0.05, 0.95, [Candidate("random", "mean")], seeds=1)
    assert impute_item_mean(Y).shape == Y.shape


def test_mrmr_prefix_cache_gives_the_rows_of_a_selection_per_budget() -> None:
    """The planner selects mRMR once per fold at the largest budget it may try and cuts it per budget;
    every evidence row equals the row of a fresh selection at that budget."""
    from evalplan.core.backtest.planner import Candidate as PlanCandidate
    from evalplan.core.backtest.planner import evaluate_candidate, plan_benchmark

    Y = two_pl(3).astype(float)
    cand = PlanCandidate("mrmr", "kernel_ridge")
    progress: list[float] = []
    plan = plan_benchmark(Y, 0.06, 0.9, [cand], seeds=2, progress=progress.append)
    assert len(plan["evidence"]) >= 2 and progress[-1] == 1.0 and progress == sorted(progress)
    for row in plan["evidence"]:
        fresh = evaluate_candidate(Y, cand, row["budget"], 0.9, [0, 1], {})
        assert row["expected_rmse"] == pytest.approx(fresh["expected_rmse"], abs=1e-12)
        assert row["interval_width"] == pytest.approx(fresh["interval_width"], abs=1e-12)
