"""Who is calling: authentication (API.md "Teams and tokens") and the :class:`Caller` of a request.

* ``EVALPLAN_AUTH=off`` (the embedded default): every request is the built-in team ``local`` with
  every scope, and may manage every team.
* ``EVALPLAN_AUTH=required``: ``Authorization: Bearer <token>`` (or the ``evalplan_token`` cookie
  that ``/ui/login`` sets for the pages). A missing, unknown, revoked or expired token is 401 with
  ``WWW-Authenticate: Bearer``; a missing scope is 403; more than ``auth_failures_per_minute`` failed
  attempts from one client address in a minute is 429. ``EVALPLAN_ADMIN_TOKEN`` is an admin of
  every team (it acts as team ``local`` for data). Tokens are stored as sha256 only
  (``app.teams.tokens``); the bootstrap token is compared in constant time.

Scopes are ordered: ``admin`` includes ``write``, which includes ``read``. A route needs ``read``
for GET/HEAD, else ``write``; a route overrides that with ``openapi_extra={"x-evalplan-scope": s}``
(``read`` for POST routes that store nothing, such as predict; ``admin`` for token management).
``authenticate`` runs once per request (installed on every ``/v1`` router and inside ``DbSession``).
"""

from __future__ import annotations

import hashlib
import hmac
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Annotated, Any

from fastapi import Depends, Request
from sqlalchemy import select

from app.db.models import ApiToken, Team
from app.kit.errors import Forbidden, TooManyRequests, Unauthorized

__all__ = ["Caller", "CurrentCaller", "Unauthorized", "authenticate", "token_caller"]

LOCAL_TEAM = "local"
LOCAL_TEAM_ID = "local"
SCOPES = ("read", "write", "admin")
TOKEN_COOKIE = "evalplan_token"
SCOPE_EXTRA = "x-evalplan-scope"
_IMPLIES = {"admin": {"admin", "write", "read"}, "write": {"write", "read"}, "read": {"read"}}


def expand_scopes(scopes: Any) -> frozenset[str]:
    """The scopes a token's list grants (``admin`` > ``write`` > ``read``)."""
    granted: set[str] = set()
    for scope in scopes or []:
        granted |= _IMPLIES.get(str(scope), set())
    return frozenset(granted)


@dataclass(frozen=True)
class Caller:
    """The authenticated principal of a request: its team, token and scopes.

    ``superuser`` is the bootstrap admin (``EVALPLAN_ADMIN_TOKEN``) or anyone with ``EVALPLAN_AUTH=off``:
    it may create teams and manage any team's tokens.
    """

    team: str = LOCAL_TEAM
    token_id: str | None = None
    scopes: frozenset[str] = field(default_factory=lambda: frozenset(SCOPES))
    team_id: str = LOCAL_TEAM_ID
    actor: str = LOCAL_TEAM
    superuser: bool = False

    def has(self, scope: str) -> bool:
        return scope in self.scopes


LOCAL_CALLER = Caller(superuser=True)
ADMIN_CALLER = Caller(actor="admin", superuser=True)


def hash_token(token: str) -> str:
    """The stored form of a token: sha256 hex (tokens are 256-bit random, so no salt or KDF is needed)."""
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


class FailureLimiter:
    """Failed authentication attempts per client address over a sliding minute (one process's view)."""

    def __init__(self, per_minute: int) -> None:
        self.per_minute = per_minute
        self._seen: dict[str, deque[float]] = {}
        self._lock = threading.Lock()

    def _recent(self, address: str, now: float) -> deque[float]:
        attempts = self._seen.setdefault(address, deque())
        while attempts and attempts[0] <= now - 60.0:
            attempts.popleft()
        return attempts

    def check(self, address: str) -> None:
        with self._lock:
            now = time.monotonic()
            attempts = self._recent(address, now)
            if len(attempts) >= self.per_minute:
                retry = max(1, int(60.0 - (now - attempts[0])) + 1)
                raise TooManyRequests(f"too many failed authentication attempts from {address}; retry later",
                                      [{"header": "Authorization", "detail": f"retry after {retry} s"}],
                                      headers={"Retry-After": str(retry)})

    def fail(self, address: str) -> None:
        with self._lock:
            self._recent(address, time.monotonic()).append(time.monotonic())
            if len(self._seen) > 10_000:  # bound the memory an address sweep can take
                self._seen = {a: d for a, d in self._seen.items() if d}


def _challenge(detail: str, error: str = "invalid_token") -> Unauthorized:
    return Unauthorized(detail, [{"header": "Authorization", "detail": "send 'Authorization: Bearer <token>'"}],
                        headers={"WWW-Authenticate": f'Bearer realm="evalplan", error="{error}"'})


def _presented_token(request: Request) -> str | None:
    header = request.headers.get("authorization")
    if header is not None:
        scheme, _, value = header.partition(" ")
        if scheme.lower() != "bearer" or not value.strip():
            return ""
        return value.strip()
    return request.cookies.get(TOKEN_COOKIE)


def required_scope(request: Request) -> str:
    route = request.scope.get("route")
    extra = getattr(route, "openapi_extra", None) or {}
    if SCOPE_EXTRA in extra:
        return str(extra[SCOPE_EXTRA])
    return "read" if request.method in ("GET", "HEAD", "OPTIONS") else "write"


def _limiter(request: Request) -> FailureLimiter:
    state = request.app.state
    limiter = getattr(state, "auth_limiter", None)
    if limiter is None:
        limiter = state.auth_limiter = FailureLimiter(state.settings.auth_failures_per_minute)
    return limiter


def lookup_token(request: Request, token: str) -> Caller | None:
    """The caller a team token stands for, or None when it is unknown, revoked or expired."""
    digest = hash_token(token)
    with request.app.state.session_factory() as session:
        row = session.execute(select(ApiToken, Team.name).join(Team, Team.id == ApiToken.team_id)
                              .where(ApiToken.token_hash == digest)).first()
        if row is None:
            return None
        stored, team_name = row
        if not hmac.compare_digest(stored.token_hash, digest) or stored.revoked_at is not None:
            return None
        if stored.expires_at is not None:
            expires = stored.expires_at if stored.expires_at.tzinfo else stored.expires_at.replace(tzinfo=UTC)
            if expires <= datetime.now(UTC):
                return None
        return Caller(team=team_name, token_id=stored.id, scopes=expand_scopes(stored.scopes), team_id=stored.team_id,
                      actor=stored.name)


def authenticate(request: Request) -> Caller:
    """The request's caller (see the module docstring); cached on ``request.state``."""
    cached = getattr(request.state, "caller", None)
    if isinstance(cached, Caller):
        caller = cached
    else:
        caller = _authenticate(request)
        request.state.caller = caller
    scope = required_scope(request)
    if not caller.has(scope):
        raise Forbidden(f"this route needs the {scope!r} scope; the token has {sorted(caller.scopes)}",
                        [{"header": "Authorization", "detail": f"missing scope {scope!r}"}])
    return caller


def _authenticate(request: Request) -> Caller:
    settings = request.app.state.settings
    if settings.auth == "off":
        return LOCAL_CALLER
    token = _presented_token(request)
    if token is None:
        _limiter(request).check(request.client.host if request.client else "unknown")
        raise _challenge("this route needs a token: send 'Authorization: Bearer <token>'", "invalid_request")
    return token_caller(request, token)


def token_caller(request: Request, token: str) -> Caller:
    """The caller ``token`` stands for, under the per-address failure limit; 401 when it stands for none."""
    settings = request.app.state.settings
    address = request.client.host if request.client else "unknown"
    limiter = _limiter(request)
    limiter.check(address)
    caller = None
    admin = settings.admin_token.get_secret_value() if settings.admin_token is not None else ""
    if token and admin and hmac.compare_digest(token.encode("utf-8"), admin.encode("utf-8")):
        caller = ADMIN_CALLER
    elif token:
        caller = lookup_token(request, token)
    if caller is None:
        limiter.fail(address)
        raise _challenge("the token is unknown, revoked or expired")
    return caller


def current_caller(request: Request) -> Caller:
    """The request's authenticated caller (alias of :func:`authenticate` for dependency injection)."""
    return authenticate(request)


CurrentCaller = Annotated[Caller, Depends(authenticate)]
