"""Issue 24 item 11: an import into an existing benchmark is read back by the default export.

The probe imported inspect logs (models ``mockllm/mock-a``...) into a benchmark created with
``POST /v1/benchmarks`` (default metric ``score``): 201 with ``n_scores`` 720, then the wide CSV export
(which reads the default metric) had the header row only: the scores were stored under ``match``.
Now a benchmark without scores takes the imported metric as its default (a benchmark with scores keeps
its own, and the answer says how to read the import). Every harness (lm-eval, inspect, HELM,
lighteval: files written by the real packages) is round-tripped; every answer reports
``items_created`` and ``scores_replaced``; another task's items into an existing benchmark are 409
unless ``allow_foreign_items``.
"""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from sqlalchemy.orm import Session, sessionmaker

from evalplan.db.models import Item, Score
from support.harness_runs import arith_correct, inspect_log, lighteval_details
from support.helpers import assert_problem, count_rows, create_benchmark
from support.lm_eval_logs import make_docs, samples_filename, samples_log_bytes, samples_log_records

HELM = Path(__file__).parents[1] / "support" / "data" / "helm" / "simple_mcqa"


def exported(client: TestClient, benchmark: str) -> dict[str, dict[str, float]]:
    """The default ``text/csv`` export as ``{model: {item: value}}``."""
    r = client.get(f"/v1/benchmarks/{benchmark}/scores", headers={"accept": "text/csv"})
    assert r.status_code == 200, r.text
    rows = list(csv.reader(io.StringIO(r.text)))
    header = rows[0][1:]
    return {row[0]: {i: float(v) for i, v in zip(header, row[1:]) if v != ""} for row in rows[1:]}


def files_of(*paths: Path) -> list[tuple[str, tuple[str, bytes, str]]]:
    return [("files", (p.name, p.read_bytes(), "application/octet-stream")) for p in paths]


def test_inspect_logs_of_six_models_into_an_existing_benchmark_come_back(client: TestClient, tmp_path: Path) -> None:
    create_benchmark(client, "arith", score_kind="binary")  # default metric "score"
    log = inspect_log(tmp_path, n=20)
    for name in "abcdef":
        r = client.post("/v1/imports/inspect", data={"model": f"mockllm/mock-{name}"}, files=files_of(log))
        assert r.status_code == 201, r.text
        body = r.json()
        assert body["benchmark_created"] is False and body["default_metric"] == "match"
        assert body["items_created"] == (20 if name == "a" else 0) and body["scores_replaced"] == 0
    expected = {f"q{i}": 1.0 if arith_correct(i) else 0.0 for i in range(20)}
    assert exported(client, "arith") == {f"mockllm/mock-{n}": expected for n in "abcdef"}
    # the same model again: every cell is replaced, and the answer says so
    r = client.post("/v1/imports/inspect", data={"model": "mockllm/mock-a"}, files=files_of(log))
    assert r.status_code == 201 and r.json()["scores_replaced"] == 20 and r.json()["items_created"] == 0


def test_a_benchmark_with_scores_keeps_its_default_metric_and_the_answer_says_how_to_read(
        client: TestClient, tmp_path: Path) -> None:
    create_benchmark(client, "arith", score_kind="binary")
    up = client.post("/v1/benchmarks/arith/scores", json=[{"model": "hand", "item": "q0", "score": 1}])
    assert up.status_code == 200, up.text
    r = client.post("/v1/imports/inspect", data={"model": "mockllm/mock-a"}, files=files_of(inspect_log(tmp_path, n=6)))
    assert r.status_code == 201, r.text
    assert r.json()["default_metric"] == "score" and any("?metric=match" in n for n in r.json()["notes"])
    assert list(exported(client, "arith")) == ["hand"]


def test_lm_eval_round_trip_and_scores_replaced(client: TestClient) -> None:
    create_benchmark(client, "arc_easy", score_kind="binary")
    docs = make_docs(10, seed=2)
    files = [("files", (samples_filename("arc_easy"), samples_log_bytes("arc_easy", docs), "application/jsonl"))]
    r = client.post("/v1/imports/lm-eval", data={"model": "org/model-1"}, files=files)
    assert r.status_code == 201, r.text
    body = r.json()
    assert (body["items_created"], body["scores_replaced"], body["n_scores"]) == (10, 0, 10)
    expected = {str(rec["doc_id"]): float(rec["acc"]) for rec in samples_log_records("arc_easy", docs)
                if rec["filter"] == "none"}
    assert exported(client, "arc_easy") == {"org/model-1": expected}
    again = client.post("/v1/imports/lm-eval", data={"model": "org/model-1"}, files=files).json()
    assert (again["items_created"], again["scores_replaced"]) == (0, 10)
    assert again["benchmarks"][0]["scores_replaced"] == 10


@pytest.mark.slow
def test_helm_round_trip(client: TestClient) -> None:
    create_benchmark(client, "helm-mcqa", score_kind="binary")
    paths = (HELM / "per_instance_stats.json", HELM / "scenario_state.json")
    r = client.post("/v1/imports/helm", data={"benchmark": "helm-mcqa"}, files=files_of(*paths))
    assert r.status_code == 201, r.text
    rows = json.loads(paths[0].read_text())
    expected = {row["instance_id"]: next(s["mean"] for s in row["stats"] if s["name"]["name"] == "exact_match")
                for row in rows}
    assert exported(client, "helm-mcqa") == {"simple/model1": expected}
    assert r.json()["items_created"] == len(expected) and r.json()["scores_replaced"] == 0


def test_lighteval_round_trip_and_foreign_items_are_refused(client: TestClient, db_session_factory:
                                                              sessionmaker[Session], tmp_path: Path) -> None:
    details, _, expected = lighteval_details(tmp_path, splits={"test": 6})
    create_benchmark(client, "le", score_kind="continuous")
    r = client.post("/v1/imports/lighteval", data={"benchmark": "le", "split": "test", "model": "org/dummy"},
                    files=files_of(details))
    assert r.status_code == 201, r.text
    assert exported(client, "le") == {"org/dummy": expected}
    # lighteval details into a text benchmark of another task (inspect's arith): 409, nothing stored
    client.post("/v1/imports/inspect", data={"model": "mockllm/m"}, files=files_of(inspect_log(tmp_path / "i", n=8)))
    before = count_rows(db_session_factory, Item, Score)
    r = client.post("/v1/imports/lighteval", data={"benchmark": "arith", "split": "test", "model": "org/dummy"},
                    files=files_of(details))
    body = assert_problem(r, 409)
    assert {e["field"] for e in body["errors"]} == {"benchmark", "allow_foreign_items"}
    assert count_rows(db_session_factory, Item, Score) == before
    r = client.post("/v1/imports/lighteval", data={"benchmark": "arith", "split": "test", "model": "org/dummy",
                                                   "allow_foreign_items": "true"}, files=files_of(details))
    assert r.status_code == 201 and r.json()["items_created"] == 6
