"""Pydantic pieces every domain's schemas share: name patterns, UTC timestamps, job references."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated

from pydantic import AfterValidator, BaseModel, PlainSerializer

NAME_PATTERN = r"^[^\x00-\x1f/]{1,200}$"
# Model names may hold '/' (Hugging Face ids such as "meta-llama/Llama-3-8B", which score uploads
# create); GET /v1/models/{model} takes them as a path. models.name is VARCHAR(300).
MODEL_NAME_PATTERN = r"^[^\x00-\x1f]{1,300}$"


def as_utc(value: datetime) -> datetime:
    """The same instant in UTC; a naive value (SQLite hands those back for
    ``DateTime(timezone=True)``) is UTC already."""
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def iso_utc(value: datetime | None) -> str | None:
    """ISO 8601 in UTC with a ``Z`` suffix (``2024-05-01T12:00:00.123456Z``), the one timestamp format."""
    return None if value is None else as_utc(value).isoformat().replace("+00:00", "Z")


UtcDatetime = Annotated[datetime, AfterValidator(as_utc), PlainSerializer(iso_utc, return_type=str)]


class JobRef(BaseModel):
    id: str
    status: str | None = None


class JobAccepted(BaseModel):
    job: JobRef
