"""The table of ``evalplan.embeddings``: the item-text embedding cache."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import (
    BigInteger,
    Boolean,
    DateTime,
    Integer,
    LargeBinary,
    String,
    UniqueConstraint,
)
from sqlalchemy.orm import Mapped, mapped_column

from evalplan.db.models.base import Base, utcnow


class Embedding(Base):
    """An item-text embedding, cached by (sha256 of the text, embedding model).

    A re-upload, a rename or another benchmark with the same text never re-embeds.
    ``vector`` holds ``dim`` float32 values (little-endian bytes).
    """

    __tablename__ = "embeddings"
    __table_args__ = (UniqueConstraint("text_hash", "model", name="uq_embeddings_text_model"),)

    pk: Mapped[int] = mapped_column(BigInteger().with_variant(Integer, "sqlite"), primary_key=True, autoincrement=True)
    text_hash: Mapped[str] = mapped_column(String(64), nullable=False)
    model: Mapped[str] = mapped_column(String(300), nullable=False)
    dim: Mapped[int] = mapped_column(Integer, nullable=False)
    vector: Mapped[bytes] = mapped_column(LargeBinary, nullable=False)
    n_tokens: Mapped[int | None] = mapped_column(Integer)
    truncated: Mapped[bool] = mapped_column(Boolean, default=False, nullable=False)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
