"""Jobs (``/v1/jobs``): status, progress, result, error; list and cancel."""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Query
from fastapi.responses import Response

from evalplan.auth.audit import change_visibility
from evalplan.auth.deps import DbSession
from evalplan.auth.teams import team_name, team_names
from evalplan.charts.http import chart_response
from evalplan.db.models import Job
from evalplan.jobs import service as job_service
from evalplan.jobs.plots import job_chart
from evalplan.jobs.schemas import JobList, JobOut
from evalplan.kit.deps import Pagination
from evalplan.kit.schemas import VisibilityPatch

router = APIRouter(prefix="/v1/jobs", tags=["jobs"])


def job_out(job: Job, team: str | None = None) -> JobOut:
    return JobOut(id=job.id, kind=job.kind, queue=job.queue, status=job.status, progress=job.progress,
                  result=job.result, error=job.error, attempts=job.attempts, created_at=job.created_at,
                  started_at=job.started_at, finished_at=job.finished_at, team=team, visibility=job.visibility)


@router.get("", response_model=JobList)
def list_jobs(session: DbSession, page: Pagination, kind: Annotated[str | None, Query()] = None,
              status: Annotated[str | None, Query()] = None) -> JobList:
    result = job_service.list_jobs(session, limit=page.limit, cursor=page.cursor, kind=kind, status=status)
    names = team_names(session, {j.team_id for j in result.items})
    return JobList(items=[job_out(j, names[j.team_id]) for j in result.items], next_cursor=result.next_cursor)


@router.get("/{job_id}", response_model=JobOut)
def get_job(job_id: str, session: DbSession) -> JobOut:
    job = job_service.get_job(session, job_id)
    return job_out(job, team_name(session, job.team_id))


@router.post("/{job_id}/cancel", response_model=JobOut)
def cancel_job(job_id: str, session: DbSession) -> JobOut:
    job = job_service.cancel_job(session, job_id)
    session.commit()
    return job_out(job, team_name(session, job.team_id))


@router.patch("/{job_id}", response_model=JobOut)
def patch_job(job_id: str, body: VisibilityPatch, session: DbSession) -> JobOut:
    """Change the visibility (`private` or `public`; the owning team only); audited. A public job (a
    backtest's table, say) is readable by every team; cancelling it stays the owner's (403)."""
    job = job_service.get_job(session, job_id)
    change_visibility(session, job, body.visibility, "job", f"job {job_id!r}")
    session.commit()
    return job_out(job, team_name(session, job.team_id))


@router.get("/{job_id}/plot.{fmt}", response_class=Response,
            responses={200: {"content": {"image/svg+xml": {}, "image/png": {}}, "description": "The chart."}})
def plot(job_id: str, fmt: Literal["svg", "png"], session: DbSession) -> Response:
    """A finished job's chart: a backtest's RMSE and coverage vs budget per method, or the
    benchmark-similarity heatmap; 409 for other kinds or unfinished jobs."""
    job = job_service.get_job(session, job_id)
    return chart_response(job_chart(job), fmt, f"{job.kind}-{job.id}")
