"""Plans: ``POST /v1/plans`` -> 202 ``{job}``; the plan is the job's result (API.md "Plans")."""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import JSONResponse

from app.kit.deps import DbSession, JobQueue
from app.kit.schemas import JobAccepted
from app.plans import service as plan_service
from app.plans.schemas import PlanCreate

router = APIRouter(prefix="/v1/plans", tags=["plans"])


@router.post("", status_code=202, response_model=JobAccepted)
def create_plan(body: PlanCreate, session: DbSession, jobs: JobQueue) -> JSONResponse:
    """Validate synchronously (422 / 404, nothing stored), then start a ``plan`` job whose result holds,
    per benchmark, ``{method, predictor, budget, expected_rmse, interval_width, evidence, ...}`` and a
    ``suite`` total (``GET /v1/jobs/{id}``)."""
    job = plan_service.create_plan(session, body)
    return jobs.accepted(session, job, True)
