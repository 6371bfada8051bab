"""Domain errors shared by every layer; the API renders them as RFC 9457 problem+json.

``errors`` lists precise locations, e.g. ``{"row": 3, "column": "c17", "detail": "..."}``.
"""

from __future__ import annotations

from typing import Any

MAX_REPORTED_ERRORS = 50


class EvalplanError(Exception):
    """Base class: an HTTP status, a short title, a human detail and optional locations."""

    status: int = 400
    title: str = "Bad request"
    slug: str = "bad-request"

    def __init__(self, detail: str, errors: list[dict[str, Any]] | None = None,
                 headers: dict[str, str] | None = None) -> None:
        super().__init__(detail)
        self.detail = detail
        self.headers = headers
        self.errors = (errors or [])[:MAX_REPORTED_ERRORS]
        self.n_errors = len(errors or [])


class NotFound(EvalplanError):
    status, title, slug = 404, "Not found", "not-found"


class Unauthorized(EvalplanError):
    """401: no, an unknown, a revoked or an expired token (answered with ``WWW-Authenticate``)."""

    status, title, slug = 401, "Unauthorized", "unauthorized"


class Forbidden(EvalplanError):
    """403: a missing scope, or a write to another team's public resource."""

    status, title, slug = 403, "Forbidden", "forbidden"


class TooManyRequests(EvalplanError):
    status, title, slug = 429, "Too many requests", "too-many-requests"


class Conflict(EvalplanError):
    status, title, slug = 409, "Conflict", "conflict"


class InvalidInput(EvalplanError):
    status, title, slug = 422, "Invalid input", "invalid-input"


class PayloadTooLarge(EvalplanError):
    status, title, slug = 413, "Payload too large", "payload-too-large"


class UnsupportedMediaType(EvalplanError):
    status, title, slug = 415, "Unsupported media type", "unsupported-media-type"


class ErrorCollector:
    """Accumulate located errors while parsing, then raise them all at once."""

    def __init__(self, limit: int = 1000) -> None:
        self.errors: list[dict[str, Any]] = []
        self.limit = limit

    def add(self, detail: str, **location: Any) -> None:
        if len(self.errors) < self.limit:
            self.errors.append({**location, "detail": detail})

    def __bool__(self) -> bool:
        return bool(self.errors)

    def raise_if_any(self, summary: str) -> None:
        if self.errors:
            first = self.errors[0]
            where = ", ".join(f"{k} {v}" for k, v in first.items() if k != "detail")
            raise InvalidInput(
                f"{summary}: {len(self.errors)} problem(s); first at {where}: {first['detail']}",
                self.errors,
            )


class ServiceUnavailable(EvalplanError):
    status, title, slug = 503, "Service unavailable", "service-unavailable"


class NotInstalled(EvalplanError):
    """A route needs an optional package (an extra such as ``evalplan[inspect]``) this server lacks."""

    status, title, slug = 501, "Optional package not installed", "not-installed"
