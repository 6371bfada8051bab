"""The job runtime's table queries that domains call (docs/ARCHITECTURE.md "Table ownership"): a job by id, a
page of jobs, the recent jobs of a kind, live workers, a team's jobs (team deletion)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from evalplan.db.models import Job, Worker
from evalplan.kit.pagination import Page, keyset_page


def job_by_id(session: Session, job_id: str, *, for_update: bool = False) -> Job | None:
    """The readable job ``job_id`` (None when missing); ``for_update`` locks its row."""
    if for_update:
        return session.get(Job, job_id, with_for_update=True)
    return session.get(Job, job_id)


def job_page(session: Session, *, limit: int, cursor: str | None, kind: str | None = None,
             status: str | None = None) -> Page[Job]:
    """A page of the readable jobs (of ``kind`` / in ``status`` when given), newest first."""
    stmt = select(Job)
    if kind is not None:
        stmt = stmt.where(Job.kind == kind)
    if status is not None:
        stmt = stmt.where(Job.status == status)
    return keyset_page(session, stmt, Job.id, limit=limit, cursor=cursor, what="job", descending=True)


def recent_jobs(session: Session, kind: str, limit: int, *, benchmark_id: str | None = None) -> list[Job]:
    """The ``limit`` newest readable jobs of ``kind`` (the benchmark's only, when given), newest first."""
    stmt = select(Job).where(Job.kind == kind)
    if benchmark_id is not None:
        stmt = stmt.where(Job.benchmark_id == benchmark_id)
    return list(session.scalars(stmt.order_by(Job.id.desc()).limit(limit)))


def live_worker_count(session: Session, kind: str, seen_since: datetime) -> int:
    """How many workers of ``kind`` sent a heartbeat at or after ``seen_since``."""
    return int(session.scalar(select(func.count()).select_from(Worker).where(
        Worker.kind == kind, Worker.last_seen_at >= seen_since)) or 0)


def team_job_ids(session: Session, team_id: str, statuses: Sequence[str]) -> list[str]:
    """Ids of the team's jobs in one of ``statuses``."""
    return list(session.scalars(select(Job.id).where(Job.team_id == team_id, Job.status.in_(statuses))))


def delete_team_jobs(session: Session, team_id: str) -> int:
    """Delete the team's jobs (their inputs by cascade); how many went."""
    jobs = list(session.scalars(select(Job).where(Job.team_id == team_id)))
    for job in jobs:
        session.delete(job)
    return len(jobs)
