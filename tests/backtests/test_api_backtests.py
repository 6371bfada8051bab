"""POST /v1/backtests end to end on a GENERATED 2-PL benchmark (40 models x 50 items): a stratified
and an extrapolation backtest as real in-process jobs (rows, columns, finite metrics), and every bad
input of the issue answered 422 / 404 synchronously with no job created."""

from __future__ import annotations

import math

import numpy as np
import pytest

from evalplan.core.backtest.backtest import run_backtest
from support.helpers import two_pl as generated_two_pl
from support.helpers import upload_matrix, wait_for_job

N_MODELS, N_ITEMS = 40, 50
FINITE = ("rmse", "mae", "spearman", "kendall", "coverage", "stability", "seconds")


def two_pl(seed: int, n_models: int = N_MODELS, n_items: int = N_ITEMS) -> np.ndarray:
    return generated_two_pl(seed, n_models, n_items).astype(int)


def upload(client, bench: str, Y: np.ndarray, prefix: str | None = None) -> None:
    upload_matrix(client, bench, Y, [f"{prefix or bench}_m{m:02d}" for m in range(Y.shape[0])],
                  [f"q{j:03d}" for j in range(Y.shape[1])])


def run(client, agreement: bool = True, **body) -> dict:
    r = client.post("/v1/backtests", json=body)
    assert r.status_code == 202, r.text
    job = r.json()["job"]
    assert job["status"] == "queued" and r.headers["location"] == f"/v1/jobs/{job['id']}"
    done = wait_for_job(client, job["id"], timeout=180)
    assert done["status"] == "succeeded", done
    assert done["kind"] == "backtest" and done["queue"] == "cpu" and done["progress"] == 1.0
    result = done["result"]
    assert set(result) >= {"rows", "columns"}
    assert "agreement" in result["unavailable"]
    for row in result["rows"]:
        assert list(row) == result["columns"]
        if row["predictor"] in ("mean", "aipw", "guard") or not agreement:
            assert row["agreement"] is None  # no item-level predictions
        else:  # the test data are 0/1 scores
            assert 0.0 <= row["agreement"] <= 1.0, row
    return result


def check_finite(rows: list[dict]) -> None:
    for row in rows:
        for key in FINITE:
            assert row[key] is not None and math.isfinite(row[key]), (key, row)
        assert row["rmse"] >= row["mae"] >= 0 and -1 <= row["spearman"] <= 1 and -1 <= row["kendall"] <= 1
        assert 0 <= row["coverage"] <= 1 and row["seconds"] >= 0


def test_stratified_backtest_job(committed_client) -> None:
    client = committed_client
    upload(client, "gen", two_pl(1))
    result = run(client, benchmarks="gen", methods=["random", "anchor_points"], predictors=["kernel_ridge"],
                 budgets=[0.1, 0.2], n_reference=20, split="stratified", seeds=2,
                 params={"anchor_points": {"n_init": 1, "swap": "never"}})
    rows = result["rows"]
    assert len(rows) == 2 * 2 * 2  # methods x budgets x seeds (one predictor)
    assert {(r["method"], r["budget"], r["seed"]) for r in rows} == {
        (m, b, s) for m in ("random", "anchor_points") for b in (0.1, 0.2) for s in (0, 1)}
    assert {r["k"] for r in rows} == {5, 10}
    assert all(r["benchmark"] == "gen" and r["split"] == "stratified" and r["predictor"] == "kernel_ridge"
               and r["n_reference"] == 20 and r["n_test"] == 20 for r in rows)
    check_finite(rows)
    # the params reach the selector: the same numbers as the offline backtest with them
    offline = run_backtest(two_pl(1), ["anchor_points"], {"anchor_points": "kernel_ridge"}, budgets=[0.1, 0.2],
                           n_reference=20, split="stratified", seeds=2,
                           method_params={"anchor_points": {"n_init": 1, "swap": "never"}})
    served = {(r["budget"], r["seed"]): r["rmse"] for r in rows if r["method"] == "anchor_points"}
    assert served == pytest.approx({(r["budget"], r["seed"]): r["rmse"] for r in offline}, abs=1e-12)
    # stability is per (method, budget): the same on both seeds
    for m in ("random", "anchor_points"):
        for b in (0.1, 0.2):
            assert len({r["stability"] for r in rows if r["method"] == m and r["budget"] == b}) == 1


def test_extrapolation_backtest_two_benchmarks(committed_client) -> None:
    client = committed_client
    upload(client, "gen_a", two_pl(2))
    upload(client, "gen_b", two_pl(3))
    result = run(client, benchmarks=["gen_a", "gen_b"], methods=["random"],
                 predictors={"random": ["mean", "ridge"]}, budgets=[0.2], n_reference=15,
                 split="extrapolation", seeds=2)
    rows = result["rows"]
    assert len(rows) == 2 * 2 * 2  # benchmarks x predictors x seeds
    assert [r["benchmark"] for r in rows].count("gen_a") == 4 and [r["benchmark"] for r in rows].count("gen_b") == 4
    assert all(r["split"] == "extrapolation" and r["n_reference"] == 15 and r["n_test"] == 12 for r in rows)
    check_finite(rows)


def test_suite_backtest_one_multi_benchmark_coreset(committed_client) -> None:
    client = committed_client
    upload(client, "gen_a", two_pl(5), prefix="shared")
    upload(client, "gen_b", two_pl(6, n_items=30), prefix="shared")
    upload(client, "gen_c", two_pl(8, n_models=20))  # other models: none shared with gen_a
    r = client.post("/v1/backtests", json={"benchmarks": ["gen_a", "gen_c"], "methods": ["random"], "budgets": [0.2],
                                           "n_reference": 15, "suite": True})
    assert r.status_code == 422 and "every benchmark of the suite (0)" in r.text, r.text
    result = run(client, agreement=False, benchmarks=["gen_a", "gen_b"], methods=["random", "mrmr"],
                 predictors={"random": "mean", "mrmr": "kernel_ridge"}, budgets=[0.2], n_reference=15,
                 split="stratified", seeds=2, suite=True)
    assert result["suite"] is True
    rows = result["rows"]
    assert len(rows) == 3 * 2 * 2  # (gen_a, gen_b, overall) x methods x seeds
    by = {(r["benchmark"], r["method"], r["seed"]): r for r in rows}
    for m in ("random", "mrmr"):
        for seed in (0, 1):
            # a total budget of 0.2 x 80 = 16 items, split 10 + 6 by size; one reference draw for both
            assert [by[(b, m, seed)]["k"] for b in ("gen_a", "gen_b", "overall")] == [10, 6, 16]
            assert {by[(b, m, seed)]["n_test"] for b in ("gen_a", "gen_b", "overall")} == {25}
            assert 0.0 <= by[("overall", m, seed)]["coverage"] <= 1.0
    check_finite([{**r, "stability": 0.0} for r in rows])  # stability is not computed in a suite


BAD = [
    ({"methods": ["nope"]}, 422, "methods.0"),
    ({"predictors": ["nope"]}, 422, "predictors.0"),
    ({"predictors": {"random": "nope"}}, 422, "predictors.random"),
    ({"split": "sideways"}, 422, "split"),
    ({"budgets": [0.0]}, 422, "budgets.0"),
    ({"budgets": [0.1, 1.5]}, 422, "budgets.1"),
    ({"budgets": [5]}, 422, "budgets.0"),
    ({"seeds": 0}, 422, "seeds"),
    ({"seeds": 21}, 422, "seeds"),
    ({"n_reference": 2}, 422, "n_reference"),
    ({"n_reference": 40}, 422, "n_reference"),
    ({"n_reference": 25, "split": "extrapolation"}, 422, "n_reference"),
    ({"benchmarks": "missing"}, 404, None),
    ({"benchmarks": ["gen", "missing"]}, 404, None),
    ({"benchmarks": "small", "n_reference": 5}, 422, "benchmarks"),
    ({"suite": True}, 422, "suite"),
    ({"params": {"mrmr": {"scheme": "mid"}}}, 422, "params.mrmr"),
    ({"params": {"random": {"k": 3}}}, 422, "params.random"),
    ({"params": {"lasso": {}}}, 422, "params.lasso"),  # not in methods
    ({"methods": ["anchor_points"], "params": {"anchor_points": {"n_inti": 2}}}, 422, "params.anchor_points.n_inti"),
    ({"methods": ["anchor_points"], "params": {"anchor_points": {"n_init": "two"}}}, 422,
     "params.anchor_points.n_init"),
    ({"suite": True, "benchmarks": ["gen", "gen2"], "predictors": ["guard"]}, 422, "predictors.random"),
    ({"methods": ["auto"], "predictors": {"auto": "ridge"}}, 422, "predictors.auto"),
    ({"methods": ["random"], "predictors": {"random": "auto"}}, 422, "predictors.random"),
    ({"methods": ["auto"], "suite": True, "benchmarks": ["gen", "gen2"]}, 422, "methods"),
    ({"methods": ["auto"], "params": {"auto": {"max_seconds": -1}}}, 422, "params.auto.max_seconds"),
]


def test_bad_inputs_create_no_job(client) -> None:
    upload(client, "gen", two_pl(1))
    upload(client, "gen2", two_pl(7), prefix="gen")
    upload(client, "small", two_pl(4, n_models=6, n_items=10))
    base = {"benchmarks": "gen", "methods": ["random"], "budgets": [0.1], "n_reference": 20,
            "split": "random", "seeds": 2}
    for change, status, field in BAD:
        r = client.post("/v1/backtests", json={**base, **change})
        assert r.status_code == status, (change, r.text)
        assert r.headers["content-type"].startswith("application/problem+json")
        if field is not None:
            assert field in [e.get("field") for e in r.json()["errors"]], (change, r.json())
    assert client.get("/v1/jobs").json()["items"] == []
