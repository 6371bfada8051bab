"""Liveness (``/health``: the process answers) and readiness (``/health/ready``: what it depends on answers).

Both run on the event loop and never wait on the request thread pool, so they answer while every
pool thread is stuck on a dead database. Each readiness probe runs in its own thread under a
deadline; anything down gives 503 problem+json naming it (never 500).
"""

from __future__ import annotations

import hmac
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response

from evalplan.health.probes import readiness
from evalplan.health.schemas import Health, Readiness
from evalplan.kit.errors import Unauthorized
from evalplan.kit.observability import metrics_text
from evalplan.kit.problems import RETRY_AFTER_S, problem_response

router = APIRouter(tags=["health"])


@router.get("/health", response_model=Health)
async def health() -> Health:
    return Health(status="ok")


@router.get("/health/ready", response_model=Readiness,
            responses={503: {"description": "A dependency is down (named in `errors`)",
                             "content": {"application/problem+json": {}}}})
async def ready(request: Request) -> Any:
    checks = await readiness(request.app.state.settings, request.app.state.session_factory)
    down = [{"dependency": name, "detail": state} for name, state in checks.items()
            if state not in ("ok", "not used")]
    if down:
        names = ", ".join(d["dependency"] for d in down)
        response: JSONResponse = problem_response(
            503, "Service unavailable", f"not ready: {names} down", instance=request.url.path,
            slug="not-ready", errors=down, headers={"Retry-After": RETRY_AFTER_S})
        return response
    return Readiness(status="ok", **checks)


def _check_metrics_token(request: Request) -> None:
    """With ``auth=required``: 401 unless ``Authorization: Bearer`` is ``metrics_token`` or ``admin_token``
    (the metrics count every team's jobs). With ``auth=off`` the route is open, like everything else."""
    settings = request.app.state.settings
    if settings.auth != "required":
        return
    scheme, _, value = request.headers.get("authorization", "").partition(" ")
    presented = value.strip().encode() if scheme.lower() == "bearer" else b""
    accepted = [s.get_secret_value().encode() for s in (settings.metrics_token, settings.admin_token) if s is not None]
    if presented and any(hmac.compare_digest(presented, token) for token in accepted):
        return
    raise Unauthorized("GET /metrics needs 'Authorization: Bearer <EVALPLAN_METRICS_TOKEN>' (or the admin token)",
                       [{"header": "Authorization", "detail": "send the metrics token as a Bearer token"}],
                       headers={"WWW-Authenticate": 'Bearer realm="evalplan-metrics"'})


@router.get("/metrics", response_class=Response, tags=["health"],
            responses={200: {"description": "Prometheus text exposition", "content": {"text/plain": {}}},
                       401: {"description": "auth required: no or a wrong metrics token",
                             "content": {"application/problem+json": {}}}})
def metrics(request: Request) -> Response:
    """Prometheus metrics: HTTP latency by route template, jobs by kind/status and their durations,
    queue depth, live workers (``evalplan.kit.observability``). With ``EVALPLAN_AUTH=required`` it needs
    ``Authorization: Bearer <EVALPLAN_METRICS_TOKEN>`` (or the admin token)."""
    _check_metrics_token(request)
    body, content_type = metrics_text(request.app.state.metrics_registry)
    return Response(body, media_type=content_type)
