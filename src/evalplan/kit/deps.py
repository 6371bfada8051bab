"""FastAPI dependencies, in the ``Annotated[..., Depends(...)]`` style: import the alias, not the function.

* ``AppSettings``: the app's :class:`~evalplan.kit.settings.Settings`.
* ``Pagination``: ``limit`` + ``cursor`` query parameters, checked against the settings.
* ``JobQueue``: hands committed jobs to the dispatcher and answers 202.

``DbSession`` and ``CurrentCaller`` (the request's caller and its team-scoped session) are in ``evalplan.auth.deps``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from fastapi import Depends, Query, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel
from sqlalchemy.orm import Session, sessionmaker

from evalplan.db.models import Job, utcnow
from evalplan.kit.errors import InvalidInput, ServiceUnavailable
from evalplan.kit.jobs import Dispatcher
from evalplan.kit.pagination import PageParams
from evalplan.kit.schemas import JobAccepted, JobRef
from evalplan.kit.settings import Settings


def get_app_settings(request: Request) -> Settings:
    settings: Settings = request.app.state.settings
    return settings


def page_params(
    settings: Annotated[Settings, Depends(get_app_settings)],
    limit: Annotated[int | None, Query(ge=1,
                                       description="Page size (default 100, at most EVALPLAN_PAGE_SIZE_MAX).")] = None,
    cursor: Annotated[str | None, Query(description="The `next_cursor` of the previous page.")] = None,
) -> PageParams:
    if limit is None:
        limit = settings.page_size_default
    if limit > settings.page_size_max:
        raise InvalidInput(f"limit must be at most {settings.page_size_max}",
                           [{"parameter": "limit", "detail": f"{limit} > {settings.page_size_max}"}])
    return PageParams(limit, cursor)


@dataclass
class JobQueueClient:
    """Submits committed jobs to the configured dispatcher (thread pool or Celery)."""

    dispatcher: Dispatcher
    session_factory: sessionmaker[Session]

    def submit(self, job_id: str, queue: str) -> None:
        """Dispatch one committed job; if the broker is down the job is marked failed and the request is 503."""
        try:
            self.dispatcher.submit(job_id, queue)
        except Exception as exc:  # noqa: BLE001 - the broker being down must not leave a job queued forever
            with self.session_factory() as session:
                job = session.get(Job, job_id)
                if job is not None:
                    job.status, job.finished_at = "failed", utcnow()
                    job.error = {"status": 503, "title": "Service unavailable", "detail": f"could not enqueue: {exc}"}
                    session.commit()
            raise ServiceUnavailable(f"the job queue is unreachable: {type(exc).__name__}",
                                     [{"job": job_id, "detail": "job marked failed; retry the request"}]) from None

    def accepted(self, session: Session, job: Job, created: bool) -> JSONResponse:
        """Commit, dispatch a newly created job, and answer ``202 {job}`` with a Location header."""
        session.commit()
        if created:
            self.submit(job.id, job.queue)
        return accepted(JobAccepted(job=JobRef(id=job.id, status=job.status)), f"/v1/jobs/{job.id}")


def accepted(body: BaseModel, location: str) -> JSONResponse:
    """``202 Accepted`` with ``body`` and a ``Location`` header."""
    return JSONResponse(body.model_dump(mode="json"), status_code=202, headers={"Location": location})


def job_queue(request: Request) -> JobQueueClient:
    return JobQueueClient(request.app.state.dispatcher, request.app.state.session_factory)


AppSettings = Annotated[Settings, Depends(get_app_settings)]
Pagination = Annotated[PageParams, Depends(page_params)]
JobQueue = Annotated[JobQueueClient, Depends(job_queue)]
