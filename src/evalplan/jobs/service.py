"""Jobs as a resource (``/v1/jobs``): read, list (newest first), cancel."""

from __future__ import annotations

from sqlalchemy.orm import Session

from evalplan.auth.scoping import require_own
from evalplan.db.models import Job
from evalplan.kit.errors import Conflict, InvalidInput, NotFound
from evalplan.kit.jobs import JOB_STATUSES, finish_job
from evalplan.kit.pagination import Page
from evalplan.kit.repository import job_by_id, job_page


def get_job(session: Session, job_id: str) -> Job:
    job = job_by_id(session, job_id)
    if job is None:
        raise NotFound(f"job {job_id!r} does not exist", [{"parameter": "id", "detail": "no such job"}])
    return job


def cancel_job(session: Session, job_id: str) -> Job:
    job = job_by_id(session, job_id, for_update=True)
    if job is None:
        raise NotFound(f"job {job_id!r} does not exist", [{"parameter": "id", "detail": "no such job"}])
    require_own(session, job, f"job {job_id!r}")
    if job.status in ("succeeded", "failed"):
        raise Conflict(f"job {job_id} already {job.status}", [{"field": "status", "detail": job.status}])
    if job.status != "cancelled":
        finish_job(job, "cancelled")
    session.flush()
    return job


def list_jobs(session: Session, *, limit: int, cursor: str | None, kind: str | None = None,
              status: str | None = None) -> Page[Job]:
    if status is not None and status not in JOB_STATUSES:
        raise InvalidInput(f"unknown status {status!r}", [{"parameter": "status", "detail": f"one of {JOB_STATUSES}"}])
    return job_page(session, limit=limit, cursor=cursor, kind=kind, status=status)
