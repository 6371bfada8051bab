"""Jobs: the HTTP view (get, list, cancel) and ``run_job`` (progress, failures, redelivery, giving up)."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import threading
import time
from collections import Counter
from datetime import timedelta
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from evalplan.auth.scoping import team_scoped_factory
from evalplan.core.embedding.embedder import default_device
from evalplan.db.models import Benchmark, Job, utcnow
from evalplan.kit.errors import InvalidInput
from evalplan.kit.jobs import MAX_ATTEMPTS, JobContext, create_job, register, run_job
from evalplan.kit.pagination import encode_cursor
from evalplan.main import create_app
from evalplan.workers.dispatch import InProcessDispatcher
from support.helpers import settings_for, wait_for_job


def run(factory: sessionmaker[Session], job_id: str) -> str:
    """``run_job`` as the dispatchers call it (sessions bound to the job's team)."""
    return run_job(factory, job_id, team_scope=team_scoped_factory)


JOB_KEYS = {"id", "kind", "queue", "status", "progress", "result", "error", "attempts", "created_at",
            "started_at", "finished_at", "team", "visibility"}

# ----------------------------------------------------------------------------- test-only handlers

CALLS: Counter[str] = Counter()
GATES: dict[str, threading.Event] = {}


class WorkerLost(BaseException):
    """Stands in for a worker process dying mid-job: nothing in run_job catches it."""


@register("test_jobs_echo")
def _echo(ctx: JobContext) -> dict[str, Any]:
    CALLS[ctx.job_id] += 1
    return {"echo": ctx.payload.get("value"), "calls": CALLS[ctx.job_id]}


@register("test_jobs_other", queue="gpu")
def _other(ctx: JobContext) -> None:
    CALLS[ctx.job_id] += 1


@register("test_jobs_gated")
def _gated(ctx: JobContext) -> dict[str, Any]:
    """Report 0.25, wait for the test to open the gate, then report 0.75 (which notices a cancel)."""
    CALLS[ctx.job_id] += 1
    ctx.progress(0.25)
    if not GATES[ctx.job_id].wait(timeout=30):
        raise RuntimeError("the test never opened the gate")
    if ctx.payload.get("report_again", True):
        ctx.progress(0.75)
    return {"done": True}


@register("test_jobs_invalid")
def _invalid(ctx: JobContext) -> None:
    raise InvalidInput("row 3 of the upload is wrong", [{"row": 3, "column": "score", "detail": "not a number"}])


@register("test_jobs_crash")
def _crash(ctx: JobContext) -> None:
    CALLS[ctx.job_id] += 1
    return {"x": 1} / 0  # type: ignore[operator]


@register("test_jobs_dies")
def _dies(ctx: JobContext) -> dict[str, int]:
    """Dies (like a killed worker) on the first ``die_times`` calls, then succeeds."""
    CALLS[ctx.job_id] += 1
    if CALLS[ctx.job_id] <= ctx.payload["die_times"]:
        raise WorkerLost(ctx.job_id)
    return {"calls": CALLS[ctx.job_id]}


# ----------------------------------------------------------------------------- helpers

def new_job(factory: sessionmaker[Session], kind: str, payload: dict[str, Any] | None = None,
            status: str | None = None) -> str:
    """Create (and commit) a job without dispatching it; optionally force its status."""
    with factory() as session:
        job = create_job(session, kind, payload or {})
        if status is not None:
            job.status = status
        session.commit()
        return job.id


def db_job(factory: sessionmaker[Session], job_id: str) -> Job:
    with factory() as session:
        job = session.get(Job, job_id)
        assert job is not None
        return job


def poll(client: TestClient, job_id: str, predicate, timeout: float = 20.0) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while True:
        body = client.get(f"/v1/jobs/{job_id}").json()
        if predicate(body):
            return body
        if time.monotonic() > deadline:
            raise AssertionError(f"job {job_id} never reached the expected state: {body}")
        time.sleep(0.02)


# ----------------------------------------------------------------------------- GET / list

def test_get_job_shape_of_a_queued_job(committed_client: TestClient, committed_session_factory) -> None:
    job_id = new_job(committed_session_factory, "test_jobs_other", {"a": 1})
    r = committed_client.get(f"/v1/jobs/{job_id}")
    assert r.status_code == 200, r.text
    body = r.json()
    assert set(body) == JOB_KEYS
    assert body["id"] == job_id
    assert body["kind"] == "test_jobs_other"
    assert body["queue"] == "gpu"
    assert body["status"] == "queued"
    assert body["progress"] == 0.0
    assert body["result"] is None and body["error"] is None
    assert body["attempts"] == 0
    assert body["started_at"] is None and body["finished_at"] is None
    assert body["created_at"]


def test_unknown_job_is_404_problem(committed_client: TestClient) -> None:
    for r in (committed_client.get("/v1/jobs/jb_nope"), committed_client.post("/v1/jobs/jb_nope/cancel")):
        assert r.status_code == 404, r.text
        assert r.headers["content-type"].startswith("application/problem+json")
        body = r.json()
        assert body["status"] == 404
        assert "jb_nope" in body["detail"]


def test_a_real_stats_job_through_the_dispatcher(committed_client: TestClient) -> None:
    assert committed_client.post("/v1/benchmarks", json={"name": "jobs-bench"}).status_code == 201
    r = committed_client.post("/v1/benchmarks/jobs-bench/scores", content=b"model,a,b,c\nm1,1,0,1\nm2,1,1,\n",
                              headers={"content-type": "text/csv"})
    assert r.status_code == 200, r.text
    r = committed_client.get("/v1/benchmarks/jobs-bench/stats")
    assert r.status_code == 202, r.text
    job_id = r.json()["job"]["id"]
    assert r.headers["location"] == f"/v1/jobs/{job_id}"
    job = wait_for_job(committed_client, job_id)
    assert set(job) == JOB_KEYS
    assert job["status"] == "succeeded", job
    assert job["kind"] == "score_stats" and job["queue"] == "cpu"
    assert job["progress"] == 1.0 and job["attempts"] == 1 and job["error"] is None
    assert job["started_at"] and job["finished_at"]
    result = job["result"]
    assert (result["n_models"], result["n_items"], result["n_scores"]) == (2, 3, 5)
    assert result["mean"] == pytest.approx(4 / 5)
    assert result["missing_fraction"] == pytest.approx(1 / 6)
    assert result["constant_items"] == [{"item": "a", "value": 1.0, "n_observed": 2},
                                        {"item": "c", "value": 1.0, "n_observed": 1}]
    # Fresh statistics are now served directly.
    again = committed_client.get("/v1/benchmarks/jobs-bench/stats")
    assert again.status_code == 200
    assert again.json() == result


def test_list_jobs_with_kind_and_status_filters(committed_client: TestClient, committed_session_factory) -> None:
    a1 = new_job(committed_session_factory, "test_jobs_echo")
    b1 = new_job(committed_session_factory, "test_jobs_other", status="failed")
    a2 = new_job(committed_session_factory, "test_jobs_echo", status="succeeded")
    a3 = new_job(committed_session_factory, "test_jobs_echo", status="failed")
    b2 = new_job(committed_session_factory, "test_jobs_other")

    def ids(**params: Any) -> list[str]:
        r = committed_client.get("/v1/jobs", params=params)
        assert r.status_code == 200, r.text
        assert all(set(j) == JOB_KEYS for j in r.json()["items"])
        return [j["id"] for j in r.json()["items"]]

    assert ids() == [b2, a3, a2, b1, a1]  # newest first
    assert ids(kind="test_jobs_echo") == [a3, a2, a1]
    assert ids(kind="test_jobs_other") == [b2, b1]
    assert ids(status="failed") == [a3, b1]
    assert ids(status="queued") == [b2, a1]
    assert ids(kind="test_jobs_echo", status="succeeded") == [a2]
    assert ids(kind="no_such_kind") == []

    first = committed_client.get("/v1/jobs", params={"limit": 2}).json()
    assert [j["id"] for j in first["items"]] == [b2, a3]
    assert first["next_cursor"]
    second = committed_client.get("/v1/jobs", params={"limit": 2, "cursor": first["next_cursor"]}).json()
    assert [j["id"] for j in second["items"]] == [a2, b1]
    third = committed_client.get("/v1/jobs", params={"limit": 2, "cursor": second["next_cursor"]}).json()
    assert [j["id"] for j in third["items"]] == [a1]
    assert third["next_cursor"] is None

    for bad in ("%%%", encode_cursor(12), encode_cursor({"id": a1})):  # garbage, an item cursor, a dict
        r = committed_client.get("/v1/jobs", params={"cursor": bad})
        assert r.status_code == 422, (bad, r.text)
        assert r.json()["errors"][0]["parameter"] == "cursor"

    r = committed_client.get("/v1/jobs", params={"status": "done"})
    assert r.status_code == 422
    assert r.headers["content-type"].startswith("application/problem+json")
    assert r.json()["errors"][0]["parameter"] == "status"


# ----------------------------------------------------------------------------- cancel

def test_cancel_a_queued_job_then_run_does_nothing(committed_client: TestClient, committed_session_factory) -> None:
    job_id = new_job(committed_session_factory, "test_jobs_echo", {"value": 7})
    r = committed_client.post(f"/v1/jobs/{job_id}/cancel")
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["status"] == "cancelled"
    assert body["finished_at"] is not None
    assert committed_client.get(f"/v1/jobs/{job_id}").json()["status"] == "cancelled"

    assert run(committed_session_factory, job_id) == "cancelled"
    assert CALLS[job_id] == 0  # the handler never ran
    job = db_job(committed_session_factory, job_id)
    assert (job.status, job.attempts, job.result, job.started_at) == ("cancelled", 0, None, None)

    again = committed_client.post(f"/v1/jobs/{job_id}/cancel")  # idempotent
    assert again.status_code == 200 and again.json()["status"] == "cancelled"


def test_cancel_a_finished_job_is_409(committed_client: TestClient, committed_session_factory) -> None:
    job_id = new_job(committed_session_factory, "test_jobs_echo", {"value": "x"})
    assert run(committed_session_factory, job_id) == "succeeded"
    r = committed_client.post(f"/v1/jobs/{job_id}/cancel")
    assert r.status_code == 409, r.text
    assert r.headers["content-type"].startswith("application/problem+json")
    assert "succeeded" in r.json()["detail"]
    job = committed_client.get(f"/v1/jobs/{job_id}").json()
    assert job["status"] == "succeeded"
    assert job["result"] == {"echo": "x", "calls": 1}


@pytest.mark.parametrize("report_again", [True, False])
def test_cancel_a_running_job(committed_client: TestClient, committed_session_factory, report_again: bool) -> None:
    job_id = new_job(committed_session_factory, "test_jobs_gated", {"report_again": report_again})
    GATES[job_id] = threading.Event()
    outcome: list[str] = []
    worker = threading.Thread(target=lambda: outcome.append(run(committed_session_factory, job_id)))
    worker.start()
    try:
        poll(committed_client, job_id, lambda b: b["progress"] == 0.25)
        r = committed_client.post(f"/v1/jobs/{job_id}/cancel")
        assert r.status_code == 200, r.text
        assert r.json()["status"] == "cancelled"
    finally:
        GATES[job_id].set()
        worker.join(timeout=30)
    assert outcome == ["cancelled"]
    body = committed_client.get(f"/v1/jobs/{job_id}").json()
    assert body["status"] == "cancelled"
    assert body["result"] is None and body["error"] is None
    assert body["progress"] == 0.25


# ----------------------------------------------------------------------------- run_job

def test_progress_is_visible_while_running(committed_client: TestClient, committed_session_factory) -> None:
    job_id = new_job(committed_session_factory, "test_jobs_gated")
    GATES[job_id] = threading.Event()
    outcome: list[str] = []
    worker = threading.Thread(target=lambda: outcome.append(run(committed_session_factory, job_id)))
    worker.start()
    try:
        body = poll(committed_client, job_id, lambda b: b["progress"] > 0)
        assert body["status"] == "running"
        assert body["progress"] == 0.25
        assert body["attempts"] == 1
        assert body["started_at"] is not None and body["finished_at"] is None
        listed = committed_client.get("/v1/jobs", params={"status": "running"}).json()["items"]
        assert [j["id"] for j in listed] == [job_id]
    finally:
        GATES[job_id].set()
        worker.join(timeout=30)
    assert outcome == ["succeeded"]
    body = committed_client.get(f"/v1/jobs/{job_id}").json()
    assert body["status"] == "succeeded"
    assert body["progress"] == 1.0
    assert body["result"] == {"done": True}
    assert body["finished_at"] is not None


def test_invalid_input_fails_with_the_error(committed_client: TestClient, committed_session_factory) -> None:
    job_id = new_job(committed_session_factory, "test_jobs_invalid")
    assert run(committed_session_factory, job_id) == "failed"
    body = committed_client.get(f"/v1/jobs/{job_id}").json()
    assert body["status"] == "failed"
    assert body["result"] is None
    assert body["attempts"] == 1
    assert body["error"] == {"status": 422, "title": "Invalid input", "detail": "row 3 of the upload is wrong",
                             "errors": [{"row": 3, "column": "score", "detail": "not a number"}]}


def test_crash_fails_without_a_traceback(committed_client: TestClient, committed_session_factory) -> None:
    job_id = new_job(committed_session_factory, "test_jobs_crash")
    assert run(committed_session_factory, job_id) == "failed"
    body = committed_client.get(f"/v1/jobs/{job_id}").json()
    assert body["status"] == "failed"
    assert body["error"]["status"] == 500
    assert body["error"]["title"] == "Job crashed"
    assert body["error"]["detail"].startswith("TypeError: ")
    text = json.dumps(body)
    assert "Traceback" not in text and 'File "' not in text and "test_jobs.py" not in text
    # A final job is never re-run (e.g. a duplicate delivery).
    assert run(committed_session_factory, job_id) == "failed"
    assert CALLS[job_id] == 1


@register("test_jobs_embedding_device")
def _embedding_device(ctx: JobContext) -> str:
    return default_device()  # the embedding job's first step: imports torch


def test_a_job_needing_the_worker_extra_fails_with_503_on_a_base_install(
        committed_client: TestClient, committed_session_factory, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "torch", None)  # `import torch` now fails as on a base install (no [worker])
    job_id = new_job(committed_session_factory, "test_jobs_embedding_device")
    assert run(committed_session_factory, job_id) == "failed"
    error = committed_client.get(f"/v1/jobs/{job_id}").json()["error"]
    assert error["status"] == 503 and error["title"] == "Service unavailable"
    assert "[worker] extra" in error["detail"] and error["errors"] == [
        {"package": "torch", "detail": "not installed on the process that ran the job"}]


def test_unknown_kind_fails(committed_client: TestClient, committed_session_factory) -> None:
    with committed_session_factory() as session:
        job = Job(kind="test_jobs_unregistered", queue="cpu", status="queued", progress=0.0, payload={}, attempts=0)
        session.add(job)
        session.commit()
        job_id = job.id
    assert run(committed_session_factory, job_id) == "failed"
    error = committed_client.get(f"/v1/jobs/{job_id}").json()["error"]
    assert "test_jobs_unregistered" in error["detail"]
    assert run(committed_session_factory, "jb_missing") == "missing"


def test_lost_worker_is_rerun_on_redelivery(committed_client: TestClient, committed_session_factory) -> None:
    job_id = new_job(committed_session_factory, "test_jobs_dies", {"die_times": 1})
    with pytest.raises(WorkerLost):
        run(committed_session_factory, job_id)
    left = committed_client.get(f"/v1/jobs/{job_id}").json()
    assert (left["status"], left["attempts"], left["finished_at"]) == ("running", 1, None)

    assert run(committed_session_factory, job_id) == "succeeded"  # the broker redelivers
    body = committed_client.get(f"/v1/jobs/{job_id}").json()
    assert body["status"] == "succeeded"
    assert body["attempts"] == 2
    assert body["result"] == {"calls": 2}
    assert CALLS[job_id] == 2


def test_lost_worker_gives_up_after_max_attempts(committed_client: TestClient, committed_session_factory) -> None:
    assert MAX_ATTEMPTS == 3
    job_id = new_job(committed_session_factory, "test_jobs_dies", {"die_times": 99})
    for attempt in range(1, MAX_ATTEMPTS + 1):
        with pytest.raises(WorkerLost):
            run(committed_session_factory, job_id)
        job = db_job(committed_session_factory, job_id)
        assert (job.status, job.attempts) == ("running", attempt)
    assert run(committed_session_factory, job_id) == "failed"
    assert CALLS[job_id] == MAX_ATTEMPTS  # not called a fourth time
    body = committed_client.get(f"/v1/jobs/{job_id}").json()
    assert body["status"] == "failed"
    assert body["attempts"] == MAX_ATTEMPTS
    assert body["error"]["title"] == "Job failed"
    assert "gave up after 3 attempts" in body["error"]["detail"]
    assert body["finished_at"] is not None
    assert run(committed_session_factory, job_id) == "failed"
    assert CALLS[job_id] == MAX_ATTEMPTS


# ----------------------------------------------------------------------------- reaper (issue 13)

def test_embedded_api_restart_reaps_an_orphaned_running_job(committed_session_factory, database_urls, backend) -> None:
    """A job left ``running`` by a dead process (embedded mode: the API itself) is requeued by the
    restarted API's housekeeper and run to the end by its in-process pool."""
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    with committed_session_factory() as session:
        session.add(Benchmark(name="reaped", score_kind="binary", score_min=0.0, score_max=1.0))
        session.commit()
    settings = settings_for(database_urls[backend], housekeeping=True, reaper_interval_s=0.5, job_lease_s=2.0,
                            job_heartbeat_s=0.5)
    app = create_app(settings, session_factory=committed_session_factory,
                     dispatcher=InProcessDispatcher(committed_session_factory, threads=1, heartbeat_s=0.5, lease_s=2.0))
    with TestClient(app, raise_server_exceptions=False) as client:
        client.post("/v1/benchmarks/reaped/scores", content=b"model,a,b\nm1,1,0\nm2,0,0\n",
                    headers={"content-type": "text/csv"})
        with committed_session_factory() as session:
            bench = session.scalars(select(Benchmark).where(Benchmark.name == "reaped")).one()
            job = create_job(session, "score_stats", {"benchmark_id": bench.id, "metric": "score",
                                                      "data_version": bench.data_version}, benchmark_id=bench.id)
            job.status, job.attempts = "running", 1
            job.worker_id = f"{socket.gethostname()}:{dead.pid}"
            job.started_at = job.heartbeat_at = utcnow() - timedelta(seconds=5)
            session.commit()
            job_id = job.id
        started = time.monotonic()
        body = wait_for_job(client, job_id, timeout=60)
        print(f"orphaned job reaped and finished in {time.monotonic() - started:.1f} s")
        assert body["status"] == "succeeded", body
        assert body["attempts"] == 2 and body["result"]["n_scores"] == 4
