"""Teams, tokens and the audit log (``/v1/teams``, ``/v1/audit``); all need the ``admin`` scope."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query
from fastapi.responses import Response
from sqlalchemy import select

from evalplan.auth import deletion as team_deletion
from evalplan.auth import teams as team_service
from evalplan.auth.caller import SCOPE_EXTRA, CurrentCaller
from evalplan.auth.deps import DbSession
from evalplan.auth.schemas import (
    AuditList,
    AuditOut,
    TeamCreate,
    TeamList,
    TeamOut,
    TokenCreate,
    TokenCreated,
    TokenList,
    TokenOut,
)
from evalplan.db.models import ApiToken, Team
from evalplan.kit.deps import Pagination
from evalplan.kit.errors import Forbidden

router = APIRouter(prefix="/v1", tags=["teams"])
ADMIN = {SCOPE_EXTRA: "admin"}


def token_out(token: ApiToken, team: str) -> TokenOut:
    return TokenOut(id=token.id, name=token.name, team=team, scopes=list(token.scopes), expires_at=token.expires_at,
                    revoked_at=token.revoked_at, created_at=token.created_at)


@router.post("/teams", status_code=201, response_model=TeamOut, openapi_extra=ADMIN)
def create_team(body: TeamCreate, session: DbSession, caller: CurrentCaller) -> TeamOut:
    """Create a team (the bootstrap admin token, or anyone with EVALPLAN_AUTH=off)."""
    if not caller.superuser:
        raise Forbidden("only the bootstrap admin token (EVALPLAN_ADMIN_TOKEN) creates teams",
                        [{"header": "Authorization", "detail": "a team token cannot create teams"}])
    team = team_service.create_team(session, body.name)
    session.commit()
    return TeamOut(id=team.id, name=team.name, created_at=team.created_at)


@router.delete("/teams/{team}", status_code=204, response_class=Response, openapi_extra=ADMIN)
def delete_team(team: str, session: DbSession, caller: CurrentCaller) -> Response:
    """Delete a team with everything it owns, all or nothing (the bootstrap admin only; audited). 409,
    naming the blockers, while it owns a published coreset, another team builds on its data, or one of
    its jobs is queued or running; the built-in team `local` is never deleted."""
    team_deletion.write_first(session)
    row = team_service.get_team(session, team, caller)
    if not caller.superuser:
        raise Forbidden("only the bootstrap admin token (EVALPLAN_ADMIN_TOKEN) deletes teams",
                        [{"header": "Authorization", "detail": "a team token cannot delete teams"}])
    team_deletion.delete_team(session, row)
    session.commit()
    return Response(status_code=204)


@router.get("/teams", response_model=TeamList, openapi_extra=ADMIN)
def list_teams(session: DbSession, caller: CurrentCaller) -> TeamList:
    """Every team for the bootstrap admin; the caller's own team otherwise."""
    stmt = select(Team).order_by(Team.name)
    if not caller.superuser:
        stmt = stmt.where(Team.id == caller.team_id)
    return TeamList(items=[TeamOut(id=t.id, name=t.name, created_at=t.created_at) for t in session.scalars(stmt)])


@router.post("/teams/{team}/tokens", status_code=201, response_model=TokenCreated, openapi_extra=ADMIN)
def create_token(team: str, body: TokenCreate, session: DbSession, caller: CurrentCaller) -> TokenCreated:
    """A new token of the team; the secret `token` appears only in this response."""
    row = team_service.get_team(session, team, caller)
    token, secret = team_service.create_token(session, row, name=body.name, scopes=list(body.scopes),
                                              expires_at=body.expires_at)
    session.commit()
    return TokenCreated(**token_out(token, row.name).model_dump(), token=secret)


@router.get("/teams/{team}/tokens", response_model=TokenList, openapi_extra=ADMIN)
def list_tokens(team: str, session: DbSession, caller: CurrentCaller) -> TokenList:
    """The team's tokens (never their secrets)."""
    row = team_service.get_team(session, team, caller)
    return TokenList(items=[token_out(t, row.name) for t in team_service.list_tokens(session, row)])


@router.delete("/teams/{team}/tokens/{token_id}", status_code=204, response_class=Response, openapi_extra=ADMIN)
def revoke_token(team: str, token_id: str, session: DbSession, caller: CurrentCaller) -> Response:
    """Revoke a token: it answers 401 from then on."""
    row = team_service.get_team(session, team, caller)
    team_service.revoke_token(session, row, token_id)
    session.commit()
    return Response(status_code=204)


@router.get("/audit", response_model=AuditList, openapi_extra=ADMIN)
def read_audit(session: DbSession, caller: CurrentCaller, page: Pagination,
               team: Annotated[str | None, Query(description="Another team (bootstrap admin only).")] = None
               ) -> AuditList:
    """The team's audit log, newest first: who created, published, deprecated, changed the visibility of,
    or deleted what."""
    team_id = team_service.get_team(session, team, caller).id if team is not None else caller.team_id
    result = team_service.list_audit(session, team_id, limit=page.limit, cursor=page.cursor)
    names = team_service.team_names(session, {e.team_id for e in result.items})
    return AuditList(items=[AuditOut(id=e.pk, team=names[e.team_id], actor=e.actor, token_id=e.token_id,
                                     action=e.action, resource_type=e.resource_type, resource_id=e.resource_id,
                                     detail=e.detail or {}, created_at=e.created_at) for e in result.items],
                     next_cursor=result.next_cursor)
