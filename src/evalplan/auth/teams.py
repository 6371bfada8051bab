"""Teams and tokens: create a team, issue a token (shown once), revoke it, read the audit log.

Tokens are ``evp_`` + 43 url-safe characters of ``secrets.token_urlsafe(32)`` (256 random bits);
only their sha256 is stored (``evalplan.auth.caller.hash_token``).
"""

from __future__ import annotations

import secrets
from datetime import datetime

from sqlalchemy import or_, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from evalplan.auth.audit import record
from evalplan.auth.caller import SCOPES, Caller, hash_token
from evalplan.auth.names import text_problem
from evalplan.auth.scoping import unscoped
from evalplan.db.models import ApiToken, AuditEntry, Benchmark, Model, Team, utcnow
from evalplan.kit.errors import Conflict, InvalidInput, NotFound
from evalplan.kit.pagination import Page, keyset_page
from evalplan.kit.schemas import as_utc

TOKEN_PREFIX = "evp_"


def new_secret() -> str:
    return TOKEN_PREFIX + secrets.token_urlsafe(32)


def team_names(session: Session, team_ids: set[str]) -> dict[str, str]:
    """Team id -> name (cached on the session)."""
    cache: dict[str, str] = session.info.setdefault("evalplan.team_names", {})
    missing = [t for t in team_ids if t not in cache]
    if missing:
        cache.update(session.execute(select(Team.id, Team.name).where(Team.id.in_(missing))).all())
    return {t: cache.get(t, t) for t in team_ids}


def team_name(session: Session, team_id: str) -> str:
    return team_names(session, {team_id})[team_id]


def names_under(session: Session, team_name: str, limit: int = 5) -> list[str]:
    """Benchmark and model names of any team that start with ``team_name/`` (they would read as that team's)."""
    pattern = team_name.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "/%"
    found: list[str] = []
    with unscoped(session):
        for cls in (Benchmark, Model):
            found += session.scalars(select(cls.name).where(cls.name.like(pattern, escape="\\")).limit(limit))
    return sorted(found)[:limit]


def create_team(session: Session, name: str) -> Team:
    reason = text_problem(name, "team")
    if reason:
        raise InvalidInput(f"invalid team name in field 'name': {reason}", [{"field": "name", "detail": reason}])
    if session.scalars(select(Team).where(Team.name == name)).first() is not None:
        raise Conflict(f"a team named {name!r} already exists", [{"field": "name", "detail": "team names are unique"}])
    taken = names_under(session, name)
    if taken:
        raise Conflict(f"existing names start with {name + '/'!r} ({', '.join(taken)}): a team of that name would "
                       "make them read as its own (team/name); choose another team name",
                       [{"field": "name", "detail": f"{len(taken)}+ benchmark or model names start with {name}/"}])
    team = Team(name=name)
    session.add(team)
    try:
        session.flush()
    except IntegrityError:
        raise Conflict(f"a team named {name!r} already exists",
                       [{"field": "name", "detail": "team names are unique"}]) from None
    record(session, "create", "team", team.id, team_id=team.id, name=name)
    return team


def get_team(session: Session, ref: str, caller: Caller) -> Team:
    """The team ``ref`` (id or name) that ``caller`` may manage: its own, or any for the superuser; else 404."""
    team = session.scalars(select(Team).where(or_(Team.id == ref, Team.name == ref))).first()
    if team is None or (not caller.superuser and team.id != caller.team_id):
        raise NotFound(f"team {ref!r} does not exist", [{"parameter": "team", "detail": f"no team {ref!r}"}])
    return team


def create_token(session: Session, team: Team, *, name: str, scopes: list[str],
                 expires_at: datetime | None = None) -> tuple[ApiToken, str]:
    """A new token of ``team``; returns the row and the secret (never stored, shown once)."""
    unknown = [s for s in scopes if s not in SCOPES]
    if not scopes or unknown:
        raise InvalidInput("scopes must be a non-empty list of read, write, admin",
                           [{"field": "scopes", "detail": f"unknown {unknown}" if unknown else "empty"}])
    if expires_at is not None and as_utc(expires_at) <= utcnow():
        raise InvalidInput("expires_at is in the past", [{"field": "expires_at", "detail": expires_at.isoformat()}])
    secret = new_secret()
    token = ApiToken(team_id=team.id, name=name, token_hash=hash_token(secret), scopes=sorted(set(scopes)),
                     expires_at=expires_at)
    session.add(token)
    session.flush()
    record(session, "create", "token", token.id, team_id=team.id, name=name, scopes=token.scopes)
    return token, secret


def revoke_token(session: Session, team: Team, token_id: str) -> None:
    token = session.scalars(select(ApiToken).where(ApiToken.id == token_id, ApiToken.team_id == team.id)).first()
    if token is None:
        raise NotFound(f"token {token_id!r} does not exist", [{"parameter": "token_id", "detail": "no such token"}])
    if token.revoked_at is None:
        token.revoked_at = utcnow()
        record(session, "revoke", "token", token.id, team_id=team.id, name=token.name)
    session.flush()


def list_tokens(session: Session, team: Team) -> list[ApiToken]:
    return list(session.scalars(select(ApiToken).where(ApiToken.team_id == team.id).order_by(ApiToken.id)))


def list_audit(session: Session, team_id: str, *, limit: int, cursor: str | None) -> Page[AuditEntry]:
    stmt = select(AuditEntry).where(AuditEntry.team_id == team_id)
    return keyset_page(session, stmt, AuditEntry.pk, limit=limit, cursor=cursor, what="audit entry", descending=True)
