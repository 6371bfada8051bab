"""Readiness probes: the database, the broker and the job workers, each in a thread under a deadline."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta

import anyio
from sqlalchemy import text
from sqlalchemy.orm import Session, sessionmaker

from evalplan.db.models import utcnow
from evalplan.kit.repository import live_worker_count
from evalplan.kit.settings import Settings

#: probe threads of their own: a probe stuck on a dead server never takes a request thread
_LIMITER: anyio.CapacityLimiter | None = None


def _limiter() -> anyio.CapacityLimiter:
    global _LIMITER
    if _LIMITER is None:
        _LIMITER = anyio.CapacityLimiter(8)
    return _LIMITER


async def _probe(fn: Callable[[], str], deadline_s: float) -> str:
    try:
        with anyio.fail_after(deadline_s):
            return await anyio.to_thread.run_sync(fn, abandon_on_cancel=True, limiter=_limiter())
    except TimeoutError:
        return f"down: no answer within {deadline_s:g} s"
    except Exception as exc:  # noqa: BLE001 - any failure of a probe is "down", never a 500
        return f"down: {type(exc).__name__}"


def _database(session_factory: sessionmaker[Session]) -> str:
    with session_factory() as session:
        session.execute(text("SELECT 1"))
    return "ok"


def _broker(url: str, timeout_s: float) -> str:
    import redis

    client = redis.Redis.from_url(url, socket_connect_timeout=timeout_s, socket_timeout=timeout_s)
    try:
        client.ping()
    finally:
        client.close()
    return "ok"


def _workers(session_factory: sessionmaker[Session], lease_s: float) -> str:
    fresh = utcnow() - timedelta(seconds=lease_s)
    with session_factory() as session:
        alive = live_worker_count(session, "celery", fresh)
    return "ok" if alive else f"down: no worker heartbeat in the last {lease_s:g} s"


async def readiness(settings: Settings, session_factory: sessionmaker[Session]) -> dict[str, str]:
    """``{"database", "broker", "workers"}`` -> ``"ok"``, ``"not used"`` or ``"down: <why>"``."""
    deadline = settings.db_connect_timeout_s + 1.0
    checks = {"database": await _probe(lambda: _database(session_factory), deadline)}
    if settings.redis_url:
        url = settings.redis_url
        checks["broker"] = await _probe(lambda: _broker(url, 2.0), 3.0)
        if checks["database"] == "ok":
            checks["workers"] = await _probe(lambda: _workers(session_factory, settings.job_lease_s), deadline)
        else:
            checks["workers"] = "down: unknown (the database is down)"
    else:
        checks["broker"] = checks["workers"] = "not used"
    return checks
