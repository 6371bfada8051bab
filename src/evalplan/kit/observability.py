"""Request context, metrics, logs and security headers: one ASGI middleware and a ``/metrics`` route.

* Every response carries ``X-Request-ID`` (the client's, when it is 1-64 safe characters, else a
  new one); problem bodies carry it as ``request_id`` and every log line as ``request_id``.
* Prometheus metrics (``prometheus-client``): request count and latency by method and route
  template (``/v1/sessions/{session_id}``, never the raw path), in-flight requests, score cells
  written by write path; at scrape time,
  from the database: jobs by kind and status, finished jobs' durations, queued jobs per queue
  (and the broker's queue length in production), live workers.
* With ``evalplan serve --workers N`` (N > 1) the HTTP metrics of every worker process are summed at
  scrape time: prometheus-client's multiprocess mode, in a folder named by ``PROMETHEUS_MULTIPROC_DIR``
  (``serve`` makes and removes one when the variable is unset).
* Logs are JSON lines (``python-json-logger``) with the request id; one access line per request.
* Security headers on every response; CORS only for the origins in ``EVALPLAN_CORS_ORIGINS``.
"""

from __future__ import annotations

import logging
import os
import re
import time
import uuid
from contextvars import ContextVar
from datetime import timedelta
from typing import Any

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.core import GaugeMetricFamily, SummaryMetricFamily
from prometheus_client.multiprocess import MultiProcessCollector
from prometheus_client.registry import Collector
from sqlalchemy import func, select
from sqlalchemy.orm import Session, sessionmaker
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from evalplan.db.models import Job, Worker, utcnow

log = logging.getLogger("evalplan.access")

REQUEST_ID: ContextVar[str | None] = ContextVar("evalplan_request_id", default=None)
_SAFE_ID = re.compile(r"^[A-Za-z0-9._-]{1,64}$")

SECURITY_HEADERS: tuple[tuple[bytes, bytes], ...] = (
    (b"x-content-type-options", b"nosniff"),
    (b"x-frame-options", b"DENY"),
    (b"referrer-policy", b"no-referrer"),
    (b"cross-origin-opener-policy", b"same-origin"),
    (b"cross-origin-resource-policy", b"same-origin"),
    (b"content-security-policy", b"frame-ancestors 'none'"),
    (b"permissions-policy", b"camera=(), microphone=(), geolocation=()"),
)

#: process-wide HTTP metrics (one registry per process; the database-derived ones are per app)
HTTP_REGISTRY = CollectorRegistry()
REQUESTS = Counter("evalplan_http_requests", "HTTP requests answered", ["method", "route", "status"],
                   registry=HTTP_REGISTRY)
LATENCY = Histogram("evalplan_http_request_duration_seconds", "Time to answer a request, by route template",
                    ["method", "route"], registry=HTTP_REGISTRY,
                    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0))
IN_FLIGHT = Gauge("evalplan_http_requests_in_flight", "Requests being answered", registry=HTTP_REGISTRY,
                  multiprocess_mode="livesum")
SCORE_CELLS = Counter("evalplan_score_cells_written", "Score cells written (uploads and imports), by write path: "
                      "copy = PostgreSQL binary COPY, batched = SQLite batched upsert", ["path"],
                      registry=HTTP_REGISTRY)
MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"


def current_request_id() -> str | None:
    return REQUEST_ID.get()


def route_template(scope: Scope) -> str:
    """The matched route's path template, or ``unmatched`` (never the raw path: bounded labels)."""
    route = scope.get("route")
    path = getattr(route, "path_format", None) or getattr(route, "path", None)
    if isinstance(path, str):
        return path
    return "unmatched"


class RequestContextMiddleware:
    """Request id, security headers, latency metrics and the access log line (outermost middleware)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        incoming = dict(scope.get("headers") or []).get(b"x-request-id", b"").decode("latin-1")
        request_id = incoming if _SAFE_ID.match(incoming) else uuid.uuid4().hex
        token = REQUEST_ID.set(request_id)
        started = time.perf_counter()
        status = 500
        IN_FLIGHT.inc()

        async def send_with_headers(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
                headers = [(n, v) for n, v in message.get("headers", []) if n.lower() != b"x-request-id"]
                present = {n.lower() for n, _ in headers}
                headers += [(n, v) for n, v in SECURITY_HEADERS if n not in present]
                headers.append((b"x-request-id", request_id.encode()))
                message = {**message, "headers": headers}
            await send(message)

        try:
            await self.app(scope, receive, send_with_headers)
        finally:
            elapsed = time.perf_counter() - started
            IN_FLIGHT.dec()
            route = route_template(scope)
            REQUESTS.labels(scope["method"], route, str(status)).inc()
            LATENCY.labels(scope["method"], route).observe(elapsed)
            log.info("%s %s %s", scope["method"], scope["path"], status, extra={
                "method": scope["method"], "path": scope["path"], "route": route, "status": status,
                "duration_ms": round(elapsed * 1000, 2)})
            REQUEST_ID.reset(token)


class JobsCollector(Collector):
    """Job and worker metrics read from the database (and the broker) at scrape time, so they cover
    every API and worker process."""

    def __init__(self, session_factory: sessionmaker[Session], redis_url: str | None, lease_s: float) -> None:
        self.session_factory, self.redis_url, self.lease_s = session_factory, redis_url, lease_s

    def collect(self) -> Any:
        up = GaugeMetricFamily("evalplan_database_up", "1 when the database answered this scrape")
        try:
            families = self._from_database()
            up.add_metric([], 1.0)
        except Exception:  # noqa: BLE001 - a scrape never fails because the database is down
            logging.getLogger(__name__).warning("metrics: database unavailable", exc_info=True)
            families = []
            up.add_metric([], 0.0)
        yield up
        yield from families
        if self.redis_url:
            yield self._broker_depth()

    def _from_database(self) -> list[Any]:
        jobs = GaugeMetricFamily("evalplan_jobs", "Jobs by kind and status", labels=["kind", "status"])
        queued = GaugeMetricFamily("evalplan_jobs_queued", "Queued jobs per queue (database)", labels=["queue"])
        durations = SummaryMetricFamily("evalplan_job_duration_seconds", "Run time of finished jobs "
                                        "(started -> finished), by kind and outcome", labels=["kind", "status"])
        workers = GaugeMetricFamily("evalplan_workers_alive", "Worker processes with a fresh heartbeat",
                                    labels=["kind"])
        with self.session_factory() as session:
            dialect = session.get_bind().dialect.name
            if dialect == "postgresql":
                seconds: Any = func.extract("epoch", Job.finished_at - Job.started_at)
            else:
                seconds = (func.julianday(Job.finished_at) - func.julianday(Job.started_at)) * 86400.0
            for kind, status, n in session.execute(select(Job.kind, Job.status, func.count()).group_by(Job.kind,
                                                                                                       Job.status)):
                jobs.add_metric([kind, status], float(n))
            for queue, n in session.execute(select(Job.queue, func.count()).where(Job.status == "queued")
                                            .group_by(Job.queue)):
                queued.add_metric([queue], float(n))
            for kind, status, n, total in session.execute(
                    select(Job.kind, Job.status, func.count(), func.sum(seconds))
                    .where(Job.finished_at.is_not(None), Job.started_at.is_not(None))
                    .group_by(Job.kind, Job.status)):
                durations.add_metric([kind, status], count_value=int(n), sum_value=float(total or 0.0))
            fresh = utcnow() - timedelta(seconds=self.lease_s)
            for kind, n in session.execute(select(Worker.kind, func.count()).where(Worker.last_seen_at >= fresh)
                                           .group_by(Worker.kind)):
                workers.add_metric([kind], float(n))
        return [jobs, queued, durations, workers]

    def _broker_depth(self) -> Any:
        depth = GaugeMetricFamily("evalplan_broker_queue_depth", "Messages waiting in the broker queue",
                                  labels=["queue"])
        try:
            import redis

            client = redis.Redis.from_url(str(self.redis_url), socket_connect_timeout=2, socket_timeout=2)
            try:
                for queue in ("cpu", "gpu"):
                    depth.add_metric([queue], float(client.llen(queue)))
            finally:
                client.close()
        except Exception:  # noqa: BLE001 - broker down: no sample
            logging.getLogger(__name__).warning("metrics: broker unavailable", exc_info=True)
        return depth


def http_registry() -> CollectorRegistry:
    """This process's HTTP metrics; in multiprocess mode (``PROMETHEUS_MULTIPROC_DIR`` set when
    prometheus-client was imported) those of every worker process, summed (the in-flight gauge over
    live processes)."""
    if not os.environ.get(MULTIPROC_ENV):
        return HTTP_REGISTRY
    registry = CollectorRegistry()
    MultiProcessCollector(registry)
    return registry


def metrics_text(app_registry: CollectorRegistry) -> tuple[bytes, str]:
    """The exposition text of the HTTP metrics and the app's database-derived ones."""
    return generate_latest(http_registry()) + generate_latest(app_registry), CONTENT_TYPE_LATEST


class RequestIdFilter(logging.Filter):
    """Adds ``request_id`` to every record (None outside a request)."""

    def filter(self, record: logging.LogRecord) -> bool:
        if not hasattr(record, "request_id"):
            record.request_id = REQUEST_ID.get()
        return True


_CONFIGURED = "_evalplan_json_handler"


def configure_logging(level: str, fmt: str) -> None:
    """Root logging: JSON lines (``fmt="json"``) or plain text, with the request id, once per process."""
    root = logging.getLogger()
    root.setLevel(level.upper())
    if any(getattr(h, _CONFIGURED, False) for h in root.handlers):
        return
    handler = logging.StreamHandler()
    if fmt == "json":
        from pythonjsonlogger.json import JsonFormatter

        handler.setFormatter(JsonFormatter("%(asctime)s %(levelname)s %(name)s %(message)s %(request_id)s",
                                           rename_fields={"asctime": "time", "levelname": "level",
                                                          "name": "logger"}))
    else:
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s [%(request_id)s] %(message)s"))
    handler.addFilter(RequestIdFilter())
    setattr(handler, _CONFIGURED, True)
    root.addHandler(handler)
