"""Liveness (``/health``) and readiness (``/health/ready``: the database answers)."""

from __future__ import annotations

from fastapi import APIRouter
from sqlalchemy import text

from app.health.schemas import Health, Readiness
from app.kit.deps import DbSession

router = APIRouter(tags=["health"])


@router.get("/health", response_model=Health)
def health() -> Health:
    return Health(status="ok")


@router.get("/health/ready", response_model=Readiness)
def ready(session: DbSession) -> Readiness:
    session.execute(text("SELECT 1"))
    return Readiness(status="ok", database="ok")
