"""The similarity page: choose benchmarks with item text, see the benchmark-similarity heatmap in
its greedy ordering (papers/000 eq. 12-13); large or not yet embedded sets run as a job."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import Query, Request
from fastapi.responses import Response
from sqlalchemy.orm import Session

from evalplan import charts
from evalplan.auth.deps import DbSession
from evalplan.benchmarks import service as benchmark_service
from evalplan.coresets.repository import text_item_counts
from evalplan.kit.deps import AppSettings, JobQueue, JobQueueClient
from evalplan.kit.errors import EvalplanError
from evalplan.similarity import plots as similarity_plots
from evalplan.similarity import service as similarity_service
from evalplan.ui.routing import page_router
from evalplan.ui.templating import render

router = page_router()
MAX_CANDIDATES = 200
Benchmarks = Annotated[list[str], Query(description="Benchmarks to compare (names or ids), repeated")]


def text_benchmarks(session: Session) -> list[str]:
    """Names of the benchmarks whose items have text (the ones the similarity can use)."""
    views = benchmark_service.list_benchmarks(session, limit=MAX_CANDIDATES, cursor=None).items
    counts = text_item_counts(session, [v.benchmark.id for v in views])
    return [v.benchmark.name for v in views if counts[v.benchmark.id][1] > 0]


def similarity_context(session: Session, jobs: JobQueueClient, model: str, chosen: list[str]) -> dict[str, Any]:
    refs = [r.strip() for value in chosen for r in value.split(",") if r.strip()]
    context: dict[str, Any] = {"chosen": refs, "result": None, "job": None}
    if not refs:
        return context
    try:
        result, job, created = similarity_service.similarity_or_job(session, refs, model)
    except EvalplanError as exc:  # shown above the form, which keeps the choice
        return {**context, "problem": exc.detail, "status_code": exc.status}
    if created and job is not None:
        session.commit()
        jobs.submit(job.id, job.queue)
    context.update(result=result, job=job)
    if result is not None:
        context["heatmap_svg"] = charts.to_inline_svg(similarity_plots.similarity_chart(result),
                                                      label="Benchmark similarity heatmap", prefix="similarity")
    return context


@router.get("/ui/similarity/live")
def similarity_fragment(request: Request, session: DbSession, jobs: JobQueue, settings: AppSettings,
                        benchmarks: Benchmarks = []) -> Response:  # noqa: B006 - FastAPI copies the default
    context = similarity_context(session, jobs, settings.embedding_model, benchmarks)
    return render(request, "_similarity_result.html", status_code=context.pop("status_code", 200), **context)


@router.get("/ui/similarity")
def similarity_page(request: Request, session: DbSession, jobs: JobQueue, settings: AppSettings,
                    benchmarks: Benchmarks = []) -> Response:  # noqa: B006 - FastAPI copies the default
    context = similarity_context(session, jobs, settings.embedding_model, benchmarks)
    return render(request, "similarity.html", nav="similarity", candidates=text_benchmarks(session),
                  status_code=context.pop("status_code", 200), **context)
