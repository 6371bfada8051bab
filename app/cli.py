"""The ``evalplan`` command: ``serve``, ``worker`` and ``db upgrade``."""

from __future__ import annotations

import argparse
import sys

from app.settings import get_settings


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="evalplan", description="Evalplan evaluation-planning service.")
    sub = parser.add_subparsers(dest="command", required=True)

    serve = sub.add_parser("serve", help="run the HTTP API (applies migrations first in embedded SQLite mode)")
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=int, default=8000)
    serve.add_argument("--workers", type=int, default=1, help="uvicorn worker processes")
    serve.add_argument("--no-migrate", action="store_true", help="do not apply migrations on start")

    worker = sub.add_parser("worker", help="run a Celery worker (needs EVALPLAN_REDIS_URL)")
    worker.add_argument("--queues", default="cpu,gpu", help="comma-separated queues among cpu,gpu")
    worker.add_argument("--concurrency", type=int, default=None)
    worker.add_argument("--pool", default="prefork", choices=["prefork", "solo", "threads"])

    db = sub.add_parser("db", help="database administration")
    db_sub = db.add_subparsers(dest="db_command", required=True)
    upgrade = db_sub.add_parser("upgrade", help="apply Alembic migrations")
    upgrade.add_argument("revision", nargs="?", default="head")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    settings = get_settings()
    if args.command == "db":
        from app.db.migrate import upgrade

        upgrade(settings.database_url, args.revision)
        print(f"database at revision {args.revision}")
        return 0
    if args.command == "serve":
        import uvicorn

        if settings.is_sqlite and not args.no_migrate:
            from app.db.migrate import upgrade

            upgrade(settings.database_url)
        uvicorn.run("app.main:create_app", factory=True, host=args.host, port=args.port,
                    workers=args.workers, log_level=settings.log_level.lower())
        return 0
    if args.command == "worker":
        queues = [q.strip() for q in args.queues.split(",") if q.strip()]
        unknown = set(queues) - {"cpu", "gpu"}
        if unknown or not queues:
            print(f"evalplan worker: unknown queues {sorted(unknown)}; choose among cpu,gpu", file=sys.stderr)
            return 2
        if not settings.uses_celery:
            print("evalplan worker: set EVALPLAN_REDIS_URL (without it, jobs run inside `evalplan serve`)", file=sys.stderr)
            return 2
        from workers.celery_app import celery_app

        concurrency = args.concurrency or settings.worker_concurrency
        celery_app.worker_main([
            "worker", "-Q", ",".join(queues), "--concurrency", str(concurrency), "--pool", args.pool,
            "--loglevel", settings.log_level.upper(), "--without-gossip", "--without-mingle",
        ])
        return 0
    return 2


if __name__ == "__main__":
    sys.exit(main())
