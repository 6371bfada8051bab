"""ASGI middleware: request body size limit and ``Idempotency-Key`` replay for POST routes."""

from __future__ import annotations

import hashlib
import json
import tempfile
from typing import Any

from sqlalchemy.exc import IntegrityError
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.db.models import IdempotencyRecord
from app.kit.errors import PayloadTooLarge
from app.kit.problems import PROBLEM_MEDIA_TYPE, problem_body

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


class IdempotencyMiddleware:
    """Same key + same body: replay the stored response. Same key + another body: 422.

    The body is spooled to a temporary file while hashed, so large uploads are not
    held in memory. Responses with status >= 500 are not stored, so a retry runs again.
    """

    def __init__(self, app: ASGIApp, session_factory_getter: Any) -> None:
        self.app, self.get_session_factory = app, session_factory_getter

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

        spool = tempfile.SpooledTemporaryFile(max_size=SPOOL_IN_MEMORY)
        more = True
        while more:
            message = await receive()
            if message["type"] == "http.disconnect":
                spool.close()
                return
            spool.write(message.get("body", b""))
            more = message.get("more_body", False)
        request_hash = request_fingerprint(headers.get(b"content-type", b""), scope.get("query_string", b""), spool)
        factory = self.get_session_factory(scope)

        with factory() as session:
            record = session.get(IdempotencyRecord, (key, "POST", path))
            if record is None:
                session.add(IdempotencyRecord(key=key, method="POST", path=path, request_hash=request_hash))
                try:
                    session.commit()
                except IntegrityError:
                    session.rollback()
                    record = session.get(IdempotencyRecord, (key, "POST", path))
            if record is not None:
                spool.close()
                if record.request_hash != request_hash:
                    status, body = _problem(422, "Idempotency key reused",
                                            "this Idempotency-Key was already used with a different request body",
                                            path, "idempotency-key-reused")
                    await _send_bytes(send, status, body, PROBLEM_MEDIA_TYPE)
                elif record.status_code is None:
                    status, body = _problem(409, "Request in progress",
                                            "a request with this Idempotency-Key is still being processed; retry later",
                                            path, "idempotency-in-progress")
                    await _send_bytes(send, status, body, PROBLEM_MEDIA_TYPE, [(b"retry-after", b"1")])
                else:
                    await _send_bytes(send, record.status_code, bytes(record.response_body or b""),
                                      record.content_type or "application/json", [(b"idempotent-replayed", b"true")])
                return

        spool.seek(0)
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

        captured: dict[str, Any] = {"status": 500, "content_type": "application/json", "body": bytearray()}

        async def capture_send(message: Message) -> None:
            if message["type"] == "http.response.start":
                captured["status"] = message["status"]
                for name, value in message.get("headers", []):
                    if name.lower() == b"content-type":
                        captured["content_type"] = value.decode("latin-1")
            elif message["type"] == "http.response.body":
                captured["body"].extend(message.get("body", b""))
            await send(message)

        try:
            await self.app(scope, replay_receive, capture_send)
        finally:
            spool.close()
            with factory() as session:
                record = session.get(IdempotencyRecord, (key, "POST", path))
                if record is not None:
                    if captured["status"] >= 500:
                        session.delete(record)
                    else:
                        record.status_code = captured["status"]
                        record.content_type = captured["content_type"]
                        record.response_body = bytes(captured["body"])
                    session.commit()
