"""The session page: the trajectory chart (estimate and band vs n, stop threshold, true score when
known), status and stop reason, the observed items; it refreshes itself while the session is active."""

from __future__ import annotations

from typing import Any

from fastapi import Request
from fastapi.responses import Response
from sqlalchemy.orm import Session

from app import charts
from app.kit.deps import DbSession
from app.sessions import plots as session_plots
from app.sessions import views as session_views
from app.sessions.service import get_eval_session
from app.ui.pages.home import Cursor
from app.ui.routing import page_router
from app.ui.templating import render

router = page_router()
OBSERVATIONS_PER_PAGE = 50
REFRESH_MS = 2000


def live_context(session: Session, session_id: str, cursor: str | None) -> dict[str, Any]:
    row = get_eval_session(session, session_id)
    view = session_views.session_view(session, row)
    observations = session_views.list_observations(session, row, limit=OBSERVATIONS_PER_PAGE, cursor=cursor)
    chart = session_plots.trajectory_chart(session, row)
    truth = session_views.true_scores(session, row)
    return {"s": view, "observations": observations, "cursor": cursor, "truth": truth,
            "threshold": session_views.stop_half_width(row), "level": session_plots.session_level(row),
            "chart_svg": charts.to_inline_svg(chart, label=f"Trajectory of session {row.id}", prefix="trajectory"),
            "refresh_ms": REFRESH_MS}


@router.get("/ui/sessions/{session_id}/live")
def session_fragment(request: Request, session_id: str, session: DbSession, cursor: Cursor = None) -> Response:
    return render(request, "_session_live.html", **live_context(session, session_id, cursor))


@router.get("/ui/sessions/{session_id}")
def session_page(request: Request, session_id: str, session: DbSession, cursor: Cursor = None) -> Response:
    return render(request, "session.html", **live_context(session, session_id, cursor))
