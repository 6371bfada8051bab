"""The chart of a finished job, for the kinds that have one (backtests, benchmark similarity)."""

from __future__ import annotations

from typing import Any

from evalplan.backtests import plots as backtest_plots
from evalplan.db.models import Job
from evalplan.kit.errors import Conflict
from evalplan.plans import plots as plan_plots
from evalplan.similarity import plots as similarity_plots


def has_chart(job: Job) -> bool:
    return backtest_plots.is_backtest(job) or similarity_plots.is_similarity(job) or plan_plots.is_plan(job)


def job_chart(job: Job) -> Any:
    """409 unless the job succeeded and its kind has a chart."""
    if not has_chart(job):
        raise Conflict(f"a {job.kind} job has no chart; backtest, benchmark_similarity and plan jobs do",
                       [{"parameter": "job_id", "detail": f"kind {job.kind}"}])
    if job.status != "succeeded":
        raise Conflict(f"job {job.id} is {job.status}; its chart exists once it succeeds",
                       [{"field": "status", "detail": job.status}])
    if backtest_plots.is_backtest(job):
        return backtest_plots.backtest_chart(job)
    if plan_plots.is_plan(job):
        return plan_plots.plan_chart(job)
    return similarity_plots.similarity_chart(job.result or {})
