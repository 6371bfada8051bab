"""Lost-worker recovery and housekeeping, run by every API and worker process on a timer.

* Process heartbeat: the ``workers`` row of this process (``/health/ready`` counts fresh ones).
* Reaper: a ``running`` job whose heartbeat is older than ``job_lease_s`` lost its worker
  (``kill -9``, OOM, a lost host): it is requeued and sent again, or failed once it has had
  ``MAX_ATTEMPTS`` runs. A lost job is thus back in a queue within ``job_lease_s +
  reaper_interval_s`` (35-40 s by default). Rows are claimed ``FOR UPDATE SKIP LOCKED``, so
  several reapers never handle one job twice.
* Lost messages: a ``queued`` job whose row has not changed for ``job_queued_resend_s`` is sent to
  the broker again (Redis may have lost the message: restarted without persistence); ``run_job`` drops
  a duplicate delivery, so a resend is harmless when the first message was only slow. A job still
  queued ``job_queued_max_s`` after its creation is failed ("never started"), so nothing (``GET
  /stats`` reuses a pending job) waits on it forever.
* Pruning: idempotency records older than ``idempotency_retention_s``; worker rows silent for a day.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from datetime import UTC, timedelta

from sqlalchemy import delete, or_, select
from sqlalchemy.orm import Session, sessionmaker

from evalplan.db.models import IdempotencyRecord, Job, Worker, utcnow
from evalplan.kit.db import begin_write
from evalplan.kit.jobs import MAX_ATTEMPTS, finish_job, this_worker
from evalplan.kit.settings import Settings

log = logging.getLogger(__name__)

Resubmit = Callable[[str, str], None]


def reap_lost_jobs(session_factory: sessionmaker[Session], lease_s: float,
                   resubmit: Resubmit | None) -> dict[str, list[str]]:
    """Requeue (and resubmit) or fail every running job without a fresh heartbeat; returns the ids."""
    stale = utcnow() - timedelta(seconds=lease_s)
    requeued: list[tuple[str, str]] = []
    failed: list[str] = []
    with session_factory() as session:
        begin_write(session)
        jobs = session.scalars(
            select(Job).where(Job.status == "running",
                              or_(Job.heartbeat_at < stale, Job.heartbeat_at.is_(None) & (Job.started_at < stale)))
            .with_for_update(skip_locked=True)
        ).all()
        for job in jobs:
            lost = job.worker_id or "an unknown worker"
            if job.attempts >= MAX_ATTEMPTS:
                finish_job(job, "failed", error={
                    "status": 500, "title": "Job failed",
                    "detail": f"gave up after {job.attempts} attempts (worker lost: {lost} sent no heartbeat "
                              f"for {lease_s:g} s)"})
                failed.append(job.id)
            else:
                job.status, job.worker_id, job.heartbeat_at = "queued", None, None
                requeued.append((job.id, job.queue))
        session.commit()
    for job_id, queue in requeued:
        log.warning("job %s lost its worker; requeued on %s", job_id, queue)
        if resubmit is not None:
            try:
                resubmit(job_id, queue)
            except Exception as exc:  # noqa: BLE001 - the broker is down: fail it as the API does (503)
                log.warning("could not resubmit job %s", job_id, exc_info=True)
                with session_factory() as session:
                    begin_write(session)
                    unsent = session.get(Job, job_id, with_for_update=True)
                    if unsent is not None and unsent.status == "queued":
                        finish_job(unsent, "failed", error={"status": 503, "title": "Service unavailable",
                                                         "detail": f"worker lost and could not enqueue the job "
                                                                   f"again: {type(exc).__name__}"})
                    session.commit()
    for job_id in failed:
        log.warning("job %s lost its worker on its last attempt; failed", job_id)
    return {"requeued": [j for j, _ in requeued], "failed": failed}


def resend_queued_jobs(session_factory: sessionmaker[Session], resend_s: float, max_queued_s: float,
                       resubmit: Resubmit | None) -> dict[str, list[str]]:
    """Send again every queued job untouched for ``resend_s``; fail those queued longer than ``max_queued_s``."""
    now = utcnow()
    resent: list[tuple[str, str]] = []
    failed: list[str] = []
    with session_factory() as session:
        begin_write(session)
        jobs = session.scalars(
            select(Job).where(Job.status == "queued", Job.updated_at < now - timedelta(seconds=resend_s))
            .with_for_update(skip_locked=True)
        ).all()
        for job in jobs:
            created = job.created_at if job.created_at.tzinfo is not None else job.created_at.replace(tzinfo=UTC)
            if created < now - timedelta(seconds=max_queued_s):
                finish_job(job, "failed", error={
                    "status": 503, "title": "Job never started",
                    "detail": f"queued for more than {max_queued_s:g} s without a worker taking it (the broker "
                              "may have lost it); start it again"})
                failed.append(job.id)
            elif resubmit is not None:
                job.updated_at = now
                resent.append((job.id, job.queue))
        session.commit()
    for job_id, queue in resent:
        log.warning("job %s queued for over %g s without starting; sent to %s again", job_id, resend_s, queue)
        try:
            assert resubmit is not None
            resubmit(job_id, queue)
        except Exception:  # noqa: BLE001 - the broker is down: the next round tries again
            log.warning("could not resend job %s", job_id, exc_info=True)
    for job_id in failed:
        log.warning("job %s never started within %g s; failed", job_id, max_queued_s)
    return {"resent": [j for j, _ in resent], "failed": failed}


def beat(session_factory: sessionmaker[Session], worker_id: str, kind: str, queues: list[str]) -> None:
    """Insert or refresh this process's ``workers`` row."""
    with session_factory() as session:
        begin_write(session)
        row = session.get(Worker, worker_id)
        if row is None:
            session.add(Worker(id=worker_id, kind=kind, queues=list(queues)))
        else:
            row.last_seen_at = utcnow()
        session.commit()


def prune(session_factory: sessionmaker[Session], retention_s: float) -> None:
    with session_factory() as session:
        begin_write(session)
        session.execute(delete(IdempotencyRecord).where(
            IdempotencyRecord.created_at < utcnow() - timedelta(seconds=retention_s)))
        session.execute(delete(Worker).where(Worker.last_seen_at < utcnow() - timedelta(days=1)))
        session.commit()


class Housekeeper:
    """A daemon thread: heartbeat every ``job_heartbeat_s``; reap and prune every ``reaper_interval_s``."""

    def __init__(self, settings: Settings, session_factory: sessionmaker[Session], resubmit: Resubmit | None, *,
                 kind: str | None = None, queues: list[str] | None = None) -> None:
        self.settings, self.session_factory, self.resubmit = settings, session_factory, resubmit
        self.kind, self.queues = kind, list(queues or [])
        self.worker_id = this_worker()
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._loop, name="evalplan-housekeeper", daemon=True)

    def start(self) -> Housekeeper:
        self.thread.start()
        return self

    def stop(self) -> None:
        self.stopped.set()
        self.thread.join(timeout=10)
        if self.kind is not None:
            try:
                with self.session_factory() as session:
                    session.execute(delete(Worker).where(Worker.id == self.worker_id))
                    session.commit()
            except Exception:  # noqa: BLE001 - best effort on shutdown
                log.debug("could not remove worker row %s", self.worker_id, exc_info=True)

    def run_once(self, *, reap: bool = True) -> None:
        if self.kind is not None:
            beat(self.session_factory, self.worker_id, self.kind, self.queues)
        if reap:
            reap_lost_jobs(self.session_factory, self.settings.job_lease_s, self.resubmit)
            resend_queued_jobs(self.session_factory, self.settings.job_queued_resend_s,
                               self.settings.job_queued_max_s, self.resubmit)
            prune(self.session_factory, self.settings.idempotency_retention_s)

    def _loop(self) -> None:
        period = min(self.settings.job_heartbeat_s, self.settings.reaper_interval_s)
        next_reap = time.monotonic()
        while True:
            due = time.monotonic() >= next_reap
            if due:
                next_reap = time.monotonic() + self.settings.reaper_interval_s
            try:
                self.run_once(reap=due)
            except Exception:  # noqa: BLE001 - the database may be down; try again next period
                log.warning("housekeeping failed", exc_info=True)
            if self.stopped.wait(period):
                return
