"""Sequential sessions (BayesAME): create, observe, read, trajectory, list."""

from __future__ import annotations

from fastapi import APIRouter, Query
from fastapi.responses import JSONResponse
from sqlalchemy.orm import Session

from app.kit.deps import PageDep, PageParams, SessionDep
from app.sessions.schemas import ObservationsPost, SessionCreate
from app.sessions import service as session_service

router = APIRouter(prefix="/v1/sessions", tags=["sessions"])


@router.post("", status_code=201)
def create_session(body: SessionCreate, session: Session = SessionDep) -> JSONResponse:
    """Start a session: the response's `next_items` are the items to run first. With `targets` (two or
    more models) instead of `target`, a multi-target session: `next` gives the (target, item) pairs."""
    row = session_service.create_session(session, session_service.SessionRequest(**body.model_dump()))
    session.commit()
    return JSONResponse(session_service.session_view(session, row), status_code=201,
                        headers={"Location": f"/v1/sessions/{row.id}"})


@router.post("/{session_id}/observations")
def post_observations(session_id: str, body: ObservationsPost, session: Session = SessionDep) -> JSONResponse:
    """Record scores (all-or-nothing) and return the updated session."""
    observations = [session_service.ObservationIn(item, score, target) for item, score, target in body.triples()]
    row = session_service.post_observations(session, session_id, observations)
    return JSONResponse(session_service.session_view(session, row))


@router.get("")
def list_sessions(benchmark: str | None = Query(None), target: str | None = Query(None),
                  status: str | None = Query(None, description="active or stopped"),
                  page: PageParams = PageDep, session: Session = SessionDep) -> JSONResponse:
    result = session_service.list_sessions(session, limit=page.limit, cursor=page.cursor, benchmark=benchmark,
                                           target=target, status=status)
    names = session_service.benchmark_names(session, [r.benchmark_id for r in result.items])
    return JSONResponse({"items": [session_service.session_view(session, r, names.get(r.benchmark_id))
                                   for r in result.items], "next_cursor": result.next_cursor})


@router.get("/{session_id}")
def read_session(session_id: str, session: Session = SessionDep) -> JSONResponse:
    return JSONResponse(session_service.session_view(session, session_service.get_session(session, session_id)))


@router.get("/{session_id}/trajectory")
def read_trajectory(session_id: str, session: Session = SessionDep) -> JSONResponse:
    row = session_service.get_session(session, session_id)
    return JSONResponse(session_service.trajectory(session, row))
