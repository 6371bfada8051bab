"""The table of ``evalplan.models``: models (team-owned, scored on benchmarks)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import (
    JSON,
    DateTime,
    String,
    UniqueConstraint,
)
from sqlalchemy.orm import Mapped, mapped_column

from evalplan.db.ids import new_id
from evalplan.db.models.base import Base, TeamOwned, utcnow


class Model(TeamOwned, Base):
    __tablename__ = "models"
    __table_args__ = (UniqueConstraint("team_id", "name", name="uq_models_team_name"),)

    id: Mapped[str] = mapped_column(String(40), primary_key=True, default=lambda: new_id("md"))
    name: Mapped[str] = mapped_column(String(300), nullable=False)
    family: Mapped[str | None] = mapped_column(String(200))
    meta: Mapped[dict[str, Any]] = mapped_column("metadata", JSON, default=dict, nullable=False)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
