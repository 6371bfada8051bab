"""Request/response models of ``/v1/models``."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

from evalplan.kit.schemas import MODEL_NAME_PATTERN, RequestModel, UtcDatetime, Visibility


class ModelCreate(RequestModel):

    name: str = Field(pattern=MODEL_NAME_PATTERN)
    family: str | None = Field(None, max_length=200)
    metadata: dict[str, Any] = Field(default_factory=dict)
    visibility: Visibility = "private"


class ModelOut(BaseModel):
    id: str
    name: str
    family: str | None
    metadata: dict[str, Any]
    created_at: UtcDatetime
    team: str | None = Field(None, description="The owning team's name.")
    visibility: str = Field("private", description="private (the owning team only) or public (every team).")


class ModelList(BaseModel):
    items: list[ModelOut]
    next_cursor: str | None
