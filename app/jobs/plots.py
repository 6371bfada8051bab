"""The chart of a finished job, for the kinds that have one (backtests, benchmark similarity)."""

from __future__ import annotations

from typing import Any

from app.backtests import plots as backtest_plots
from app.db.models import Job
from app.kit.errors import Conflict
from app.similarity import plots as similarity_plots


def has_chart(job: Job) -> bool:
    return backtest_plots.is_backtest(job) or similarity_plots.is_similarity(job)


def job_chart(job: Job) -> Any:
    """409 unless the job succeeded and its kind has a chart."""
    if not has_chart(job):
        raise Conflict(f"a {job.kind} job has no chart; backtest and benchmark_similarity jobs do",
                       [{"parameter": "job_id", "detail": f"kind {job.kind}"}])
    if job.status != "succeeded":
        raise Conflict(f"job {job.id} is {job.status}; its chart exists once it succeeds",
                       [{"field": "status", "detail": job.status}])
    if backtest_plots.is_backtest(job):
        return backtest_plots.backtest_chart(job)
    return similarity_plots.similarity_chart(job.result or {})
