"""Score uploads (wide CSV, long JSON) and downloads: exact round trips, upsert, metrics, located errors
that leave the database unchanged, body limits, and the statistics job."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import func, select

import support.helpers as helpers
from evalplan.db.models import Benchmark, Item, Model, Score
from evalplan.main import create_app
from support.helpers import assert_problem, post_scores_csv, wait_for_job

CSV = {"content-type": "text/csv"}
BASE = "model,a,b,c\nm1,1,0,\nm2,0.5,,0.123456\n"




def row_counts(factory) -> dict[str, int]:
    with factory() as session:
        return {table.__tablename__: session.scalar(select(func.count()).select_from(table))
                for table in (Benchmark, Item, Model, Score)}


def new_benchmark(client, name: str = "b", **extra: object) -> dict:
    r = client.post("/v1/benchmarks", json={"name": name, **extra})
    assert r.status_code == 201, r.text
    return r.json()


def upload_csv(client, text: str, bench: str = "b", metric: str | None = None):
    return post_scores_csv(client, bench, text, metric)


def download_csv(client, bench: str = "b", metric: str | None = None) -> str:
    params = {"metric": metric} if metric else None
    r = client.get(f"/v1/benchmarks/{bench}/scores", headers={"accept": "text/csv"}, params=params)
    assert r.status_code == 200, r.text
    assert r.headers["content-type"].startswith("text/csv")
    return r.text


def long_cells(client, bench: str = "b", limit: int = 1000, **params: object) -> list[list[dict]]:
    pages, cursor = [], None
    while True:
        query = {"limit": limit, **params} | ({"cursor": cursor} if cursor else {})
        r = client.get(f"/v1/benchmarks/{bench}/scores", headers={"accept": "application/json"}, params=query)
        assert r.status_code == 200, r.text
        assert r.headers["content-type"].startswith("application/json")
        pages.append(r.json()["items"])
        cursor = r.json()["next_cursor"]
        if cursor is None:
            return pages


# ---------------------------------------------------------------- round trips


@pytest.mark.parametrize("text", [
    BASE,
    "model,a,b,c,d\nm1,1,0,0.5,\nm2,,0.123456,1,0\nm3,0.3333333333333333,,,1\n",
    "model,x\nonly,0\n",
    "model,q 1,\"q,2\",q3\n\"org/m,1\",1,,0.25\nm-2,,0.5,\n",
])  # a header-only CSV holds no scores: 422, nothing stored (tests/benchmarks/test_empty_score_upload.py)
def test_wide_csv_round_trip_is_exact(client, text: str) -> None:
    new_benchmark(client)
    r = upload_csv(client, text)
    assert r.status_code == 200, r.text
    assert download_csv(client) == text


def test_upload_response_and_benchmark_counts(client) -> None:
    new_benchmark(client)
    r = upload_csv(client, BASE)
    assert r.json() == {"n_scores": 4, "n_models": 2, "n_items": 3, "metric": "score"}
    bench = client.get("/v1/benchmarks/b").json()
    assert (bench["n_items"], bench["n_models"], bench["data_version"]) == (3, 2, 1)
    r = upload_csv(client, "model,c,d\nm3,1,1\n")
    assert r.json() == {"n_scores": 2, "n_models": 1, "n_items": 2, "metric": "score"}
    bench = client.get("/v1/benchmarks/b").json()
    assert (bench["n_items"], bench["n_models"], bench["data_version"]) == (4, 3, 2)


def test_non_canonical_upload_downloads_canonical(client) -> None:
    new_benchmark(client)
    upload_csv(client, "model , a ,b,c\r\n m1 ,1.0, 0.50 ,1e-1\r\nm2,0.0,,+1\r\n")
    assert download_csv(client) == "model,a,b,c\nm1,1,0.5,0.1\nm2,0,,1\n"


def test_format_query_and_default_are_csv(client) -> None:
    new_benchmark(client)
    upload_csv(client, BASE)
    assert client.get("/v1/benchmarks/b/scores").text == BASE
    assert client.get("/v1/benchmarks/b/scores", params={"format": "csv"},
                      headers={"accept": "application/json"}).text == BASE
    assert client.get("/v1/benchmarks/b/scores", params={"format": "json"}).json()["items"][0] == \
        {"model": "m1", "item": "a", "score": 1.0}
    assert client.get("/v1/benchmarks/b/scores", params={"format": "xml"}).status_code == 422


def test_long_json_upload_then_csv_download(client) -> None:
    new_benchmark(client)
    cells = [
        {"model": "m1", "item": "a", "score": 1},
        {"model": "m2", "item": "b", "score": 0.123456},
        {"model": "m1", "item": "c", "score": 0},
        {"model": "m2", "item": "a", "score": 0.5},
    ]
    r = client.post("/v1/benchmarks/b/scores", json=cells)
    assert r.status_code == 200, r.text
    assert r.json() == {"n_scores": 4, "n_models": 2, "n_items": 3, "metric": "score"}
    assert download_csv(client) == "model,a,b,c\nm1,1,,0\nm2,0.5,0.123456,\n"


def test_json_download_is_long_and_paginated(client) -> None:
    new_benchmark(client)
    upload_csv(client, "model,a,b,c\nm1,1,0,\nm2,0.5,,0.123456\nm3,0,1,1\n")
    pages = long_cells(client, limit=2)
    assert [len(p) for p in pages] == [2, 2, 2, 1]
    flat = [(c["model"], c["item"], c["score"]) for p in pages for c in p]
    assert flat == [("m1", "a", 1.0), ("m1", "b", 0.0), ("m2", "a", 0.5), ("m2", "c", 0.123456),
                    ("m3", "a", 0.0), ("m3", "b", 1.0), ("m3", "c", 1.0)]
    assert long_cells(client, limit=1000) == [[{"model": m, "item": i, "score": s} for m, i, s in flat]]


def test_json_download_bad_cursor(client) -> None:
    import base64

    new_benchmark(client)
    upload_csv(client, BASE)
    for key in (["md_x", "not-an-int"], ["md_x"], {"a": 1}, [1, 2], ["md_x", 10**30]):
        cursor = base64.urlsafe_b64encode(json.dumps(key).encode()).decode().rstrip("=")
        assert_problem(client.get("/v1/benchmarks/b/scores", params={"format": "json", "cursor": cursor}), 422)
    assert_problem(client.get("/v1/benchmarks/b/scores", params={"format": "json", "cursor": "***"}), 422)


def test_metrics_are_kept_apart(client) -> None:
    new_benchmark(client)
    assert upload_csv(client, "model,a,b\nm1,1,0\n", metric="acc").json()["metric"] == "acc"
    assert upload_csv(client, "model,a,b\nm1,0.25,0.75\nm2,1,1\n", metric="f1").status_code == 200
    assert download_csv(client, metric="acc") == "model,a,b\nm1,1,0\n"
    assert download_csv(client, metric="f1") == "model,a,b\nm1,0.25,0.75\nm2,1,1\n"
    assert download_csv(client) == "model,a,b\n"  # the default metric 'score' has no cells
    f1 = long_cells(client, metric="f1")[0]
    assert [(c["model"], c["item"], c["score"]) for c in f1] == [
        ("m1", "a", 0.25), ("m1", "b", 0.75), ("m2", "a", 1.0), ("m2", "b", 1.0)]
    # re-uploading one metric leaves the other alone
    upload_csv(client, "model,a\nm1,0\n", metric="f1")
    assert download_csv(client, metric="acc") == "model,a,b\nm1,1,0\n"
    assert download_csv(client, metric="f1") == "model,a,b\nm1,0,0.75\nm2,1,1\n"


def test_benchmark_default_metric_is_used(client) -> None:
    new_benchmark(client, default_metric="acc_norm")
    assert upload_csv(client, "model,a\nm1,1\n").json()["metric"] == "acc_norm"
    assert download_csv(client, metric="acc_norm") == "model,a\nm1,1\n"
    assert download_csv(client) == "model,a\nm1,1\n"
    assert download_csv(client, metric="score") == "model,a\n"


def test_bad_metric_name_is_422(client) -> None:
    new_benchmark(client)
    body = assert_problem(upload_csv(client, BASE, metric="has space"), 422)
    assert body["errors"][0]["parameter"] == "metric"
    assert_problem(client.get("/v1/benchmarks/b/scores", params={"metric": "a\tb"}), 422)
    assert download_csv(client) == "model\n"


def test_reupload_replaces_cell_and_leaves_others(client) -> None:
    new_benchmark(client)
    upload_csv(client, BASE)
    r = upload_csv(client, "model,a\nm1,0\n")
    assert r.json() == {"n_scores": 1, "n_models": 1, "n_items": 1, "metric": "score"}
    assert download_csv(client) == "model,a,b,c\nm1,0,0,\nm2,0.5,,0.123456\n"
    # an empty cell is "no value in this upload", never a deletion
    upload_csv(client, "model,a,b\nm2,,1\n")
    assert download_csv(client) == "model,a,b,c\nm1,0,0,\nm2,0.5,1,0.123456\n"
    # long JSON upserts the same way
    client.post("/v1/benchmarks/b/scores", json=[{"model": "m2", "item": "c", "score": 0.75}])
    assert download_csv(client) == "model,a,b,c\nm1,0,0,\nm2,0.5,1,0.75\n"
    assert client.get("/v1/benchmarks/b").json()["data_version"] == 4


def test_unknown_models_and_items_are_created(client, db_session_factory) -> None:
    new_benchmark(client)
    client.post("/v1/models", json={"name": "m1", "family": "known"})
    upload_csv(client, BASE)
    assert row_counts(db_session_factory) == {"benchmarks": 1, "items": 3, "models": 2, "scores": 4}
    assert [m["name"] for m in client.get("/v1/models").json()["items"]] == ["m1", "m2"]
    assert client.get("/v1/models/m1").json()["family"] == "known"
    items = client.get("/v1/benchmarks/b/items").json()["items"]
    assert [(i["id"], i["prompt"]) for i in items] == [("a", None), ("b", None), ("c", None)]


def test_models_are_shared_between_benchmarks(client, db_session_factory) -> None:
    new_benchmark(client, "b1")
    new_benchmark(client, "b2")
    upload_csv(client, "model,a\nm1,1\n", bench="b1")
    upload_csv(client, "model,a\nm1,0\nm2,1\n", bench="b2")
    assert row_counts(db_session_factory)["models"] == 2
    assert download_csv(client, "b1") == "model,a\nm1,1\n"
    assert download_csv(client, "b2") == "model,a\nm1,0\nm2,1\n"
    assert client.get("/v1/benchmarks/b1").json()["n_models"] == 1
    assert client.get("/v1/benchmarks/b2").json()["n_models"] == 2


def test_unbounded_continuous_accepts_any_finite(client) -> None:
    new_benchmark(client, "u", score_min=None, score_max=None)
    r = upload_csv(client, "model,a,b\nm1,59.3,-12.5\n", bench="u")
    assert r.status_code == 200, r.text
    assert download_csv(client, "u") == "model,a,b\nm1,59.3,-12.5\n"
    assert client.post("/v1/benchmarks/u/scores", json=[{"model": "m2", "item": "a", "score": 1e6}]).status_code == 200


def test_custom_range(client) -> None:
    new_benchmark(client, "r", score_min=0, score_max=100)
    assert upload_csv(client, "model,a\nm1,100\n", bench="r").status_code == 200
    body = assert_problem(upload_csv(client, "model,a\nm1,100.5\n", bench="r"), 422)
    assert (body["errors"][0]["row"], body["errors"][0]["column"]) == (2, "a")


def test_binary_accepts_zero_and_one(client) -> None:
    new_benchmark(client, "bin", score_kind="binary")
    assert upload_csv(client, "model,a,b\nm1,1,0\nm2,1.0,0.0\n", bench="bin").status_code == 200
    assert download_csv(client, "bin") == "model,a,b\nm1,1,0\nm2,1,0\n"


# ---------------------------------------------------------------- bad inputs: located, nothing stored


@pytest.fixture
def seeded(client, db_session_factory) -> Iterator[None]:
    """A benchmark that already has data; every bad upload must leave it exactly as it was."""
    new_benchmark(client)
    new_benchmark(client, "bin", score_kind="binary")
    assert upload_csv(client, BASE).status_code == 200
    assert upload_csv(client, "model,a\nm1,1\n", bench="bin").status_code == 200

    def snapshot() -> tuple:
        return (row_counts(db_session_factory), download_csv(client), download_csv(client, "bin"),
                client.get("/v1/benchmarks/b").json(), client.get("/v1/benchmarks/bin").json(),
                [m["name"] for m in client.get("/v1/models").json()["items"]])

    before = snapshot()
    assert before[0] == {"benchmarks": 2, "items": 4, "models": 2, "scores": 5}
    yield
    assert snapshot() == before, "a rejected upload changed the database"


# Each bad CSV starts with a valid row for a new model and a new item, and an update of an existing
# cell, so that a partial write would show up in the snapshot.
CSV_CASES = {
    "ragged_short": ("model,a,z\nm1,0,1\nnew,1,0\nm9,1\n", 4, "z"),
    "ragged_long": ("model,a,z\nm1,0,1\nnew,1,0,1\n", 3, 4),
    "header_not_model": ("name,a,z\nm1,0,1\n", 1, "name"),
    "header_empty_first": (",a,z\nm1,0,1\n", 1, ""),
    "non_numeric": ("model,a,z\nm1,0,1\nnew,1,high\n", 3, "z"),
    "nan": ("model,a,z\nm1,0,1\nnew,nan,1\n", 3, "a"),
    "inf": ("model,a,z\nm1,0,1\nnew,1,inf\n", 3, "z"),
    "minus_inf": ("model,a,z\nm1,0,1\nnew,-inf,1\n", 3, "a"),
    "above_max": ("model,a,z\nm1,0,1\nnew,1.5,1\n", 3, "a"),
    "below_min": ("model,a,z\nm1,0,1\nnew,1,-0.5\n", 3, "z"),
    "duplicate_model": ("model,a,z\nm1,0,1\nnew,1,0\nm1,1,1\n", 4, "model"),
    "duplicate_item": ("model,a,z,a\nm1,0,1,1\n", 1, "a"),
    "empty_model": ("model,a,z\nm1,0,1\n,1,1\n", 3, "model"),
    "long_item_id": ("model,a," + "z" * 201 + "\nm1,0,1\n", 1, 3),
    "long_model_name": ("model,a,z\nm1,0,1\n" + "n" * 301 + ",1,0\n", 3, "model"),
    "bad_quote": ('model,a,z\nm1,0,1\nnew,"1"x,0\n', 3, None),
}


@pytest.mark.parametrize("case", list(CSV_CASES))
def test_bad_csv_is_located_and_stores_nothing(client, seeded, case: str) -> None:
    text, row, column = CSV_CASES[case]
    body = assert_problem(upload_csv(client, text), 422)
    first = body["errors"][0]
    assert first["row"] == row
    if column is not None:
        assert first["column"] == column
    assert f"row {row}" in body["detail"]


def test_binary_half_is_located_and_stores_nothing(client, seeded) -> None:
    body = assert_problem(upload_csv(client, "model,a,z\nm1,0,1\nnew,0.5,1\n", bench="bin"), 422)
    assert (body["errors"][0]["row"], body["errors"][0]["column"]) == (3, "a")
    body = assert_problem(client.post("/v1/benchmarks/bin/scores", json=[
        {"model": "m1", "item": "a", "score": 0}, {"model": "new", "item": "a", "score": 0.5}]), 422)
    assert (body["errors"][0]["row"], body["errors"][0]["column"]) == (1, "score")


def test_csv_reports_every_bad_cell(client, seeded) -> None:
    body = assert_problem(upload_csv(client, "model,a,b\nm1,x,2\nm2,1,nan\n"), 422)
    assert [(e["row"], e["column"]) for e in body["errors"]] == [(2, "a"), (2, "b"), (3, "b")]


JSON_CASES = {
    "duplicate_cell": ([{"model": "new", "item": "z", "score": 1}, {"model": "m1", "item": "a", "score": 0},
                        {"model": "m1", "item": "a", "score": 1}], 2, "item"),
    "score_string": ([{"model": "new", "item": "z", "score": 1}, {"model": "m1", "item": "a", "score": "1"}], 1, "score"),
    "score_bool": ([{"model": "new", "item": "z", "score": 1}, {"model": "m1", "item": "a", "score": True}], 1, "score"),
    "score_null": ([{"model": "new", "item": "z", "score": 1}, {"model": "m1", "item": "a", "score": None}], 1, "score"),
    "score_missing": ([{"model": "new", "item": "z", "score": 1}, {"model": "m1", "item": "a"}], 1, "score"),
    "score_above": ([{"model": "new", "item": "z", "score": 1}, {"model": "m1", "item": "a", "score": 2}], 1, "score"),
    "model_missing": ([{"model": "new", "item": "z", "score": 1}, {"item": "a", "score": 1}], 1, "model"),
    "item_empty": ([{"model": "new", "item": "z", "score": 1}, {"model": "m1", "item": " ", "score": 1}], 1, "item"),
    "not_object": ([{"model": "new", "item": "z", "score": 1}, 5], 1, None),
}


@pytest.mark.parametrize("case", list(JSON_CASES))
def test_bad_json_is_located_and_stores_nothing(client, seeded, case: str) -> None:
    records, row, column = JSON_CASES[case]
    body = assert_problem(client.post("/v1/benchmarks/b/scores", json=records), 422)
    assert body["errors"][0]["row"] == row
    if column is not None:
        assert body["errors"][0]["column"] == column


@pytest.mark.parametrize("content", [b'[{"model": "m1", "item": "a", "score": 1}', b"{}", b"NaN", b""])
def test_malformed_json_stores_nothing(client, seeded, content: bytes) -> None:
    assert_problem(client.post("/v1/benchmarks/b/scores", content=content,
                               headers={"content-type": "application/json"}), 422)


def test_json_nan_literal_is_rejected(client, seeded) -> None:
    body = assert_problem(client.post("/v1/benchmarks/b/scores", headers={"content-type": "application/json"},
                                      content=b'[{"model": "m1", "item": "a", "score": NaN}]'), 422)
    assert (body["errors"][0]["row"], body["errors"][0]["column"]) == (0, "score")


def test_empty_csv_body_is_422(client, seeded) -> None:
    assert_problem(upload_csv(client, ""), 422)


def test_unknown_benchmark_is_404(client, seeded) -> None:
    body = assert_problem(upload_csv(client, BASE, bench="missing"), 404)
    assert "missing" in body["detail"]
    assert_problem(client.get("/v1/benchmarks/missing/scores"), 404)
    assert_problem(client.get("/v1/benchmarks/missing/stats"), 404)


@pytest.mark.parametrize("ctype", ["text/plain", "application/xml", "application/x-ndjson", ""])
def test_unsupported_content_type_is_415(client, seeded, ctype: str) -> None:
    r = client.post("/v1/benchmarks/b/scores", content=BASE.encode(), headers={"content-type": ctype})
    body = assert_problem(r, 415)
    assert body["errors"][0]["header"] == "Content-Type"


def test_csv_with_charset_parameter_is_accepted(client) -> None:
    new_benchmark(client)
    r = client.post("/v1/benchmarks/b/scores", content=BASE.encode(), headers={"content-type": "text/csv; charset=utf-8"})
    assert r.status_code == 200, r.text
    assert download_csv(client) == BASE


# ---------------------------------------------------------------- body size limit


@pytest.fixture
def small_client(db_session_factory, database_urls, backend) -> Iterator[TestClient]:
    settings = helpers.settings_for(database_urls[backend], max_upload_bytes=1000)
    app = create_app(settings, session_factory=db_session_factory, dispatcher=helpers.NoJobsDispatcher())
    with TestClient(app, raise_server_exceptions=False) as test_client:
        yield test_client


def big_csv() -> bytes:
    return ("model,a\n" + "".join(f"m{i},1\n" for i in range(300))).encode()


def test_body_over_limit_by_content_length_is_413(small_client, db_session_factory) -> None:
    new_benchmark(small_client)
    before = row_counts(db_session_factory)
    body = big_csv()
    assert len(body) > 1000
    r = small_client.post("/v1/benchmarks/b/scores", content=body, headers=CSV)
    assert_problem(r, 413)
    assert "1000" in r.json()["detail"]
    assert row_counts(db_session_factory) == before
    assert download_csv(small_client) == "model\n"


def test_body_over_limit_streamed_is_413(small_client, db_session_factory) -> None:
    new_benchmark(small_client)
    before = row_counts(db_session_factory)

    def chunks() -> Iterator[bytes]:
        data = big_csv()
        for start in range(0, len(data), 100):
            yield data[start:start + 100]

    r = small_client.post("/v1/benchmarks/b/scores", content=chunks(), headers=CSV)
    assert "content-length" not in {k.lower() for k in r.request.headers}
    assert_problem(r, 413)
    assert row_counts(db_session_factory) == before


def test_streamed_json_body_over_limit_is_413_not_400(small_client, db_session_factory) -> None:
    before = row_counts(db_session_factory)
    payload = json.dumps({"name": "big", "description": "x" * 2000}).encode()
    r = small_client.post("/v1/benchmarks", content=iter([payload]), headers={"content-type": "application/json"})
    assert_problem(r, 413)
    r = small_client.post("/v1/benchmarks", content=payload, headers={"content-type": "application/json"})
    assert_problem(r, 413)
    assert row_counts(db_session_factory) == before


def test_body_under_limit_is_accepted(small_client) -> None:
    new_benchmark(small_client)
    r = small_client.post("/v1/benchmarks/b/scores", content=iter([b"model,a\n", b"m1,1\n"]), headers=CSV)
    assert r.status_code == 200, r.text
    assert download_csv(small_client) == "model,a\nm1,1\n"


# ---------------------------------------------------------------- statistics job


STATS_CSV = "model,a,b,c,d\nm1,1,0,0.5,\nm2,1,1,,\nm3,1,0,0.5,\n"


def get_stats(client, bench: str = "b") -> dict:
    r = client.get(f"/v1/benchmarks/{bench}/stats")
    if r.status_code == 202:
        body = r.json()
        assert set(body) == {"job"} and body["job"]["id"].startswith("job_")
        assert r.headers["location"] == f"/v1/jobs/{body['job']['id']}"
        job = wait_for_job(client, body["job"]["id"])
        assert job["status"] == "succeeded", job
        assert job["kind"] == "score_stats" and job["progress"] == 1.0
        r = client.get(f"/v1/benchmarks/{bench}/stats")
    assert r.status_code == 200, r.text
    return r.json()


def test_stats_job_and_values(committed_client) -> None:
    client = committed_client
    new_benchmark(client)
    assert upload_csv(client, STATS_CSV).status_code == 200
    r = client.get("/v1/benchmarks/b/stats")
    assert r.status_code == 202, r.text
    first_job = r.json()["job"]["id"]
    stats = get_stats(client)
    assert stats["benchmark"] == "b" and stats["metric"] == "score" and stats["data_version"] == 1
    assert (stats["n_models"], stats["n_items"], stats["n_scores"]) == (3, 4, 8)
    assert stats["missing_fraction"] == pytest.approx(4 / 12)
    assert stats["mean"] == pytest.approx(5 / 8)
    assert {m["model"]: m["mean"] for m in stats["models"]} == pytest.approx({"m1": 0.5, "m2": 1.0, "m3": 0.5})
    items = {i["item"]: i for i in stats["items"]}
    assert items["a"]["mean"] == pytest.approx(1.0)
    assert items["b"]["mean"] == pytest.approx(1 / 3)
    assert items["c"]["mean"] == pytest.approx(0.5)
    assert items["d"]["mean"] is None and items["d"]["missing_fraction"] == 1.0
    assert stats["constant_items"] == [{"item": "a", "value": 1.0, "n_observed": 3},
                                       {"item": "c", "value": 0.5, "n_observed": 2}]
    assert stats["duplicate_models"] == [["m1", "m3"]]
    # fresh: served without a new job
    assert client.get("/v1/benchmarks/b/stats").status_code == 200
    assert len(client.get("/v1/jobs", params={"kind": "score_stats"}).json()["items"]) == 1

    # new data: a new version, 202 again, new numbers
    assert upload_csv(client, "model,d\nm1,1\n").status_code == 200
    r = client.get("/v1/benchmarks/b/stats")
    assert r.status_code == 202, r.text
    assert r.json()["job"]["id"] != first_job
    stats = get_stats(client)
    assert stats["data_version"] == 2
    assert {m["model"]: m["mean"] for m in stats["models"]}["m1"] == pytest.approx(2.5 / 4)
    assert stats["duplicate_models"] == []
    assert {i["item"]: i["mean"] for i in stats["items"]}["d"] == pytest.approx(1.0)


def test_stats_per_metric_and_empty_benchmark(committed_client) -> None:
    client = committed_client
    new_benchmark(client)
    client.post("/v1/benchmarks/b/items", content=b'{"id": "a", "prompt": "p"}\n{"id": "b", "prompt": "q"}\n',
                headers={"content-type": "application/x-ndjson"})
    stats = get_stats(client)
    assert (stats["n_models"], stats["n_items"], stats["n_scores"]) == (0, 2, 0)
    assert stats["mean"] is None
    upload_csv(client, "model,a,b\nm1,0.2,0.4\n", metric="f1")
    r = client.get("/v1/benchmarks/b/stats", params={"metric": "f1"})
    assert r.status_code == 202
    job = wait_for_job(client, r.json()["job"]["id"])
    assert job["status"] == "succeeded", job
    stats = client.get("/v1/benchmarks/b/stats", params={"metric": "f1"}).json()
    assert stats["metric"] == "f1" and stats["mean"] == pytest.approx(0.3)


@pytest.mark.parametrize("name, fallback, encoded", [
    ("mmlu", "mmlu.scores.csv", "mmlu.scores.csv"),
    ("日本語", "___.scores.csv", "%E6%97%A5%E6%9C%AC%E8%AA%9E.scores.csv"),
    ('say "hi"', "say _hi_.scores.csv", "say%20%22hi%22.scores.csv"),
])
def test_csv_download_filename_for_any_benchmark_name(client, name: str, fallback: str, encoded: str) -> None:
    from urllib.parse import quote

    new_benchmark(client, name)
    upload_csv(client, "model,a\nm1,1\n", bench=quote(name, safe=""))
    r = client.get(f"/v1/benchmarks/{quote(name, safe='')}/scores")
    assert r.status_code == 200, r.text
    assert r.text == "model,a\nm1,1\n"
    assert r.headers["content-disposition"] == f"attachment; filename=\"{fallback}\"; filename*=UTF-8''{encoded}"


def test_rejected_oversize_body_does_not_burn_the_idempotency_key(small_client, db_session_factory) -> None:
    from evalplan.db.models import IdempotencyRecord

    new_benchmark(small_client)
    headers = {"idempotency-key": "big-1", **CSV}
    assert_problem(small_client.post("/v1/benchmarks/b/scores", content=iter([big_csv()]), headers=headers), 413)
    with db_session_factory() as session:
        assert session.scalar(select(func.count()).select_from(IdempotencyRecord)) == 0
    r = small_client.post("/v1/benchmarks/b/scores", content=b"model,a\nm1,1\n", headers=headers)
    assert r.status_code == 200, r.text
    assert download_csv(small_client) == "model,a\nm1,1\n"
