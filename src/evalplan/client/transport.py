"""The client's HTTP layer (standard library only): JSON, bytes and multipart bodies, the Bearer token,
and retries that are safe: GET/DELETE always, POST/PATCH only under one ``Idempotency-Key``, reused by
every attempt, so the server replays instead of repeating the write."""

from __future__ import annotations

import json
import os
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
from collections.abc import Iterable
from typing import Any

RETRY_STATUSES = frozenset({408, 429, 502, 503, 504})
"""Statuses worth another attempt (a 409 ``idempotency-in-progress`` too, for a keyed write)."""


class EvalplanError(Exception):
    """An HTTP error from the server; ``problem`` is its RFC 9457 problem+json body (when it sent one)."""

    def __init__(self, status: int, problem: dict[str, Any] | None, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.problem = problem or {}


def multipart(fields: dict[str, Any], files: Iterable[tuple[str, str, bytes]]) -> tuple[bytes, str]:
    """A ``multipart/form-data`` body: text ``fields`` (None left out) and ``(field, filename, content)`` files."""
    boundary = uuid.uuid4().hex
    parts: list[bytes] = []
    for name, value in fields.items():
        if value is None:
            continue
        text = ("true" if value else "false") if isinstance(value, bool) else str(value)
        parts.append(f'--{boundary}\r\nContent-Disposition: form-data; name="{name}"\r\n\r\n{text}\r\n'.encode())
    for field, filename, content in files:
        safe = filename.replace('"', "_")
        parts.append(f'--{boundary}\r\nContent-Disposition: form-data; name="{field}"; filename="{safe}"\r\n'
                     "Content-Type: application/octet-stream\r\n\r\n".encode() + content + b"\r\n")
    parts.append(f"--{boundary}--\r\n".encode())
    return b"".join(parts), f"multipart/form-data; boundary={boundary}"


class Transport:
    """One base URL, token and retry policy; :meth:`call` returns the decoded body (JSON, text or bytes)."""

    def __init__(self, base_url: str, *, token: str | None = None, timeout: float = 60.0, retries: int = 3,
                 backoff: float = 0.5, headers: dict[str, str] | None = None, in_progress_wait_s: float = 60.0) -> None:
        self.base_url = base_url.rstrip("/")
        self.token = token if token is not None else os.environ.get("EVALPLAN_TOKEN") or None
        self.timeout = timeout
        self.retries = retries
        self.backoff = backoff
        self.headers = dict(headers or {})
        #: how long a keyed write keeps retrying ``409 idempotency-in-progress`` (the same request still
        #: running, or the lease of one whose server crashed: the server frees it within its lease, 20 s)
        self.in_progress_wait_s = in_progress_wait_s

    def url(self, path: str, params: dict[str, Any] | None = None) -> str:
        url = self.base_url + path
        query = {k: v for k, v in (params or {}).items() if v is not None}
        return url + ("?" + urllib.parse.urlencode(query) if query else "")

    def call(self, method: str, path: str, *, json_body: Any = None, content: bytes | None = None,
             content_type: str | None = None, params: dict[str, Any] | None = None,
             headers: dict[str, str] | None = None, accept: str = "application/json",
             idempotency_key: str | None = None) -> Any:
        all_headers = {"Accept": accept, **self.headers, **(headers or {})}
        if self.token:
            all_headers["Authorization"] = f"Bearer {self.token}"
        data = content
        if json_body is not None:
            data = json.dumps(json_body).encode()
            content_type = "application/json"
        if content_type:
            all_headers["Content-Type"] = content_type
        writes = method in ("POST", "PATCH")
        if writes:
            all_headers["Idempotency-Key"] = idempotency_key or all_headers.get("Idempotency-Key") or uuid.uuid4().hex
        url = self.url(path, params)
        attempt = 0
        started = time.monotonic()
        while True:
            attempt += 1
            request = urllib.request.Request(url, data=data, method=method, headers=all_headers)
            try:
                with urllib.request.urlopen(request, timeout=self.timeout) as response:
                    raw = response.read()
                    media = response.headers.get("Content-Type", "")
                    break
            except urllib.error.HTTPError as exc:
                raw = exc.read()
                problem = _json_or_none(raw)
                in_progress = (writes and exc.code == 409
                               and problem.get("type", "").endswith("idempotency-in-progress"))
                wait = max(self.backoff * 2 ** min(attempt - 1, 6), _retry_after(exc.headers.get("Retry-After")))
                if in_progress and time.monotonic() - started + wait <= self.in_progress_wait_s:
                    time.sleep(min(wait, 5.0))
                    continue
                if exc.code in RETRY_STATUSES and attempt <= self.retries:
                    time.sleep(min(wait, 30.0))
                    continue
                detail = problem.get("detail") if problem else raw[:500].decode(errors="replace")
                raise EvalplanError(exc.code, problem or None, f"{method} {path} -> {exc.code}: {detail}") from None
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                if attempt <= self.retries:
                    time.sleep(self.backoff * 2 ** (attempt - 1))
                    continue
                raise
        if not raw:
            return None
        if "json" in media:
            return json.loads(raw)
        if media.startswith("text/") or "xml" in media:
            return raw.decode()
        return raw


def _retry_after(value: str | None) -> float:
    """Seconds of a ``Retry-After`` header (its delay form; 0 when absent or a date)."""
    try:
        return max(0.0, float(value)) if value else 0.0
    except ValueError:
        return 0.0


def _json_or_none(raw: bytes) -> dict[str, Any]:
    try:
        value = json.loads(raw)
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}
