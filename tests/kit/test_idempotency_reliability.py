"""Idempotency-Key under real conditions (issue 13, failure 2): a retry right after the answer
replays it, a dead request's key is taken over after its lease, long paths, Location replayed,
pruning after the retention period."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta

import httpx
import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Engine, func, select

from evalplan.db.models import IdempotencyRecord, Model, utcnow
from evalplan.kit.reaper import prune
from evalplan.main import create_app
from evalplan.workers.dispatch import InProcessDispatcher
from support.browser import LiveServer, serving
from support.helpers import settings_for, wait_for_job
from support.lm_eval_logs import make_docs, samples_filename, samples_log_bytes


@pytest.fixture
def server(engines: dict[str, Engine], database_urls: dict[str, str], backend: str) -> Iterator[LiveServer]:
    with serving(engines[backend], database_urls[backend]) as running:
        yield running


@pytest.mark.slow
def test_retry_right_after_the_answer_replays(server: LiveServer) -> None:
    """50 sequential pairs over one keep-alive connection: the retry never sees 409."""
    with httpx.Client(base_url=server.url, timeout=30) as http:
        for i in range(50):
            headers = {"idempotency-key": f"pair-{i}"}
            first = http.post("/v1/models", json={"name": f"pair-{i}"}, headers=headers)
            second = http.post("/v1/models", json={"name": f"pair-{i}"}, headers=headers)
            assert first.status_code == 201, first.text
            assert second.status_code == 201, second.text
            assert second.headers["idempotent-replayed"] == "true"
            assert second.json() == first.json()
    with server.session_factory() as session:
        assert session.scalar(select(func.count()).select_from(Model)) == 50


def test_a_dead_requests_key_is_taken_over_after_its_lease(committed_client: TestClient,
                                                            committed_session_factory) -> None:
    headers = {"idempotency-key": "orphan"}
    assert committed_client.post("/v1/models", json={"name": "orphan"}, headers=headers).status_code == 201
    # as a process killed mid-request leaves it: the record in progress, nothing else committed
    with committed_session_factory() as session:
        record = session.scalars(select(IdempotencyRecord).where(IdempotencyRecord.key == "orphan")).one()
        record.status_code, record.response_body, record.response_headers = None, None, None
        record.lease_expires_at = utcnow() + timedelta(seconds=60)
        session.delete(session.scalars(select(Model).where(Model.name == "orphan")).one())
        session.commit()
    busy = committed_client.post("/v1/models", json={"name": "orphan"}, headers=headers)
    assert busy.status_code == 409 and busy.headers["retry-after"] == "1"
    assert busy.headers["content-type"].startswith("application/problem+json")
    with committed_session_factory() as session:
        session.scalars(select(IdempotencyRecord)).one().lease_expires_at = utcnow() - timedelta(seconds=1)
        session.commit()
    taken = committed_client.post("/v1/models", json={"name": "orphan"}, headers=headers)
    assert taken.status_code == 201, taken.text
    replay = committed_client.post("/v1/models", json={"name": "orphan"}, headers=headers)
    assert replay.headers["idempotent-replayed"] == "true" and replay.json() == taken.json()


def test_long_path_with_a_key_is_not_a_500(client: TestClient) -> None:
    path = "/v1/benchmarks/" + "b" * 3000 + "/scores"
    for _ in range(2):
        r = client.post(path, content=b"model,a\nm,1\n", headers={"idempotency-key": "long", "content-type": "text/csv"})
        assert r.status_code == 404, r.text
        assert r.headers["content-type"].startswith("application/problem+json")


def test_location_and_headers_are_replayed(committed_session_factory, database_urls: dict[str, str],
                                           backend: str) -> None:
    app = create_app(settings_for(database_urls[backend], inline_import_max_bytes=10),
                     session_factory=committed_session_factory,
                     dispatcher=InProcessDispatcher(committed_session_factory, threads=1))
    content = samples_log_bytes("loc_task", make_docs(6, seed=1), seed=2)
    with TestClient(app, raise_server_exceptions=False) as http:
        def post() -> httpx.Response:
            return http.post("/v1/imports/lm-eval", data={"model": "loc-model"}, headers={"idempotency-key": "loc"},
                             files=[("files", (samples_filename("loc_task"), content, "application/jsonl"))])

        first = post()
        assert first.status_code == 202, first.text
        second = post()
        assert second.status_code == 202 and second.headers["idempotent-replayed"] == "true"
        assert second.headers["location"] == first.headers["location"] == f"/v1/jobs/{first.json()['job']['id']}"
        assert second.json() == first.json()
        assert wait_for_job(http, first.json()["job"]["id"])["status"] == "succeeded"


def test_records_are_pruned_after_the_retention(committed_client: TestClient, committed_session_factory) -> None:
    for key in ("old", "new"):
        assert committed_client.post("/v1/models", json={"name": key}, headers={"idempotency-key": key}).status_code == 201
    with committed_session_factory() as session:
        old = session.scalars(select(IdempotencyRecord).where(IdempotencyRecord.key == "old")).one()
        old.created_at = utcnow() - timedelta(hours=25)
        session.commit()
    prune(committed_session_factory, retention_s=24 * 3600)
    with committed_session_factory() as session:
        assert session.scalars(select(IdempotencyRecord.key)).all() == ["new"]
