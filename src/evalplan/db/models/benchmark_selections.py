"""The table of ``evalplan.benchmark_selections``."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import (
    JSON,
    DateTime,
    Float,
    Integer,
    String,
)
from sqlalchemy.orm import Mapped, mapped_column

from evalplan.db.ids import new_id
from evalplan.db.models.base import Base, TeamOwned, utcnow


class BenchmarkSelection(TeamOwned, Base):
    """A benchmark-level selection (paper 000 §4.4) and its Gaussian imputation model (eq. 8).

    ``benchmark_names`` are the matrix columns in order; ``mean``/``scale`` (per column) and ``cov``
    (B x B, the correlation matrix of the standardized training scores) are what ``predict`` needs.
    ``selected`` lists names in greedy order with their ``gains``. ``diagnostics`` holds the residual
    variance fraction (eqs. 10-11), the test R^2 (eq. 9) when a test split was asked for, and the split.
    """

    __tablename__ = "benchmark_selections"

    id: Mapped[str] = mapped_column(String(40), primary_key=True, default=lambda: new_id("bs"))
    method: Mapped[str] = mapped_column(String(40), nullable=False)
    k: Mapped[int] = mapped_column(Integer, nullable=False)
    seed: Mapped[int] = mapped_column(Integer, default=0, nullable=False)
    source: Mapped[str] = mapped_column(String(20), nullable=False)  # "matrix" | "benchmarks"
    metric: Mapped[str | None] = mapped_column(String(200))
    benchmark_names: Mapped[list[str]] = mapped_column(JSON, nullable=False)
    selected: Mapped[list[str]] = mapped_column(JSON, nullable=False)
    gains: Mapped[list[float | None]] = mapped_column(JSON, nullable=False)
    mean: Mapped[list[float]] = mapped_column(JSON, nullable=False)
    scale: Mapped[list[float]] = mapped_column(JSON, nullable=False)
    cov: Mapped[list[list[float]]] = mapped_column(JSON, nullable=False)
    ridge: Mapped[float] = mapped_column(Float, nullable=False)
    n_models: Mapped[int] = mapped_column(Integer, nullable=False)
    test_fraction: Mapped[float] = mapped_column(Float, default=0.0, nullable=False)
    diagnostics: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict, nullable=False)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
