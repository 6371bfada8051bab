"""Response models of the health checks."""

from __future__ import annotations

from pydantic import BaseModel, Field


class Health(BaseModel):
    status: str


class Readiness(BaseModel):
    status: str
    database: str = Field(description='"ok"')
    broker: str = Field(description='"ok", or "not used" in embedded mode (jobs in-process)')
    workers: str = Field(description='"ok" (a worker heartbeat is fresh), or "not used" in embedded mode')
