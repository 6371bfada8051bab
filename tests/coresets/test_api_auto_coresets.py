"""``method: "auto"`` over HTTP (API.md "Static coresets: auto") on a GENERATED 2-PL benchmark:
POST /v1/coresets -> job -> GET shows ``diagnostics.auto`` (choice + CV table) -> predict with the
chosen predictor and an interval calibrated on auto's outer-fold errors; bad inputs 4xx, nothing stored."""

from __future__ import annotations

import json

import numpy as np
import pytest
from sqlalchemy import func, select
from test_api_score_coresets import N_ITEMS, N_REF, create, make_suite, stored_fits, target_scores, upload

from evalplan.db.models import Coreset, Job
from support.helpers import assert_problem

FAST = {"selectors": ["random", "mrmr", "anchor_points"], "max_seconds": 120}


@pytest.fixture(scope="module")
def suite():
    return make_suite(N_ITEMS, seed=4)


def test_auto_coreset_records_its_choice_and_predicts_with_it(committed_client, committed_session_factory,
                                                              suite) -> None:
    client = committed_client
    upload(client, "gen", suite["ref"])
    upload(client, "gen2", suite["ref"][:, ::-1].copy())
    coreset = create(client, method="auto", benchmarks=["gen", "gen2"], budget=12, reference_models="all",
                     params=FAST)
    assert coreset["method"] == "auto" and coreset["n_items"] == 12
    diag = coreset["diagnostics"]
    assert set(diag["auto"]) == set(diag["per_benchmark"])  # one choice per benchmark
    fits = stored_fits(committed_session_factory, coreset["id"])
    labels = {"random", "mrmr", "anchor_points"}
    for bid, auto in diag["auto"].items():
        choice = auto["choice"]
        assert choice["selector"] in labels
        table = auto["cv_table"]
        assert {r["selector"] for r in table} == labels and len(table) == 13  # random 4, mrmr (miq, mid) 3 + 3, anchor_points 3
        best = min(table, key=lambda r: r["cv_rmse"])
        rule = auto["choice_rule"]
        assert rule["rule"] == "prior" and rule["prior"] == "mrmr+average(ridge+kernel_ridge)"
        prior_row = next(r for r in table if r["label"] == rule["prior"])
        # the prior unless the lowest-RMSE candidate beats it by more than se_mult standard errors
        expected = rule["prior"] if prior_row["excess_se"] <= rule["se_mult"] else best["label"]
        assert choice["label"] == expected, table
        assert coreset["predictor"] == "auto" and diag["predictor"] == "auto"  # not a single predictor's name
        assert len(auto["outer_folds"]) == 5 and sum(f["n_test"] for f in auto["outer_folds"]) == N_REF
        assert 0 < auto["honest_rmse"] < 0.2
        fit = fits[bid]
        assert fit["predictor"] == choice["predictor"] and fit["selector"] == choice["selector"]
        assert fit["components"] == choice["components"]
        assert fit["calibration"]["kind"] == "cross_fitted" and fit["calibration"]["source"] == "auto_outer_folds"
        errors = np.asarray(fit["calibration"]["errors"])
        assert errors.shape == (N_REF,)
        assert float(np.sqrt(np.mean(errors**2))) == pytest.approx(auto["honest_rmse"])
        summary = diag["fits_summary"][bid]
        assert summary["selector"] == choice["selector"] and summary["calibration"] == "cross_fitted"
    raw = client.get(f"/v1/coresets/{coreset['id']}").text
    assert "X_ref" not in raw and '"errors"' not in raw

    names = {bid: b for bid, b in zip(diag["per_benchmark"], ["gen", "gen2"])}
    for target in suite["targets"]:
        rows = {"gen": target, "gen2": target[::-1].copy()}
        r = client.post(f"/v1/coresets/{coreset['id']}/predict", json={"scores": target_scores(coreset, rows)})
        assert r.status_code == 200, r.text
        out = r.json()
        for bid, name in names.items():
            entry = out["benchmarks"][name]
            chosen = diag["auto"][bid]["choice"]["predictor"]
            assert entry["predictor"] in (chosen, "aipw"), entry
            if entry["predictor"] == chosen:
                assert entry["calibration"] == "cross_fitted"
            lo, hi = entry["interval"]
            assert 0.0 <= lo <= entry["estimate"] <= hi <= 1.0
            assert abs(entry["estimate"] - target.mean()) < 0.25, (entry, target.mean())
        assert out["overall"]["interval"][0] <= out["overall"]["estimate"] <= out["overall"]["interval"][1]


BAD = {
    "no reference models": ({"reference_models": None}, "reference_models"),
    "too few references": ({"reference_models": [f"ref{m:02d}" for m in range(8)]}, "at least 10"),
    "predictor given": ({"predictor": "ridge"}, "chooses the predictor"),
    "max_seconds zero": ({"params": {"max_seconds": 0}}, "max_seconds"),
    "max_seconds negative": ({"params": {"max_seconds": -5}}, "max_seconds"),
    "max_seconds huge": ({"params": {"max_seconds": 1e9}}, "max_seconds"),
    "max_seconds a string": ({"params": {"max_seconds": "fast"}}, "max_seconds"),
    "max_seconds a bool": ({"params": {"max_seconds": True}}, "max_seconds"),
    "unknown selector": ({"params": {"selectors": ["mrmr", "magic"]}}, "magic"),
    "empty selectors": ({"params": {"selectors": []}}, "selectors"),
    "outer_folds 1": ({"params": {"outer_folds": 1}}, "outer_folds"),
    "unknown param": ({"params": {"n_trials": 5}}, "valid parameters"),
}


def test_auto_bad_inputs_are_4xx_and_store_nothing(committed_client, committed_session_factory, suite) -> None:
    client = committed_client
    upload(client, "gen", suite["ref"])
    for case, (override, needle) in BAD.items():
        body = {"method": "auto", "benchmarks": ["gen"], "budget": 10, "reference_models": "all", **override}
        r = client.post("/v1/coresets", json=body)
        problem = assert_problem(r, 422)
        assert needle.lower() in json.dumps(problem).lower(), (case, problem)
    with committed_session_factory() as session:
        assert session.scalar(select(func.count()).select_from(Coreset)) == 0
        assert session.scalar(select(func.count()).select_from(Job)) == 0
