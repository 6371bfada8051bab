"""The session page: the trajectory chart (estimate and band vs n, stop threshold, true score when
known), status and stop reason, the observed items with their text and the target's stored response; it
refreshes itself while the session is active."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import Query, Request
from fastapi.responses import Response
from sqlalchemy.orm import Session

from evalplan import charts
from evalplan.auth.deps import DbSession
from evalplan.benchmarks.items import item_samples
from evalplan.benchmarks.responses import responses_for
from evalplan.core.sequential.interval_names import interval_label
from evalplan.sessions import plots as session_plots
from evalplan.sessions import views as session_views
from evalplan.sessions.service import get_eval_session
from evalplan.ui.pages.home import Cursor
from evalplan.ui.routing import page_router
from evalplan.ui.templating import render

router = page_router()
ItemQuery = Annotated[str | None, Query(max_length=200, description="Show this item's observations only")]
OBSERVATIONS_PER_PAGE = 50
REFRESH_MS = 2000


def live_context(session: Session, session_id: str, cursor: str | None, item: str | None = None) -> dict[str, Any]:
    row = get_eval_session(session, session_id)
    view = session_views.session_view(session, row)
    item = (item or "").strip() or None
    if item is not None:  # search by item id: its observations only
        observations = session_views.find_observations(session, row, item)
    else:
        observations = session_views.list_observations(session, row, limit=OBSERVATIONS_PER_PAGE, cursor=cursor)
    samples = item_samples(session, [(row.benchmark_id, o["item"]) for o in observations.items])
    stored = responses_for(session, row.benchmark_id, [o["item"] for o in observations.items],
                           models=list(row.targets or [row.target or ""]))
    chart = session_plots.trajectory_chart(session, row)
    truth = session_views.true_scores(session, row)
    return {"s": view, "observations": observations, "cursor": cursor, "truth": truth, "item": item,
            "samples": {item_id: text for (_, item_id), text in samples.items()},
            "responses": {(item_id, r["model"]): r for item_id, rows in stored.items() for r in rows},
            "threshold": session_views.stop_half_width(row), "level": session_plots.session_level(row),
            "interval_name": interval_label(session_plots.session_level(row), row.method, row.config,
                                            multi_target=bool(row.targets)),
            "chart_svg": charts.to_inline_svg(chart, label=f"Trajectory of session {row.id}", prefix="trajectory"),
            "refresh_ms": REFRESH_MS}


@router.get("/ui/sessions/{session_id}/live")
def session_fragment(request: Request, session_id: str, session: DbSession, cursor: Cursor = None,
                     item: ItemQuery = None) -> Response:
    return render(request, "_session_live.html", **live_context(session, session_id, cursor, item))


@router.get("/ui/sessions/{session_id}")
def session_page(request: Request, session_id: str, session: DbSession, cursor: Cursor = None,
                 item: ItemQuery = None) -> Response:
    return render(request, "session.html", **live_context(session, session_id, cursor, item))
