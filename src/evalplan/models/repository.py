"""The model table's queries that other domains call (docs/ARCHITECTURE.md "Table ownership")."""

from __future__ import annotations

from collections.abc import Iterable

from sqlalchemy import select
from sqlalchemy.orm import Session

from evalplan.db.models import Model


def names_by_id(session: Session, ids: Iterable[str]) -> dict[str, str]:
    """id -> name of the readable models among ``ids`` (one query)."""
    wanted = list(ids)
    if not wanted:
        return {}
    return {model_id: name for model_id, name in session.execute(select(Model.id, Model.name)
                                                                 .where(Model.id.in_(wanted)))}
