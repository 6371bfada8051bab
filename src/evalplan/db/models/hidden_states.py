"""The tables of ``evalplan.hidden_states``: hidden-state matrices in chunks."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import (
    DateTime,
    ForeignKey,
    Integer,
    LargeBinary,
    String,
    UniqueConstraint,
)
from sqlalchemy.orm import Mapped, mapped_column

from evalplan.db.ids import new_id
from evalplan.db.models.base import Base, utcnow


class HiddenState(Base):
    """Hidden states of one model on (some of) a benchmark's items (RepCore, papers/003 §2.2).

    Rows are stored in ``hidden_state_chunks`` (raw little-endian ``dtype`` values, ``dim`` per row);
    ``item_pks`` holds the items' ``items.pk`` as int64 bytes in row order. One per (benchmark, model):
    a re-upload replaces it (a new id and ``created_at``).
    """

    __tablename__ = "hidden_states"
    __table_args__ = (UniqueConstraint("benchmark_id", "model_id", name="uq_hidden_states_benchmark_model"),)

    id: Mapped[str] = mapped_column(String(40), primary_key=True, default=lambda: new_id("hs"))
    benchmark_id: Mapped[str] = mapped_column(ForeignKey("benchmarks.id", ondelete="CASCADE"), nullable=False)
    model_id: Mapped[str] = mapped_column(ForeignKey("models.id", ondelete="CASCADE"), nullable=False, index=True)
    n_items: Mapped[int] = mapped_column(Integer, nullable=False)
    dim: Mapped[int] = mapped_column(Integer, nullable=False)
    dtype: Mapped[str] = mapped_column(String(10), nullable=False)
    item_pks: Mapped[bytes] = mapped_column(LargeBinary, nullable=False)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class HiddenStateChunk(Base):
    """Rows ``row_start .. row_start + n_rows`` of a hidden-state matrix (about 4 MB each)."""

    __tablename__ = "hidden_state_chunks"

    hidden_state_id: Mapped[str] = mapped_column(ForeignKey("hidden_states.id", ondelete="CASCADE"), primary_key=True)
    seq: Mapped[int] = mapped_column(Integer, primary_key=True)
    row_start: Mapped[int] = mapped_column(Integer, nullable=False)
    n_rows: Mapped[int] = mapped_column(Integer, nullable=False)
    data: Mapped[bytes] = mapped_column(LargeBinary, nullable=False)
