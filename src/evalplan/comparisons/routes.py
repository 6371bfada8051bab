"""``POST /v1/comparisons`` and ``GET /v1/comparisons?sessions=a,b``: "is B better than A?"."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from evalplan.auth.deps import DbSession
from evalplan.comparisons import service
from evalplan.comparisons.schemas import ComparisonOut, ComparisonRequest

router = APIRouter(prefix="/v1/comparisons", tags=["comparisons"])


@router.post("", response_model=ComparisonOut, response_model_exclude_unset=True)
def compare(body: ComparisonRequest, session: DbSession) -> ComparisonOut:
    """Each session's estimate, interval and trajectory, and for every later session B against the
    first A: the paired difference B - A on the items both observed (`paired`: mean, finite-population
    t interval, wins and ties, `verdict` b_better|a_better|undecided), the anytime-valid confidence
    sequence on the same pairs (`anytime`), and the difference of the two sessions' own estimates
    (`estimates`). Nothing is stored."""
    return ComparisonOut.model_validate(service.compare_sessions(session, body.sessions, body.level))


@router.get("", response_model=ComparisonOut, response_model_exclude_unset=True)
def compare_get(session: DbSession,
                sessions: Annotated[str, Query(description="Comma-separated session ids; the first is A.")],
                level: Annotated[float | None, Query(gt=0, lt=1)] = None) -> ComparisonOut:
    """The same as `POST /v1/comparisons` with the ids in the query string."""
    ids = [s.strip() for s in sessions.split(",") if s.strip()]
    return ComparisonOut.model_validate(service.compare_sessions(session, ids, level))
