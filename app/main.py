"""The composition root: build the FastAPI app from settings (DB, dispatcher, routers, middleware)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import APIRouter, Depends, FastAPI
from fastapi.middleware.cors import CORSMiddleware
from prometheus_client import CollectorRegistry
from sqlalchemy.orm import Session, sessionmaker

import app.jobs.handlers  # noqa: F401  (registers every job handler)
from app import __version__
from app.backtests import routes as backtests
from app.benchmark_selections import routes as benchmark_selections
from app.benchmarks import routes as benchmarks
from app.coresets import routes as coresets
from app.embeddings import routes as embeddings
from app.health import routes as health
from app.hidden_states import routes as hidden_states
from app.imports import routes as imports
from app.jobs import routes as jobs
from app.kit.caller import authenticate
from app.kit.db import engine_for, make_session_factory
from app.kit.input_guard import InputGuardMiddleware
from app.kit.jobs import Dispatcher
from app.kit.middleware import BodyLimitMiddleware, EncodedSlashMiddleware, IdempotencyMiddleware, credential_scope
from app.kit.observability import JobsCollector, RequestContextMiddleware, configure_logging
from app.kit.openapi import install_openapi
from app.kit.problems import install_problem_handlers
from app.kit.reaper import Housekeeper
from app.kit.settings import Settings, get_settings
from app.models import routes as models
from app.plans import routes as plans
from app.sessions import cache as session_cache
from app.sessions import routes as sessions
from app.similarity import routes as similarity
from app.teams import routes as teams
from app.ui.mount import install_ui
from workers.dispatch import InProcessDispatcher, make_dispatcher

DESCRIPTION = """Evaluation planning for LLM teams: pick small coresets of benchmark items,
run sequential evaluation sessions, and predict full-suite scores with intervals.

Errors are RFC 9457 `application/problem+json`. Lists use `limit` + `cursor`.
POST routes accept an `Idempotency-Key` header."""

#: response headers a cross-origin browser client may read
CORS_EXPOSED_HEADERS = ["Location", "Retry-After", "X-Request-ID", "Idempotent-Replayed", "Content-Disposition"]

#: every /v1 router, one per domain (``app/<domain>/routes.py``)
V1_ROUTERS: tuple[APIRouter, ...] = (
    benchmarks.router, models.router, imports.router, jobs.router, embeddings.router, coresets.router,
    similarity.router, sessions.router, hidden_states.router, benchmark_selections.router, backtests.router,
    plans.router, teams.router,
)


def create_app(
    settings: Settings | None = None,
    *,
    session_factory: sessionmaker[Session] | None = None,
    dispatcher: Dispatcher | None = None,
) -> FastAPI:
    """Build the app. Tests pass their own session factory and dispatcher; the CLI passes none."""
    settings = settings or get_settings()
    configure_logging(settings.log_level, settings.log_format)
    engine = None
    if session_factory is None:
        engine = engine_for(settings)
        session_factory = make_session_factory(engine)
    if dispatcher is None:
        dispatcher = make_dispatcher(settings, session_factory)

    # Housekeeping (heartbeat, job reaper, pruning: app.kit.reaper) runs in servers built from
    # settings; tests that hand in a session factory opt in with settings.housekeeping=True.
    run_housekeeping = settings.housekeeping if settings.housekeeping is not None else engine is not None

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        housekeeper = None
        if run_housekeeping:
            in_process = isinstance(dispatcher, InProcessDispatcher)
            housekeeper = Housekeeper(settings, session_factory, dispatcher.submit,
                                      kind="inprocess" if in_process else None, queues=["cpu", "gpu"]).start()
        yield
        if housekeeper is not None:
            housekeeper.stop()
        shutdown = getattr(dispatcher, "shutdown", None)
        if shutdown is not None:
            shutdown()
        if engine is not None:
            engine.dispose()

    # docs_url/redoc_url off: app.ui serves both from packaged assets (FastAPI's load from a CDN).
    app = FastAPI(title="Evalplan", version=__version__, description=DESCRIPTION, lifespan=lifespan,
                  docs_url=None, redoc_url=None)
    app.state.settings = settings
    app.state.session_factory = session_factory
    app.state.dispatcher = dispatcher
    app.state.metrics_registry = CollectorRegistry()
    app.state.metrics_registry.register(JobsCollector(session_factory, settings.redis_url, settings.job_lease_s))

    session_cache.estimators.max_bytes = settings.session_cache_bytes
    install_problem_handlers(app)
    app.include_router(health.router)
    for router in V1_ROUTERS:
        app.include_router(router, dependencies=[Depends(authenticate)])  # app.kit.caller
    install_ui(app)
    install_openapi(app)

    def factory_of(scope: dict[str, Any]) -> sessionmaker[Session]:
        return scope["app"].state.session_factory

    app.add_middleware(IdempotencyMiddleware, session_factory_getter=factory_of, scope_of=credential_scope)
    app.add_middleware(InputGuardMiddleware)
    app.add_middleware(BodyLimitMiddleware, max_bytes=settings.max_upload_bytes)
    app.add_middleware(EncodedSlashMiddleware)
    if settings.cors_origins:
        app.add_middleware(CORSMiddleware, allow_origins=settings.cors_origins, allow_methods=["*"],
                           allow_headers=["*"], expose_headers=CORS_EXPOSED_HEADERS)
    app.add_middleware(RequestContextMiddleware)  # outermost: request id, security headers, metrics, access log
    return app
