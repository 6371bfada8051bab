"""RFC 9457 problem+json for every error; tracebacks are logged, never returned."""

from __future__ import annotations

import logging
from http import HTTPStatus
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from sqlalchemy.exc import DBAPIError, InterfaceError, OperationalError
from sqlalchemy.exc import TimeoutError as PoolTimeout
from starlette.exceptions import HTTPException as StarletteHTTPException

from evalplan.charts.render import RenderFailed
from evalplan.kit.errors import EvalplanError
from evalplan.kit.observability import REQUEST_ID
from evalplan.kit.request_errors import plain_errors

log = logging.getLogger(__name__)
PROBLEM_MEDIA_TYPE = "application/problem+json"


def problem_body(status: int, title: str, detail: str, *, instance: str | None = None, slug: str | None = None,
                 errors: list[dict[str, Any]] | None = None, n_errors: int | None = None) -> dict[str, Any]:
    """The RFC 9457 body: ``type`` (``urn:evalplan:problem:<slug>``), ``title``, ``status``, ``detail``,
    ``instance`` and the located ``errors`` (with ``n_errors`` when more were found than listed)."""
    body: dict[str, Any] = {
        "type": f"urn:evalplan:problem:{slug}" if slug else "about:blank",
        "title": title,
        "status": status,
        "detail": detail,
    }
    if instance:
        body["instance"] = instance
    if errors:
        body["errors"] = errors
        if n_errors is not None and n_errors > len(errors):
            body["n_errors"] = n_errors
    request_id = REQUEST_ID.get()
    if request_id:
        body["request_id"] = request_id
    return body


def problem_response(status: int, title: str, detail: str, *, instance: str | None = None,
                     slug: str | None = None, errors: list[dict[str, Any]] | None = None,
                     headers: dict[str, str] | None = None, n_errors: int | None = None) -> JSONResponse:
    body = problem_body(status, title, detail, instance=instance, slug=slug, errors=errors, n_errors=n_errors)
    return JSONResponse(body, status_code=status, media_type=PROBLEM_MEDIA_TYPE, headers=headers)


def _jsonable(value: Any) -> Any:
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    return str(value)


RETRY_AFTER_S = "2"


def database_unavailable(path: str) -> JSONResponse:
    """503 problem naming the database, with ``Retry-After``."""
    return problem_response(503, "Service unavailable",
                            "the database is unavailable or did not answer in time; retry later",
                            instance=path, slug="database-unavailable",
                            errors=[{"dependency": "database", "detail": "unavailable"}],
                            headers={"Retry-After": RETRY_AFTER_S})


def is_database_outage(exc: BaseException) -> bool:
    """An error of the database's availability (not of the statement): connection, timeout, lock."""
    if isinstance(exc, PoolTimeout):
        return True
    if not isinstance(exc, DBAPIError):
        return False
    if exc.connection_invalidated:
        return True
    return isinstance(exc, (OperationalError, InterfaceError))


async def _dbapi(request: Request, exc: Exception) -> JSONResponse:
    if is_database_outage(exc):
        log.warning("database unavailable on %s %s: %s", request.method, request.url.path, exc)
        return database_unavailable(request.url.path)
    log.exception("unhandled database error on %s %s", request.method, request.url.path)
    return problem_response(500, "Internal Server Error",
                            "an unexpected error occurred; it has been logged", instance=request.url.path)


def install_problem_handlers(app: FastAPI) -> None:
    @app.exception_handler(EvalplanError)
    async def _domain(request: Request, exc: EvalplanError) -> JSONResponse:
        return problem_response(exc.status, exc.title, exc.detail, instance=request.url.path,
                                slug=exc.slug, errors=exc.errors, n_errors=exc.n_errors, headers=exc.headers)

    @app.exception_handler(RenderFailed)
    async def _render_failed(request: Request, exc: RenderFailed) -> JSONResponse:
        return problem_response(exc.status, exc.title, exc.detail, instance=request.url.path, slug=exc.slug)

    @app.exception_handler(RequestValidationError)
    async def _validation(request: Request, exc: RequestValidationError) -> JSONResponse:
        route = request.scope.get("route")
        body_field = getattr(route, "body_field", None)
        model = getattr(getattr(body_field, "field_info", None), "annotation", None)
        detail, errors = plain_errors(exc.errors(), body=exc.body, content_type=request.headers.get("content-type"),
                                      model=model)
        return problem_response(422, "Invalid request", detail, instance=request.url.path, slug="invalid-request",
                                errors=[{**e, "loc": _jsonable(e["loc"])} for e in errors])

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        phrase = HTTPStatus(exc.status_code).phrase if exc.status_code in HTTPStatus._value2member_map_ else "Error"
        detail = exc.detail if isinstance(exc.detail, str) else phrase
        if exc.status_code == 404 and detail == "Not Found":
            detail = f"no route matches {request.method} {request.url.path}"
        if exc.status_code == 405:
            detail = f"method {request.method} is not allowed on {request.url.path}"
        return problem_response(exc.status_code, phrase, detail, instance=request.url.path,
                                headers=getattr(exc, "headers", None))

    # An unreachable, stuck or locked database (connect/statement/pool timeouts, a dropped
    # connection, SQLite's "database is locked") is the service's trouble, not the client's: 503.
    app.add_exception_handler(PoolTimeout, _dbapi)
    app.add_exception_handler(DBAPIError, _dbapi)

    @app.exception_handler(Exception)
    async def _crash(request: Request, exc: Exception) -> JSONResponse:
        log.exception("unhandled error on %s %s", request.method, request.url.path)
        return problem_response(500, "Internal Server Error",
                                "an unexpected error occurred; it has been logged", instance=request.url.path,
                                headers={"Connection": "close"})
