"""A session's chart: its trajectory, the true score when known and the stop threshold.

Shared by ``GET /v1/sessions/{id}/plot.svg`` and the session page, so both show the same figure.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy.orm import Session

from evalplan import charts
from evalplan.benchmarks import service as benchmarks
from evalplan.benchmarks.repository import benchmark_by_id
from evalplan.core.sequential.interval_names import interval_label
from evalplan.db.models import EvalSession
from evalplan.sessions import views

DEFAULT_LEVEL = 0.95


def session_level(row: EvalSession) -> float:
    """The level of the session's ``ci`` (``stop.level`` or ``level`` when set, else 95%)."""
    config = row.config or {}
    return float(config.get("level") or (config.get("stop") or {}).get("level") or DEFAULT_LEVEL)


def trajectory_chart(session: Session, row: EvalSession) -> Any:
    """The trajectory chart; a multi-target session gets one panel per target."""
    rows = views.trajectory(session, row)
    truth = views.true_scores(session, row)
    threshold = views.stop_half_width(row)
    level = session_level(row)
    bench = benchmark_by_id(session, row.benchmark_id)
    benchmark = bench.name if bench is not None else row.benchmark_id
    score_range = (0.0, 1.0) if bench is None else benchmarks.score_range(bench)
    band = interval_label(level, row.method, row.config, multi_target=bool(row.targets))
    if not row.targets:
        return charts.session_trajectory(rows, level=level, true_score=truth.get(row.target or ""),
                                         stop_half_width=threshold, score_range=score_range, band_name=band,
                                         title=f"{row.target} on {benchmark}: estimate after each observation")
    panels = [charts.session_trajectory([r for r in rows if r["target"] == name], level=level,
                                        true_score=truth.get(name), stop_half_width=threshold,
                                        score_range=score_range, band_name=band,
                                        title=f"{name} on {benchmark}: estimate after each of its observations")
              for name in row.targets]
    return charts.combine(*panels)
