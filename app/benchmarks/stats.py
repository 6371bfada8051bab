"""Score-matrix statistics: the cached result of the ``score_stats`` job for the current data version, or a new job."""

from __future__ import annotations

from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.benchmarks.scores import check_metric
from app.db.models import Benchmark, Job
from app.kit.jobs import create_job

KIND = "score_stats"


def stats_or_job(session: Session, benchmark: Benchmark, metric: str | None) -> tuple[dict[str, Any] | None,
                                                                                      Job | None, bool]:
    """Return (stats, None, False) if fresh stats exist, else (None, job, created)."""
    metric = check_metric(metric or benchmark.default_metric)
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
