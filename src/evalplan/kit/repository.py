"""The job runtime's table queries that domains call (docs/ARCHITECTURE.md "Table ownership"): a team's jobs
(team deletion)."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import select
from sqlalchemy.orm import Session

from evalplan.db.models import Job


def team_job_ids(session: Session, team_id: str, statuses: Sequence[str]) -> list[str]:
    """Ids of the team's jobs in one of ``statuses``."""
    return list(session.scalars(select(Job.id).where(Job.team_id == team_id, Job.status.in_(statuses))))


def delete_team_jobs(session: Session, team_id: str) -> int:
    """Delete the team's jobs (their inputs by cascade); how many went."""
    jobs = list(session.scalars(select(Job).where(Job.team_id == team_id)))
    for job in jobs:
        session.delete(job)
    return len(jobs)
