"""Response models of ``POST /v1/imports/lm-eval``."""

from __future__ import annotations

from pydantic import BaseModel


class ImportedTask(BaseModel):
    """One imported task (file): its benchmark and what was stored."""

    task: str
    benchmark: str
    benchmark_id: str
    benchmark_created: bool
    metric: str
    filter: str | None
    n_items: int
    items_created: int
    items_updated: int
    n_scores: int
    mean_score: float | None


class ImportSummary(BaseModel):
    model: str
    model_id: str
    benchmarks: list[ImportedTask]
