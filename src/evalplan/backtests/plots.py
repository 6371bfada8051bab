"""A backtest job's chart and table: RMSE and coverage vs budget per method (papers/002 §3).

Shared by ``GET /v1/jobs/{id}/plot.svg`` and the backtest job page.
"""

from __future__ import annotations

from typing import Any

from evalplan import charts
from evalplan.backtests.service import KIND
from evalplan.core.backtest.backtest import summarize
from evalplan.core.sequential.stopping import DEFAULT_LEVEL
from evalplan.db.models import Job

TABLE_METRICS = ("rmse", "mae", "spearman", "kendall", "coverage", "interval_width", "seconds")


def is_backtest(job: Job) -> bool:
    return job.kind == KIND


def _level(job: Job) -> float:
    return float((job.payload or {}).get("level") or DEFAULT_LEVEL)


def backtest_chart(job: Job) -> Any:
    rows = (job.result or {}).get("rows") or []
    return charts.backtest_curves(rows, level=_level(job))


def backtest_summary(job: Job) -> list[dict[str, Any]]:
    """Mean and standard error over seeds per (benchmark, method, predictor, budget), as
    :func:`evalplan.core.backtest.backtest.summarize` computes them, benchmark by benchmark."""
    rows = (job.result or {}).get("rows") or []
    out: list[dict[str, Any]] = []
    for benchmark in dict.fromkeys(r.get("benchmark") for r in rows):
        part = [r for r in rows if r.get("benchmark") == benchmark]
        out += [{"benchmark": benchmark, **d} for d in summarize(part, TABLE_METRICS)]
    return out
