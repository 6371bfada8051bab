"""Who is calling: authentication (API.md "Teams and tokens") and the :class:`Caller` of a request.

* ``EVALPLAN_AUTH=off`` (the embedded default): every request is the built-in team ``local`` with
  every scope, and may manage every team.
* ``EVALPLAN_AUTH=required``: ``Authorization: Bearer <token>`` (or the ``evalplan_token`` cookie
  that ``/ui/login`` sets for the pages). A missing, unknown, revoked or expired token is 401 with
  ``WWW-Authenticate: Bearer``; a missing scope is 403; more than ``auth_failures_per_minute`` failed
  attempts from one client address in a minute is 429 (counted in Redis across all API processes when
  ``redis_url`` is set, else per process). ``EVALPLAN_ADMIN_TOKEN`` is an admin of
  every team (it acts as team ``local`` for data). Tokens are stored as sha256 only
  (``evalplan.auth.teams``); the bootstrap token is compared in constant time.

Scopes are ordered: ``admin`` includes ``write``, which includes ``read``. A route needs ``read``
for GET/HEAD, else ``write``; a route overrides that with ``openapi_extra={"x-evalplan-scope": s}``
(``read`` for POST routes that store nothing, such as predict; ``admin`` for token management).
``authenticate`` runs once per request (installed on every ``/v1`` router and inside ``DbSession``).
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import threading
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Annotated, Any

from fastapi import Depends, Request
from limits import RateLimitItemPerMinute
from limits.errors import StorageError
from limits.storage import MemoryStorage, RedisStorage
from limits.strategies import MovingWindowRateLimiter
from sqlalchemy import select
from starlette.types import Scope

from evalplan.db.models import ApiToken, Team
from evalplan.kit.errors import Forbidden, TooManyRequests, Unauthorized

__all__ = ["Caller", "CurrentCaller", "Unauthorized", "authenticate", "token_caller"]

LOCAL_TEAM = "local"
LOCAL_TEAM_ID = "local"
SCOPES = ("read", "write", "admin")
TOKEN_COOKIE = "evalplan_token"
SCOPE_EXTRA = "x-evalplan-scope"
_LIMITER_LOCK = threading.Lock()
logger = logging.getLogger(__name__)
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
    """Failed authentication attempts per client address over a sliding minute: the ``limits`` package's
    moving window (each failed attempt a hit; an address with ``per_minute`` hits in the last 60 s is refused).

    With ``redis_url`` the window lives in Redis (``evalplan:auth-failures/<address>/...`` keys), shared by
    every API process; without it, in this process's memory (``limits``' expiring memory storage, so an
    address sweep costs no lasting memory). Should Redis not answer, this process's own memory window takes
    over for that call (logged), so an outage degrades to the per-process limit instead of to no limit or to
    refusing every request."""

    KEY_PREFIX = "evalplan"

    def __init__(self, per_minute: int, redis_url: str | None = None) -> None:
        self.per_minute = per_minute
        self.item = RateLimitItemPerMinute(per_minute, namespace="auth-failures")
        self.local = MovingWindowRateLimiter(MemoryStorage())
        self.shared: MovingWindowRateLimiter | None = None
        if redis_url:
            self.shared = MovingWindowRateLimiter(RedisStorage(
                redis_url, key_prefix=self.KEY_PREFIX, wrap_exceptions=True,
                socket_connect_timeout=1.0, socket_timeout=1.0))

    def _limiters(self) -> list[MovingWindowRateLimiter]:
        return [self.shared, self.local] if self.shared is not None else [self.local]

    def check(self, address: str) -> None:
        """429 when ``address`` failed ``per_minute`` times in the last minute."""
        for limiter in self._limiters():
            try:
                if not limiter.test(self.item, address):
                    reset_at = limiter.get_window_stats(self.item, address).reset_time
                    raise _too_many(address, reset_at - time.time())
                return
            except StorageError as exc:
                logger.warning("auth failure limiter: Redis unavailable (%s); using this process's count", exc)

    def fail(self, address: str) -> None:
        """Count one failed attempt of ``address``."""
        for limiter in self._limiters():
            try:
                limiter.hit(self.item, address)
                return
            except StorageError as exc:
                logger.warning("auth failure limiter: Redis unavailable (%s); using this process's count", exc)


def _too_many(address: str, wait_s: float) -> TooManyRequests:
    retry = max(1, int(wait_s) + 1)
    return TooManyRequests(f"too many failed authentication attempts from {address}; retry later",
                           [{"header": "Authorization", "detail": f"retry after {retry} s"}],
                           headers={"Retry-After": str(retry)})


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
    """The app's limiter: shared through Redis when ``redis_url`` is set, else this process's own."""
    state = request.app.state
    limiter = getattr(state, "auth_limiter", None)
    if limiter is None:
        with _LIMITER_LOCK:
            limiter = getattr(state, "auth_limiter", None)
            if limiter is None:
                settings = state.settings
                limiter = FailureLimiter(settings.auth_failures_per_minute, settings.redis_url or None)
                state.auth_limiter = limiter
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


def idempotency_scope(scope: Scope) -> str | None:
    """The ``Idempotency-Key`` namespace of a request (``evalplan.kit.middleware.IdempotencyMiddleware``):
    the authenticated caller's team and token (``local`` with auth off), or None when the credential is
    missing, unknown, revoked or expired (the request then runs unkeyed and answers 401 by itself; failures
    are counted there, once). Blocking (one token lookup): the middleware runs it in a thread."""
    request = Request(scope)
    settings = request.app.state.settings
    if settings.auth == "off":
        return LOCAL_TEAM
    token = _presented_token(request)
    if not token:
        return None
    admin = settings.admin_token.get_secret_value() if settings.admin_token is not None else ""
    if admin and hmac.compare_digest(token.encode("utf-8"), admin.encode("utf-8")):
        return "admin"
    caller = lookup_token(request, token)
    return None if caller is None else f"{caller.team_id}:{caller.token_id}"


def current_caller(request: Request) -> Caller:
    """The request's authenticated caller (alias of :func:`authenticate` for dependency injection)."""
    return authenticate(request)


CurrentCaller = Annotated[Caller, Depends(authenticate)]
