"""The Celery app: Redis broker, late acks, redelivery on worker loss, queues ``cpu`` and ``gpu``.

Start a worker with ``evalplan worker --queues cpu,gpu`` (or
``celery -A workers.celery_app worker -Q cpu``).
"""

from __future__ import annotations

from celery import Celery
from kombu import Queue

from app.kit.settings import Settings, get_settings

QUEUES = ("cpu", "gpu")


def make_celery(settings: Settings) -> Celery:
    broker = settings.redis_url or "redis://127.0.0.1:6379/0"
    app = Celery("evalplan", broker=broker, include=["workers.tasks"])
    app.conf.update(
        task_acks_late=True,  # ack after the task ran, so a lost worker's job is redelivered
        task_reject_on_worker_lost=True,  # requeue (not fail) when the worker process dies
        worker_prefetch_multiplier=1,
        task_queues=[Queue(q) for q in QUEUES],
        task_default_queue="cpu",
        task_ignore_result=True,  # results live in the jobs table
        broker_connection_retry_on_startup=True,
        broker_transport_options={"visibility_timeout": 3600},
        worker_hijack_root_logger=False,
    )
    return app


celery_app = make_celery(get_settings())
