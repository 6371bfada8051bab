"""Read and bound a request body before the app (and its database session) sees it (issue 24 item 7).

A write route's database session takes a pool connection when its transaction begins, which was before
routes that read the body themselves (score and item uploads) had read it: 20 clients sending 200 bytes
at 10 B/s held the whole pool and every other route answered 503. This middleware, inside the body-size
limit, reads the whole body of a POST/PUT/PATCH into a spooled temporary file first (in memory up to
8 MB, on disk past it) and only then calls the app with it, so a slow sender holds no connection:

* the body must arrive at ``body_min_rate_bytes_s`` on average after ``body_read_grace_s`` (deadline
  ``start + grace + received / rate``): a slower sender gets ``408`` problem+json and the connection is
  closed;
* one client address may have at most ``max_concurrent_uploads_per_client`` bodies being read at once
  (per process): more is ``429`` with ``Retry-After``. A body that arrives whole in its first message (a
  small JSON post: nothing left to wait for) takes no slot, so a CI job posting observations from many
  threads is never refused.
"""

from __future__ import annotations

import asyncio
import json
import tempfile
import threading
import time
from collections import Counter
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from evalplan.kit.problems import PROBLEM_MEDIA_TYPE, problem_body

SPOOL_IN_MEMORY = 8 * 1024 * 1024
CHUNK = 1024 * 1024


class BodyReadMiddleware:
    """See the module docstring."""

    def __init__(self, app: ASGIApp, *, min_rate_bytes_s: float, grace_s: float, per_client: int) -> None:
        self.app, self.min_rate, self.grace_s, self.per_client = app, min_rate_bytes_s, grace_s, per_client
        self.active: Counter[str] = Counter()
        self.lock = threading.Lock()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] not in ("POST", "PUT", "PATCH"):
            await self.app(scope, receive, send)
            return
        start = time.monotonic()
        try:
            first = await asyncio.wait_for(receive(), timeout=self.grace_s)
        except TimeoutError:
            await self._too_slow(scope, send, 0, start)
            return
        if first["type"] == "http.disconnect":
            return
        if not first.get("more_body", False):  # the whole body is here: nothing to bound, no slot taken
            delivered = False

            async def once() -> Message:
                nonlocal delivered
                if delivered:
                    return await receive()
                delivered = True
                return first

            await self.app(scope, once, send)
            return
        client = (scope.get("client") or ("unknown", 0))[0]
        with self.lock:
            if self.active[client] >= self.per_client:
                busy = True
            else:
                busy = False
                self.active[client] += 1
        if busy:
            await _problem(send, 429, "Too many requests",
                           f"this client already sends {self.per_client} request bodies at once "
                           "(setting EVALPLAN_MAX_CONCURRENT_UPLOADS_PER_CLIENT); retry when one has finished",
                           scope["path"], "too-many-requests", [(b"retry-after", b"1")])
            return
        spool = tempfile.SpooledTemporaryFile(max_size=SPOOL_IN_MEMORY)
        try:
            if not await self._read(scope, receive, send, spool, first, start):
                return
        finally:
            with self.lock:
                self.active[client] -= 1
                if self.active[client] <= 0:
                    del self.active[client]
        try:
            spool.seek(0)
            done = False

            async def replay() -> Message:
                nonlocal done
                if done:
                    return await receive()  # the app waits for the disconnect: pass it through
                chunk = spool.read(CHUNK)
                if chunk:
                    return {"type": "http.request", "body": chunk, "more_body": True}
                done = True
                return {"type": "http.request", "body": b"", "more_body": False}

            await self.app(scope, replay, send)
        finally:
            spool.close()

    async def _too_slow(self, scope: Scope, send: Send, received: int, start: float) -> None:
        await _problem(send, 408, "Request timeout",
                       f"the request body arrived slower than {self.min_rate:g} bytes/s "
                       f"({received} bytes in {time.monotonic() - start:.1f} s; settings "
                       "EVALPLAN_BODY_MIN_RATE_BYTES_S, EVALPLAN_BODY_READ_GRACE_S)",
                       scope["path"], "request-timeout", [(b"connection", b"close")])

    async def _read(self, scope: Scope, receive: Receive, send: Send, spool: Any, first: Message,
                    start: float) -> bool:
        """Spool the body after its ``first`` message; False when the answer (408) was sent or the client left."""
        received = len(first.get("body", b""))
        spool.write(first.get("body", b""))
        while True:
            deadline = start + self.grace_s + received / self.min_rate
            try:
                message = await asyncio.wait_for(receive(), timeout=max(0.0, deadline - time.monotonic()))
            except TimeoutError:
                await self._too_slow(scope, send, received, start)
                return False
            if message["type"] == "http.disconnect":
                return False
            chunk = message.get("body", b"")
            received += len(chunk)
            spool.write(chunk)
            if not message.get("more_body", False):
                return True


async def _problem(send: Send, status: int, title: str, detail: str, path: str, slug: str,
                   extra: list[tuple[bytes, bytes]]) -> None:
    body = json.dumps(problem_body(status, title, detail, instance=path, slug=slug)).encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", PROBLEM_MEDIA_TYPE.encode()),
                            (b"content-length", str(len(body)).encode()), *extra]})
    await send({"type": "http.response.body", "body": body})
