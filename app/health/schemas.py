"""Response models of the health checks."""

from __future__ import annotations

from pydantic import BaseModel


class Health(BaseModel):
    status: str


class Readiness(BaseModel):
    status: str
    database: str
