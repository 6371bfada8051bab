"""The tables of ``evalplan.coresets``: coresets, their ranked items, trained models (RepCore alignments)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import (
    JSON,
    DateTime,
    Float,
    ForeignKey,
    Integer,
    LargeBinary,
    String,
    Text,
    UniqueConstraint,
)
from sqlalchemy.orm import Mapped, mapped_column

from evalplan.db.ids import new_id
from evalplan.db.models.base import Base, TeamOwned, utcnow


class Coreset(TeamOwned, Base):
    """A selected subset of items over one or more benchmarks, with how it was made.

    Named coresets form a series per team: ``version`` is 1 + the latest of that name. A published
    version (``published_at``) is frozen; ``provenance`` records what it was made from.
    """

    __tablename__ = "coresets"
    __table_args__ = (UniqueConstraint("team_id", "name", "version", name="uq_coresets_team_name_version"),)

    id: Mapped[str] = mapped_column(String(40), primary_key=True, default=lambda: new_id("cs"))
    name: Mapped[str | None] = mapped_column(String(200))
    version: Mapped[int] = mapped_column(Integer, default=1, nullable=False)
    method: Mapped[str] = mapped_column(String(60), nullable=False)
    status: Mapped[str] = mapped_column(String(20), default="pending", nullable=False)
    benchmark_ids: Mapped[list[str]] = mapped_column(JSON, nullable=False)
    budget: Mapped[Any] = mapped_column(JSON, nullable=False)
    params: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict, nullable=False)
    seed: Mapped[int] = mapped_column(Integer, default=0, nullable=False)
    reference_models: Mapped[Any | None] = mapped_column(JSON)
    predictor: Mapped[str | None] = mapped_column(String(60))
    embedding_model: Mapped[str | None] = mapped_column(String(300))
    job_id: Mapped[str | None] = mapped_column(ForeignKey("jobs.id", ondelete="SET NULL"))
    diagnostics: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    # What predict needs to refit the predictor (score-based: {"fits": {benchmark_id: {X_ref, y_ref, ...}}}),
    # M x k numbers per benchmark: deferred, so listing / GET never load it (docs/DECISIONS.md).
    fitted_state: Mapped[dict[str, Any] | None] = mapped_column(JSON, deferred=True)
    error: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    provenance: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    created_by: Mapped[str | None] = mapped_column(String(200))
    published_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    published_by: Mapped[str | None] = mapped_column(String(200))
    deprecated_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    deprecation_message: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow, onupdate=utcnow)


class CoresetItem(Base):
    __tablename__ = "coreset_items"

    coreset_id: Mapped[str] = mapped_column(ForeignKey("coresets.id", ondelete="CASCADE"), primary_key=True)
    rank: Mapped[int] = mapped_column(Integer, primary_key=True)
    item_pk: Mapped[int] = mapped_column(ForeignKey("items.pk", ondelete="CASCADE"), nullable=False, index=True)
    benchmark_id: Mapped[str] = mapped_column(ForeignKey("benchmarks.id", ondelete="CASCADE"), nullable=False)
    gain: Mapped[float | None] = mapped_column(Float)
    weight: Mapped[float | None] = mapped_column(Float)


class TrainedModel(Base):
    """A trained model cached by the sha256 of everything that determines it (e.g. a RepCore alignment)."""

    __tablename__ = "trained_models"

    key: Mapped[str] = mapped_column(String(64), primary_key=True)
    kind: Mapped[str] = mapped_column(String(60), nullable=False)
    benchmark_id: Mapped[str] = mapped_column(ForeignKey("benchmarks.id", ondelete="CASCADE"), nullable=False,
                                              index=True)
    meta: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict, nullable=False)
    blob: Mapped[bytes] = mapped_column(LargeBinary, nullable=False)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
