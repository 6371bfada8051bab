"""FastAPI dependencies: a DB session per request, pagination parameters, settings."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from fastapi import Depends, Query, Request
from fastapi.responses import JSONResponse
from sqlalchemy.orm import Session

from app.db.models import Job, utcnow
from app.kit.errors import InvalidInput, ServiceUnavailable
from app.kit.settings import Settings


def get_session(request: Request) -> Iterator[Session]:
    with request.app.state.session_factory() as session:
        yield session


def get_app_settings(request: Request) -> Settings:
    return request.app.state.settings


@dataclass
class PageParams:
    limit: int
    cursor: str | None


def page_params(
    request: Request,
    limit: int | None = Query(None, ge=1, description="Page size (default 100, at most EVALPLAN_PAGE_SIZE_MAX)."),
    cursor: str | None = Query(None, description="The `next_cursor` of the previous page."),
) -> PageParams:
    settings: Settings = request.app.state.settings
    if limit is None:
        limit = settings.page_size_default
    if limit > settings.page_size_max:
        raise InvalidInput(f"limit must be at most {settings.page_size_max}",
                           [{"parameter": "limit", "detail": f"{limit} > {settings.page_size_max}"}])
    return PageParams(limit, cursor)


SessionDep = Depends(get_session)
PageDep = Depends(page_params)


def submit_job(request: Request, job_id: str, queue: str) -> None:
    """Hand a committed job to the configured dispatcher (thread pool or Celery)."""
    try:
        request.app.state.dispatcher.submit(job_id, queue)
    except Exception as exc:  # noqa: BLE001 - the broker being down must not leave a job queued forever
        with request.app.state.session_factory() as session:
            job = session.get(Job, job_id)
            if job is not None:
                job.status, job.finished_at = "failed", utcnow()
                job.error = {"status": 503, "title": "Service unavailable", "detail": f"could not enqueue: {exc}"}
                session.commit()
        raise ServiceUnavailable(f"the job queue is unreachable: {type(exc).__name__}",
                                 [{"job": job_id, "detail": "job marked failed; retry the request"}]) from None


def job_accepted(request: Request, session: Session, job: Job, created: bool) -> JSONResponse:
    """Commit, dispatch a newly created job, and answer 202 ``{job}`` with a Location header."""
    session.commit()
    if created:
        submit_job(request, job.id, job.queue)
    return JSONResponse({"job": {"id": job.id, "status": job.status}}, status_code=202,
                        headers={"Location": f"/v1/jobs/{job.id}"})
