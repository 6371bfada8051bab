"""``GET /`` (redirect) and the home page: benchmarks, recent coresets, sessions and jobs."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import Query, Request
from fastapi.responses import RedirectResponse, Response
from sqlalchemy.orm import Session

from evalplan.auth.deps import DbSession
from evalplan.benchmarks import service as benchmark_service
from evalplan.coresets import service as coreset_service
from evalplan.db.models import EvalSession
from evalplan.jobs import service as job_service
from evalplan.sessions import views as session_views
from evalplan.ui.routing import page_router
from evalplan.ui.templating import render, root_path

router = page_router()
Cursor = Annotated[str | None, Query(description="The `next_cursor` of a list on the page")]
BENCHMARKS_PER_PAGE = 25
RECENT_PER_PAGE = 10


@router.get("/")
def root(request: Request) -> RedirectResponse:
    return RedirectResponse(f"{root_path(request)}/ui/", status_code=307)


def session_rows(session: Session, rows: list[EvalSession]) -> list[dict[str, Any]]:
    """API session views (with benchmark names) of ``rows``, for the session tables."""
    names = session_views.benchmark_names(session, [r.benchmark_id for r in rows])
    return [session_views.session_view(session, r, names.get(r.benchmark_id)) for r in rows]


@router.get("/ui/")
def home(request: Request, session: DbSession, benchmarks_cursor: Cursor = None, coresets_cursor: Cursor = None,
         sessions_cursor: Cursor = None, jobs_cursor: Cursor = None) -> Response:
    benchmarks = benchmark_service.list_benchmarks(session, limit=BENCHMARKS_PER_PAGE, cursor=benchmarks_cursor)
    coresets = coreset_service.list_coresets(session, limit=RECENT_PER_PAGE, cursor=coresets_cursor)
    sessions = session_views.list_sessions(session, limit=RECENT_PER_PAGE, cursor=sessions_cursor)
    jobs = job_service.list_jobs(session, limit=RECENT_PER_PAGE, cursor=jobs_cursor)
    return render(
        request, "home.html", nav="home",
        benchmarks=benchmarks, benchmarks_cursor=benchmarks_cursor,
        coresets=[coreset_service.summary_view(session, c) for c in coresets.items],
        coresets_next=coresets.next_cursor, coresets_cursor=coresets_cursor,
        sessions=session_rows(session, sessions.items), sessions_next=sessions.next_cursor,
        sessions_cursor=sessions_cursor, jobs=jobs, jobs_cursor=jobs_cursor)
