"""Backtests: ``POST /v1/backtests`` -> 202 ``{job}``; the table is the job's result."""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import JSONResponse

from evalplan.auth.audit import record
from evalplan.auth.deps import DbSession
from evalplan.backtests import service as backtest_service
from evalplan.backtests.schemas import BacktestCreate
from evalplan.kit.deps import JobQueue
from evalplan.kit.schemas import JobAccepted

router = APIRouter(prefix="/v1/backtests", tags=["backtests"])


@router.post("", status_code=202, response_model=JobAccepted)
def create_backtest(body: BacktestCreate, session: DbSession, jobs: JobQueue) -> JSONResponse:
    """Validate synchronously (422 / 404, nothing stored), then start a ``backtest`` job whose result is
    ``{rows, columns, unavailable, metrics}`` (``GET /v1/jobs/{id}``). With ``sequential: true``, a
    ``sequential_backtest`` job replaying held-out models as session targets for each session method:
    ``{sequential, rows, setups, targets, budgets, stop, columns}``."""
    job = backtest_service.create_backtest(session, body)
    job.visibility = body.visibility
    record(session, "create", "backtest", job.id, kind=job.kind, visibility=job.visibility)
    return jobs.accepted(session, job, True)
