"""The declarative base, the team-owned mixin and what every table module shares."""

from __future__ import annotations

from datetime import UTC, datetime

from sqlalchemy import String
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column


def utcnow() -> datetime:
    return datetime.now(UTC)


class Base(DeclarativeBase):
    pass


#: the built-in team of ``EVALPLAN_AUTH=off`` (and of every row that existed before teams)
LOCAL_TEAM_ID = "local"
VISIBILITIES = ("private", "public")


class TeamOwned:
    """Mixin of every table that holds a team's data (API.md "Teams and tokens").

    ``evalplan.auth.scoping`` adds ``team_id = caller's OR visibility = 'public'`` to every ORM SELECT of
    these tables and ``team_id = caller's`` to every ORM UPDATE/DELETE, stamps new rows with the
    caller's team and refuses (403) flushing a change to another team's row. A new table joins the
    scoping by inheriting this mixin. Child rows (items, scores, embeddings, hidden states,
    observations) have no team: they are reached only through their owner.
    """

    team_id: Mapped[str] = mapped_column(String(40), nullable=False, index=True)
    visibility: Mapped[str] = mapped_column(String(10), default="private", nullable=False)
