"""``evalplan serve``: the HTTP API under uvicorn, migrations applied first in embedded SQLite mode.

Imported inside the command (kept out of ``evalplan --help``): uvicorn and ``evalplan.db.migrate`` (Alembic and
SQLAlchemy); the app itself is loaded by uvicorn from ``evalplan.main:create_app``."""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager

from evalplan.kit.settings import get_settings


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    serve = sub.add_parser("serve", help="run the HTTP API (applies migrations first in embedded SQLite mode)")
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=int, default=8000)
    serve.add_argument("--workers", type=int, default=1, help="uvicorn worker processes")
    serve.add_argument("--no-migrate", action="store_true", help="do not apply migrations on start")


@contextmanager
def shared_metrics_folder(workers: int) -> Iterator[None]:
    """With several uvicorn workers, a folder for prometheus-client's multiprocess mode (so that
    ``/metrics`` sums every worker's HTTP metrics, evalplan.kit.observability), unless
    ``PROMETHEUS_MULTIPROC_DIR`` names one already; removed when the server stops."""
    if workers <= 1 or os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        yield
        return
    folder = tempfile.mkdtemp(prefix="evalplan-metrics-")
    os.environ["PROMETHEUS_MULTIPROC_DIR"] = folder
    try:
        yield
    finally:
        os.environ.pop("PROMETHEUS_MULTIPROC_DIR", None)
        shutil.rmtree(folder, ignore_errors=True)


def serve_command(args: argparse.Namespace) -> int:
    settings = get_settings()
    import uvicorn

    if settings.is_sqlite and not args.no_migrate:
        from evalplan.db.migrate import upgrade

        upgrade(settings.database_url)
    # the app logs (JSON lines, one access line per request with its id: evalplan.kit.observability);
    # uvicorn's own loggers propagate to that root handler
    with shared_metrics_folder(args.workers):
        uvicorn.run("evalplan.main:create_app", factory=True, host=args.host, port=args.port,
                    workers=args.workers, log_level=settings.log_level.lower(), log_config=None,
                    access_log=False, timeout_worker_healthcheck=settings.serve_worker_healthcheck_timeout_s)
    return 0
