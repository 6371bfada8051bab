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
import secrets
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Annotated, Any

from fastapi import Depends, Request
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
    """Failed authentication attempts per client address over a sliding minute (one process's view:
    the fallback when no Redis is configured, and when Redis does not answer)."""

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
                raise _too_many(address, 60.0 - (now - attempts[0]))

    def fail(self, address: str) -> None:
        with self._lock:
            self._recent(address, time.monotonic()).append(time.monotonic())
            if len(self._seen) > 10_000:  # bound the memory an address sweep can take
                self._seen = {a: d for a, d in self._seen.items() if d}


def _too_many(address: str, wait_s: float) -> TooManyRequests:
    retry = max(1, int(wait_s) + 1)
    return TooManyRequests(f"too many failed authentication attempts from {address}; retry later",
                           [{"header": "Authorization", "detail": f"retry after {retry} s"}],
                           headers={"Retry-After": str(retry)})


class RedisFailureLimiter:
    """The same sliding minute shared by every API process through Redis (``EVALPLAN_REDIS_URL``).

    One sorted set per address, ``evalplan:auth-failures:<address>``, holds a member per failed attempt
    scored by its wall-clock time; ``check`` drops members older than 60 s and counts the rest, ``fail``
    adds one and lets the key expire after a minute of quiet. Should Redis not answer, the process's own
    :class:`FailureLimiter` takes over for that call (logged), so an outage degrades to the per-process
    limit instead of to no limit or to refusing every request."""

    PREFIX = "evalplan:auth-failures:"

    def __init__(self, per_minute: int, url: str) -> None:
        import redis  # noqa: PLC0415 - only servers configured with Redis need it

        self.per_minute = per_minute
        self.client = redis.Redis.from_url(url, socket_connect_timeout=1.0, socket_timeout=1.0)
        self.fallback = FailureLimiter(per_minute)
        self._errors: tuple[type[BaseException], ...] = (redis.RedisError, OSError)

    def _key(self, address: str) -> str:
        return self.PREFIX + address

    def check(self, address: str) -> None:
        now = time.time()
        try:
            pipe = self.client.pipeline(transaction=True)
            pipe.zremrangebyscore(self._key(address), "-inf", now - 60.0)
            pipe.zcard(self._key(address))
            pipe.zrange(self._key(address), 0, 0, withscores=True)
            _, count, oldest = pipe.execute()
        except self._errors as exc:
            logger.warning("auth failure limiter: Redis unavailable (%s); using this process's count", exc)
            self.fallback.check(address)
            return
        if int(count) >= self.per_minute:
            first = float(oldest[0][1]) if oldest else now
            raise _too_many(address, 60.0 - (now - first))

    def fail(self, address: str) -> None:
        now = time.time()
        try:
            pipe = self.client.pipeline(transaction=True)
            pipe.zadd(self._key(address), {f"{now!r}:{secrets.token_hex(4)}": now})
            pipe.expire(self._key(address), 61)
            pipe.execute()
        except self._errors as exc:
            logger.warning("auth failure limiter: Redis unavailable (%s); using this process's count", exc)
            self.fallback.fail(address)


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


def _limiter(request: Request) -> FailureLimiter | RedisFailureLimiter:
    """The app's limiter: shared through Redis when ``redis_url`` is set, else this process's own."""
    state = request.app.state
    limiter = getattr(state, "auth_limiter", None)
    if limiter is None:
        with _LIMITER_LOCK:
            limiter = getattr(state, "auth_limiter", None)
            if limiter is None:
                settings = state.settings
                limiter = (RedisFailureLimiter(settings.auth_failures_per_minute, settings.redis_url)
                           if settings.redis_url else FailureLimiter(settings.auth_failures_per_minute))
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
