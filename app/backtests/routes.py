"""Backtests: ``POST /v1/backtests`` -> 202 ``{job}``; the table is the job's result."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse
from sqlalchemy.orm import Session

from app.kit.deps import SessionDep, job_accepted
from app.backtests.schemas import BacktestCreate
from app.backtests import service as backtest_service

router = APIRouter(prefix="/v1/backtests", tags=["backtests"])


@router.post("", status_code=202)
def create_backtest(body: BacktestCreate, request: Request, session: Session = SessionDep) -> JSONResponse:
    """Validate synchronously (422 / 404, nothing stored), then start a ``backtest`` job whose result is
    ``{rows, columns, unavailable, metrics}`` (``GET /v1/jobs/{id}``)."""
    job = backtest_service.create_backtest(session, body)
    return job_accepted(request, session, job, True)
