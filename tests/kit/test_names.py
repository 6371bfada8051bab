"""Issue 24 item 5: names ``.``/``..`` (or a ``/``-part that is), and names with control, bidi or
zero-width characters are refused with a 422 problem naming the field, on every create path:
POST /v1/benchmarks, /v1/models, score uploads (CSV and JSON) that introduce models, POST /v1/coresets
``name``, and the lm-eval, HELM, inspect and lighteval imports. Nothing is stored."""

from __future__ import annotations

from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from sqlalchemy.orm import Session, sessionmaker

from evalplan.db.models import Benchmark, Coreset, Model
from support.helpers import assert_problem, count_rows, create_benchmark, upload_items
from support.lm_eval_logs import make_docs, samples_filename, samples_log_bytes

BAD = ["..", ".", "a/../b", "x/.", "evil\u202etxt.exe", "\u2066iso\u2069", "zero\u200bwidth",
       "bom\ufeff", "line\u2028sep", "del\x7f"]
HELM = Path(__file__).parents[1] / "support" / "data" / "helm" / "simple_mcqa"


def _refused(r, field: str) -> None:
    body = assert_problem(r, 422)
    assert any(e.get("field") == field for e in body["errors"]), body
    assert field in body["detail"] or "name" in body["detail"], body


@pytest.mark.parametrize("bad", BAD)
def test_bad_names_are_refused_on_every_create_path(client: TestClient, db_session_factory: sessionmaker[Session],
                                                    bad: str) -> None:
    create_benchmark(client, "ok-bench", score_kind="binary")
    upload_items(client, "ok-bench", ["q0", "q1"])
    before = count_rows(db_session_factory, Benchmark, Model, Coreset)
    if "/" not in bad:  # '/' in a benchmark name is already refused by the create schema
        _refused(client.post("/v1/benchmarks", json={"name": bad}), "name")
    else:
        assert_problem(client.post("/v1/benchmarks", json={"name": bad}), 422)
    _refused(client.post("/v1/models", json={"name": bad}), "name")
    _refused(client.post("/v1/benchmarks/ok-bench/scores", json=[{"model": bad, "item": "q0", "score": 1}]), "model")
    if "\x7f" not in bad and "\u2028" not in bad:  # the csv module reads these as data too, but test JSON only
        csv = f'model,q0\n"{bad}",1\n'.encode()
        _refused(client.post("/v1/benchmarks/ok-bench/scores", content=csv, headers={"content-type": "text/csv"}),
                 "model")
    bench_id = client.get("/v1/benchmarks/ok-bench").json()["id"]
    _refused(client.post("/v1/coresets", json={"name": bad, "method": "random", "benchmarks": [bench_id],
                                               "budget": 1}), "name")
    docs = make_docs(4)
    _refused(client.post("/v1/imports/lm-eval", data={"model": bad},
                         files=[("files", (samples_filename("t"), samples_log_bytes("t", docs), "application/jsonl"))]),
             "model")
    files = [("files", (p.name, p.read_bytes(), "application/json"))
             for p in (HELM / "per_instance_stats.json", HELM / "scenario_state.json")]
    _refused(client.post("/v1/imports/helm", data={"benchmark": bad}, files=files), "benchmark")
    _refused(client.post("/v1/imports/helm", data={"benchmark": "fine", "model": bad}, files=files), "model")
    assert count_rows(db_session_factory, Benchmark, Model, Coreset) == before


@pytest.mark.slow
def test_coreset_names_hold_no_slash_or_at(client: TestClient) -> None:
    create_benchmark(client, "ok-bench", score_kind="binary")
    upload_items(client, "ok-bench", ["q0", "q1"])
    for bad in ("a/b", "a@1"):
        _refused(client.post("/v1/coresets", json={"name": bad, "method": "random", "benchmarks": ["ok-bench"],
                                                   "budget": 1}), "name")


def test_ordinary_names_still_work(client: TestClient) -> None:
    for name in ("meta-llama/Llama-3-8B", "01-ai_yi-6b", "Mistral-7B+RAHF-DUAL+LoRA", "模型 v2", "a.b..c"):
        assert client.post("/v1/models", json={"name": name}).status_code == 201, name


def test_bad_team_names_are_refused(client: TestClient) -> None:
    for bad in ("..", "evil\u202etxt", "zero\u200bwidth"):
        _refused(client.post("/v1/teams", json={"name": bad}), "name")
    assert client.post("/v1/teams", json={"name": "fine-team"}).status_code == 201


@pytest.mark.parametrize("bad", ["team-a%2Fmusr", "x%2fy", "%2F"])
def test_names_holding_an_encoded_slash_are_refused(client: TestClient, db_session_factory: sessionmaker[Session],
                                                    bad: str) -> None:
    """Issue 32 item 8: ``team-a%2Fmusr`` reads as ``team-a/musr`` once a reference is decoded: refused like it."""
    create_benchmark(client, "ok-bench", score_kind="binary")
    upload_items(client, "ok-bench", ["q0", "q1"])
    before = count_rows(db_session_factory, Benchmark, Model, Coreset)
    for path, body, field in (("/v1/benchmarks", {"name": bad}, "name"), ("/v1/models", {"name": bad}, "name"),
                              ("/v1/benchmarks/ok-bench/scores", [{"model": bad, "item": "q0", "score": 1}], "model"),
                              ("/v1/coresets", {"name": bad, "method": "random", "benchmarks": ["ok-bench"],
                                                "budget": 1}, "name"),
                              ("/v1/teams", {"name": bad}, "name")):
        r = client.post(path, json=body)
        _refused(r, field)
        assert "%2F" in r.json()["detail"], (path, r.json())
    assert count_rows(db_session_factory, Benchmark, Model, Coreset) == before


@pytest.mark.parametrize("bad", ["evil\u001ctarget", "bell\u0007", "esc\u001b[0m", "\u202eevil", "zero\u200bwidth"])
def test_session_targets_follow_the_name_rule(client: TestClient, bad: str) -> None:
    """Issue 32 item 1: a session target reaches charts, pages and CSVs: a located 422, nothing stored."""
    create_benchmark(client, "ok-bench", score_kind="binary")
    upload_items(client, "ok-bench", ["q0", "q1"])
    for body in ({"benchmark": "ok-bench", "target": bad, "method": "random"},
                 {"benchmark": "ok-bench", "targets": ["fine", bad], "method": "bayesame"}):
        r = client.post("/v1/sessions", json=body)
        problem = assert_problem(r, 422)
        assert any(e.get("field", "").startswith("target") for e in problem["errors"]), problem
        assert "U+" in problem["detail"], problem
    assert client.get("/v1/sessions").json()["items"] == []


def test_control_characters_are_refused_in_every_free_text(client: TestClient) -> None:
    """Free text (descriptions, item text, query values) may hold tab, LF and CR, no other C0 control."""
    r = client.post("/v1/benchmarks", json={"name": "fine", "description": "line one\nline\ttwo\r\n"})
    assert r.status_code == 201, r.text
    r = client.post("/v1/benchmarks", json={"name": "fine2", "description": "a\u001cb"})
    problem = assert_problem(r, 422)
    assert problem["errors"][0]["field"] == "description" and "U+001C" in problem["detail"]
    r = client.post("/v1/benchmarks/fine/items", content='{"id": "q0", "prompt": "ring \\u0007"}\n',
                    headers={"content-type": "application/x-ndjson"})
    problem = assert_problem(r, 422)
    assert "U+0007" in problem["detail"]
    assert_problem(client.get("/v1/benchmarks", params={"q": "a\u001bb"}), 422)
    assert client.get("/v1/benchmarks/fine/items").json()["items"] == []
