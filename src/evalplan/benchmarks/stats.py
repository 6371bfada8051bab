"""Score-matrix statistics: the cached result of the ``score_stats`` job for the current data version, or a new job."""

from __future__ import annotations

from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from evalplan.benchmarks.score_matrix import metrics_of, models_with_scores
from evalplan.benchmarks.scores import check_metric
from evalplan.db.models import Benchmark, Job
from evalplan.kit.errors import NotFound
from evalplan.kit.jobs import create_job

KIND = "score_stats"


def _has_metric(session: Session, benchmark: Benchmark, metric: str) -> bool:
    return bool(models_with_scores(session, benchmark.id, metric))


def stats_or_job(session: Session, benchmark: Benchmark, metric: str | None) -> tuple[dict[str, Any] | None,
                                                                                      Job | None, bool]:
    """Return (stats, None, False) if fresh stats exist, else (None, job, created)."""
    given = metric is not None and metric != benchmark.default_metric
    metric = check_metric(metric or benchmark.default_metric)
    if given and not _has_metric(session, benchmark, metric):
        known = metrics_of(session, benchmark.id)
        raise NotFound(f"benchmark {benchmark.name!r} has no scores under metric {metric!r}"
                       + (f"; its metrics: {', '.join(known)}" if known else ""),
                       [{"parameter": "metric", "detail": f"unknown metric {metric!r}"}])
    recent = session.scalars(
        select(Job).where(Job.kind == KIND, Job.benchmark_id == benchmark.id).order_by(Job.id.desc()).limit(50)
    )
    for job in recent:
        payload = job.payload or {}
        if payload.get("metric") != metric or payload.get("data_version") != benchmark.data_version:
            continue
        if job.status == "succeeded" and job.result and job.result.get("data_version") == benchmark.data_version:
            return job.result, job, False
        if job.status in ("queued", "running"):
            return None, job, False
    job = create_job(
        session, KIND,
        {"benchmark_id": benchmark.id, "metric": metric, "data_version": benchmark.data_version},
        benchmark_id=benchmark.id,
    )
    return None, job, True
