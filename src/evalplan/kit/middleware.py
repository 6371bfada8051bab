"""ASGI middleware: request body size limit and ``Idempotency-Key`` replay for POST routes."""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import re
import tempfile
from collections.abc import Callable
from datetime import UTC, timedelta
from typing import Any
from urllib.parse import unquote

from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session, sessionmaker
from starlette.concurrency import run_in_threadpool
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from evalplan.db.models import LOCAL_TEAM_ID, IdempotencyRecord, utcnow
from evalplan.kit.db import begin_write
from evalplan.kit.errors import PayloadTooLarge
from evalplan.kit.problems import (
    PROBLEM_MEDIA_TYPE,
    RETRY_AFTER_S,
    database_unavailable,
    is_database_outage,
    problem_body,
)

log = logging.getLogger(__name__)

SPOOL_IN_MEMORY = 8 * 1024 * 1024


def _problem(status: int, title: str, detail: str, path: str, slug: str) -> tuple[int, bytes]:
    return status, json.dumps(problem_body(status, title, detail, instance=path, slug=slug)).encode()


async def _send_bytes(send: Send, status: int, body: bytes, content_type: str,
                      extra: list[tuple[bytes, bytes]] | None = None) -> None:
    headers = [(b"content-type", content_type.encode()), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers + (extra or [])})
    await send({"type": "http.response.body", "body": body})


def request_fingerprint(content_type: bytes, query: bytes, body: Any) -> str:
    """SHA-256 of content type, query and body (a seekable file).

    A multipart body's random boundary is replaced by a fixed token first, so a client
    retrying the same upload (with a fresh boundary) gets the same fingerprint.
    """
    boundary = _multipart_boundary(content_type)
    digest = hashlib.sha256()
    media = content_type.split(b";")[0].strip().lower() if boundary else content_type
    digest.update(media + b"\n" + query + b"\n")
    body.seek(0)
    carry = b""
    keep = len(boundary) - 1 if boundary else 0
    while chunk := body.read(1024 * 1024):
        data = carry + chunk
        if boundary:
            data = data.replace(boundary, b"\x00boundary\x00")
        carry = data[len(data) - keep:] if keep else b""
        digest.update(data[:len(data) - keep] if keep else data)
    digest.update(carry)
    return digest.hexdigest()


def _multipart_boundary(content_type: bytes) -> bytes | None:
    if not content_type.lower().startswith(b"multipart/"):
        return None
    for part in content_type.split(b";")[1:]:
        name, _, value = part.strip().partition(b"=")
        if name.lower() == b"boundary" and value:
            return value.strip(b'"')
    return None


class BodyLimitMiddleware:
    """Reject bodies over ``max_bytes`` with 413, by Content-Length or while streaming."""

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app, self.max_bytes = app, max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = dict(scope.get("headers") or [])
        length = headers.get(b"content-length")
        if length is not None and length.isdigit() and int(length) > self.max_bytes:
            status, body = _problem(413, "Payload too large",
                                    f"request body of {int(length)} bytes exceeds the limit of {self.max_bytes} bytes "
                                    "(setting EVALPLAN_MAX_UPLOAD_BYTES)", scope["path"], "payload-too-large")
            await _send_bytes(send, status, body, PROBLEM_MEDIA_TYPE, [(b"connection", b"close")])
            return
        received = 0
        too_large: PayloadTooLarge | None = None

        async def limited_receive() -> Message:
            nonlocal received, too_large
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.max_bytes:
                    too_large = PayloadTooLarge(
                        f"request body exceeds the limit of {self.max_bytes} bytes (setting EVALPLAN_MAX_UPLOAD_BYTES)",
                        [{"header": "Content-Length", "detail": f"more than {self.max_bytes} bytes"}],
                    )
                    raise too_large
            return message

        started = False
        replaced = False

        async def send_413(exc: PayloadTooLarge) -> None:
            status, body = _problem(413, exc.title, exc.detail, scope["path"], exc.slug)
            await _send_bytes(send, status, body, PROBLEM_MEDIA_TYPE, [(b"connection", b"close")])

        async def tracking_send(message: Message) -> None:
            nonlocal started, replaced
            if replaced:
                return  # the rest of the app's own response, already replaced by the 413
            if message["type"] == "http.response.start":
                started = True
                if too_large is not None and message["status"] != 413:
                    # The app caught the error itself (FastAPI turns a failed body read into
                    # "400 error parsing the body"): the answer is still 413.
                    replaced = True
                    await send_413(too_large)
                    return
            await send(message)

        try:
            await self.app(scope, limited_receive, tracking_send)
        except PayloadTooLarge as exc:
            if replaced:
                return
            if started:
                raise
            await send_413(exc)


#: response headers never stored for a replay (per-response or recomputed)
_NOT_REPLAYED = {b"content-length", b"date", b"server", b"x-request-id", b"set-cookie", b"connection"}


def local_scope(_scope: Scope) -> str:
    """Idempotency keys' scope without authentication: every caller is ``local``."""
    return LOCAL_TEAM_ID


class EncodedSlashMiddleware:
    """Keep an encoded ``/`` (``%2F``) inside a path segment as the literal ``%2F``, so ``team%2Fname``
    stays one ``{benchmark}`` parameter (``evalplan.auth.naming`` reads it as ``team/name``)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        raw = scope.get("raw_path") if scope["type"] == "http" else None
        if raw and b"%2f" in raw.lower():
            segments = raw.decode("latin-1").split("?", 1)[0].split("/")
            scope = dict(scope)
            scope["path"] = "/".join("%2F".join(unquote(p) for p in re.split("%2[fF]", seg)) for seg in segments)
        await self.app(scope, receive, send)


class IdempotencyMiddleware:
    """``Idempotency-Key`` on POST: same key + same body replays the stored response (status,
    headers such as ``Location``, body); same key + another body is 422.

    * The final response is stored before its first byte is sent, so a retry sent as soon as
      the answer arrives replays it (never 409).
    * An unfinished record holds a lease (``idempotency_lease_s``, 20 s), renewed every quarter of it
      while the request runs: meanwhile a retry gets 409 + ``Retry-After``; once the lease expires (the
      process died and stopped renewing it), a retry takes it over.
    * Keys are scoped by ``scope_of(scope)`` (blocking, run in a thread: the caller's team and token,
      ``evalplan.auth.caller.idempotency_scope``) and by the method and path (hashed, so any path length
      fits). ``scope_of`` answering None (no valid credential) passes the request on unkeyed: the app
      answers 401 and no record is written, so a revoked token's key is never replayed.
    * Responses with status >= 500 are not stored, so a retry runs again.
    * Every database call runs in a worker thread, never on the event loop.
    * The body is spooled to a temporary file while hashed, so large uploads are not held in memory.
    """

    def __init__(self, app: ASGIApp, session_factory_getter: Any,
                 scope_of: Callable[[Scope], str | None] = local_scope) -> None:
        self.app, self.get_session_factory, self.scope_of = app, session_factory_getter, scope_of

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "POST":
            await self.app(scope, receive, send)
            return
        headers = dict(scope.get("headers") or [])
        raw_key = headers.get(b"idempotency-key")
        if raw_key is None:
            await self.app(scope, receive, send)
            return
        key = raw_key.decode("latin-1").strip()
        path = scope["path"]
        if not key or len(key) > 200:
            status, body = _problem(422, "Invalid request", "Idempotency-Key must be 1-200 characters", path,
                                    "invalid-request")
            await _send_bytes(send, status, body, PROBLEM_MEDIA_TYPE)
            return

        try:  # authenticate first: a bad, revoked or expired credential is never replayed and stores nothing
            key_scope = await run_in_threadpool(self.scope_of, scope)
        except Exception as exc:
            if not is_database_outage(exc):
                raise
            await _send_database_unavailable(send, path)
            return
        if key_scope is None:  # the app answers 401 (or 429) itself
            await self.app(scope, receive, send)
            return

        spool = tempfile.SpooledTemporaryFile(max_size=SPOOL_IN_MEMORY)
        try:
            more = True
            while more:
                message = await receive()
                if message["type"] == "http.disconnect":
                    return
                spool.write(message.get("body", b""))
                more = message.get("more_body", False)
            request_hash = await run_in_threadpool(
                request_fingerprint, headers.get(b"content-type", b""), scope.get("query_string", b""), spool)
            settings = scope["app"].state.settings
            store = _Store(self.get_session_factory(scope), key_scope, key, path,
                           float(settings.idempotency_lease_s))
            try:
                claim = await run_in_threadpool(store.claim, request_hash)
            except Exception as exc:
                if not is_database_outage(exc):
                    raise
                await _send_database_unavailable(send, path)
                return
            if claim is not None:
                await _send_bytes(send, *claim)
                return
            spool.seek(0)
            await self._run(scope, spool, send, store)
        finally:
            spool.close()

    async def _run(self, scope: Scope, spool: Any, send: Send, store: _Store) -> None:
        sent_body = False

        async def replay_receive() -> Message:
            nonlocal sent_body
            if sent_body:
                return {"type": "http.disconnect"}
            chunk = spool.read(1024 * 1024)
            if chunk:
                return {"type": "http.request", "body": chunk, "more_body": True}
            sent_body = True
            return {"type": "http.request", "body": b"", "more_body": False}

        start: Message | None = None
        body = bytearray()
        complete = False

        async def capture_send(message: Message) -> None:
            nonlocal start, complete
            if message["type"] == "http.response.start":
                start = message
            elif message["type"] == "http.response.body":
                body.extend(message.get("body", b""))
                complete = complete or not message.get("more_body", False)

        async def keep_lease() -> None:  # renew the lease while the request runs (a crash stops renewing it)
            while True:
                await asyncio.sleep(store.lease_s / 4)
                try:
                    await run_in_threadpool(store.renew)
                except Exception:  # noqa: BLE001 - a database blip: the next beat tries again
                    log.warning("could not renew the lease of Idempotency-Key %r", store.key, exc_info=True)

        heartbeat = asyncio.create_task(keep_lease())
        try:
            await self.app(scope, replay_receive, capture_send)
        except BaseException:
            heartbeat.cancel()
            await _forget(store)
            raise
        heartbeat.cancel()
        if start is None or not complete:
            await _forget(store)
            return
        status = int(start["status"])
        response_headers = [(bytes(n), bytes(v)) for n, v in start.get("headers", [])]
        if status >= 500:
            await _forget(store)
        else:
            try:
                await run_in_threadpool(store.finish, status, response_headers, bytes(body))
            except Exception:  # noqa: BLE001 - the answer still goes out; the lease lets a retry run again
                log.warning("could not store the response of Idempotency-Key %r", store.key, exc_info=True)
        await send({**start, "headers": response_headers})
        await send({"type": "http.response.body", "body": bytes(body)})


async def _forget(store: _Store) -> None:
    try:
        await run_in_threadpool(store.forget)
    except Exception:  # noqa: BLE001 - the lease expires instead
        log.warning("could not release Idempotency-Key %r", store.key, exc_info=True)


async def _send_database_unavailable(send: Send, path: str) -> None:
    response = database_unavailable(path)
    await _send_bytes(send, response.status_code, bytes(response.body), PROBLEM_MEDIA_TYPE,
                      [(b"retry-after", RETRY_AFTER_S.encode())])


class _Store:
    """The idempotency record of one (scope, key, POST, path); every method is blocking (run in a thread)."""

    def __init__(self, factory: sessionmaker[Session], scope: str, key: str, path: str, lease_s: float) -> None:
        self.factory, self.scope, self.key, self.path, self.lease_s = factory, scope, key, path, lease_s
        self.ident = (scope, key, "POST", hashlib.sha256(path.encode("utf-8", "surrogateescape")).hexdigest())

    def _get(self, session: Session) -> IdempotencyRecord | None:
        return session.get(IdempotencyRecord, self.ident, with_for_update=True, populate_existing=True)

    def claim(self, request_hash: str) -> tuple[int, bytes, str, list[tuple[bytes, bytes]]] | None:
        """None: this request runs (the record is ours). Else the response to send instead."""
        now = utcnow()
        lease = now + timedelta(seconds=self.lease_s)
        with self.factory() as session:
            begin_write(session)
            record = self._get(session)
            if record is None:
                scope, key, method, path_hash = self.ident
                session.add(IdempotencyRecord(scope=scope, key=key, method=method, path_hash=path_hash,
                                              path=self.path, request_hash=request_hash, lease_expires_at=lease))
                try:
                    session.commit()
                    return None
                except IntegrityError:
                    session.rollback()
                    record = self._get(session)
                    if record is None:  # pragma: no cover - deleted between the two statements
                        return self._problem(409, "Request in progress", "retry", "idempotency-in-progress")
            if record.request_hash != request_hash:
                return self._problem(422, "Idempotency key reused",
                                     "this Idempotency-Key was already used with a different request body",
                                     "idempotency-key-reused")
            if record.status_code is not None:
                stored = [(str(n).encode("latin-1"), str(v).encode("latin-1"))
                          for n, v in record.response_headers or [] if str(n).lower() != "content-type"]
                return (record.status_code, bytes(record.response_body or b""),
                        record.content_type or "application/json", stored + [(b"idempotent-replayed", b"true")])
            expires = record.lease_expires_at
            if expires is not None and expires.tzinfo is None:
                expires = expires.replace(tzinfo=UTC)
            if expires is None or expires > now:
                return self._problem(409, "Request in progress",
                                     "a request with this Idempotency-Key is still being processed; retry later",
                                     "idempotency-in-progress", [(b"retry-after", b"1")])
            record.lease_expires_at = lease  # the first run died: this retry takes the key over
            session.commit()
            return None

    def _problem(self, status: int, title: str, detail: str, slug: str,
                 extra: list[tuple[bytes, bytes]] | None = None) -> tuple[int, bytes, str, list[tuple[bytes, bytes]]]:
        _, body = _problem(status, title, detail, self.path, slug)
        return status, body, PROBLEM_MEDIA_TYPE, list(extra or [])

    def finish(self, status: int, headers: list[tuple[bytes, bytes]], body: bytes) -> None:
        with self.factory() as session:
            begin_write(session)
            record = self._get(session)
            if record is None:
                return
            content_type = next((v.decode("latin-1") for n, v in headers if n.lower() == b"content-type"),
                                "application/json")
            record.status_code, record.content_type, record.response_body = status, content_type, body
            record.response_headers = [[n.decode("latin-1"), v.decode("latin-1")] for n, v in headers
                                       if n.lower() not in _NOT_REPLAYED]
            record.lease_expires_at = None
            session.commit()

    def renew(self) -> None:
        """Push the lease of this unfinished record ``lease_s`` ahead (the request is still running)."""
        with self.factory() as session:
            begin_write(session)
            record = self._get(session)
            if record is not None and record.status_code is None:
                record.lease_expires_at = utcnow() + timedelta(seconds=self.lease_s)
            session.commit()

    def forget(self) -> None:
        with self.factory() as session:
            begin_write(session)
            record = self._get(session)
            if record is not None and record.status_code is None:
                session.delete(record)
            session.commit()
