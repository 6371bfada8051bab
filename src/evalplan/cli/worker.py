"""``evalplan worker``: a Celery worker on the cpu and/or gpu queues (needs ``EVALPLAN_REDIS_URL``).

Imported inside the command (kept out of ``evalplan --help``): ``evalplan.workers.celery_app`` (Celery and,
through the job handlers, the web app's domains)."""

from __future__ import annotations

import argparse
import sys

from evalplan.kit.settings import get_settings


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    worker = sub.add_parser("worker", help="run a Celery worker (needs EVALPLAN_REDIS_URL)")
    worker.add_argument("--queues", default="cpu,gpu", help="comma-separated queues among cpu,gpu")
    worker.add_argument("--concurrency", type=int, default=None)
    worker.add_argument("--pool", default="prefork", choices=["prefork", "solo", "threads"])


def worker_command(args: argparse.Namespace) -> int:
    settings = get_settings()
    queues = [q.strip() for q in args.queues.split(",") if q.strip()]
    unknown = set(queues) - {"cpu", "gpu"}
    if unknown or not queues:
        print(f"evalplan worker: unknown queues {sorted(unknown)}; choose among cpu,gpu", file=sys.stderr)
        return 2
    if not settings.uses_celery:
        print("evalplan worker: set EVALPLAN_REDIS_URL (without it, jobs run inside `evalplan serve`)",
              file=sys.stderr)
        return 2
    from evalplan.workers.celery_app import celery_app

    concurrency = args.concurrency or settings.worker_concurrency
    celery_app.worker_main([
        "worker", "-Q", ",".join(queues), "--concurrency", str(concurrency), "--pool", args.pool,
        "--loglevel", settings.log_level.upper(), "--without-gossip", "--without-mingle",
    ])
    return 0
