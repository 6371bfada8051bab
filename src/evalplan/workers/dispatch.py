"""Dispatchers: where a committed job goes. Chosen by settings only (EVALPLAN_REDIS_URL)."""

from __future__ import annotations

import logging
from concurrent.futures import Future, ThreadPoolExecutor

from sqlalchemy.orm import Session, sessionmaker

from evalplan.auth.scoping import team_scoped_factory
from evalplan.kit.jobs import run_job
from evalplan.kit.settings import Settings

log = logging.getLogger(__name__)


class InProcessDispatcher:
    """Embedded mode: run jobs with the same task function in a thread pool."""

    def __init__(self, session_factory: sessionmaker[Session], threads: int, *, heartbeat_s: float = 5.0,
                 lease_s: float = 30.0) -> None:
        self.session_factory = session_factory
        self.heartbeat_s, self.lease_s = heartbeat_s, lease_s
        self.executor = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="evalplan-job")
        self.futures: list[Future[str]] = []

    def submit(self, job_id: str, queue: str) -> None:
        self.futures = [f for f in self.futures if not f.done()]
        self.futures.append(self.executor.submit(run_job, self.session_factory, job_id,
                                                 team_scope=team_scoped_factory, heartbeat_s=self.heartbeat_s,
                                                 lease_s=self.lease_s))

    def shutdown(self) -> None:
        self.executor.shutdown(wait=True)


class CeleryDispatcher:
    """Production mode: send the job id to a Celery queue (``cpu`` or ``gpu``)."""

    def __init__(self, settings: Settings) -> None:
        from evalplan.workers.celery_app import make_celery  # celery loads only when EVALPLAN_REDIS_URL is set

        self.celery = make_celery(settings)

    def submit(self, job_id: str, queue: str) -> None:
        self.celery.send_task("evalplan.run_job", args=[job_id], queue=queue)

    def shutdown(self) -> None:
        self.celery.close()


def make_dispatcher(settings: Settings,
                    session_factory: sessionmaker[Session]) -> InProcessDispatcher | CeleryDispatcher:
    if settings.uses_celery:
        return CeleryDispatcher(settings)
    return InProcessDispatcher(session_factory, settings.inprocess_job_threads, heartbeat_s=settings.job_heartbeat_s,
                               lease_s=settings.job_lease_s)
