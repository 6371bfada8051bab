"""Benchmarks and models: create, read by id or name, list with limit + cursor, errors as problem+json."""

from __future__ import annotations

import base64
import json

import pytest

from support.helpers import assert_problem


def make_cursor(key: object) -> str:
    return base64.urlsafe_b64encode(json.dumps(key).encode()).decode().rstrip("=")


def walk(client, path: str, limit: int, **params: object) -> list[list[dict]]:
    """Every page of a list route, following next_cursor until it is null."""
    pages, cursor = [], None
    for _ in range(100):
        query = {"limit": limit, **params}
        if cursor is not None:
            query["cursor"] = cursor
        r = client.get(path, params=query)
        assert r.status_code == 200, r.text
        body = r.json()
        assert set(body) == {"items", "next_cursor"}
        pages.append(body["items"])
        cursor = body["next_cursor"]
        if cursor is None:
            return pages
    raise AssertionError("pagination never ended")


# ---------------------------------------------------------------- benchmarks


def test_create_benchmark_shape(client) -> None:
    r = client.post("/v1/benchmarks", json={"name": "mmlu-mini", "capability": "knowledge",
                                            "description": "a tiny one", "embedding_fields": ["subject"]})
    assert r.status_code == 201, r.text
    body = r.json()
    assert body["id"].startswith("bm_")
    assert body["name"] == "mmlu-mini"
    assert body["capability"] == "knowledge"
    assert body["description"] == "a tiny one"
    assert body["embedding_fields"] == ["subject"]
    assert body["n_items"] == 0 and body["n_models"] == 0
    assert body["score_kind"] == "continuous"
    assert body["score_min"] == 0.0 and body["score_max"] == 1.0
    assert body["default_metric"] == "score"
    assert body["data_version"] == 0
    assert "created_at" in body


def test_get_benchmark_by_id_and_by_name(client) -> None:
    created = client.post("/v1/benchmarks", json={"name": "gsm", "capability": "math"}).json()
    by_id = client.get(f"/v1/benchmarks/{created['id']}")
    by_name = client.get("/v1/benchmarks/gsm")
    assert by_id.status_code == 200 and by_name.status_code == 200
    assert by_id.json() == by_name.json() == created


def test_list_benchmarks_contains_created(client) -> None:
    ids = [client.post("/v1/benchmarks", json={"name": f"b{i}"}).json()["id"] for i in range(3)]
    body = client.get("/v1/benchmarks").json()
    assert [b["id"] for b in body["items"]] == ids
    assert body["next_cursor"] is None
    assert [b["name"] for b in body["items"]] == ["b0", "b1", "b2"]


def test_binary_benchmark_scale_is_zero_one(client) -> None:
    body = client.post("/v1/benchmarks", json={"name": "bin", "score_kind": "binary", "score_max": 5}).json()
    assert (body["score_kind"], body["score_min"], body["score_max"]) == ("binary", 0.0, 1.0)


def test_unbounded_benchmark(client) -> None:
    body = client.post("/v1/benchmarks", json={"name": "u", "score_min": None, "score_max": None}).json()
    assert body["score_min"] is None and body["score_max"] is None


def test_duplicate_benchmark_name_is_409(client) -> None:
    first = client.post("/v1/benchmarks", json={"name": "dup"})
    assert first.status_code == 201
    body = assert_problem(client.post("/v1/benchmarks", json={"name": "dup", "capability": "x"}), 409)
    assert "dup" in body["detail"]
    assert body["errors"][0]["field"] == "name"
    assert len(client.get("/v1/benchmarks").json()["items"]) == 1


@pytest.mark.parametrize("payload, field", [
    ({}, "name"),
    ({"name": ""}, "name"),
    ({"name": "a/b"}, "name"),
    ({"name": 5}, "name"),
    ({"name": "ok", "score_kind": "ternary"}, "score_kind"),
    ({"name": "ok", "embedding_fields": "subject"}, "embedding_fields"),
    ({"name": "ok", "colour": "red"}, "colour"),
    ({"name": "ok", "default_metric": "has space"}, "default_metric"),
])
def test_bad_benchmark_body_is_422_naming_field(client, payload: dict, field: str) -> None:
    body = assert_problem(client.post("/v1/benchmarks", json=payload), 422)
    assert body["errors"][0]["field"] == field
    assert field in body["detail"]
    assert client.get("/v1/benchmarks").json()["items"] == []


def test_score_min_above_max_is_422(client) -> None:
    body = assert_problem(client.post("/v1/benchmarks", json={"name": "x", "score_min": 2, "score_max": 1}), 422)
    assert body["errors"][0]["field"] == "score_min"
    assert client.get("/v1/benchmarks/x").status_code == 404


def test_unknown_benchmark_is_404(client) -> None:
    body = assert_problem(client.get("/v1/benchmarks/nope"), 404)
    assert "nope" in body["detail"]
    assert_problem(client.get("/v1/benchmarks/bm_000000000000000000000000"), 404)


def test_benchmark_pagination_walks_every_page_once(client) -> None:
    ids = [client.post("/v1/benchmarks", json={"name": f"p{i}"}).json()["id"] for i in range(7)]
    pages = walk(client, "/v1/benchmarks", 3)
    assert [len(p) for p in pages] == [3, 3, 1]
    assert [b["id"] for p in pages for b in p] == ids


def test_benchmark_pagination_exact_multiple(client) -> None:
    ids = [client.post("/v1/benchmarks", json={"name": f"q{i}"}).json()["id"] for i in range(6)]
    pages = walk(client, "/v1/benchmarks", 3)
    assert [len(p) for p in pages] == [3, 3]
    assert [b["id"] for p in pages for b in p] == ids


def test_capability_filter_with_pagination(client) -> None:
    math_names = []
    for i in range(5):
        capability = "math" if i % 2 == 0 else "code"
        client.post("/v1/benchmarks", json={"name": f"c{i}", "capability": capability})
        if capability == "math":
            math_names.append(f"c{i}")
    pages = walk(client, "/v1/benchmarks", 2, capability="math")
    assert [len(p) for p in pages] == [2, 1]
    assert [b["name"] for p in pages for b in p] == math_names == ["c0", "c2", "c4"]
    assert all(b["capability"] == "math" for p in pages for b in p)
    assert client.get("/v1/benchmarks", params={"capability": "none"}).json() == {"items": [], "next_cursor": None}


@pytest.mark.parametrize("cursor", ["!!!", "abc", make_cursor({"a": 1}), make_cursor(5), make_cursor([1, 2])])
def test_bad_benchmark_cursor_is_422(client, cursor: str) -> None:
    client.post("/v1/benchmarks", json={"name": "one"})
    body = assert_problem(client.get("/v1/benchmarks", params={"cursor": cursor}), 422)
    assert body["errors"][0]["parameter"] == "cursor"


@pytest.mark.parametrize("limit", [1001, 0, -1, "x"])
def test_bad_limit_is_422(client, limit: object) -> None:
    body = assert_problem(client.get("/v1/benchmarks", params={"limit": limit}), 422)
    assert "limit" in json.dumps(body)
    assert_problem(client.get("/v1/models", params={"limit": limit}), 422)


def test_limit_at_max_is_accepted(client) -> None:
    assert client.get("/v1/benchmarks", params={"limit": 1000}).status_code == 200


# ---------------------------------------------------------------- models


def test_create_and_get_model(client) -> None:
    r = client.post("/v1/models", json={"name": "llama-3-8b", "family": "llama", "metadata": {"params": 8e9}})
    assert r.status_code == 201, r.text
    body = r.json()
    assert body["id"].startswith("md_")
    assert (body["name"], body["family"], body["metadata"]) == ("llama-3-8b", "llama", {"params": 8e9})
    assert client.get(f"/v1/models/{body['id']}").json() == body
    assert client.get("/v1/models/llama-3-8b").json() == body


def test_model_defaults(client) -> None:
    body = client.post("/v1/models", json={"name": "m"}).json()
    assert body["family"] is None and body["metadata"] == {}


def test_duplicate_model_is_409(client) -> None:
    client.post("/v1/models", json={"name": "gpt"})
    body = assert_problem(client.post("/v1/models", json={"name": "gpt", "family": "x"}), 409)
    assert body["errors"][0]["field"] == "name"
    assert len(client.get("/v1/models").json()["items"]) == 1


@pytest.mark.parametrize("payload, field", [
    ({}, "name"), ({"name": "m", "metadata": [1]}, "metadata"), ({"name": "m", "size": 1}, "size"),
])
def test_bad_model_body_is_422(client, payload: dict, field: str) -> None:
    body = assert_problem(client.post("/v1/models", json=payload), 422)
    assert body["errors"][0]["field"] == field
    assert client.get("/v1/models").json()["items"] == []


def test_unknown_model_is_404(client) -> None:
    assert "ghost" in assert_problem(client.get("/v1/models/ghost"), 404)["detail"]


def test_model_pagination_and_family_filter(client) -> None:
    ids = []
    for i in range(7):
        ids.append(client.post("/v1/models", json={"name": f"m{i}", "family": "a" if i < 4 else "b"}).json()["id"])
    pages = walk(client, "/v1/models", 3)
    assert [len(p) for p in pages] == [3, 3, 1]
    assert [m["id"] for p in pages for m in p] == ids
    pages = walk(client, "/v1/models", 3, family="a")
    assert [len(p) for p in pages] == [3, 1]
    assert [m["name"] for p in pages for m in p] == ["m0", "m1", "m2", "m3"]


def test_bad_model_cursor_is_422(client) -> None:
    assert_problem(client.get("/v1/models", params={"cursor": "%%%"}), 422)
    assert_problem(client.get("/v1/models", params={"cursor": make_cursor(3)}), 422)


def test_models_from_score_upload_are_listed(client) -> None:
    client.post("/v1/benchmarks", json={"name": "s"})
    r = client.post("/v1/benchmarks/s/scores", content=b"model,a\nnew-1,1\nnew-2,0\n",
                    headers={"content-type": "text/csv"})
    assert r.status_code == 200, r.text
    assert [m["name"] for m in client.get("/v1/models").json()["items"]] == ["new-1", "new-2"]
    assert assert_problem(client.post("/v1/models", json={"name": "new-1"}), 409)


def test_model_names_with_slash(client) -> None:
    r = client.post("/v1/models", json={"name": "meta-llama/Llama-3-8B"})
    assert r.status_code == 201, r.text
    created = r.json()
    assert client.get("/v1/models/meta-llama/Llama-3-8B").json() == created
    assert client.get("/v1/models/meta-llama%2FLlama-3-8B").json() == created
    # a name made by a score upload is reachable too
    client.post("/v1/benchmarks", json={"name": "s"})
    client.post("/v1/benchmarks/s/scores", content=b"model,a\norg/other,1\n", headers={"content-type": "text/csv"})
    assert client.get("/v1/models/org/other").json()["name"] == "org/other"
    assert_problem(client.get("/v1/models/org/missing"), 404)
    assert_problem(client.post("/v1/models", json={"name": "bad\nname"}), 422)
    assert_problem(client.post("/v1/models", json={"name": "m" * 301}), 422)


def test_names_shaped_like_ids_are_refused(client):
    for path in ("/v1/benchmarks", "/v1/models"):
        r = client.post(path, json={"name": "bm_0123456789abcdef01234567"})
        assert r.status_code == 422, r.text
        assert r.json()["errors"][0]["field"] == "name"
