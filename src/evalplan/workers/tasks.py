"""Thin Celery tasks: a job id in, ``evalplan.kit.jobs.run_job`` does the rest."""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from sqlalchemy.exc import OperationalError
from sqlalchemy.orm import Session, sessionmaker

import evalplan.jobs.handlers  # noqa: F401  (registers every job handler)
from evalplan.auth.scoping import team_scoped_factory
from evalplan.kit.db import engine_for, make_session_factory
from evalplan.kit.jobs import run_job
from evalplan.kit.settings import get_settings
from evalplan.workers.celery_app import celery_app


@lru_cache(maxsize=1)
def worker_session_factory() -> sessionmaker[Session]:
    return make_session_factory(engine_for(get_settings()))


@celery_app.task(name="evalplan.run_job", bind=True, acks_late=True, reject_on_worker_lost=True,
                 autoretry_for=(OperationalError,), retry_backoff=True, max_retries=5)
def run_job_task(self: Any, job_id: str) -> str:
    """Run one job; a database outage is retried with backoff, a lost worker is redelivered."""
    settings = get_settings()
    return run_job(worker_session_factory(), job_id, team_scope=team_scoped_factory,
                   heartbeat_s=settings.job_heartbeat_s, lease_s=settings.job_lease_s)
