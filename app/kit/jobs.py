"""The job runtime: one table, one entry point (``run_job``) for both in-process threads and Celery workers.

A job handler is a plain function ``handler(ctx) -> result`` registered under a kind.
It reads its inputs from ``ctx.payload`` (and ``ctx.inputs()`` for uploaded files),
reports progress through ``ctx.progress(fraction)`` and returns a JSON-able result.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from app.db.models import Job, JobInput, utcnow
from app.kit.errors import EvalplanError, InvalidInput

log = logging.getLogger(__name__)

JOB_STATUSES = ("queued", "running", "succeeded", "failed", "cancelled")
FINAL_STATUSES = ("succeeded", "failed", "cancelled")
MAX_ATTEMPTS = 3


class JobCancelled(Exception):
    """Raised inside a handler when the job was cancelled while it ran."""


@dataclass
class JobContext:
    job_id: str
    kind: str
    payload: dict[str, Any]
    session_factory: sessionmaker[Session]

    def progress(self, fraction: float) -> None:
        """Record progress in its own short transaction; raises JobCancelled if cancelled."""
        with self.session_factory() as session:
            job = session.get(Job, self.job_id, with_for_update=True)
            if job is None or job.status == "cancelled":
                raise JobCancelled(self.job_id)
            job.progress = max(0.0, min(1.0, float(fraction)))
            session.commit()

    def inputs(self) -> list[tuple[str, bytes]]:
        with self.session_factory() as session:
            rows = session.execute(
                select(JobInput.filename, JobInput.content).where(JobInput.job_id == self.job_id).order_by(JobInput.pk)
            ).all()
            return [(name, bytes(content)) for name, content in rows]


Handler = Callable[[JobContext], Any]
HANDLERS: dict[str, tuple[Handler, str]] = {}


def register(kind: str, queue: str = "cpu") -> Callable[[Handler], Handler]:
    """Register a job handler for ``kind``, routed to ``queue`` (``cpu`` or ``gpu``)."""

    def wrap(fn: Handler) -> Handler:
        HANDLERS[kind] = (fn, queue)
        return fn

    return wrap


class Dispatcher(Protocol):
    """Sends a committed job to whatever executes it (thread pool or Celery)."""

    def submit(self, job_id: str, queue: str) -> None: ...


def create_job(
    session: Session,
    kind: str,
    payload: dict[str, Any],
    *,
    benchmark_id: str | None = None,
    inputs: list[tuple[str, bytes]] | None = None,
) -> Job:
    """Add a queued job (and its input files) to the session; dispatch it after commit."""
    if kind not in HANDLERS:
        raise ValueError(f"no handler registered for job kind {kind!r}")
    job = Job(kind=kind, queue=HANDLERS[kind][1], status="queued", progress=0.0, payload=payload,
              attempts=0, benchmark_id=benchmark_id)
    session.add(job)
    session.flush()
    for filename, content in inputs or []:
        session.add(JobInput(job_id=job.id, filename=filename, content=content))
    session.flush()
    return job


def run_job(session_factory: sessionmaker[Session], job_id: str) -> str:
    """Execute one job to a final status; returns that status. Safe to call again after a crash."""
    with session_factory() as session:
        job = session.get(Job, job_id, with_for_update=True)
        if job is None:
            log.warning("job %s does not exist", job_id)
            return "missing"
        if job.status in FINAL_STATUSES:
            return job.status
        if job.attempts >= MAX_ATTEMPTS:
            finish_job(job, "failed", error={"title": "Job failed",
                                             "detail": f"gave up after {job.attempts} attempts (worker lost)"})
            session.commit()
            return "failed"
        job.status, job.attempts, job.started_at = "running", job.attempts + 1, utcnow()
        ctx = JobContext(job.id, job.kind, dict(job.payload or {}), session_factory)
        session.commit()

    handler = HANDLERS.get(ctx.kind, (None, ""))[0]
    status, result, error = "succeeded", None, None
    try:
        if handler is None:
            raise InvalidInput(f"unknown job kind {ctx.kind!r}")
        result = handler(ctx)
    except JobCancelled:
        status = "cancelled"
    except EvalplanError as exc:
        status, error = "failed", {"status": exc.status, "title": exc.title, "detail": exc.detail, "errors": exc.errors}
    except Exception as exc:  # noqa: BLE001 - a job must always reach a final status
        log.exception("job %s (%s) crashed", ctx.job_id, ctx.kind)
        status, error = "failed", {"status": 500, "title": "Job crashed", "detail": f"{type(exc).__name__}: {exc}"}

    with session_factory() as session:
        job = session.get(Job, job_id, with_for_update=True)
        if job is None:
            return "missing"
        if job.status == "cancelled":
            status, result, error = "cancelled", None, None
        finish_job(job, status, result=result, error=error)
        session.commit()
    return status


def finish_job(job: Job, status: str, *, result: Any = None, error: dict[str, Any] | None = None) -> None:
    """Set a final status (and result or error) and the finish time."""
    job.status, job.result, job.error, job.finished_at = status, result, error, utcnow()
    if status == "succeeded":
        job.progress = 1.0
