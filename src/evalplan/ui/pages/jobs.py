"""The job page: status and a live progress bar; a finished backtest shows RMSE and coverage vs
budget per method and its table, a benchmark-similarity job its heatmap."""

from __future__ import annotations

import json
from typing import Any

from fastapi import Request
from fastapi.responses import Response
from sqlalchemy.orm import Session

from evalplan import charts
from evalplan.auth.deps import DbSession
from evalplan.backtests import plots as backtest_plots
from evalplan.benchmarks.repository import benchmark_by_id
from evalplan.db.models import Job
from evalplan.jobs import service as job_service
from evalplan.jobs.plots import has_chart, job_chart
from evalplan.kit.jobs import FINAL_STATUSES
from evalplan.plans import plots as plan_plots
from evalplan.similarity import plots as similarity_plots
from evalplan.ui.routing import page_router
from evalplan.ui.templating import render

router = page_router()
RESULT_PREVIEW_CHARS = 20_000
FINAL = FINAL_STATUSES


def links_of(session: Session, job: Job) -> list[tuple[str, str, str]]:
    """(what, label, page) of what the job works on: its coreset, its benchmark."""
    payload = job.payload or {}
    links = []
    if payload.get("coreset_id"):
        links.append(("coreset", payload["coreset_id"], f"/ui/coresets/{payload['coreset_id']}"))
    if plan_plots.is_plan(job):
        links.append(("plan page", job.id, f"/ui/plans/{job.id}"))
    benchmark = benchmark_by_id(session, job.benchmark_id) if job.benchmark_id else None
    if benchmark is not None:
        links.append(("benchmark", benchmark.name, f"/ui/benchmarks/{benchmark.id}"))
    return links


def results_of(job: Job) -> dict[str, Any]:
    if job.status != "succeeded":
        return {}
    out: dict[str, Any] = {}
    if has_chart(job) and not plan_plots.is_plan(job):  # a plan's chart is on its own page
        out["chart_svg"] = charts.to_inline_svg(job_chart(job), label=f"Chart of {job.kind} job {job.id}",
                                                prefix="job")
    if backtest_plots.is_backtest(job):
        out["summary"] = backtest_plots.backtest_summary(job)
        out["unavailable"] = (job.result or {}).get("unavailable") or {}
    elif similarity_plots.is_similarity(job):
        out["ordering"] = (job.result or {}).get("ordering") or []
    else:
        text = json.dumps(job.result, indent=2, default=str)
        out["result_text"] = text[:RESULT_PREVIEW_CHARS]
        out["result_truncated"] = len(text) > RESULT_PREVIEW_CHARS
    return out


@router.get("/ui/jobs/{job_id}/live")
def job_fragment(request: Request, job_id: str, session: DbSession) -> Response:
    return render(request, "_job_live.html", job=job_service.get_job(session, job_id), final=FINAL,
                  live=True)


@router.get("/ui/jobs/{job_id}")
def job_page(request: Request, job_id: str, session: DbSession) -> Response:
    job = job_service.get_job(session, job_id)
    return render(request, "job.html", job=job, final=FINAL, links=links_of(session, job), **results_of(job))
