"""``POST /v1/comparisons`` and ``GET /v1/comparisons?sessions=a,b``: "is B better than A?"."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query
from pydantic import BaseModel, ConfigDict, Field

from evalplan.auth.deps import DbSession
from evalplan.comparisons import service

router = APIRouter(prefix="/v1/comparisons", tags=["comparisons"])


class ComparisonRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    sessions: list[str] = Field(description="Two or more session ids on one benchmark; the first is the baseline A.")
    level: float | None = Field(default=None, gt=0, lt=1, description="Interval level (default 0.95).")


@router.post("")
def compare(body: ComparisonRequest, session: DbSession) -> dict[str, Any]:
    """Each session's estimate, interval and trajectory, and for every later session B against the
    first A: the paired difference B - A on the items both observed (`paired`: mean, finite-population
    t interval, wins and ties, `verdict` b_better|a_better|undecided), the anytime-valid confidence
    sequence on the same pairs (`anytime`), and the difference of the two sessions' own estimates
    (`estimates`). Nothing is stored."""
    return service.compare_sessions(session, body.sessions, body.level)


@router.get("")
def compare_get(session: DbSession,
                sessions: Annotated[str, Query(description="Comma-separated session ids; the first is A.")],
                level: Annotated[float | None, Query(gt=0, lt=1)] = None) -> dict[str, Any]:
    """The same as `POST /v1/comparisons` with the ids in the query string."""
    return service.compare_sessions(session, [s.strip() for s in sessions.split(",") if s.strip()], level)
