"""Request/response models of ``/v1/models``."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

from app.kit.schemas import MODEL_NAME_PATTERN, RequestModel, UtcDatetime


class ModelCreate(RequestModel):

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
