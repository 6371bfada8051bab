"""Liveness (``/health``: the process answers) and readiness (``/health/ready``: what it depends on answers).

Both run on the event loop and never wait on the request thread pool, so they answer while every
pool thread is stuck on a dead database. Each readiness probe runs in its own thread under a
deadline; anything down gives 503 problem+json naming it (never 500).
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response

from app.health.probes import readiness
from app.health.schemas import Health, Readiness
from app.kit.observability import metrics_text
from app.kit.problems import RETRY_AFTER_S, problem_response

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


@router.get("/metrics", response_class=Response, tags=["health"],
            responses={200: {"description": "Prometheus text exposition", "content": {"text/plain": {}}}})
def metrics(request: Request) -> Response:
    """Prometheus metrics: HTTP latency by route template, jobs by kind/status and their durations,
    queue depth, live workers (``app.kit.observability``)."""
    body, content_type = metrics_text(request.app.state.metrics_registry)
    return Response(body, media_type=content_type)
