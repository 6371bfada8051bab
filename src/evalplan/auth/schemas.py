"""Request/response models of ``/v1/teams`` and ``/v1/audit``."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from evalplan.kit.schemas import NAME_PATTERN, UtcDatetime

Scope = Literal["read", "write", "admin"]


class TeamCreate(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(pattern=NAME_PATTERN, description="Unique team name (no '/').")


class TeamOut(BaseModel):
    id: str
    name: str
    created_at: UtcDatetime | None = None


class TeamList(BaseModel):
    items: list[TeamOut]
    next_cursor: str | None = None


class TokenCreate(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1, max_length=200, description="What the token is for; recorded as `created_by`.")
    scopes: list[Scope] = Field(min_length=1, description="admin includes write, which includes read.")
    expires_at: UtcDatetime | None = Field(None, description="After this instant the token answers 401.")


class TokenOut(BaseModel):
    id: str
    name: str
    team: str
    scopes: list[str]
    expires_at: UtcDatetime | None = None
    revoked_at: UtcDatetime | None = None
    created_at: UtcDatetime | None = None


class TokenCreated(TokenOut):
    token: str = Field(description="The secret: shown only in this response, stored only as a hash.")


class TokenList(BaseModel):
    items: list[TokenOut]
    next_cursor: str | None = None


class AuditOut(BaseModel):
    id: int
    team: str
    actor: str
    token_id: str | None
    action: str
    resource_type: str
    resource_id: str
    detail: dict[str, Any]
    created_at: UtcDatetime


class AuditList(BaseModel):
    items: list[AuditOut]
    next_cursor: str | None
