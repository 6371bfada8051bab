"""Request/response models of the Data section of API.md."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field

NAME_PATTERN = r"^[^\x00-\x1f/]{1,200}$"
# Model names may hold '/' (Hugging Face ids such as "meta-llama/Llama-3-8B", which score uploads
# create); GET /v1/models/{model} takes them as a path. models.name is VARCHAR(300).
MODEL_NAME_PATTERN = r"^[^\x00-\x1f]{1,300}$"


def _as_utc(value: datetime) -> datetime:
    """SQLite hands back naive datetimes for ``DateTime(timezone=True)``; they are UTC."""
    return value.replace(tzinfo=timezone.utc) if value.tzinfo is None else value


UtcDatetime = Annotated[datetime, AfterValidator(_as_utc)]


class BenchmarkCreate(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(pattern=NAME_PATTERN, description="Unique name (no '/' or control characters).")
    capability: str | None = Field(None, max_length=200)
    description: str | None = None
    embedding_fields: list[str] = Field(default_factory=list, description="Item `fields` keys appended to the embedding text.")
    score_kind: Literal["binary", "continuous"] = "continuous"
    score_min: float | None = Field(0.0, description="Lowest valid score (continuous); null = unbounded.")
    score_max: float | None = Field(1.0, description="Highest valid score (continuous); null = unbounded.")
    default_metric: str = Field("score", pattern=r"^[A-Za-z0-9_.,:@/+\-]{1,200}$")


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


class ModelCreate(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(pattern=MODEL_NAME_PATTERN)
    family: str | None = Field(None, max_length=200)
    metadata: dict[str, Any] = Field(default_factory=dict)


class ModelOut(BaseModel):
    id: str
    name: str
    family: str | None
    metadata: dict[str, Any]
    created_at: UtcDatetime


class ModelList(BaseModel):
    items: list[ModelOut]
    next_cursor: str | None


class JobRef(BaseModel):
    id: str
    status: str | None = None


class JobOut(BaseModel):
    id: str
    kind: str
    queue: str
    status: str
    progress: float
    result: Any | None
    error: dict[str, Any] | None
    attempts: int
    created_at: UtcDatetime
    started_at: UtcDatetime | None
    finished_at: UtcDatetime | None


class JobList(BaseModel):
    items: list[JobOut]
    next_cursor: str | None


class JobAccepted(BaseModel):
    job: JobRef
