"""POST /v1/coresets end to end (real embeddings, real in-process jobs), exports, predictions,
benchmark similarity, and every bad input of the text-coreset issue (422, nothing stored)."""

from __future__ import annotations

import csv
import io
import json

import numpy as np
import pytest
from sqlalchemy import func, select

from evalplan.db.models import Coreset, Job
from support.helpers import wait_for_job

PROBLEM = "application/problem+json"
TOPICS = {
    "arith": ["What is {a} plus {b}?", "Compute {a} times {b}.", "Subtract {b} from {a}."],
    "geo": ["What is the capital of country number {a}?", "Which river flows through city {a}?",
            "Name the mountain range near region {b}."],
}


def make_items(bench: str, n: int, seed: int) -> list[dict]:
    rng = np.random.default_rng(seed)
    templates = TOPICS[bench]
    return [{"id": f"{bench}-{i}", "prompt": templates[i % len(templates)].format(a=int(rng.integers(100)), b=int(rng.integers(100))),
             "target": str(int(rng.integers(1000)))} for i in range(n)]


def setup_suite(client, n_models: int = 6, sizes=(("arith", 14), ("geo", 10))) -> dict[str, np.ndarray]:
    """Two benchmarks with text (two capabilities) and binary scores of reference models."""
    truth = {}
    rng = np.random.default_rng(0)
    for name, n in sizes:
        r = client.post("/v1/benchmarks", json={"name": name, "capability": f"cap-{name}", "score_kind": "binary"})
        assert r.status_code == 201, r.text
        body = "\n".join(json.dumps(x) for x in make_items(name, n, seed=len(name)))
        r = client.post(f"/v1/benchmarks/{name}/items", content=body, headers={"content-type": "application/x-ndjson"})
        assert r.status_code == 200, r.text
        ability = np.linspace(0.2, 0.9, n_models)[:, None]
        values = (rng.random((n_models, n)) < ability).astype(int)
        truth[name] = values
        lines = ["model," + ",".join(f"{name}-{i}" for i in range(n))]
        lines += [f"ref{m}," + ",".join(map(str, row)) for m, row in enumerate(values)]
        r = client.post(f"/v1/benchmarks/{name}/scores", content="\n".join(lines) + "\n", headers={"content-type": "text/csv"})
        assert r.status_code == 200, r.text
    return truth


def create(client, **body) -> dict:
    r = client.post("/v1/coresets", json=body)
    assert r.status_code == 202, r.text
    out = r.json()
    assert out["coreset"]["status"] == "pending" and out["job"]["id"]
    job = wait_for_job(client, out["job"]["id"], timeout=180)
    assert job["status"] == "succeeded", job
    coreset = client.get(f"/v1/coresets/{out['coreset']['id']}").json()
    assert coreset["status"] == "ready"
    return coreset


@pytest.mark.slow
def test_facility_location_end_to_end(committed_client):
    client = committed_client
    truth = setup_suite(client)
    coreset = create(client, method="facility_location", benchmarks=["arith", "geo"], budget=6, name="suite-fl")
    items = coreset["items"]
    assert [i["rank"] for i in items] == [1, 2, 3, 4, 5, 6]
    assert {i["benchmark"] for i in items} == {"arith", "geo"}  # block-diagonal: both covered
    gains = [i["gain"] for i in items]
    assert all(g is not None and g > 0 for g in gains)
    assert gains == sorted(gains, reverse=True)  # greedy marginal gains of a submodular function
    assert coreset["version"] == 1 and coreset["name"] == "suite-fl"
    assert coreset["diagnostics"]["embeddings"]["dim"] == 384

    # exports
    lines = client.get(f"/v1/coresets/{coreset['id']}/export", params={"format": "jsonl"}).text.splitlines()
    assert [json.loads(x)["item"] for x in lines] == [i["item"] for i in items]
    rows = list(csv.DictReader(io.StringIO(client.get(f"/v1/coresets/{coreset['id']}/export", params={"format": "csv"}).text)))
    assert [r["item"] for r in rows] == [i["item"] for i in items]
    inspect = client.get(f"/v1/coresets/{coreset['id']}/export", params={"format": "inspect"}).json()
    assert sorted(inspect) == ["arith", "geo"]
    r = client.get(f"/v1/coresets/{coreset['id']}/export", params={"format": "lm-eval"})
    assert r.status_code == 422 and r.headers["content-type"].startswith(PROBLEM)  # ids like 'arith-3' have no doc index
    r = client.get(f"/v1/coresets/{coreset['id']}/export", params={"format": "yaml"})
    assert r.status_code == 422

    # predict from posted scores: benchmark estimate = mean of the coreset scores (§3.2)
    target = {name: values[2] for name, values in truth.items()}
    scores = [{"benchmark": i["benchmark"], "item": i["item"],
               "score": float(target[i["benchmark"]][int(i["item"].split("-")[1])])} for i in items]
    pred = client.post(f"/v1/coresets/{coreset['id']}/predict", json={"scores": scores}).json()
    for name in ("arith", "geo"):
        mine = [s["score"] for s in scores if s["benchmark"] == name]
        b = pred["benchmarks"][name]
        assert b["estimate"] == pytest.approx(np.mean(mine))
        assert b["interval"][0] <= b["estimate"] <= b["interval"][1]
        assert 0 <= b["interval"][0] and b["interval"][1] <= 1
    assert pred["overall"]["estimate"] == pytest.approx(np.mean([pred["benchmarks"][n]["estimate"] for n in ("arith", "geo")]))
    assert set(pred["capabilities"]) == {"cap-arith", "cap-geo"}
    assert pred["extrapolation"] is False
    # predict from the stored scores of a model
    stored = client.post(f"/v1/coresets/{coreset['id']}/predict", json={"model": "ref2"}).json()
    assert stored["overall"]["estimate"] == pytest.approx(pred["overall"]["estimate"])

    # a second coreset with the same name is version 2 and reuses the cached embeddings
    again = create(client, method="facility_location", benchmarks=["arith", "geo"], budget=6, name="suite-fl")
    assert again["version"] == 2
    assert again["diagnostics"]["embeddings"]["n_embedded"] == 0
    assert [i["item"] for i in again["items"]] == [i["item"] for i in items]  # deterministic


@pytest.mark.parametrize("method,params", [
    ("random", {}), ("stratified_random", {}), ("dpp", {"kernel": "cov"}), ("dpp", {"kernel": "cos", "mi": True}),
    ("k_center", {}), ("k_means", {}), ("facility_location", {"stratify": False, "alpha": 2.0}),
])
def test_every_text_method_selects_k_distinct_items(committed_client, method, params):
    setup_suite(committed_client)
    coreset = create(committed_client, method=method, benchmarks=["arith", "geo"], budget=5, params=params, seed=3)
    keys = [(i["benchmark"], i["item"]) for i in coreset["items"]]
    assert len(keys) == 5 == len(set(keys))


def test_fraction_budget_and_alpha_tuning(committed_client):
    setup_suite(committed_client)
    coreset = create(committed_client, method="facility_location", benchmarks=["arith", "geo"],
                     budget={"fraction": 0.3}, reference_models="all")
    per = coreset["diagnostics"]["per_benchmark"]
    counts = {b: sum(1 for i in coreset["items"] if i["benchmark"] == b) for b in ("arith", "geo")}
    assert counts == {"arith": round(0.3 * 14), "geo": round(0.3 * 10)}
    assert sorted(per.values()) == sorted(counts.values())
    tuning = coreset["diagnostics"]["alpha_tuning"]
    assert tuning and len(tuning["reference_models"]) == 6
    assert coreset["params"]["alpha"] == tuning["alpha"]
    assert tuning["alpha"] in [row["alpha"] for row in tuning["grid"]]


def count_rows(db_session_factory, model) -> int:
    with db_session_factory() as session:
        return session.scalar(select(func.count()).select_from(model))


@pytest.mark.parametrize("body,fragment", [
    ({"method": "facility_location", "benchmarks": ["arith", "geo"], "budget": 25}, "larger than"),
    ({"method": "facility_location", "benchmarks": ["arith", "geo"], "budget": 1}, "number of benchmarks"),
    ({"method": "stratified_random", "benchmarks": ["arith", "geo"], "budget": 1}, "number of benchmarks"),
    ({"method": "simulated_annealing", "benchmarks": ["arith"], "budget": 2}, "facility_location"),
    ({"method": "facility_location", "benchmarks": ["arith"], "budget": 2, "params": {"beta": 1}}, "alpha"),
    ({"method": "facility_location", "benchmarks": ["scoreonly"], "budget": 2}, "scoreonly"),
    ({"method": "random", "benchmarks": ["empty"], "budget": 2}, "empty"),
    ({"method": "random", "benchmarks": ["arith"], "budget": {"fraction": 1.5}}, "fraction"),
    ({"method": "random", "benchmarks": ["arith"], "budget": 0}, "positive"),
    ({"method": "random", "benchmarks": [], "budget": 2}, "benchmarks"),
    ({"method": "dpp", "benchmarks": ["arith"], "budget": 2, "params": {"kernel": "rbf"}}, "kernel"),
    ({"method": "facility_location", "benchmarks": ["arith"], "budget": 2, "params": {"alpha": -1}}, "alpha"),
    ({"method": "random", "benchmarks": ["arith"], "budget": 2, "seed": -4}, "seed"),
])
def test_bad_coreset_requests_are_422_and_store_nothing(client, db_session_factory, body, fragment):
    setup_suite(client)
    client.post("/v1/benchmarks", json={"name": "empty"})
    client.post("/v1/benchmarks", json={"name": "scoreonly"})
    client.post("/v1/benchmarks/scoreonly/scores", content="model,x,y\nm,1,0\n", headers={"content-type": "text/csv"})
    before = (count_rows(db_session_factory, Coreset), count_rows(db_session_factory, Job))
    r = client.post("/v1/coresets", json=body)
    assert r.status_code == 422, r.text
    assert r.headers["content-type"].startswith(PROBLEM)
    assert fragment in json.dumps(r.json())
    assert (count_rows(db_session_factory, Coreset), count_rows(db_session_factory, Job)) == before


def test_unknown_benchmark_is_404(client):
    r = client.post("/v1/coresets", json={"method": "random", "benchmarks": ["nope"], "budget": 1})
    assert r.status_code == 404 and r.headers["content-type"].startswith(PROBLEM)


def test_predict_errors(committed_client):
    client = committed_client
    setup_suite(client)
    coreset = create(client, method="random", benchmarks=["arith", "geo"], budget=4, seed=1)
    url = f"/v1/coresets/{coreset['id']}/predict"
    first = coreset["items"][0]
    outside = next(f"arith-{i}" for i in range(14) if f"arith-{i}" not in {x["item"] for x in coreset["items"]})
    cases = [
        ({"scores": [{"benchmark": "arith", "item": outside, "score": 1}]}, 422),
        ({"scores": [{"benchmark": first["benchmark"], "item": first["item"], "score": 0.5}]}, 422),  # binary benchmark
        ({"scores": [{"benchmark": first["benchmark"], "item": first["item"], "score": 1}] * 2}, 422),
        ({}, 422),
        ({"model": "nobody"}, 404),
    ]
    for body, status in cases:
        r = client.post(url, json=body)
        assert r.status_code == status, (body, r.text)
        assert r.headers["content-type"].startswith(PROBLEM)
    assert client.post("/v1/coresets/cs_000000000000000000000000/predict", json={}).status_code == 404


def test_benchmark_similarity_job_then_cached(committed_client):
    client = committed_client
    setup_suite(client)
    r = client.get("/v1/benchmark-similarity", params={"benchmarks": "arith,geo"})
    if r.status_code == 202:
        job = wait_for_job(client, r.json()["job"]["id"], timeout=120)
        assert job["status"] == "succeeded", job
        r = client.get("/v1/benchmark-similarity", params={"benchmarks": "arith,geo"})
    assert r.status_code == 200, r.text
    body = r.json()
    m = np.array(body["matrix"])
    assert body["benchmarks"] == ["arith", "geo"]
    assert m.shape == (2, 2) and np.allclose(m, m.T) and np.allclose(np.diag(m), 1.0)
    assert 0 <= m[0, 1] <= 1
    assert sorted(o["benchmark"] for o in body["ordering"]) == ["arith", "geo"]
    assert client.get("/v1/benchmark-similarity", params={"benchmarks": "arith"}).status_code == 422


def test_alpha_grid_drops_alphas_whose_graph_is_too_large():
    from evalplan.coresets.families.text import MAX_GRAPH_ENTRIES, alpha_grid

    assert alpha_grid(1000, 50) == [0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0]
    big = alpha_grid(60_000, 200)
    assert big and max(big) < 16.0
    assert all(a * 60_000 / 200 * 60_000 <= MAX_GRAPH_ENTRIES + 60_000 for a in big)


def test_unbounded_scale_predicts_with_null_bounds(committed_client):
    client = committed_client
    client.post("/v1/benchmarks", json={"name": "open", "score_min": None, "score_max": None})
    items = "\n".join(json.dumps({"id": str(i), "prompt": f"Write a poem about {i} cats.", "target": ""}) for i in range(8))
    client.post("/v1/benchmarks/open/items", content=items, headers={"content-type": "application/x-ndjson"})
    coreset = create(client, method="random", benchmarks=["open"], budget=1, seed=0)
    item = coreset["items"][0]["item"]
    r = client.post(f"/v1/coresets/{coreset['id']}/predict", json={"scores": [{"benchmark": "open", "item": item, "score": 57.5}]})
    assert r.status_code == 200, r.text
    assert r.json()["benchmarks"]["open"]["estimate"] == 57.5
