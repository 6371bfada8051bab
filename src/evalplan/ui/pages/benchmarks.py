"""The benchmark page: size, models, missing cells, score kind, the distributions of model means and
item difficulty (from the score-statistics job), and its coresets and sessions."""

from __future__ import annotations

from typing import Annotated, Any, Literal
from urllib.parse import quote

from fastapi import Query, Request
from fastapi.responses import Response
from sqlalchemy.orm import Session

from evalplan import charts
from evalplan.auth.deps import DbSession
from evalplan.benchmarks import service as benchmark_service
from evalplan.benchmarks import stats as stats_service
from evalplan.benchmarks.scores import matrix_for
from evalplan.core.score_stats import score_matrix_stats
from evalplan.coresets import service as coreset_service
from evalplan.db.models import Benchmark, Job, utcnow
from evalplan.kit.deps import JobQueue, JobQueueClient
from evalplan.kit.jobs import finish_job
from evalplan.sessions import views as session_views
from evalplan.ui.pages.home import RECENT_PER_PAGE, Cursor, session_rows
from evalplan.ui.pages.leaderboard import leaderboard_context
from evalplan.ui.routing import page_router
from evalplan.ui.templating import render

router = page_router()
BENCHMARK_PAGE_ROWS = 15  # the leaderboard section's page; /ui/leaderboard shows 50


INLINE_STATS_CELLS = 2_000_000  # ~1 s on a busy core; larger matrices go to the score_stats job


def compute_stats(session: Session, benchmark: Benchmark, job: Job) -> dict[str, Any]:
    """Run the score_stats job's computation now and record it as that job's result."""
    matrix = matrix_for(session, benchmark, job.payload["metric"])
    result = {"benchmark": benchmark.name, "metric": job.payload["metric"], "data_version": benchmark.data_version,
              **score_matrix_stats(matrix.values, matrix.model_names, matrix.item_ids)}
    job.started_at = utcnow()
    finish_job(job, "succeeded", result=result)
    return result


def stats_section(jobs: JobQueueClient, session: Session, benchmark: Benchmark) -> dict[str, Any]:
    """The score statistics (computed by their job the first time; started here when missing) and,
    once there, the two histograms."""
    stats, job, created = stats_service.stats_or_job(session, benchmark, None)
    if created and job is not None:
        view = benchmark_service.view(session, benchmark)
        if view.n_items * view.n_models <= INLINE_STATS_CELLS:
            # small enough to compute during this request: the first visit shows the statistics, not
            # "being computed 0%"; stored as the job's result (the same cache the API's stats route reads)
            stats = compute_stats(session, benchmark, job)
        session.commit()
        if stats is None:
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
        request, "benchmark.html", benchmark=bench, view=view, **stats_section(jobs, session, bench), **board,
        coresets=[coreset_service.summary_view(session, c) for c in coresets.items],
        coresets_next=coresets.next_cursor, coresets_cursor=coresets_cursor,
        sessions=session_rows(session, sessions.items), sessions_next=sessions.next_cursor,
        sessions_cursor=sessions_cursor)
