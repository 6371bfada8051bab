"""The OpenAPI document with the error answers: every operation lists the RFC 9457
``application/problem+json`` responses it can give (issue 13, failure 10).

FastAPI documents only the success response and a 422 in its own ``HTTPValidationError`` shape; the
service answers every error as a problem (``evalplan.kit.problems``). :func:`document_problems` adds the
``Problem`` schema and, per operation, the statuses that can occur there:

* every operation: 422 (a path, query or body value refused; also the input guard), 503 (the database
  or the job queue unreachable);
* an operation with path parameters, or a ``/v1`` operation naming things in its body or query: 404;
* POST: 400 (unreadable body), 409 (a conflict, or an ``Idempotency-Key`` still in progress),
  413 (body over ``EVALPLAN_MAX_UPLOAD_BYTES``), 415 (a content type the route does not read);
* DELETE: 404, 409.
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi

from evalplan.kit.problems import PROBLEM_MEDIA_TYPE

PROBLEM_SCHEMA: dict[str, Any] = {
    "title": "Problem",
    "type": "object",
    "description": "RFC 9457 problem details; `errors` locates each problem (field, row, column, parameter, ...).",
    "required": ["type", "title", "status", "detail"],
    "properties": {
        "type": {"type": "string", "description": "`urn:evalplan:problem:<slug>` or `about:blank`."},
        "title": {"type": "string"},
        "status": {"type": "integer", "minimum": 400, "maximum": 599},
        "detail": {"type": "string", "description": "What is wrong and where."},
        "instance": {"type": "string"},
        "errors": {"type": "array", "items": {"type": "object", "additionalProperties": True}},
        "n_errors": {"type": "integer", "description": "All problems found, when more than `errors` lists."},
    },
    "additionalProperties": True,
}

DESCRIPTIONS = {
    400: "Bad request: the body could not be read.",
    404: "Not found: a named benchmark, model, item, job, coreset, session or selection does not exist.",
    409: "Conflict: the state does not allow it (a duplicate name, a stopped session, a conflicting score), "
         "or a request with this Idempotency-Key is still in progress.",
    413: "Payload too large: the body exceeds EVALPLAN_MAX_UPLOAD_BYTES.",
    415: "Unsupported media type: the route does not read this Content-Type.",
    422: "Invalid input: a value is refused (type, range, NUL, non-finite number, nesting, size cap).",
    503: "Service unavailable: the database or the job queue cannot be reached; retry later.",
}


def _problem_response(status: int) -> dict[str, Any]:
    return {"description": DESCRIPTIONS[status],
            "content": {PROBLEM_MEDIA_TYPE: {"schema": {"$ref": "#/components/schemas/Problem"}}}}


def statuses_for(path: str, method: str, operation: dict[str, Any]) -> list[int]:
    """The error statuses ``method path`` can answer (see the module docstring)."""
    statuses = {422, 503}
    has_path_params = any(p.get("in") == "path" for p in operation.get("parameters", [])) or "{" in path
    if has_path_params or path.startswith("/v1/"):
        statuses.add(404)
    if method == "post":
        statuses |= {400, 409, 413, 415}
    if method == "delete":
        statuses.add(409)
    if path.startswith("/health"):
        statuses = {503}
    return sorted(statuses)


def document_problems(schema: dict[str, Any]) -> dict[str, Any]:
    """Add the ``Problem`` schema and each operation's problem responses to ``schema`` (in place)."""
    components = schema.setdefault("components", {}).setdefault("schemas", {})
    components["Problem"] = PROBLEM_SCHEMA
    for name in ("HTTPValidationError", "ValidationError"):
        components.pop(name, None)
    for path, operations in schema.get("paths", {}).items():
        for method, operation in operations.items():
            if not isinstance(operation, dict) or "responses" not in operation:
                continue
            responses = operation["responses"]
            for status in statuses_for(path, method, operation):
                responses[str(status)] = _problem_response(status)
    return schema


def install_openapi(app: FastAPI) -> None:
    """Serve :func:`document_problems` of FastAPI's generated document at ``/openapi.json`` (cached)."""

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            schema = get_openapi(title=app.title, version=app.version, description=app.description,
                                 routes=app.routes, tags=app.openapi_tags)
            app.openapi_schema = document_problems(schema)
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]
