"""Text coresets that say when they help, over HTTP: ``facility_location_hybrid`` (difficulty strata of
the reference models), ``diagnostics.vs_random`` / ``recommendation``, the no-reference warning, and
the hybrid's bad inputs (422 problem+json, nothing stored). Real embeddings, real in-process jobs."""

from __future__ import annotations

import json

import pytest
from test_api_coresets import PROBLEM, count_rows, create, setup_suite

from evalplan.db.models import Coreset, Job

VS_RANDOM_KEYS = {"rmse", "random_rmse", "rmse_ratio", "p_beats_random", "random_interval", "draws",
                  "n_references", "cross_fitted", "recommendation"}


def test_hybrid_coreset_carries_vs_random_and_predicts(committed_client):
    client = committed_client
    setup_suite(client)
    coreset = create(client, method="facility_location_hybrid", benchmarks=["arith", "geo"], budget=8,
                     reference_models="all", params={"strata": 2})
    keys = [(i["benchmark"], i["item"]) for i in coreset["items"]]
    assert len(keys) == 8 == len(set(keys))
    assert {b: sum(1 for b_, _ in keys if b_ == b) for b in ("arith", "geo")} == {"arith": 5, "geo": 3}
    diag = coreset["diagnostics"]
    strata = diag["strata"]
    assert {s["benchmark"] for s in strata} == {"arith", "geo"}
    assert sum(s["picked"] for s in strata) == 8 and all(s["picked"] >= 1 for s in strata)
    vs = diag["vs_random"]
    assert VS_RANDOM_KEYS <= set(vs)
    assert vs["cross_fitted"] is True and vs["in_sample"] is False  # strata replayed on folds of the references
    assert vs["n_references"] == 6 and vs["counts"] == [5, 3]
    assert vs["rmse"] >= 0 and vs["random_rmse"] > 0
    assert vs["rmse_ratio"] == pytest.approx(vs["rmse"] / vs["random_rmse"])
    assert 0 <= vs["p_beats_random"] <= 1
    rec = diag["recommendation"]
    assert rec == vs["recommendation"]
    if vs["rmse_ratio"] < 1:
        assert rec["method"] == "facility_location_hybrid"
    else:  # several benchmarks: the random alternative keeps the per-benchmark split
        assert rec["method"] == "stratified_random" and rec["interval"]["half_width"] > 0
        assert any("stratified_random" in w for w in diag["warnings"])
    # predict works whatever the recommendation
    pred = client.post(f"/v1/coresets/{coreset['id']}/predict", json={"model": "ref2"})
    assert pred.status_code == 200, pred.text
    assert set(pred.json()["benchmarks"]) == {"arith", "geo"}

    # a paper method without named references: the backtest uses every model with scores
    fl = create(client, method="facility_location", benchmarks=["arith"], budget=4, params={"alpha": 1.0})
    vs = fl["diagnostics"]["vs_random"]
    assert vs["cross_fitted"] is False and vs["n_references"] == 6 and vs["counts"] == [4]
    assert vs["reference_models"].startswith("all models")
    assert fl["diagnostics"]["recommendation"]["method"] in ("facility_location", "random")
    assert fl["params"] == {"alpha": 1.0}  # the paper's method is untouched (no tuning without references)


def test_no_reference_scores_warns(committed_client):
    client = committed_client
    setup_suite(client, sizes=(("geo", 10),))
    client.post("/v1/benchmarks", json={"name": "textonly", "score_kind": "binary"})
    body = "\n".join(json.dumps({"id": f"t{i}", "prompt": f"Question number {i} about topic {i % 3}?"})
                     for i in range(8))
    r = client.post("/v1/benchmarks/textonly/items", content=body, headers={"content-type": "application/x-ndjson"})
    assert r.status_code == 200, r.text
    coreset = create(client, method="facility_location", benchmarks=["textonly"], budget=3)
    diag = coreset["diagnostics"]
    assert diag["vs_random"] is None and diag["recommendation"] is None
    assert any("no reference scores" in w and "random" in w for w in diag["warnings"])


@pytest.mark.parametrize("body,fragment", [
    ({"method": "facility_location_hybrid", "benchmarks": ["arith"], "budget": 3}, "reference_models"),
    ({"method": "facility_location_hybrid", "benchmarks": ["textonly"], "budget": 3, "reference_models": "all"},
     "textonly"),
    ({"method": "facility_location_hybrid", "benchmarks": ["arith", "textonly"], "budget": 3,
      "reference_models": ["ref0", "ref1", "ref2"]}, "textonly"),
    ({"method": "facility_location_hybrid", "benchmarks": ["arith"], "budget": 3,
      "reference_models": ["ref0", "ref1"]}, "at least 3"),
    ({"method": "facility_location_hybrid", "benchmarks": ["arith"], "budget": 3, "reference_models": "all",
      "params": {"strata": 0}}, "strata"),
    ({"method": "facility_location_hybrid", "benchmarks": ["arith"], "budget": 3, "reference_models": "all",
      "params": {"stratify": False}}, "stratify"),
    ({"method": "facility_location_hybrid", "benchmarks": ["arith", "geo"], "budget": 1, "reference_models": "all"},
     "number of benchmarks"),
    ({"method": "facility_location_hybrid", "benchmarks": ["arith"], "budget": 3, "reference_models": ["nobody"]},
     "nobody"),
])
def test_bad_hybrid_requests_store_nothing(client, db_session_factory, body, fragment):
    setup_suite(client)
    client.post("/v1/benchmarks", json={"name": "textonly"})
    client.post("/v1/benchmarks/textonly/items", content='{"id": "a", "prompt": "x"}\n{"id": "b", "prompt": "y"}\n',
                headers={"content-type": "application/x-ndjson"})
    before = (count_rows(db_session_factory, Coreset), count_rows(db_session_factory, Job))
    r = client.post("/v1/coresets", json=body)
    assert 400 <= r.status_code < 500 and r.status_code in (404, 422), r.text
    assert r.headers["content-type"].startswith(PROBLEM)
    assert fragment in json.dumps(r.json())
    assert (count_rows(db_session_factory, Coreset), count_rows(db_session_factory, Job)) == before
