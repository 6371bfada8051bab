"""Observability and response hygiene (issue 13): /metrics, request ids, JSON logs, security headers, CORS."""

from __future__ import annotations

import json
import logging
from datetime import timedelta

import pytest
from fastapi.testclient import TestClient
from prometheus_client.parser import text_string_to_metric_families

from evalplan.db.models import Job, utcnow
from evalplan.kit.observability import RequestIdFilter
from evalplan.main import create_app
from support.helpers import assert_problem, settings_for


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def test_metrics_by_route_template_and_jobs(committed_client: TestClient, committed_session_factory) -> None:
    client = committed_client
    now = utcnow()
    with committed_session_factory() as session:
        session.add_all([
            Job(kind="backtest", queue="cpu", status="succeeded", payload={}, attempts=1,
                started_at=now - timedelta(seconds=30), finished_at=now - timedelta(seconds=10)),
            Job(kind="backtest", queue="cpu", status="succeeded", payload={}, attempts=1,
                started_at=now - timedelta(seconds=5), finished_at=now),
            Job(kind="backtest", queue="cpu", status="queued", payload={}, attempts=0),
        ])
        session.commit()
    assert client.post("/v1/benchmarks", json={"name": "obs"}).status_code == 201
    client.post("/v1/benchmarks/obs/scores", content=b"model,a,b\nm1,1,0\nm2,0,1\n", headers={"content-type": "text/csv"})
    for _ in range(3):
        assert client.get("/v1/benchmarks/obs").status_code == 200
    assert client.get("/v1/benchmarks/nope").status_code == 404
    r = client.get("/metrics")
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/plain")
    got = samples(r.text)
    route = (("method", "GET"), ("route", "/v1/benchmarks/{benchmark}"))
    assert got[("evalplan_http_request_duration_seconds_count", route)] >= 4
    assert got[("evalplan_http_requests_total", (*route[:1], route[1], ("status", "404")))] >= 1
    assert not any("/v1/benchmarks/obs" in dict(labels).get("route", "") for _, labels in got)  # templates only
    assert got[("evalplan_database_up", ())] == 1.0
    done = (("kind", "backtest"), ("status", "succeeded"))
    assert got[("evalplan_jobs", done)] == 2
    assert got[("evalplan_jobs", (("kind", "backtest"), ("status", "queued")))] == 1
    assert got[("evalplan_jobs_queued", (("queue", "cpu"),))] == 1
    assert got[("evalplan_job_duration_seconds_count", done)] == 2
    assert got[("evalplan_job_duration_seconds_sum", done)] == pytest.approx(25.0, abs=0.01)


def test_request_id_is_echoed_and_in_problem_bodies(client: TestClient) -> None:
    r = client.get("/v1/benchmarks/missing", headers={"x-request-id": "trace-42"})
    body = assert_problem(r, 404)
    assert r.headers["x-request-id"] == "trace-42" and body["request_id"] == "trace-42"
    fresh = client.get("/v1/benchmarks/missing", headers={"x-request-id": "bad id with spaces"})
    assert fresh.headers["x-request-id"] != "bad id with spaces" and len(fresh.headers["x-request-id"]) == 32
    assert fresh.json()["request_id"] == fresh.headers["x-request-id"]
    too_long = client.post("/v1/models", json={"name": "m"}, headers={"idempotency-key": "k" * 201})
    assert too_long.json()["request_id"] == too_long.headers["x-request-id"]  # problems from middleware too


@pytest.mark.parametrize("path", ["/health", "/v1/benchmarks", "/v1/benchmarks/missing", "/metrics", "/ui/"])
def test_security_headers_on_every_response(client: TestClient, path: str) -> None:
    r = client.get(path)
    assert r.headers["x-content-type-options"] == "nosniff"
    assert r.headers["x-frame-options"] == "DENY"
    assert r.headers["referrer-policy"] == "no-referrer"
    assert "frame-ancestors 'none'" in r.headers["content-security-policy"]
    assert "access-control-allow-origin" not in r.headers  # CORS is off by default


def test_cors_only_for_configured_origins(db_session_factory, database_urls: dict[str, str], backend: str) -> None:
    settings = settings_for(database_urls[backend], cors_origins=["https://dash.example"])
    with TestClient(create_app(settings, session_factory=db_session_factory)) as client:
        ok = client.options("/v1/benchmarks", headers={"origin": "https://dash.example",
                                                       "access-control-request-method": "POST"})
        assert ok.headers["access-control-allow-origin"] == "https://dash.example"
        r = client.get("/v1/benchmarks", headers={"origin": "https://dash.example"})
        assert "X-Request-ID" in r.headers["access-control-expose-headers"]
        other = client.get("/v1/benchmarks", headers={"origin": "https://evil.example"})
        assert "access-control-allow-origin" not in other.headers


def test_json_log_lines_carry_the_request_id(client: TestClient) -> None:
    from pythonjsonlogger.json import JsonFormatter

    records: list[logging.LogRecord] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(record)

    handler = Keep()
    handler.addFilter(RequestIdFilter())
    access = logging.getLogger("evalplan.access")
    access.addHandler(handler)
    old_level = access.level
    access.setLevel(logging.INFO)
    try:
        client.get("/v1/benchmarks", headers={"x-request-id": "log-7"})
    finally:
        access.removeHandler(handler)
        access.setLevel(old_level)
    line = json.loads(JsonFormatter("%(levelname)s %(name)s %(message)s %(request_id)s").format(records[-1]))
    assert line["request_id"] == "log-7"
    assert line["route"] == "/v1/benchmarks" and line["status"] == 200 and line["duration_ms"] >= 0



@pytest.mark.slow
def test_metrics_of_several_processes_are_summed(tmp_path) -> None:
    """Multiprocess mode (what ``serve --workers N`` sets up): two processes count requests, a third one's
    ``/metrics`` text reports their sum, not its own zero."""
    import os
    import subprocess
    import sys

    env = {**os.environ, "PROMETHEUS_MULTIPROC_DIR": str(tmp_path), "HF_HUB_OFFLINE": "1"}
    count = ("from evalplan.kit.observability import LATENCY, REQUESTS\n"
             "REQUESTS.labels('GET', '/v1/x', '200').inc({n})\n"
             "LATENCY.labels('GET', '/v1/x').observe(0.02)\n")
    for n in (3, 4):
        subprocess.run([sys.executable, "-c", count.format(n=n)], env=env, check=True, timeout=120)
    scrape = ("from prometheus_client import CollectorRegistry\n"
              "from evalplan.kit.observability import metrics_text\n"
              "print(metrics_text(CollectorRegistry())[0].decode())\n")
    text = subprocess.run([sys.executable, "-c", scrape], env=env, check=True, timeout=120, capture_output=True,
                          text=True).stdout
    counted = samples(text)
    assert counted[("evalplan_http_requests_total", (("method", "GET"), ("route", "/v1/x"), ("status", "200")))] == 7
    assert counted[("evalplan_http_request_duration_seconds_count", (("method", "GET"), ("route", "/v1/x")))] == 2


@pytest.mark.slow
def test_serve_with_two_workers_answers_metrics(tmp_path) -> None:
    """``evalplan serve --workers 2`` makes its own multiprocess folder: ``/metrics`` answers and counts."""
    import urllib.request

    from support.helpers import embedded_server

    with embedded_server(tmp_path, workers=2) as client:
        for _ in range(20):
            with urllib.request.urlopen(f"{client.base_url}/health", timeout=30) as answer:
                assert answer.status == 200
        with urllib.request.urlopen(f"{client.base_url}/metrics", timeout=30) as answer:
            counted = samples(answer.read().decode())
    health_ok = ("evalplan_http_requests_total", (("method", "GET"), ("route", "/health"), ("status", "200")))
    assert counted[health_ok] >= 20  # + embedded_server's readiness polls
