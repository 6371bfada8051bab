"""The tables of ``evalplan.benchmarks``: benchmarks, items, scores, model responses.

Scores are stored the way they are read: one ``score_rows`` row per (benchmark, model, metric) holding the
model's whole row of the matrix as a packed array aligned to the benchmark's dense item order
(``items.position``); ``scores`` is a read-only per-cell view of them (docs/DECISIONS.md "Score storage").
They are written and loaded in bulk by ``evalplan.benchmarks.score_matrix``.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    Column,
    DateTime,
    Float,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    UniqueConstraint,
)
from sqlalchemy.dialects import postgresql
from sqlalchemy.orm import Mapped, mapped_column

from evalplan.db.ids import new_id
from evalplan.db.models.base import Base, TeamOwned, utcnow


class Benchmark(TeamOwned, Base):
    __tablename__ = "benchmarks"
    __table_args__ = (UniqueConstraint("team_id", "name", name="uq_benchmarks_team_name"),)

    id: Mapped[str] = mapped_column(String(40), primary_key=True, default=lambda: new_id("bm"))
    name: Mapped[str] = mapped_column(String(200), nullable=False)
    capability: Mapped[str | None] = mapped_column(String(200))
    description: Mapped[str | None] = mapped_column(Text)
    embedding_fields: Mapped[list[str]] = mapped_column(JSON, default=list, nullable=False)
    score_kind: Mapped[str] = mapped_column(String(20), default="continuous", nullable=False)
    score_min: Mapped[float | None] = mapped_column(Float)
    score_max: Mapped[float | None] = mapped_column(Float)
    default_metric: Mapped[str] = mapped_column(String(200), default="score", nullable=False)
    data_version: Mapped[int] = mapped_column(Integer, default=0, nullable=False)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(
        DateTime(timezone=True), default=utcnow, onupdate=utcnow
    )


class Item(Base):
    """An item; ``position`` is its dense index in the benchmark (0, 1, ... in creation order): the
    index of its cell in every packed score row of the benchmark (``ScoreRow.vals``)."""

    __tablename__ = "items"
    __table_args__ = (UniqueConstraint("benchmark_id", "item_id", name="uq_items_benchmark_item"),
                      Index("uq_items_benchmark_position", "benchmark_id", "position", unique=True))

    pk: Mapped[int] = mapped_column(BigInteger().with_variant(Integer, "sqlite"), primary_key=True, autoincrement=True)
    benchmark_id: Mapped[str] = mapped_column(
        ForeignKey("benchmarks.id", ondelete="CASCADE"), nullable=False
    )
    item_id: Mapped[str] = mapped_column(String(200), nullable=False)
    position: Mapped[int] = mapped_column(Integer, nullable=False)
    source_index: Mapped[int | None] = mapped_column(Integer)
    prompt: Mapped[str | None] = mapped_column(Text)
    target: Mapped[str | None] = mapped_column(Text)
    fields: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    content_hash: Mapped[str | None] = mapped_column(String(64), index=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


#: array of numbers (null = missing)
PACKED_SCORES = Text().with_variant(postgresql.ARRAY(postgresql.DOUBLE_PRECISION()), "postgresql")


class ScoreRow(Base):
    """One model's scores on one benchmark under one metric: ``vals[p]`` is the score of the item at
    ``items.position`` p (missing: NaN on PostgreSQL, null on SQLite; positions past the end of a shorter
    row, items created after it was written, are missing). ``n_scores`` counts the present cells,
    ``version`` counts the writes of the row. Written and read whole (``evalplan.benchmarks.score_matrix``)."""

    __tablename__ = "score_rows"
    __table_args__ = (Index("ix_score_rows_model", "model_id"),)

    benchmark_id: Mapped[str] = mapped_column(ForeignKey("benchmarks.id", ondelete="CASCADE"), primary_key=True)
    model_id: Mapped[str] = mapped_column(ForeignKey("models.id", ondelete="CASCADE"), primary_key=True)
    metric: Mapped[str] = mapped_column(String(200), primary_key=True)
    n_scores: Mapped[int] = mapped_column(Integer, nullable=False)
    version: Mapped[int] = mapped_column(Integer, nullable=False, default=1)
    vals: Mapped[Any] = mapped_column(PACKED_SCORES, nullable=False)


#: read-only views (created by the migrations, never by ``Base.metadata``)
view_metadata = MetaData()

scores_view = Table(
    "scores", view_metadata,
    Column("model_id", String(40), primary_key=True),
    Column("item_pk", BigInteger().with_variant(Integer, "sqlite"), primary_key=True),
    Column("metric", String(200), primary_key=True),
    Column("value", Float, nullable=False),
)


class Score:
    """One score cell, read through the ``scores`` view of ``score_rows`` (one row per present cell). Read
    only: writes go through ``evalplan.benchmarks.score_matrix``."""

    __tablename__ = "scores"
    model_id: Mapped[str]
    item_pk: Mapped[int]
    metric: Mapped[str]
    value: Mapped[float]


Base.registry.map_imperatively(Score, scores_view)


class ModelResponse(Base):
    """What a model answered on an item, as a harness import (lm-eval, inspect, HELM, lighteval) logged it.

    One row per (item, model): a re-import of the model's log replaces it. ``response`` is the text (at most
    ``evalplan.integrations.harness_records.MAX_RESPONSE_CHARS`` characters; ``truncated`` and ``n_chars``, the
    full length, say when it was cut; docs/DECISIONS.md "Model responses"), ``extra`` what else the log
    said about it (the filtered answer, the scorer's answer and explanation, log-likelihoods; small JSON),
    ``source`` the harness. ``benchmark_id`` is the item's benchmark (listing a model's responses on a
    benchmark). A child row like scores: no team; it goes with its item, model or benchmark (cascade).
    """

    __tablename__ = "model_responses"
    __table_args__ = (Index("ix_model_responses_model", "model_id"),
                      Index("ix_model_responses_benchmark_model", "benchmark_id", "model_id"))

    item_pk: Mapped[int] = mapped_column(BigInteger().with_variant(Integer, "sqlite"),
                                         ForeignKey("items.pk", ondelete="CASCADE"), primary_key=True)
    model_id: Mapped[str] = mapped_column(ForeignKey("models.id", ondelete="CASCADE"), primary_key=True)
    benchmark_id: Mapped[str] = mapped_column(ForeignKey("benchmarks.id", ondelete="CASCADE"), nullable=False)
    response: Mapped[str] = mapped_column(Text, nullable=False)
    truncated: Mapped[bool] = mapped_column(Boolean, default=False, nullable=False)
    n_chars: Mapped[int] = mapped_column(Integer, nullable=False)
    source: Mapped[str] = mapped_column(String(40), nullable=False)
    extra: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow, nullable=False)
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow, nullable=False)


class BenchmarkModel(Base):
    """A model that has scores on a benchmark, with its row position in the wide matrix
    (first-upload order, so a download reproduces the uploaded row order)."""

    __tablename__ = "benchmark_models"

    benchmark_id: Mapped[str] = mapped_column(
        ForeignKey("benchmarks.id", ondelete="CASCADE"), primary_key=True
    )
    model_id: Mapped[str] = mapped_column(ForeignKey("models.id", ondelete="CASCADE"), primary_key=True)
    position: Mapped[int] = mapped_column(Integer, nullable=False)
