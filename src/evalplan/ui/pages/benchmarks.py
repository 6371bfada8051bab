"""The benchmark page: size, models, missing cells, score kind, the distributions of model means and
item difficulty (from the score-statistics job), and its coresets and sessions."""

from __future__ import annotations

import logging
from typing import Annotated, Any, Literal
from urllib.parse import quote

from fastapi import Query, Request
from fastapi.responses import Response
from sqlalchemy.exc import OperationalError
from sqlalchemy.orm import Session

from evalplan import charts
from evalplan.auth.deps import DbSession
from evalplan.auth.scoping import caller_of, scoped_factory
from evalplan.benchmarks import service as benchmark_service
from evalplan.benchmarks import stats as stats_service
from evalplan.benchmarks.repository import benchmark_one
from evalplan.coresets import service as coreset_service
from evalplan.db.models import Benchmark, Job
from evalplan.kit.db import quick_write
from evalplan.kit.deps import JobQueue, JobQueueClient
from evalplan.sessions import views as session_views
from evalplan.ui.pages.home import RECENT_PER_PAGE, Cursor, session_rows
from evalplan.ui.pages.leaderboard import leaderboard_context
from evalplan.ui.routing import page_router
from evalplan.ui.templating import render

router = page_router()
BENCHMARK_PAGE_ROWS = 15  # the leaderboard section's page; /ui/leaderboard shows 50


INLINE_STATS_CELLS = 2_000_000  # ~1 s on a busy core; larger matrices go to the score_stats job
#: how long a page waits for SQLite's write lock to start the statistics job before it renders without it
STATS_JOB_LOCK_WAIT_S = 0.5

log = logging.getLogger(__name__)


def start_stats_job(request: Request, jobs: JobQueueClient, session: Session, benchmark: Benchmark) -> Job | None:
    """Queue the score_stats job in a short transaction of its own, or None when the database is busy: a page
    view never waits on (nor fails because of) a job's write (issue 34). The next view tries again."""
    factory = request.app.state.session_factory
    caller = caller_of(session)
    if caller is not None:
        factory = scoped_factory(factory, caller)
    try:
        with quick_write(factory, STATS_JOB_LOCK_WAIT_S) as writer:
            bench = benchmark_one(writer, benchmark.id)
            stats, job = stats_service.find_stats(writer, bench, None)  # another view may have started it
            if stats is None and job is None:
                job = stats_service.new_stats_job(writer, bench, bench.default_metric)
                writer.commit()
                jobs.submit(job.id, job.queue)
            return job
    except OperationalError:
        log.info("statistics job of %s not started: the database is busy; the next view tries again",
                 benchmark.name)
        return None


def stats_section(request: Request, jobs: JobQueueClient, session: Session, benchmark: Benchmark) -> dict[str, Any]:
    """The score statistics and, once there, the two histograms. Read only: a small matrix is computed now
    (memoized per data version), a larger one by its job (started here when missing, without blocking)."""
    stats, job = stats_service.find_stats(session, benchmark, None)
    if stats is None and job is None:
        view = benchmark_service.view(session, benchmark)
        if view.n_items * view.n_models <= INLINE_STATS_CELLS:
            # small enough to compute during this request: the first visit shows the statistics, not
            # "being computed 0%"
            stats = stats_service.inline_stats(session, benchmark, benchmark.default_metric)
        else:
            job = start_stats_job(request, jobs, session, benchmark)
    if stats is None:
        return {"stats": None, "job": job}
    unit = "score" if benchmark.score_kind != "binary" else "accuracy"
    means = charts.histogram([m["mean"] for m in stats["models"]], x_title=f"model mean ({unit})",
                             count_title="models", title="Model means")
    difficulty = charts.histogram([i["mean"] for i in stats["items"]],
                                  x_title=f"item mean over models ({unit}; low = hard)", count_title="items",
                                  title="Item difficulty")
    return {"stats": stats, "job": job,
            "means_svg": charts.to_inline_svg(means, label="Histogram of model mean scores", prefix="means"),
            "difficulty_svg": charts.to_inline_svg(difficulty, label="Histogram of item mean scores",
                                                   prefix="difficulty")}


@router.get("/ui/benchmarks/{benchmark:path}/stats")
def benchmark_stats_fragment(request: Request, benchmark: str, session: DbSession, jobs: JobQueue) -> Response:
    bench = benchmark_service.get_benchmark(session, benchmark)
    return render(request, "_benchmark_stats.html", benchmark=bench, **stats_section(request, jobs, session, bench))


@router.get("/ui/benchmarks/{benchmark:path}")
def benchmark_page(request: Request, benchmark: str, session: DbSession, jobs: JobQueue,
                   coresets_cursor: Cursor = None, sessions_cursor: Cursor = None, cursor: Cursor = None,
                   sort: Annotated[str | None, Query()] = None,
                   order: Annotated[Literal["desc", "asc"], Query()] = "desc") -> Response:
    bench = benchmark_service.get_benchmark(session, benchmark)
    view = benchmark_service.view(session, bench)
    coresets = coreset_service.list_coresets(session, limit=RECENT_PER_PAGE, cursor=coresets_cursor,
                                             benchmark=bench.id)
    sessions = session_views.list_sessions(session, limit=RECENT_PER_PAGE, cursor=sessions_cursor,
                                             benchmark=bench.id)
    board = leaderboard_context(request, session, [bench.id], sort=sort, order=order, cursor=cursor,
                                page_path=f"/ui/benchmarks/{quote(bench.name, safe='')}",
                                rows_per_page=BENCHMARK_PAGE_ROWS)
    return render(
        request, "benchmark.html", benchmark=bench, view=view, **stats_section(request, jobs, session, bench), **board,
        coresets=[coreset_service.summary_view(session, c) for c in coresets.items],
        coresets_next=coresets.next_cursor, coresets_cursor=coresets_cursor,
        sessions=session_rows(session, sessions.items), sessions_next=sessions.next_cursor,
        sessions_cursor=sessions_cursor)
