"""Score-matrix statistics: the cached result of the ``score_stats`` job for the current data version, or a new job."""

from __future__ import annotations

from threading import Lock
from typing import Any

from cachetools import LRUCache
from sqlalchemy.orm import Session

from evalplan.benchmarks.score_matrix import load_matrix, metrics_of, models_with_scores
from evalplan.benchmarks.scores import check_metric
from evalplan.core.benchmarks.score_stats import score_matrix_stats
from evalplan.db.models import Benchmark, Job
from evalplan.kit.errors import NotFound
from evalplan.kit.jobs import create_job
from evalplan.kit.repository import recent_jobs

KIND = "score_stats"


def _has_metric(session: Session, benchmark: Benchmark, metric: str) -> bool:
    return bool(models_with_scores(session, benchmark.id, metric))


def stats_or_job(session: Session, benchmark: Benchmark, metric: str | None) -> tuple[dict[str, Any] | None,
                                                                                      Job | None, bool]:
    """Return (stats, None, False) if fresh stats exist, else (None, job, created)."""
    metric = check_metric(metric or benchmark.default_metric)
    stats, job = find_stats(session, benchmark, metric)
    if stats is not None or job is not None:
        return stats, job, False
    computed = memoized_stats(benchmark, metric)  # a page computed them inline for this data version
    if computed is not None:
        return computed, None, False
    return None, new_stats_job(session, benchmark, metric), True


def new_stats_job(session: Session, benchmark: Benchmark, metric: str) -> Job:
    """Add a queued ``score_stats`` job for the benchmark's current data (dispatch it after commit)."""
    return create_job(
        session, KIND,
        {"benchmark_id": benchmark.id, "metric": metric, "data_version": benchmark.data_version},
        benchmark_id=benchmark.id,
    )


def find_stats(session: Session, benchmark: Benchmark, metric: str | None) -> tuple[dict[str, Any] | None,
                                                                                   Job | None]:
    """Read only: (stats, their job) when fresh statistics exist, (None, job) while a job for the current data
    is queued or running, else (None, None). 404 for a named metric the benchmark has no scores under."""
    given = metric is not None and metric != benchmark.default_metric
    metric = check_metric(metric or benchmark.default_metric)
    if given and not _has_metric(session, benchmark, metric):
        known = metrics_of(session, benchmark.id)
        raise NotFound(f"benchmark {benchmark.name!r} has no scores under metric {metric!r}"
                       + (f"; its metrics: {', '.join(known)}" if known else ""),
                       [{"parameter": "metric", "detail": f"unknown metric {metric!r}"}])
    for job in recent_jobs(session, KIND, 50, benchmark_id=benchmark.id):
        payload = job.payload or {}
        if payload.get("metric") != metric or payload.get("data_version") != benchmark.data_version:
            continue
        if job.status == "succeeded" and job.result and job.result.get("data_version") == benchmark.data_version:
            return job.result, job
        if job.status in ("queued", "running"):
            return None, job
    return None, None


def _inline_key(benchmark: Benchmark, metric: str) -> tuple[str, int, str]:
    return benchmark.id, int(benchmark.data_version or 0), metric


def memoized_stats(benchmark: Benchmark, metric: str) -> dict[str, Any] | None:
    """The statistics a page computed inline for the benchmark's current data version, if this process has them."""
    key = _inline_key(benchmark, metric)
    with _INLINE_LOCK:
        return _INLINE.get(key)


def inline_stats(session: Session, benchmark: Benchmark, metric: str) -> dict[str, Any]:
    """The ``score_stats`` job's result computed now (a small matrix; the benchmark page), without any write:
    memoized per (benchmark, data version, metric) in this process."""
    key = _inline_key(benchmark, metric)
    with _INLINE_LOCK:
        cached = _INLINE.get(key)
    if cached is not None:
        return cached
    matrix = load_matrix(session, benchmark, metric)
    result = {"benchmark": benchmark.name, "metric": metric, "data_version": benchmark.data_version,
              **score_matrix_stats(matrix.values, matrix.model_names, matrix.item_ids)}
    with _INLINE_LOCK:
        _INLINE[key] = result
    return result


_INLINE: LRUCache[tuple[str, int, str], dict[str, Any]] = LRUCache(maxsize=32)
_INLINE_LOCK = Lock()
