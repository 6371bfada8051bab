"""The benchmark-selection table's queries that other domains call (docs/ARCHITECTURE.md "Table ownership"):
a team's selections, for its deletion (registered with ``evalplan.auth.deletion``)."""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.orm import Session

from evalplan.auth.deletion import register_team_part
from evalplan.db.models import BenchmarkSelection


def delete_team_selections(session: Session, team_id: str) -> list[str]:
    """Delete the team's benchmark selections; their ids."""
    selections = list(session.scalars(select(BenchmarkSelection).where(BenchmarkSelection.team_id == team_id)))
    ids = [s.id for s in selections]
    for selection in selections:
        session.delete(selection)
    return ids


register_team_part("benchmark_selections", delete_team_selections)  # team deletion (evalplan.auth.deletion)
