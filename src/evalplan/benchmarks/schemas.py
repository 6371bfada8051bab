"""Request/response models of benchmarks, their items and their scores (API.md "Data")."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

from evalplan.kit.schemas import NAME_PATTERN, RequestModel, UtcDatetime, Visibility


class BenchmarkCreate(RequestModel):

    name: str = Field(pattern=NAME_PATTERN, description="Unique name (no '/' or control characters).")
    capability: str | None = Field(None, max_length=200)
    description: str | None = None
    embedding_fields: list[str] = Field(default_factory=list,
                                        description="Item `fields` keys appended to the embedding text.")
    score_kind: Literal["binary", "continuous"] = "continuous"
    score_min: float | None = Field(0.0, description="Lowest valid score (continuous); null = unbounded.")
    score_max: float | None = Field(1.0, description="Highest valid score (continuous); null = unbounded.")
    default_metric: str = Field("score", pattern=r"^[A-Za-z0-9_.,:@/+\-]{1,200}$")
    visibility: Visibility = "private"


class BenchmarkOut(BaseModel):
    id: str
    name: str
    capability: str | None
    description: str | None
    embedding_fields: list[str]
    score_kind: str
    score_min: float | None
    score_max: float | None
    default_metric: str
    data_version: int
    n_items: int
    n_models: int
    created_at: UtcDatetime
    team: str | None = Field(None, description="The owning team's name.")
    visibility: str = Field("private", description="private (the owning team only) or public (every team).")


class BenchmarkList(BaseModel):
    items: list[BenchmarkOut]
    next_cursor: str | None


class ItemOut(BaseModel):
    id: str
    prompt: str | None
    target: str | None
    fields: dict[str, Any] | None
    source_index: int | None
    content_hash: str | None


class ItemList(BaseModel):
    items: list[ItemOut]
    next_cursor: str | None


class ResponseOut(BaseModel):
    """What one model answered on the item, as its harness import logged it (docs/INTEROP.md "Model responses")."""

    model: str
    model_id: str
    response: str = Field(description="The model's output (at most 20,000 characters; see `truncated`).")
    truncated: bool = Field(description="True when the logged response was longer and `response` holds its start.")
    n_chars: int = Field(description="The length of the logged response, in characters.")
    source: str = Field(description="The import it came from: lm_eval, inspect_ai, helm or lighteval.")
    extra: dict[str, Any] | None = Field(description="What else the log says about it: e.g. the filtered answer, "
                                                     "the scorer's answer and explanation, log-likelihoods.")
    created_at: UtcDatetime
    updated_at: UtcDatetime = Field(description="When an import last wrote it (a re-import replaces it).")


class ResponseList(BaseModel):
    benchmark: str
    item: str
    items: list[ResponseOut]
    next_cursor: str | None


class ItemUploadResult(BaseModel):
    created: int
    updated: int
    unchanged: int


class ScoreUploadResult(BaseModel):
    n_scores: int
    n_models: int
    n_items: int
    metric: str


class ScoreCell(BaseModel):
    model: str
    item: str
    score: float


class ScoreList(BaseModel):
    items: list[ScoreCell]
    next_cursor: str | None


class ModelStats(BaseModel):
    model: str
    mean: float | None
    n_scores: int
    missing_fraction: float


class ItemStats(BaseModel):
    item: str
    mean: float | None
    n_scores: int
    missing_fraction: float


class ConstantItem(BaseModel):
    item: str
    value: float
    n_observed: int


class ScoreStats(BaseModel):
    """``GET /v1/benchmarks/{benchmark}/stats``: validation and statistics of one metric's score matrix."""

    benchmark: str
    metric: str
    data_version: int
    n_models: int
    n_items: int
    n_scores: int
    missing_fraction: float
    mean: float | None
    models: list[ModelStats]
    items: list[ItemStats]
    constant_items: list[ConstantItem]
    duplicate_models: list[list[str]]
