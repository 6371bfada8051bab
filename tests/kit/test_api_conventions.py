"""Cross-cutting conventions: problem+json errors without tracebacks, Idempotency-Key, OpenAPI, health."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from sqlalchemy import func, select

import support.helpers as helpers
from evalplan.db.models import Benchmark, IdempotencyRecord, Model, Score
from evalplan.main import create_app
from support.helpers import assert_problem


def count(factory, table) -> int:
    with factory() as session:
        return session.scalar(select(func.count()).select_from(table))


# ---------------------------------------------------------------- errors


def test_unknown_route_is_404_problem(client) -> None:
    body = assert_problem(client.get("/v1/nothing-here"), 404)
    assert body["title"] == "Not Found"
    assert "/v1/nothing-here" in body["detail"]
    assert body["instance"] == "/v1/nothing-here"


def test_wrong_method_is_405_problem(client) -> None:
    r = client.delete("/v1/benchmarks")
    body = assert_problem(r, 405)
    assert "DELETE" in body["detail"]
    assert r.headers["allow"]  # Starlette lists the methods of the first route matching the path


def test_invalid_json_body_is_422_problem(client) -> None:
    r = client.post("/v1/benchmarks", content=b'{"name": ', headers={"content-type": "application/json"})
    body = assert_problem(r, 422)
    assert body["errors"][0]["type"] == "json_invalid"
    assert count_benchmarks(client) == 0


def test_wrong_json_type_is_422_problem(client) -> None:
    body = assert_problem(client.post("/v1/models", json=["not", "an", "object"]), 422)
    assert body["errors"]


def count_benchmarks(client) -> int:
    return len(client.get("/v1/benchmarks").json()["items"])


def test_domain_errors_have_a_typed_urn(client) -> None:
    body = assert_problem(client.get("/v1/benchmarks/none"), 404)
    assert body["type"] == "urn:evalplan:problem:not-found"
    assert body["errors"][0]["parameter"] == "benchmark"
    assert_problem(client.get("/v1/jobs/job_nope"), 404)


@pytest.fixture
def crash_client(db_session_factory, database_urls, backend) -> Iterator[TestClient]:
    app: FastAPI = create_app(helpers.settings_for(database_urls[backend]), session_factory=db_session_factory,
                              dispatcher=helpers.NoJobsDispatcher())

    def boom() -> None:
        raise RuntimeError("secret detail in /srv/evalplan/app/secret_module.py line 42")

    app.add_api_route("/v1/boom", boom, methods=["GET", "POST"])
    with TestClient(app, raise_server_exceptions=False) as test_client:
        yield test_client


def test_crash_is_500_problem_without_traceback(crash_client, caplog) -> None:
    r = crash_client.get("/v1/boom")
    body = assert_problem(r, 500)
    assert body["title"] == "Internal Server Error"
    for leak in ("Traceback", "RuntimeError", "secret", ".py", "/srv/"):
        assert leak not in r.text
    # but it is logged for the operators
    assert any("RuntimeError" in (rec.exc_text or "") or rec.exc_info for rec in caplog.records)


def test_crash_with_idempotency_key_is_not_stored(crash_client, db_session_factory) -> None:
    headers = {"idempotency-key": "crash-1", "content-type": "application/json"}
    first = crash_client.post("/v1/boom", content=b"{}", headers=headers)
    assert_problem(first, 500)
    second = crash_client.post("/v1/boom", content=b"{}", headers=headers)
    assert_problem(second, 500)
    assert "idempotent-replayed" not in second.headers
    assert count(db_session_factory, IdempotencyRecord) == 0


# ---------------------------------------------------------------- Idempotency-Key


def test_same_key_same_body_replays(client, db_session_factory) -> None:
    headers = {"idempotency-key": "key-1"}
    first = client.post("/v1/benchmarks", json={"name": "idem"}, headers=headers)
    assert first.status_code == 201, first.text
    assert "idempotent-replayed" not in first.headers
    second = client.post("/v1/benchmarks", json={"name": "idem"}, headers=headers)
    assert second.status_code == 201, second.text
    assert second.headers["idempotent-replayed"] == "true"
    assert second.json() == first.json()
    assert second.headers["content-type"].startswith("application/json")
    assert count(db_session_factory, Benchmark) == 1
    # without the key the same body is a real (conflicting) second request
    assert_problem(client.post("/v1/benchmarks", json={"name": "idem"}), 409)


def test_same_key_other_body_is_422(client, db_session_factory) -> None:
    headers = {"idempotency-key": "key-2"}
    assert client.post("/v1/benchmarks", json={"name": "one"}, headers=headers).status_code == 201
    body = assert_problem(client.post("/v1/benchmarks", json={"name": "two"}, headers=headers), 422)
    assert "Idempotency-Key" in body["detail"]
    assert count(db_session_factory, Benchmark) == 1
    assert client.get("/v1/benchmarks/two").status_code == 404


def test_same_key_other_query_is_422(client) -> None:
    client.post("/v1/benchmarks", json={"name": "b"})
    headers = {"idempotency-key": "key-q", "content-type": "text/csv"}
    assert client.post("/v1/benchmarks/b/scores", content=b"model,a\nm,1\n", headers=headers).status_code == 200
    r = client.post("/v1/benchmarks/b/scores", params={"metric": "f1"}, content=b"model,a\nm,1\n", headers=headers)
    assert_problem(r, 422)
    assert client.get("/v1/benchmarks/b/scores", params={"metric": "f1"}).text == "model,a\n"


def test_same_key_on_another_path_is_independent(client, db_session_factory) -> None:
    headers = {"idempotency-key": "shared"}
    bench = client.post("/v1/benchmarks", json={"name": "x"}, headers=headers)
    model = client.post("/v1/models", json={"name": "x"}, headers=headers)
    assert bench.status_code == 201 and model.status_code == 201, model.text
    assert "idempotent-replayed" not in model.headers
    assert model.json()["id"].startswith("md_") and bench.json()["id"].startswith("bm_")
    assert count(db_session_factory, Model) == 1 and count(db_session_factory, Benchmark) == 1


def test_score_upload_replay_writes_once(client, db_session_factory) -> None:
    client.post("/v1/benchmarks", json={"name": "b"})
    headers = {"idempotency-key": "up-1", "content-type": "text/csv"}
    first = client.post("/v1/benchmarks/b/scores", content=b"model,a,b\nm1,1,0\n", headers=headers)
    # another upload in between: a replay must not overwrite it
    client.post("/v1/benchmarks/b/scores", content=b"model,a\nm1,0.5\n", headers={"content-type": "text/csv"})
    second = client.post("/v1/benchmarks/b/scores", content=b"model,a,b\nm1,1,0\n", headers=headers)
    assert second.headers["idempotent-replayed"] == "true"
    assert second.json() == first.json() == {"n_scores": 2, "n_models": 1, "n_items": 2, "metric": "score"}
    assert client.get("/v1/benchmarks/b/scores").text == "model,a,b\nm1,0.5,0\n"
    assert client.get("/v1/benchmarks/b").json()["data_version"] == 2
    assert count(db_session_factory, Score) == 2


def test_client_errors_are_replayed_too(client) -> None:
    headers = {"idempotency-key": "bad-1"}
    first = client.post("/v1/models", json={"nam": "typo"}, headers=headers)
    assert_problem(first, 422)
    second = client.post("/v1/models", json={"nam": "typo"}, headers=headers)
    assert_problem(second, 422)
    assert second.headers["idempotent-replayed"] == "true"
    assert second.json() == first.json()


def test_idempotency_key_too_long_is_422(client) -> None:
    assert_problem(client.post("/v1/models", json={"name": "m"}, headers={"idempotency-key": "k" * 201}), 422)
    assert client.get("/v1/models").json()["items"] == []


def test_get_ignores_idempotency_key(client) -> None:
    client.post("/v1/benchmarks", json={"name": "g"})
    r = client.get("/v1/benchmarks/g", headers={"idempotency-key": "k"})
    assert r.status_code == 200 and "idempotent-replayed" not in r.headers


# ---------------------------------------------------------------- docs and health


def test_openapi_json(client) -> None:
    r = client.get("/openapi.json")
    assert r.status_code == 200
    spec = r.json()
    assert spec["info"]["title"] == "Evalplan"
    for path in ("/v1/benchmarks", "/v1/benchmarks/{benchmark}", "/v1/benchmarks/{benchmark}/items",
                 "/v1/benchmarks/{benchmark}/scores", "/v1/benchmarks/{benchmark}/stats", "/v1/models",
                 "/v1/models/{model}", "/v1/jobs/{job_id}", "/health"):
        assert path in spec["paths"], path
    upload = spec["paths"]["/v1/benchmarks/{benchmark}/scores"]["post"]["requestBody"]["content"]
    assert set(upload) >= {"text/csv", "application/json"}
    ref = upload["application/json"]["schema"]["items"]["$ref"]
    assert ref.rsplit("/", 1)[-1] in spec["components"]["schemas"]
    items = spec["paths"]["/v1/benchmarks/{benchmark}/items"]["post"]["requestBody"]["content"]
    assert "application/x-ndjson" in items


def test_docs_page(client) -> None:
    r = client.get("/docs")
    assert r.status_code == 200
    assert "text/html" in r.headers["content-type"]
    assert "/openapi.json" in r.text


def test_health(client) -> None:
    r = client.get("/health")
    assert r.status_code == 200 and r.json() == {"status": "ok"}
    ready = client.get("/health/ready")
    assert ready.status_code == 200 and ready.json() == {"status": "ok", "database": "ok", "broker": "not used",
                                                         "workers": "not used"}
