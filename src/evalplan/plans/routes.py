"""Plans: ``POST /v1/plans`` -> 202 ``{job}``; the plan is the job's result (API.md "Plans")."""

from __future__ import annotations

from typing import Literal

from fastapi import APIRouter
from fastapi.responses import JSONResponse, Response

from evalplan.auth.deps import DbSession
from evalplan.charts.http import chart_response
from evalplan.kit.deps import JobQueue
from evalplan.kit.schemas import JobAccepted
from evalplan.plans import plots as plan_plots
from evalplan.plans import service as plan_service
from evalplan.plans.schemas import PlanCreate

router = APIRouter(prefix="/v1/plans", tags=["plans"])


@router.post("", status_code=202, response_model=JobAccepted)
def create_plan(body: PlanCreate, session: DbSession, jobs: JobQueue) -> JSONResponse:
    """Validate synchronously (422 / 404, nothing stored), then start a ``plan`` job whose result holds,
    per benchmark, ``{method, predictor, budget, expected_rmse, interval_width, evidence, ...}`` and a
    ``suite`` total (``GET /v1/jobs/{id}``)."""
    job = plan_service.create_plan(session, body)
    return jobs.accepted(session, job, True)


@router.get("/{plan_id}/plot.{fmt}", response_class=Response,
            responses={200: {"content": {"image/svg+xml": {}, "image/png": {}}, "description": "The chart."}})
def plot(plan_id: str, fmt: Literal["svg", "png"], session: DbSession) -> Response:
    """A finished plan's chart (``plan_id`` is its job id): per benchmark the interval half-width of every
    candidate at every budget tried, the requested half-width and the chosen point; 409 until it succeeds,
    404 for a job that is not a plan."""
    job = plan_plots.get_plan(session, plan_id)
    return chart_response(plan_plots.plan_chart(job), fmt, f"plan-{job.id}")
