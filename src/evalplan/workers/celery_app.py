"""The Celery app: Redis broker, late acks, redelivery on worker loss, queues ``cpu`` and ``gpu``.

Start a worker with ``evalplan worker --queues cpu,gpu`` (or
``celery -A workers.celery_app worker -Q cpu``).
"""

from __future__ import annotations

from typing import Any

from celery import Celery, signals
from kombu import Queue

from evalplan.kit.db import engine_for, make_session_factory
from evalplan.kit.reaper import Housekeeper
from evalplan.kit.settings import Settings, get_settings

QUEUES = ("cpu", "gpu")


def visibility_timeout_s(settings: Settings) -> float:
    """Redis redelivers an unacked message after this long. It matches the reaper's bound (twice
    ``job_lease_s + reaper_interval_s``): a message of a killed worker comes back about when the
    reaper would requeue the job anyway, and a copy delivered while a live worker still runs the
    job is dropped by ``run_job`` (the job's heartbeat is fresh), so a short timeout is safe."""
    return max(60.0, 2 * (settings.job_lease_s + settings.reaper_interval_s))


def make_celery(settings: Settings) -> Celery:
    broker = settings.redis_url or "redis://127.0.0.1:6379/0"
    app = Celery("evalplan", broker=broker, include=["evalplan.workers.tasks"])
    app.conf.update(
        task_acks_late=True,  # ack after the task ran, so a lost worker's job is redelivered
        task_reject_on_worker_lost=True,  # requeue (not fail) when the worker process dies
        worker_prefetch_multiplier=1,
        task_queues=[Queue(q) for q in QUEUES],
        task_default_queue="cpu",
        task_ignore_result=True,  # results live in the jobs table
        broker_connection_retry_on_startup=True,
        broker_transport_options={"visibility_timeout": visibility_timeout_s(settings)},
        worker_hijack_root_logger=False,
    )
    return app


celery_app = make_celery(get_settings())

_housekeeper: Any = None


@signals.worker_ready.connect
def _start_housekeeping(sender: Any = None, **_: Any) -> None:
    """In the worker's main process: its heartbeat row, the job reaper and pruning (``evalplan.kit.reaper``)."""
    global _housekeeper
    import os

    settings = get_settings()
    # The main process's own engine (never workers.tasks' cached one, which pool children build
    # after the fork): a child forked later (a replaced pool process) drops its inherited copy
    # without closing the parent's connections (SQLAlchemy's pooling-with-multiprocessing recipe).
    engine = engine_for(settings)
    os.register_at_fork(after_in_child=lambda: engine.dispose(close=False))
    queues = sorted({q.name for q in sender.task_consumer.queues}) if sender is not None else list(QUEUES)

    def resubmit(job_id: str, queue: str) -> None:
        celery_app.send_task("evalplan.run_job", args=[job_id], queue=queue)

    _housekeeper = Housekeeper(settings, make_session_factory(engine), resubmit, kind="celery",
                               queues=queues).start()


@signals.worker_shutdown.connect
def _stop_housekeeping(**_: Any) -> None:
    if _housekeeper is not None:
        _housekeeper.stop()
