"""Sequential sessions (``/v1/sessions``, BayesAME): create, observe, read, trajectory, list."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Query, Response

from evalplan.auth.audit import change_visibility, record
from evalplan.auth.deps import DbSession
from evalplan.charts.http import chart_response
from evalplan.core.sequential.methods import ALIASES, method_table
from evalplan.kit.deps import Pagination
from evalplan.kit.schemas import VisibilityPatch
from evalplan.sessions import plots as session_plots
from evalplan.sessions import service as session_service
from evalplan.sessions import views
from evalplan.sessions.schemas import (
    ObservationList,
    ObservationOut,
    ObservationsPost,
    SessionCreate,
    SessionList,
    SessionOut,
    TrajectoryPoint,
)
from evalplan.sessions.validation import ObservationIn

router = APIRouter(prefix="/v1/sessions", tags=["sessions"])
METHODS_PATH = "/v1/sessions/methods"  # the method table; a former method name's Deprecation header links here


@router.post("", status_code=201, response_model=SessionOut, response_model_exclude_unset=True)
def create_session(body: SessionCreate, session: DbSession, response: Response) -> SessionOut:
    """Start a session: the response's `next_items` are the items to run first. With `targets` (two or
    more models) instead of `target`, a multi-target session: `next` gives the (target, item) pairs."""
    visibility = body.visibility
    row = session_service.create_session(session, body)
    row.visibility = visibility
    record(session, "create", "session", row.id, benchmark_id=row.benchmark_id, target=row.target,
           visibility=visibility)
    session.commit()
    response.headers["Location"] = f"/v1/sessions/{row.id}"
    if body.method in ALIASES:  # a former name (docs/SEQUENTIAL.md): answered with the public name
        response.headers["Deprecation"] = "true"
        response.headers["Link"] = f'<{METHODS_PATH}>; rel="deprecation"; type="application/json"'
    return SessionOut.model_validate(views.session_view(session, row))


@router.get("/methods")
def list_methods() -> dict[str, Any]:
    """The session methods: the defaults, per public method its summary, `method_params` keys, multi-target
    support, interval kinds, whether it takes hyperparameters and whether it takes only the items it proposes;
    and the former names (accepted with a `Deprecation` header whose `Link` is this page) with what they
    resolve to."""
    return method_table()


@router.post("/{session_id}/observations", response_model=SessionOut, response_model_exclude_unset=True)
def post_observations(session_id: str, body: ObservationsPost, session: DbSession) -> SessionOut:
    """Record scores (all-or-nothing) and return the updated session."""
    observations = [ObservationIn(item, score, target) for item, score, target in body.triples()]
    posted = session_service.post_observations(session, session_id, observations)
    return SessionOut.model_validate(views.session_view(session, posted.row, posted.benchmark.name, posted.team))


@router.get("", response_model=SessionList, response_model_exclude_unset=True)
def list_sessions(session: DbSession, page: Pagination, benchmark: Annotated[str | None, Query()] = None,
                  target: Annotated[str | None, Query()] = None,
                  status: Annotated[str | None, Query(description="active or stopped")] = None) -> SessionList:
    result = views.list_sessions(session, limit=page.limit, cursor=page.cursor, benchmark=benchmark,
                                 target=target, status=status)
    names = views.benchmark_names(session, [r.benchmark_id for r in result.items])
    return SessionList(items=[SessionOut.model_validate(views.session_view(session, r, names.get(r.benchmark_id)))
                              for r in result.items], next_cursor=result.next_cursor)


@router.get("/{session_id}", response_model=SessionOut, response_model_exclude_unset=True)
def read_session(session_id: str, session: DbSession) -> SessionOut:
    return SessionOut.model_validate(views.session_view(session, session_service.get_eval_session(session, session_id)))


@router.delete("/{session_id}", status_code=204, response_class=Response)
def delete_session(session_id: str, session: DbSession) -> Response:
    """Delete the session and its observations (the owning team only; audited)."""
    session_service.delete_session(session, session_id)
    return Response(status_code=204)


@router.patch("/{session_id}", response_model=SessionOut, response_model_exclude_unset=True)
def patch_session(session_id: str, body: VisibilityPatch, session: DbSession) -> SessionOut:
    """Change the visibility (`private` or `public`; the owning team only); audited. Another team may
    read a public session, never observe into or delete it (403)."""
    row = session_service.get_eval_session(session, session_id)
    change_visibility(session, row, body.visibility, "session", f"session {session_id!r}")
    session.commit()
    return SessionOut.model_validate(views.session_view(session, row))


@router.get("/{session_id}/trajectory", response_model=list[TrajectoryPoint], response_model_exclude_unset=True)
def read_trajectory(session_id: str, session: DbSession) -> list[TrajectoryPoint]:
    row = session_service.get_eval_session(session, session_id)
    return [TrajectoryPoint.model_validate(point) for point in views.trajectory(session, row)]


@router.get("/{session_id}/observations", response_model=ObservationList)
def list_observations(session_id: str, session: DbSession, page: Pagination) -> ObservationList:
    """The posted observations, newest first: `{n, item, score, target, created_at}`."""
    row = session_service.get_eval_session(session, session_id)
    result = views.list_observations(session, row, limit=page.limit, cursor=page.cursor)
    return ObservationList(items=[ObservationOut.model_validate(o) for o in result.items],
                           next_cursor=result.next_cursor)


@router.get("/{session_id}/plot.{fmt}", response_class=Response,
            responses={200: {"content": {"image/svg+xml": {}, "image/png": {}}, "description": "The chart."}})
def plot(session_id: str, fmt: Literal["svg", "png"], session: DbSession) -> Response:
    """The trajectory chart: estimate and the method's interval band (named in the legend) vs items observed,
    the stop threshold and the true score when the target's scores are stored (`plot.svg`: image/svg+xml;
    `plot.png`)."""
    row = session_service.get_eval_session(session, session_id)
    return chart_response(session_plots.trajectory_chart(session, row), fmt, f"session-{row.id}")
