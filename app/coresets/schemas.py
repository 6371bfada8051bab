"""Request/response models of the Static coresets section of API.md."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field


class CoresetCreate(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str | None = Field(None, pattern=r"^[^\x00-\x1f]{1,200}$", description="Shared name; each create adds a version.")
    method: str = Field(description="text: facility_location, random, stratified_random, dpp, k_center, k_means; "
                        "score-based: mrmr, anchor_points, irt, lasso, random_search, hardness, pbsc; repcore")
    benchmarks: list[str] = Field(min_length=1, description="Benchmark names or ids.")
    budget: int | dict[str, float] = Field(description='Total item count, or {"fraction": f} of each benchmark.')
    reference_models: list[str] | Literal["all"] | None = Field(
        None, description="Reference (calibration) models; for facility_location they tune alpha (papers/000 §4.1).")
    predictor: str | None = None
    params: dict[str, Any] = Field(default_factory=dict)
    seed: int = 0
    embedding_model: str | None = Field(None, description="Default: EVALPLAN_EMBEDDING_MODEL.")


class ScoreIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    benchmark: str
    item: str
    score: float


class PredictRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    model: str | None = Field(None, description="The target model; without `scores`, its stored scores are used.")
    scores: list[ScoreIn] | None = None
    level: float | None = Field(
        None, gt=0, lt=1, description="Interval level; default 0.95 (text and repcore coresets), 0.9 (score-based).")
