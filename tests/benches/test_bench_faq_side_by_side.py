"""The pure parts of bench/sessions/faq_side_by_side.py and bench/peers/faq_driver.py on small synthetic
data (FAQ's own code is not in the project: the driver's helpers are checked on a script written here)."""

from __future__ import annotations

import itertools
import math
from pathlib import Path

import numpy as np
import pytest

from bench.peers.faq_driver import call_capturing, load_defs, oracle
from bench.sessions.faq_side_by_side import (
    budget_sizes,
    n_targets_for,
    oracle_ess,
    parse_method,
    perfect_probability_oracle,
    piece_matrix,
    render,
    run_ours,
    score_method,
    summarize,
    uniform_runs,
    uniform_variance,
)


def _matrix(models: int = 60, items: int = 80, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    ability = rng.normal(size=(models, 1))
    difficulty = rng.normal(size=(1, items))
    return (rng.random((models, items)) < 1 / (1 + np.exp(-(ability - difficulty)))).astype(float)


def test_targets_keep_enough_references_and_pieces_use_items_every_target_has():
    assert n_targets_for(83, "interpolation", 40) == 40
    assert n_targets_for(83, "extrapolation", 40) == 40 and n_targets_for(83, "extrapolation", 50) == 83 - 17 - 25
    assert n_targets_for(53, "extrapolation", 40) == 53 - 11 - 25
    X = _matrix()
    X[3, 5] = np.nan
    P = piece_matrix(X, "interpolation", 10, seed=0)
    assert P["T"].shape == (10, 80 - (1 if 3 in P["targets"] else 0))
    assert not np.isnan(P["R"]).any() and len(np.intersect1d(P["targets"], P["refs"])) == 0
    E = piece_matrix(X, "extrapolation", 10, seed=0)
    means = np.nanmean(X, axis=1)
    assert means[E["targets"]].min() > means[E["refs"]].max()  # the best models are the targets
    assert budget_sizes(437, [0.025, 0.05, 0.1]) == [10, 21, 43]


def test_uniform_variance_is_the_exact_variance_of_the_sample_mean_without_replacement():
    z = np.array([0.0, 1.0, 1.0, 0.0, 1.0, 0.5])
    n = 3
    means = [np.mean(z[list(c)]) for c in itertools.combinations(range(len(z)), n)]
    assert uniform_variance(z, n) == pytest.approx(np.var(means))


def test_ess_of_uniform_sampling_is_one_and_a_better_estimator_scores_higher():
    T = _matrix(30, 200, seed=1)
    n = 20
    truth = T.mean(axis=1)
    var_u = np.array([uniform_variance(z, n) for z in T])
    u = uniform_runs(T, n, range(40))
    s = score_method(truth, var_u, np.array(u["estimate"]), np.array(u["lo"]), np.array(u["hi"]))
    assert 0.85 < s["ess"] < 1.15 and 0.88 < s["coverage"] <= 1.0 and s["n_seeds"] == 40
    half = truth + (np.array(u["estimate"]) - truth) / 2  # errors halved: ESS x4
    s2 = score_method(truth, var_u, half, half - 0.01, half + 0.01)
    assert s2["ess"] == pytest.approx(4 * s["ess"])
    assert oracle_ess([0.25, 0.25], [0.05, 0.05]) == pytest.approx(5.0)


def _piece() -> dict:
    T = _matrix(12, 100, seed=2)
    budgets = [{"fraction": 0.1, "n": 10}]
    truth = T.mean(axis=1)
    rng = np.random.default_rng(0)
    est = truth[None, :] + rng.normal(0, 0.05, size=(3, 12))
    ours = truth[None, :4] + rng.normal(0, 0.02, size=(1, 4))
    return {"dataset": "openllm_v2_musr", "regime": "interpolation", "budgets": budgets, "targets": list(range(12)),
            "n_models": 40, "n_items": 100, "n_items_all": 100, "n_references": 28, "gap": 0,
            "truth": truth.tolist(), "sd": T.std(axis=1).tolist(),
            "var_uniform": {"10": [uniform_variance(z, 10) for z in T]},
            "uniform": {"10": uniform_runs(T, 10, range(3))},
            "faq": {"10": {"estimate": est.tolist(), "lo": (est - 0.1).tolist(), "hi": (est + 0.1).tolist(),
                           "mean_width": [0.2, 0.2, 0.2], "seconds": 1.0},
                    "factor": {"K": 8, "lmbda": 0.1, "selected_by": "given"}, "seconds": 2.0,
                    "settings": [{"beta0": 1.0, "rho": 0.0, "gamma": 0.0, "tau": 0.25}]},
            "oracle": {"ideal": 5.0, "realized": 4.5},
            "ours": {"mine": {"10": {"estimate": ours.tolist(), "lo": (ours - 0.1).tolist(),
                                     "hi": (ours + 0.1).tolist()}, "seconds": 3.0}},
            "dates": {"faq": "2026-12-05 13:00 UTC"}}


def test_summary_compares_ours_with_faq_on_the_same_targets_and_renders():
    p = _piece()
    rows = {r["method"]: r for r in summarize(p)}
    assert rows["mine"]["n_targets"] == 4 and rows["faq"]["n_targets"] == 12
    assert rows["mine"]["vs_faq"] == pytest.approx(rows["mine"]["ess"] / rows["mine"]["faq_ess_same_targets"])
    assert rows["mine"]["vs_faq"] > 1 and math.isfinite(rows["faq"]["width_ess"])
    md = render([p], "python -m bench.sessions.faq_side_by_side --test")
    assert md.startswith("<!-- faq-side-by-side -->") and md.endswith("<!-- /faq-side-by-side -->")
    assert "| openllm_v2_musr | interpolation | 10.0% (10) |" in md and "| openllm_v2_musr | interpolation | 5.00x | 4.50x |" in md


def test_ours_run_through_the_session_engine_at_each_budget():
    X = _matrix(40, 60, seed=3)
    P = piece_matrix(X, "interpolation", 5, seed=0)
    budgets = [{"fraction": 0.1, "n": 6}, {"fraction": 0.2, "n": 12}]
    for method, rows in (("rs_mean", ["rs_mean"]), ("active_design", ["active_design", "active_design (design)"])):
        out = run_ours(method, P, budgets, 3, [0, 1])
        assert sorted(out) == sorted(rows)
        for key in ("6", "12"):
            e, lo, hi = (np.array(out[method][key][k]) for k in ("estimate", "lo", "hi"))
            assert e.shape == (2, 3) and np.all(lo <= e + 1e-12) and np.all(e <= hi + 1e-12)
    assert parse_method("active_design", 3, 40) == ("active_design", 3, 40)
    assert parse_method("refgp_v3:1:12", 3, 40) == ("refgp_v3", 1, 12)


def test_driver_runs_a_scripts_functions_without_its_body_and_reads_the_frame(tmp_path: Path):
    script = tmp_path / "peer.py"
    script.write_text("import math\nALPHA, N = 0.05, 3\nraise SystemExit('script body must not run')\n"
                      "def trial(x):\n    inner = x * 2\n    total = inner + ALPHA\n    return [math.floor(total)]\n")
    ns = load_defs(script)
    out, loc = call_capturing(ns["trial"], 4)
    assert out == [8] and loc["inner"] == 8 and loc["total"] == pytest.approx(8.05)


def test_oracle_with_perfect_spreads_beats_uniform_on_a_low_rank_matrix():
    rng = np.random.default_rng(4)
    U, V = rng.normal(size=(50, 2)), 2 * rng.normal(size=(300, 2))
    T = (rng.random((5, 300)) < 1 / (1 + np.exp(-(rng.normal(size=(5, 2)) @ V.T)))).astype(float)
    o = oracle(T, U, V)
    assert len(o["sigma2"]) == 5 and oracle_ess(o["sigma2"], o["var_phi_abs"]) > 1.5


def test_perfect_probability_oracle_sees_items_the_references_predict():
    rng = np.random.default_rng(5)
    ability, difficulty = rng.normal(size=(45, 1)), 2 * rng.normal(size=(1, 200))
    X = (rng.random((45, 200)) < 1 / (1 + np.exp(-(ability - difficulty)))).astype(float)
    o = perfect_probability_oracle(X[:40], X[40:])
    assert o["ideal"] > 1.2 and o["realized"] > 1.0 and len(o["per_target"]["ideal_u"]) == 5
