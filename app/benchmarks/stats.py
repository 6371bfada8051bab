"""The score-matrix validation and statistics job, and its cached result per data version."""

from __future__ import annotations

from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.core.score_stats import score_matrix_stats
from app.db.models import Benchmark, Job
from app.kit.jobs import JobContext, create_job, register
from app.benchmarks.service import get_benchmark
from app.benchmarks.scores import check_metric, matrix_for

KIND = "score_stats"


@register(KIND, queue="cpu")
def run_score_stats(ctx: JobContext) -> dict[str, Any]:
    """Load the matrix, then compute the statistics in ``app.core.score_stats``."""
    with ctx.session_factory() as session:
        benchmark = get_benchmark(session, ctx.payload["benchmark_id"])
        version = benchmark.data_version
        matrix = matrix_for(session, benchmark, ctx.payload["metric"])
    ctx.progress(0.5)
    stats = score_matrix_stats(matrix.values, matrix.model_names, matrix.item_ids)
    return {"benchmark": benchmark.name, "metric": ctx.payload["metric"], "data_version": version, **stats}


def stats_or_job(session: Session, benchmark: Benchmark, metric: str | None) -> tuple[dict[str, Any] | None, Job | None, bool]:
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
