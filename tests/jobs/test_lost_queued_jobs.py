"""Issue 24 item 9: a queued job whose broker message was lost (Redis restarted without persistence)
does not stay ``queued`` forever: the housekeeper sends it again after ``job_queued_resend_s`` (a
duplicate delivery is dropped by ``run_job``), and fails it once it has been queued ``job_queued_max_s``;
``GET /stats`` then stops answering with the dead job."""

from __future__ import annotations

from datetime import timedelta

from fastapi.testclient import TestClient
from sqlalchemy import update
from sqlalchemy.orm import Session, sessionmaker

from evalplan.db.models import Job, utcnow
from evalplan.kit.reaper import Housekeeper
from evalplan.main import create_app
from evalplan.workers.dispatch import InProcessDispatcher
from support.helpers import settings_for, wait_for_job


class LosingBroker:
    """A broker that accepts every message and delivers none (its queue was lost)."""

    def __init__(self) -> None:
        self.sent: list[str] = []

    def submit(self, job_id: str, queue: str) -> None:
        self.sent.append(job_id)


def age(factory: sessionmaker[Session], job_id: str, seconds: float) -> None:
    with factory() as session:
        then = utcnow() - timedelta(seconds=seconds)
        session.execute(update(Job).where(Job.id == job_id).values(created_at=then, updated_at=then))
        session.commit()


def test_a_lost_queued_job_is_sent_again_then_failed_after_the_bound(
        committed_session_factory: sessionmaker[Session], database_urls: dict[str, str], backend: str) -> None:
    settings = settings_for(database_urls[backend], job_queued_resend_s=60, job_queued_max_s=3600)
    broker = LosingBroker()
    app = create_app(settings, session_factory=committed_session_factory, dispatcher=broker)
    worker = InProcessDispatcher(committed_session_factory, threads=1)
    try:
        with TestClient(app, raise_server_exceptions=False) as client:
            assert client.post("/v1/benchmarks", json={"name": "lost"}).status_code == 201
            assert client.post("/v1/benchmarks/lost/scores", content=b"model,a,b\nm1,1,0\nm2,0,1\n",
                               headers={"content-type": "text/csv"}).status_code == 200
            first = client.get("/v1/benchmarks/lost/stats").json()["job"]["id"]
            assert broker.sent == [first]
            assert client.get("/v1/benchmarks/lost/stats").json()["job"]["id"] == first  # still the dead job
            keeper = Housekeeper(settings, committed_session_factory, worker.submit)
            keeper.run_once()
            assert client.get(f"/v1/jobs/{first}").json()["status"] == "queued"  # younger than the resend bound
            age(committed_session_factory, first, 90)
            keeper.run_once()  # sent again: this time a worker gets it
            assert wait_for_job(client, first)["status"] == "succeeded"
            assert client.get("/v1/benchmarks/lost/stats").status_code == 200

            # a job queued past the bound is failed, and /stats starts a new one
            assert client.post("/v1/benchmarks/lost/scores", content=b"model,a,b\nm3,1,1\n",
                               headers={"content-type": "text/csv"}).status_code == 200
            dead = client.get("/v1/benchmarks/lost/stats").json()["job"]["id"]
            age(committed_session_factory, dead, 4000)
            Housekeeper(settings, committed_session_factory, None).run_once()
            job = client.get(f"/v1/jobs/{dead}").json()
            assert job["status"] == "failed" and "never started" in job["error"]["title"].lower()
            fresh = client.get("/v1/benchmarks/lost/stats")
            assert fresh.status_code == 202 and fresh.json()["job"]["id"] != dead
    finally:
        worker.shutdown()
