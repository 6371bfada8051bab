"""Pydantic pieces every domain's schemas share: name patterns, UTC timestamps, job references."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, PlainSerializer

from evalplan.kit.text_rules import name_char_problem

NAME_PATTERN = r"^[^\x00-\x1f/]{1,200}$"
# Model names may hold '/' (Hugging Face ids such as "meta-llama/Llama-3-8B", which score uploads
# create); GET /v1/models/{model} takes them as a path. models.name is VARCHAR(300).
MODEL_NAME_PATTERN = r"^[^\x00-\x1f]{1,300}$"



def _name_text(value: str) -> str:
    reason = name_char_problem(value)
    if reason:
        raise ValueError(reason)
    return value


#: a name given in a request (a session target): no control, format, surrogate or separator character
#: (``evalplan.kit.text_rules``, the rule of every name; 422 located at the field)
NameText = Annotated[str, AfterValidator(_name_text)]

#: a random seed: what numpy's generators accept (0 to 2**32 - 1)
Seed = Annotated[int, Field(ge=0, le=2**32 - 1, description="Random seed, 0 to 2**32 - 1.")]
#: the cap of request counts and sizes with no natural bound (window, max_items, ...)
MAX_COUNT = 1_000_000


def as_utc(value: datetime) -> datetime:
    """The same instant in UTC; a naive value (SQLite hands those back for
    ``DateTime(timezone=True)``) is UTC already."""
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def iso_utc(value: datetime | None) -> str | None:
    """ISO 8601 in UTC with a ``Z`` suffix (``2024-05-01T12:00:00.123456Z``), the one timestamp format."""
    return None if value is None else as_utc(value).isoformat().replace("+00:00", "Z")


UtcDatetime = Annotated[datetime, AfterValidator(as_utc), PlainSerializer(iso_utc, return_type=str)]


class RequestModel(BaseModel):
    """Base of every JSON request body: unknown fields refused, and strict types, so ``true`` is not a
    number, ``1.0`` not an integer and ``5`` not a string (an integer still passes as a float).

    Non-finite numbers, NUL characters, integers past 64 bits and deep nesting are refused before
    validation, for every body, by :mod:`evalplan.kit.input_guard`."""

    model_config = ConfigDict(extra="forbid", strict=True)


class JobRef(BaseModel):
    id: str
    status: str | None = None


class JobAccepted(BaseModel):
    job: JobRef


Visibility = Literal["private", "public"]
"""``private`` (the default): the owning team only; ``public``: readable by every team (API.md "Teams and tokens")."""


class VisibilityPatch(BaseModel):
    """``PATCH`` body of a team-owned resource: change its visibility (audited)."""

    model_config = ConfigDict(extra="forbid")

    visibility: Visibility
