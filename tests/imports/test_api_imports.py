"""POST /v1/imports/lm-eval with real lm-evaluation-harness ``--log_samples`` files."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import func, select
from sqlalchemy.orm import Session, sessionmaker

from evalplan.db.models import Benchmark, Item, Job, Model, Score
from evalplan.main import create_app
from evalplan.workers.dispatch import InProcessDispatcher
from support.helpers import assert_problem, wait_for_job
from support.helpers import settings_for as make_test_settings
from support.lm_eval_logs import make_docs, records_to_bytes, samples_filename, samples_log_bytes, samples_log_records

# ----------------------------------------------------------------------------- helpers

def post_import(client: TestClient, model: str, files: list[tuple[str, bytes]], *, metric: str | None = None,
                filter: str | None = None):  # noqa: A002
    data = {"model": model}
    if metric is not None:
        data["metric"] = metric
    if filter is not None:
        data["filter"] = filter
    return client.post("/v1/imports/lm-eval", data=data,
                       files=[("files", (name, content, "application/jsonl")) for name, content in files])


def log_file(task: str, docs: list[dict[str, Any]], **kwargs: Any) -> tuple[str, bytes]:
    return samples_filename(task), samples_log_bytes(task, docs, **kwargs)


def expected_scores(task: str, docs: list[dict[str, Any]], metric: str, filter: str = "none",  # noqa: A002
                    **kwargs: Any) -> dict[str, float]:
    """doc_id (as the item id) -> the log's value of ``metric`` under ``filter``."""
    return {str(r["doc_id"]): float(r[metric]) for r in samples_log_records(task, docs, **kwargs)
            if r["filter"] == filter}


def scores_csv(client: TestClient, benchmark: str, metric: str | None = None) -> dict[str, dict[str, float | None]]:
    """Download the wide CSV and return model -> item -> value (None = empty cell)."""
    params = {"metric": metric} if metric else {}
    r = client.get(f"/v1/benchmarks/{benchmark}/scores", params=params, headers={"accept": "text/csv"})
    assert r.status_code == 200, r.text
    assert r.headers["content-type"].startswith("text/csv")
    rows = list(csv.reader(io.StringIO(r.text)))
    header = rows[0]
    assert header[0] == "model"
    return {row[0]: {item: (float(cell) if cell != "" else None) for item, cell in zip(header[1:], row[1:], strict=True)}
            for row in rows[1:]}


def csv_header(client: TestClient, benchmark: str, metric: str) -> list[str]:
    r = client.get(f"/v1/benchmarks/{benchmark}/scores", params={"metric": metric}, headers={"accept": "text/csv"})
    assert r.status_code == 200, r.text
    return list(csv.reader(io.StringIO(r.text)))[0]


def all_items(client: TestClient, benchmark: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    cursor = None
    while True:
        params: dict[str, Any] = {"limit": 7}
        if cursor:
            params["cursor"] = cursor
        r = client.get(f"/v1/benchmarks/{benchmark}/items", params=params)
        assert r.status_code == 200, r.text
        body = r.json()
        items += body["items"]
        cursor = body["next_cursor"]
        if cursor is None:
            return items


def counts(factory: sessionmaker[Session]) -> dict[str, int]:
    with factory() as session:
        return {name: session.scalar(select(func.count()).select_from(table))
                for name, table in (("benchmarks", Benchmark), ("items", Item), ("models", Model), ("scores", Score))}


NOTHING = {"benchmarks": 0, "items": 0, "models": 0, "scores": 0}




# ----------------------------------------------------------------------------- inline imports (201)

def test_import_creates_benchmark_items_and_scores(client: TestClient, db_session_factory) -> None:
    docs = make_docs(12, seed=3)
    name, content = log_file("arc_easy", docs, seed=5, shuffle=True)
    r = post_import(client, "llama-7b", [(name, content)])
    assert r.status_code == 201, r.text
    body = r.json()
    expected = expected_scores("arc_easy", docs, "acc", seed=5, shuffle=True)
    assert body["model"] == "llama-7b"
    assert isinstance(body["model_id"], str) and body["model_id"]
    assert len(body["benchmarks"]) == 1
    summary = body["benchmarks"][0]
    assert summary["task"] == "arc_easy"
    assert summary["benchmark"] == "arc_easy"
    assert summary["benchmark_created"] is True
    assert summary["metric"] == "acc"  # the first of `metrics`
    assert summary["filter"] == "none"
    assert summary["n_items"] == 12
    assert summary["items_created"] == 12
    assert summary["items_updated"] == 0
    assert summary["n_scores"] == 12
    assert summary["mean_score"] == pytest.approx(sum(expected.values()) / 12)

    bench = client.get("/v1/benchmarks/arc_easy").json()
    assert bench["id"] == summary["benchmark_id"]
    assert bench["n_items"] == 12
    assert bench["n_models"] == 1
    assert bench["default_metric"] == "acc"
    assert bench["score_kind"] == "binary"

    items = all_items(client, "arc_easy")
    assert [i["id"] for i in items] == [str(n) for n in range(12)]  # sorted by doc_id despite the shuffled file
    for item in items:
        doc_id = int(item["id"])
        doc = docs[doc_id]
        assert item["source_index"] == doc_id
        assert item["prompt"] == f"Question: {doc['question']}\nAnswer:"  # the context of arguments
        assert item["target"] == str(doc["answer"])
        assert item["fields"] == doc

    matrix = scores_csv(client, "arc_easy", "acc")
    assert matrix == {"llama-7b": expected}
    assert scores_csv(client, "arc_easy") == matrix  # default metric of the benchmark
    # The import stored only the chosen metric.
    assert csv_header(client, "arc_easy", "acc_norm") == ["model", *[str(n) for n in range(12)]]
    assert scores_csv(client, "arc_easy", "acc_norm") == {}
    assert counts(db_session_factory) == {"benchmarks": 1, "items": 12, "models": 1, "scores": 12}


def test_explicit_metric_acc_norm(client: TestClient) -> None:
    docs = make_docs(20, seed=1)
    acc = expected_scores("hellaswag", docs, "acc", seed=2)
    acc_norm = expected_scores("hellaswag", docs, "acc_norm", seed=2)
    assert acc != acc_norm  # the log makes them disagree, so the metric choice is visible
    r = post_import(client, "m-norm", [log_file("hellaswag", docs, seed=2)], metric="acc_norm")
    assert r.status_code == 201, r.text
    summary = r.json()["benchmarks"][0]
    assert summary["metric"] == "acc_norm"
    assert summary["n_scores"] == 20
    assert scores_csv(client, "hellaswag", "acc_norm") == {"m-norm": acc_norm}
    assert scores_csv(client, "hellaswag", "acc") == {}
    assert client.get("/v1/benchmarks/hellaswag").json()["default_metric"] == "acc_norm"


def test_older_list_arguments_and_boolean_scores(client: TestClient) -> None:
    docs = make_docs(6, seed=4)
    r = post_import(client, "old-harness", [log_file("piqa", docs, seed=9, arguments_form="list", bool_scores=True)])
    assert r.status_code == 201, r.text
    records = samples_log_records("piqa", docs, seed=9, arguments_form="list", bool_scores=True)
    assert all(isinstance(rec["acc"], bool) for rec in records)
    items = all_items(client, "piqa")
    assert [i["prompt"] for i in items] == [f"Question: {d['question']}\nAnswer:" for d in docs]
    assert [i["target"] for i in items] == [str(d["answer"]) for d in docs]
    assert scores_csv(client, "piqa", "acc") == {"old-harness": {str(r["doc_id"]): float(r["acc"]) for r in records}}


def test_second_model_adds_a_row(client: TestClient, db_session_factory) -> None:
    docs = make_docs(10, seed=7)
    first = post_import(client, "model-a", [log_file("mmlu_anatomy", docs, seed=11)])
    assert first.status_code == 201, first.text
    second = post_import(client, "model-b", [log_file("mmlu_anatomy", docs, seed=12)])
    assert second.status_code == 201, second.text
    summary = second.json()["benchmarks"][0]
    assert summary["benchmark_created"] is False
    assert summary["items_created"] == 0
    assert summary["benchmark_id"] == first.json()["benchmarks"][0]["benchmark_id"]
    matrix = scores_csv(client, "mmlu_anatomy", "acc")
    assert list(matrix) == ["model-a", "model-b"]
    assert matrix["model-a"] == expected_scores("mmlu_anatomy", docs, "acc", seed=11)
    assert matrix["model-b"] == expected_scores("mmlu_anatomy", docs, "acc", seed=12)
    assert matrix["model-a"] != matrix["model-b"]
    assert client.get("/v1/benchmarks/mmlu_anatomy").json()["n_models"] == 2
    assert counts(db_session_factory) == {"benchmarks": 1, "items": 10, "models": 2, "scores": 20}

    # Re-importing the same model replaces its values (no duplicate row).
    again = post_import(client, "model-a", [log_file("mmlu_anatomy", docs, seed=12)])
    assert again.status_code == 201, again.text
    matrix = scores_csv(client, "mmlu_anatomy", "acc")
    assert matrix["model-a"] == matrix["model-b"]
    assert counts(db_session_factory)["scores"] == 20


def test_several_files_make_several_benchmarks(client: TestClient) -> None:
    docs_a, docs_b = make_docs(5, seed=1), make_docs(8, seed=2)
    files = [log_file("boolq", docs_a, seed=1),
             log_file("gsm8k", docs_b, kind="generate_until", seed=2)]
    r = post_import(client, "multi", files)
    assert r.status_code == 201, r.text
    summaries = {s["task"]: s for s in r.json()["benchmarks"]}
    assert set(summaries) == {"boolq", "gsm8k"}
    assert summaries["boolq"]["metric"] == "acc" and summaries["boolq"]["n_items"] == 5
    assert summaries["gsm8k"]["metric"] == "exact_match" and summaries["gsm8k"]["n_items"] == 8
    names = {b["name"] for b in client.get("/v1/benchmarks").json()["items"]}
    assert {"boolq", "gsm8k"} <= names
    assert scores_csv(client, "boolq") == {"multi": expected_scores("boolq", docs_a, "acc", seed=1)}
    assert scores_csv(client, "gsm8k") == {
        "multi": expected_scores("gsm8k", docs_b, "exact_match", kind="generate_until", seed=2)}
    gsm_items = all_items(client, "gsm8k")
    assert gsm_items[0]["target"] == docs_b[0]["choices"][docs_b[0]["answer"]]
    assert gsm_items[0]["prompt"].startswith(f"Question: {docs_b[0]['question']}\nA. ")


def test_generate_until_with_two_filters(client: TestClient) -> None:
    docs = make_docs(30, seed=8)
    kwargs = {"kind": "generate_until", "filters": ("strict-match", "flexible-extract"), "seed": 4}
    content = samples_log_bytes("gsm8k_cot", docs, **kwargs)
    assert content.count(b"\n") == 60  # one line per (doc, filter)
    strict = expected_scores("gsm8k_cot", docs, "exact_match", "strict-match", **kwargs)
    flexible = expected_scores("gsm8k_cot", docs, "exact_match", "flexible-extract", **kwargs)
    assert strict != flexible
    assert sum(strict.values()) < sum(flexible.values())

    # Default: no "none" filter in the file, so the first filter seen.
    r = post_import(client, "gen-default", [(samples_filename("gsm8k_cot"), content)])
    assert r.status_code == 201, r.text
    summary = r.json()["benchmarks"][0]
    assert summary["filter"] == "strict-match"
    assert summary["n_items"] == 30 and summary["n_scores"] == 30

    r = post_import(client, "gen-flex", [(samples_filename("gsm8k_cot"), content)], filter="flexible-extract")
    assert r.status_code == 201, r.text
    assert r.json()["benchmarks"][0]["filter"] == "flexible-extract"
    assert scores_csv(client, "gsm8k_cot", "exact_match") == {"gen-default": strict, "gen-flex": flexible}
    assert len(all_items(client, "gsm8k_cot")) == 30

    r = post_import(client, "gen-bad", [(samples_filename("gsm8k_cot"), content)], filter="majority-vote")
    body = assert_problem(r, 422)
    assert "majority-vote" in body["detail"]
    assert "strict-match" in body["detail"] and "flexible-extract" in body["detail"]
    assert body["errors"][0]["column"] == "filter"


# ----------------------------------------------------------------------------- bad inputs: 4xx, nothing stored

def test_bad_filename_stores_nothing(client: TestClient, db_session_factory) -> None:
    docs = make_docs(4)
    good = log_file("boolq", docs)
    r = post_import(client, "m", [good, ("results_boolq.json", samples_log_bytes("boolq", docs))])
    body = assert_problem(r, 422)
    assert "results_boolq.json" in body["detail"]
    assert body["errors"][0]["file"] == "results_boolq.json"
    assert counts(db_session_factory) == NOTHING


def test_invalid_json_line_names_the_row(client: TestClient, db_session_factory) -> None:
    docs = make_docs(5)
    lines = samples_log_bytes("arc_easy", docs).splitlines(keepends=True)
    lines[3] = b'{"doc_id": 3, "doc": {"question": \n'  # a truncated line
    r = post_import(client, "m", [log_file("boolq", docs), (samples_filename("arc_easy"), b"".join(lines))])
    body = assert_problem(r, 422)
    assert body["errors"][0]["row"] == 4
    assert "invalid JSON" in body["errors"][0]["detail"]
    assert "row 4" in body["detail"]
    assert counts(db_session_factory) == NOTHING


def test_unknown_metric_names_the_column(client: TestClient, db_session_factory) -> None:
    r = post_import(client, "m", [log_file("arc_easy", make_docs(5))], metric="f1")
    body = assert_problem(r, 422)
    assert "'f1'" in body["detail"]
    assert "acc, acc_norm" in body["detail"]  # the available metrics
    assert body["errors"][0]["column"] == "metrics"
    assert counts(db_session_factory) == NOTHING


def test_duplicate_doc_id_names_the_row(client: TestClient, db_session_factory) -> None:
    records = samples_log_records("arc_easy", make_docs(6))
    records[4]["doc_id"] = 1  # row 5 repeats the doc of row 2
    r = post_import(client, "m", [(samples_filename("arc_easy"), records_to_bytes(records))])
    body = assert_problem(r, 422)
    dup = [e for e in body["errors"] if "duplicate doc_id" in e["detail"]]
    assert dup == [{"row": 5, "column": "doc_id", "detail": "duplicate doc_id 1 for filter 'none' (first at row 2)"}]
    assert counts(db_session_factory) == NOTHING


def test_non_numeric_score_names_row_and_column(client: TestClient, db_session_factory) -> None:
    records = samples_log_records("arc_easy", make_docs(6))
    records[2]["acc"] = "yes"
    r = post_import(client, "m", [(samples_filename("arc_easy"), records_to_bytes(records))])
    body = assert_problem(r, 422)
    assert body["errors"][0]["row"] == 3
    assert body["errors"][0]["column"] == "acc"
    assert counts(db_session_factory) == NOTHING


def test_scores_off_the_benchmark_scale_store_nothing(client: TestClient, db_session_factory) -> None:
    docs = make_docs(6)
    assert post_import(client, "binary-model", [log_file("arc_easy", docs)]).status_code == 201
    before = counts(db_session_factory)
    # A second file (a new task) first in the request, then a 0.5 on the binary benchmark.
    files = [log_file("boolq", docs), log_file("arc_easy", docs, score_fn=lambda d, f, m: 0.5 if d == 2 else None)]
    r = post_import(client, "half-model", files)
    body = assert_problem(r, 422)
    assert body["errors"][0]["doc_id"] == 2
    assert body["errors"][0]["column"] == "acc"
    assert "binary" in body["errors"][0]["detail"]
    assert counts(db_session_factory) == before  # neither boolq nor the model was kept
    assert client.get("/v1/benchmarks/boolq").status_code == 404


def test_missing_model_field_is_422(client: TestClient, db_session_factory) -> None:
    r = client.post("/v1/imports/lm-eval", files=[("files", log_file("arc_easy", make_docs(3)))])
    body = assert_problem(r, 422)
    assert any(e["field"] == "model" for e in body["errors"])
    assert counts(db_session_factory) == NOTHING


# ----------------------------------------------------------------------------- large imports (202 + job)

@pytest.fixture
def small_inline_client(committed_session_factory: sessionmaker[Session], database_urls: dict[str, str],
                        backend: str) -> Iterator[TestClient]:
    settings = make_test_settings(database_urls[backend], inline_import_max_bytes=100)
    app = create_app(settings, session_factory=committed_session_factory,
                     dispatcher=InProcessDispatcher(committed_session_factory, threads=2))
    with TestClient(app, raise_server_exceptions=False) as test_client:
        yield test_client


def test_large_import_runs_as_a_job(small_inline_client: TestClient, committed_session_factory) -> None:
    docs = make_docs(40, seed=21)
    files = [log_file("winogrande", docs, seed=3), log_file("gsm8k", docs, kind="generate_until", seed=4,
                                                            filters=("strict-match", "flexible-extract"))]
    r = post_import(small_inline_client, "big-model", files, filter=None)
    assert r.status_code == 202, r.text
    job_id = r.json()["job"]["id"]
    assert r.headers["location"] == f"/v1/jobs/{job_id}"
    job = wait_for_job(small_inline_client, job_id)
    assert job["status"] == "succeeded", job
    assert job["kind"] == "lm_eval_import"
    assert job["progress"] == 1.0
    assert job["error"] is None
    result = job["result"]
    assert result["model"] == "big-model"
    by_task = {s["task"]: s for s in result["benchmarks"]}
    assert by_task["winogrande"]["n_items"] == 40 and by_task["winogrande"]["metric"] == "acc"
    assert by_task["gsm8k"]["filter"] == "strict-match" and by_task["gsm8k"]["n_scores"] == 40
    assert scores_csv(small_inline_client, "winogrande", "acc") == {
        "big-model": expected_scores("winogrande", docs, "acc", seed=3)}
    assert scores_csv(small_inline_client, "gsm8k", "exact_match") == {
        "big-model": expected_scores("gsm8k", docs, "exact_match", "strict-match", kind="generate_until", seed=4,
                                     filters=("strict-match", "flexible-extract"))}
    assert counts(committed_session_factory) == {"benchmarks": 2, "items": 80, "models": 1, "scores": 80}


def test_large_import_with_explicit_metric_job(small_inline_client: TestClient) -> None:
    docs = make_docs(15, seed=5)
    r = post_import(small_inline_client, "norm-model", [log_file("arc_challenge", docs, seed=6)], metric="acc_norm")
    assert r.status_code == 202, r.text
    job = wait_for_job(small_inline_client, r.json()["job"]["id"])
    assert job["status"] == "succeeded", job
    assert job["result"]["benchmarks"][0]["metric"] == "acc_norm"
    assert scores_csv(small_inline_client, "arc_challenge", "acc_norm") == {
        "norm-model": expected_scores("arc_challenge", docs, "acc_norm", seed=6)}


def test_large_bad_import_fails_the_job_and_stores_nothing(small_inline_client: TestClient,
                                                           committed_session_factory) -> None:
    docs = make_docs(30)
    lines = samples_log_bytes("arc_easy", docs).splitlines(keepends=True)
    lines[16] = b"not json at all\n"
    files = [log_file("boolq", docs), (samples_filename("arc_easy"), b"".join(lines))]
    r = post_import(small_inline_client, "bad-big", files)
    assert r.status_code == 202, r.text
    job = wait_for_job(small_inline_client, r.json()["job"]["id"])
    assert job["status"] == "failed", job
    assert job["result"] is None
    error = job["error"]
    assert error["status"] == 422
    assert error["errors"][0]["row"] == 17
    assert "row 17" in error["detail"]
    assert "Traceback" not in json.dumps(error)
    assert counts(committed_session_factory) == NOTHING
    with committed_session_factory() as session:
        assert session.scalar(select(func.count()).select_from(Job)) == 1


def test_large_bad_filename_is_rejected_before_a_job(small_inline_client: TestClient,
                                                     committed_session_factory) -> None:
    r = post_import(small_inline_client, "m", [("boolq.jsonl", samples_log_bytes("boolq", make_docs(30)))])
    body = assert_problem(r, 422)
    assert body["errors"][0]["file"] == "boolq.jsonl"
    with committed_session_factory() as session:
        assert session.scalar(select(func.count()).select_from(Job)) == 0
    assert counts(committed_session_factory) == NOTHING


def test_same_task_in_two_files_is_rejected(client: TestClient, db_session_factory) -> None:
    docs = make_docs(4)
    other = samples_filename("boolq", "2024-07-01T09-30-00")
    r = post_import(client, "m", [log_file("boolq", docs), (other, samples_log_bytes("boolq", docs))])
    body = assert_problem(r, 422)
    assert "'boolq'" in body["detail"]
    assert body["errors"][0]["file"] == other
    assert counts(db_session_factory) == NOTHING


def test_overlong_task_name_is_422_on_every_backend(client: TestClient, db_session_factory) -> None:
    task = "t" * 201  # benchmark names hold at most 200 characters (PostgreSQL would refuse it with a 500)
    r = post_import(client, "m", [(samples_filename(task), samples_log_bytes(task, make_docs(3)))])
    body = assert_problem(r, 422)
    assert "201 characters" in body["detail"]
    assert body["errors"][0]["file"] == samples_filename(task)
    assert counts(db_session_factory) == NOTHING
    ok = "t" * 200
    assert post_import(client, "m", [(samples_filename(ok), samples_log_bytes(ok, make_docs(3)))]).status_code == 201


def test_doc_id_beyond_32_bits_names_the_row(client: TestClient, db_session_factory) -> None:
    records = samples_log_records("arc_easy", make_docs(4))
    records[2]["doc_id"] = 2**31  # source_index is a 32-bit INTEGER (PostgreSQL would overflow with a 500)
    r = post_import(client, "m", [(samples_filename("arc_easy"), records_to_bytes(records))])
    body = assert_problem(r, 422)
    assert body["errors"][0]["row"] == 3
    assert body["errors"][0]["column"] == "doc_id"
    assert str(2**31) in body["errors"][0]["detail"]
    assert counts(db_session_factory) == NOTHING
    records[2]["doc_id"] = 2**31 - 1
    r = post_import(client, "m", [(samples_filename("arc_easy"), records_to_bytes(records))])
    assert r.status_code == 201, r.text
    assert [i["source_index"] for i in all_items(client, "arc_easy")] == [0, 1, 3, 2**31 - 1]


def test_empty_file_is_422_naming_it(client: TestClient, db_session_factory) -> None:
    r = post_import(client, "m", [log_file("boolq", make_docs(3)), (samples_filename("arc_easy"), b"\n\n")])
    body = assert_problem(r, 422)
    assert body["errors"][0]["file"] == samples_filename("arc_easy")
    assert "no records" in body["detail"]
    assert counts(db_session_factory) == NOTHING
