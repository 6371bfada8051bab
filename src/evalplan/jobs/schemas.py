"""Response models of ``/v1/jobs``."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from evalplan.kit.schemas import UtcDatetime


class JobOut(BaseModel):
    id: str
    kind: str
    queue: str
    status: str
    progress: float
    result: Any | None
    error: dict[str, Any] | None
    attempts: int
    created_at: UtcDatetime
    started_at: UtcDatetime | None
    finished_at: UtcDatetime | None
    team: str | None = None
    visibility: str | None = None


class JobList(BaseModel):
    items: list[JobOut]
    next_cursor: str | None
