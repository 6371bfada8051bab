"""Offline coreset backtest (evalplan.core.backtest.backtest) and the `evalplan backtest` CLI, on synthetic 2-PL data."""

from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from scipy.stats import kendalltau, spearmanr

from evalplan.core.backtest.backtest import (
    impute_item_mean,
    nogueira_stability,
    regression_metrics,
    run_backtest,
    split_models,
)
from evalplan.core.selection.score_based import SCORE_METHODS

ROOT = Path(__file__).resolve().parents[3]


def two_pl(m: int = 40, n: int = 50, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    theta = rng.normal(size=m)
    a = rng.uniform(0.5, 2.0, n)
    b = rng.normal(size=n)
    p = 1.0 / (1.0 + np.exp(-(a * theta[:, None] - b)))
    return (rng.random((m, n)) < p).astype(float)


@pytest.fixture(scope="module")
def Y() -> np.ndarray:
    return two_pl()


@pytest.mark.slow
def test_rows_for_every_method(Y):
    methods = ["random", "irt", *SCORE_METHODS]
    preds = {"random": ["mean", "ridge"], "anchor_points": ["weighted_mean", "kernel_ridge"], "irt": ["gp_irt"]}
    rows = run_backtest(Y, methods, preds, budgets=[0.1], n_reference=15, split="stratified", seeds=2,
                        method_params={"random_search": {"n_trials": 5}, "anchor_points": {"n_init": 1},
                                       "irt": {"epochs": 150, "dim": 1}})
    got = {(r["method"], r["predictor"]) for r in rows}
    for m in methods:
        for p in preds.get(m, ["kernel_ridge"]):
            assert (m, p) in got
    assert len(rows) == 2 * sum(len(preds.get(m, ["kernel_ridge"])) for m in methods)
    keys = {"method", "predictor", "budget", "seed", "rmse", "mae", "spearman", "kendall", "coverage", "seconds",
            "stability"}
    for r in rows:
        assert keys <= r.keys()
        assert r["k"] == 5 and r["n_reference"] == 15 and r["n_test"] == 25
        assert r["rmse"] >= r["mae"] >= 0
        if r["predictor"] == "gp_irt":
            assert math.isnan(r["coverage"])
        else:
            assert 0.0 <= r["coverage"] <= 1.0
    labels = {r["label"] for r in rows}
    assert {"Random", "Random+", "AnchorPoints", "AnchorPoints++", "gp-IRT", "mRMR++"} <= labels


def test_extrapolation_split_refs_below_test():
    rng = np.random.default_rng(1)
    s = rng.random(100)
    ref, test = split_models(s, 30, "extrapolation", rng)
    assert ref.size == 30 and test.size == 30
    assert s[ref].max() < s[test].min()
    order = np.argsort(s)
    assert set(ref) <= set(order[:50]) and set(test) == set(order[70:])
    with pytest.raises(ValueError):
        split_models(s, 51, "extrapolation", rng)


def test_extrapolation_backtest_guard_and_aipw(Y):
    rows = run_backtest(Y, ["random"], {"random": ["aipw", "guard"]}, budgets=[0.2], n_reference=10,
                        split="extrapolation", seeds=1)
    assert {r["predictor"] for r in rows} == {"aipw", "guard"}
    assert all(r["n_test"] == 12 for r in rows)


def test_stratified_split_covers_bins():
    s = np.concatenate([np.full(50, 0.05), np.linspace(0.1, 1.0, 50)])  # one crowded bin
    rng = np.random.default_rng(0)
    ref, test = split_models(s, 20, "stratified", rng)
    assert np.intersect1d(ref, test).size == 0 and ref.size + test.size == s.size
    bins = np.minimum(((s - s.min()) / np.ptp(s) * 10).astype(int), 9)
    counts = np.bincount(bins[ref], minlength=10)
    # round-robin over bins: every non-empty bin contributes, none more than ceil(20/10)
    assert (counts >= 1).all() and counts.max() <= 2
    ref_r, test_r = split_models(s, 20, "random", rng)
    assert ref_r.size == 20 and test_r.size == 80


def test_metrics_hand_computed():
    y = np.array([0.1, 0.4, 0.3, 0.9])
    p = np.array([0.2, 0.3, 0.5, 0.8])
    m = regression_metrics(y, p)
    assert m["rmse"] == pytest.approx(math.sqrt((0.01 + 0.01 + 0.04 + 0.01) / 4))
    assert m["mae"] == pytest.approx((0.1 + 0.1 + 0.2 + 0.1) / 4)
    # ranks y: 1,3,2,4 ; p: 1,2,3,4 -> d^2 = 0+1+1+0 -> rho = 1 - 6*2/(4*15) = 0.8
    assert m["spearman"] == pytest.approx(0.8)
    # pairs: 6, discordant only (1,2) -> tau = (5-1)/6
    assert m["kendall"] == pytest.approx(4 / 6)
    assert m["spearman"] == pytest.approx(spearmanr(y, p).statistic)
    assert m["kendall"] == pytest.approx(kendalltau(y, p).statistic)
    assert math.isnan(regression_metrics(y, np.ones(4))["kendall"])


def test_backtest_metrics_match_manual_computation():
    Y = two_pl(20, 12, seed=3)
    rows = run_backtest(Y, ["random"], {"random": "mean"}, budgets=[0.5], n_reference=8, split="random",
                        seeds=[4], intervals=False)
    (r,) = rows
    s = Y.mean(axis=1)
    ref, test = split_models(s, 8, "random", np.random.default_rng(4))
    idx = np.sort(np.random.default_rng([4, 7919]).choice(12, size=6, replace=False))
    pred = Y[test][:, idx].mean(axis=1)
    assert r["rmse"] == pytest.approx(np.sqrt(np.mean((pred - s[test]) ** 2)))
    assert r["mae"] == pytest.approx(np.mean(np.abs(pred - s[test])))
    assert math.isnan(r["coverage"])


def test_nogueira_stability():
    assert nogueira_stability([[0, 1], [0, 1], [0, 1]], 10) == pytest.approx(1.0)
    # two disjoint halves of 4 items: p_i = 1/2, s_i^2 = 2 * 1/4 = 1/2, denom = 1/4 -> 1 - 2 = -1
    assert nogueira_stability([[0, 1], [2, 3]], 4) == pytest.approx(-1.0)
    assert math.isnan(nogueira_stability([[0, 1]], 4))


def test_impute_item_mean():
    Y = np.array([[1.0, np.nan, np.nan], [0.0, 1.0, np.nan], [1.0, 0.0, np.nan]])
    out = impute_item_mean(Y)
    assert out.shape == (3, 2)
    assert out[0, 1] == pytest.approx(0.5)


def test_bad_inputs(Y):
    with pytest.raises(ValueError):
        run_backtest(Y, ["nope"], seeds=1)
    with pytest.raises(ValueError):
        run_backtest(Y, ["random"], {"random": "nope"}, seeds=1)
    with pytest.raises(ValueError):
        run_backtest(Y, ["random"], budgets=[1.5], seeds=1)
    with pytest.raises(ValueError):
        run_backtest(Y * 2, ["irt"], seeds=1)


@pytest.mark.slow
def test_cli_backtest_prints_table(tmp_path):
    Y = two_pl(30, 40, seed=5)
    lines = ["model," + ",".join(f"i{j}" for j in range(40))]
    lines += [f"m{i}," + ",".join(str(int(v)) for v in row) for i, row in enumerate(Y)]
    lines[3] = lines[3].rsplit(",", 1)[0] + ","  # one missing score
    path = tmp_path / "scores.csv"
    path.write_text("\n".join(lines) + "\n")
    proc = subprocess.run(
        [sys.executable, "-m", "evalplan.cli", "backtest", "--scores", str(path), "--methods", "random,mrmr",
         "--predictors", "random=mean+ridge", "--budgets", "0.1,0.2", "--n-reference", "12", "--seeds", "2"],
        cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "| method | predictor | budget |" in out
    for label in ("| Random |", "| Random+ |", "| mRMR++ |"):
        assert label in out
    assert out.count("\n|") >= 2 + 6
    bad = subprocess.run([sys.executable, "-m", "evalplan.cli", "backtest", "--scores", str(tmp_path / "missing.csv")],
                         cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2 and "cannot read" in bad.stderr


@pytest.mark.slow
def test_cli_backtest_suite_prints_per_benchmark_and_overall(tmp_path):
    paths = []
    for b, n_items in enumerate((40, 24)):
        Y = two_pl(30, n_items, seed=10 + b)
        lines = ["model," + ",".join(f"i{j}" for j in range(n_items))]
        lines += [f"m{i}," + ",".join(str(int(v)) for v in row) for i, row in enumerate(Y)]
        if b == 1:
            lines.append("only_here," + ",".join("1" for _ in range(n_items)))  # not shared: left out
        path = tmp_path / f"bench{b}.csv"
        path.write_text("\n".join(lines) + "\n")
        paths.append(str(path))
    proc = subprocess.run(
        [sys.executable, "-m", "evalplan.cli", "backtest", "--scores", *paths, "--suite", "--methods", "random,mrmr",
         "--budgets", "0.2", "--n-reference", "12", "--seeds", "2"],
        cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "suite of 2 benchmarks, 30 shared models" in out
    for scope in (*paths, "overall"):
        assert f"### {scope}" in out
    assert out.count("| Random |") == 3 and out.count("| mRMR++ |") == 3
    one = subprocess.run([sys.executable, "-m", "evalplan.cli", "backtest", "--scores", paths[0], "--suite"],
                         cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert one.returncode == 2 and "at least two" in one.stderr
