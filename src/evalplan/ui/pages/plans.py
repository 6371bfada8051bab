"""The plan page (``/ui/plans/{id}``, the plan's job id): status and live progress while it runs; once it
succeeds, the budget curve per method with the chosen point, the plan per benchmark and what it saves
against running every item (items, and compute when the request gave ``cost_per_item``), and the items the
default session and ``random`` needed on held-out references (the plan's ``session`` blocks)."""

from __future__ import annotations

from typing import Any

from fastapi import Request
from fastapi.responses import Response

from evalplan import charts
from evalplan.auth.deps import DbSession
from evalplan.jobs import service as job_service
from evalplan.kit.jobs import FINAL_STATUSES
from evalplan.plans import plots as plan_plots
from evalplan.ui.routing import page_router
from evalplan.ui.templating import render

router = page_router()


@router.get("/ui/plans/{plan_id}")
def plan_page(request: Request, plan_id: str, session: DbSession) -> Response:
    job = plan_plots.plan_job(job_service.get_job(session, plan_id))
    extra: dict[str, Any] = {}
    if job.status == "succeeded":
        extra["chart_svg"] = charts.to_inline_svg(plan_plots.plan_chart(job), label=f"Budget curves of plan {job.id}",
                                                  prefix="plan")
        extra["savings"] = plan_plots.savings(job)
        extra["sessions"] = plan_plots.session_rows(job)
    return render(request, "plan.html", job=job, final=FINAL_STATUSES, request_payload=job.payload or {}, **extra)
