"""The composition root: build the FastAPI app from settings (DB, dispatcher, routers, middleware)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import APIRouter, Depends, FastAPI
from fastapi.middleware.cors import CORSMiddleware
from prometheus_client import CollectorRegistry
from sqlalchemy.orm import Session, sessionmaker

import evalplan.jobs.handlers  # noqa: F401  (registers every job handler)
from evalplan import __version__
from evalplan.auth import routes as teams
from evalplan.auth.caller import authenticate, idempotency_scope
from evalplan.backtests import routes as backtests
from evalplan.benchmark_selections import routes as benchmark_selections
from evalplan.benchmarks import routes as benchmarks
from evalplan.comparisons import routes as comparisons
from evalplan.coresets import routes as coresets
from evalplan.embeddings import routes as embeddings
from evalplan.health import routes as health
from evalplan.hidden_states import routes as hidden_states
from evalplan.imports import routes as imports
from evalplan.jobs import routes as jobs
from evalplan.kit.blas import limit_blas_threads
from evalplan.kit.body_read import BodyReadMiddleware
from evalplan.kit.db import engine_for, make_session_factory
from evalplan.kit.input_guard import InputGuardMiddleware
from evalplan.kit.jobs import Dispatcher
from evalplan.kit.middleware import BodyLimitMiddleware, EncodedSlashMiddleware, IdempotencyMiddleware
from evalplan.kit.observability import JobsCollector, RequestContextMiddleware, configure_logging
from evalplan.kit.openapi import install_openapi
from evalplan.kit.problems import install_problem_handlers
from evalplan.kit.reaper import Housekeeper
from evalplan.kit.settings import Settings, get_settings
from evalplan.leaderboard import routes as leaderboard
from evalplan.models import routes as models
from evalplan.plans import routes as plans
from evalplan.sessions import cache as session_cache
from evalplan.sessions import routes as sessions
from evalplan.similarity import routes as similarity
from evalplan.ui.mount import install_ui
from evalplan.workers.dispatch import InProcessDispatcher, make_dispatcher

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
    plans.router, teams.router, leaderboard.router, comparisons.router,
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
        limit_blas_threads()  # a server: one BLAS thread per request's computation (evalplan.kit.blas)
        engine = engine_for(settings)
        session_factory = make_session_factory(engine)
    if dispatcher is None:
        dispatcher = make_dispatcher(settings, session_factory)

    # Housekeeping (heartbeat, job reaper, pruning: evalplan.kit.reaper) runs in servers built from
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

    # docs_url/redoc_url off: evalplan.ui serves both from packaged assets (FastAPI's load from a CDN).
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
        app.include_router(router, dependencies=[Depends(authenticate)])  # evalplan.auth.caller
    install_ui(app)
    install_openapi(app)

    def factory_of(scope: dict[str, Any]) -> sessionmaker[Session]:
        return scope["app"].state.session_factory

    app.add_middleware(IdempotencyMiddleware, session_factory_getter=factory_of, scope_of=idempotency_scope)
    app.add_middleware(InputGuardMiddleware)
    # read (and bound) the body before the app takes a database connection (issue 24 item 7)
    app.add_middleware(BodyReadMiddleware, min_rate_bytes_s=settings.body_min_rate_bytes_s,
                       grace_s=settings.body_read_grace_s, per_client=settings.max_concurrent_uploads_per_client)
    app.add_middleware(BodyLimitMiddleware, max_bytes=settings.max_upload_bytes)
    app.add_middleware(EncodedSlashMiddleware)
    if settings.cors_origins:
        app.add_middleware(CORSMiddleware, allow_origins=settings.cors_origins, allow_methods=["*"],
                           allow_headers=["*"], expose_headers=CORS_EXPOSED_HEADERS)
    app.add_middleware(RequestContextMiddleware)  # outermost: request id, security headers, metrics, access log
    return app
