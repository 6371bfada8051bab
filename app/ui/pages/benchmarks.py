"""The benchmark page: size, models, missing cells, score kind, the distributions of model means and
item difficulty (from the score-statistics job), and its coresets and sessions."""

from __future__ import annotations

from typing import Any

from fastapi import Request
from fastapi.responses import Response
from sqlalchemy.orm import Session

from app import charts
from app.benchmarks import service as benchmark_service
from app.benchmarks import stats as stats_service
from app.coresets import service as coreset_service
from app.db.models import Benchmark
from app.kit.deps import DbSession, JobQueue, JobQueueClient
from app.sessions import views as session_views
from app.ui.pages.home import RECENT_PER_PAGE, Cursor, session_rows
from app.ui.routing import page_router
from app.ui.templating import render

router = page_router()


def stats_section(jobs: JobQueueClient, session: Session, benchmark: Benchmark) -> dict[str, Any]:
    """The score statistics (computed by their job the first time; started here when missing) and,
    once there, the two histograms."""
    stats, job, created = stats_service.stats_or_job(session, benchmark, None)
    if created and job is not None:
        session.commit()
        jobs.submit(job.id, job.queue)
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
    return render(request, "_benchmark_stats.html", benchmark=bench, **stats_section(jobs, session, bench))


@router.get("/ui/benchmarks/{benchmark:path}")
def benchmark_page(request: Request, benchmark: str, session: DbSession, jobs: JobQueue,
                   coresets_cursor: Cursor = None, sessions_cursor: Cursor = None) -> Response:
    bench = benchmark_service.get_benchmark(session, benchmark)
    view = benchmark_service.view(session, bench)
    coresets = coreset_service.list_coresets(session, limit=RECENT_PER_PAGE, cursor=coresets_cursor,
                                             benchmark=bench.id)
    sessions = session_views.list_sessions(session, limit=RECENT_PER_PAGE, cursor=sessions_cursor,
                                             benchmark=bench.id)
    return render(
        request, "benchmark.html", benchmark=bench, view=view, **stats_section(jobs, session, bench),
        coresets=[coreset_service.summary_view(session, c) for c in coresets.items],
        coresets_next=coresets.next_cursor, coresets_cursor=coresets_cursor,
        sessions=session_rows(session, sessions.items), sessions_next=sessions.next_cursor,
        sessions_cursor=sessions_cursor)
