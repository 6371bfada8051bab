"""The tables of ``evalplan.sessions``: sessions, their observations, the bucket priors."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    DateTime,
    Float,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    String,
    UniqueConstraint,
    text,
)
from sqlalchemy.orm import Mapped, mapped_column

from evalplan.db.ids import new_id
from evalplan.db.models.base import Base, TeamOwned, utcnow


class EvalSession(TeamOwned, Base):
    """A sequential evaluation session (BayesAME, papers/004) of one target model on one benchmark,
    or of several (``targets``, multi-target BayesAME, papers/004 §3.2; ``target`` is then null).

    The estimator state is never stored: it is rebuilt by replaying ``session_observations`` in
    ``seq`` order, so any API replica can serve any session. The columns below are a cache of that
    state (what the last write computed), written under the session's row lock.
    """

    __tablename__ = "eval_sessions"
    __table_args__ = (Index("ix_eval_sessions_benchmark_target", "benchmark_id", "target"),)

    id: Mapped[str] = mapped_column(String(40), primary_key=True, default=lambda: new_id("ss"))
    benchmark_id: Mapped[str] = mapped_column(ForeignKey("benchmarks.id", ondelete="CASCADE"), nullable=False)
    target: Mapped[str | None] = mapped_column(String(300))  # null for a multi-target session
    targets: Mapped[list[str] | None] = mapped_column(JSON)  # multi-target only: names, in target-index order
    n_latent: Mapped[int | None] = mapped_column(Integer)  # multi-target only: latent GPs L
    reference_models: Mapped[list[str]] = mapped_column(JSON, nullable=False)
    method: Mapped[str] = mapped_column(String(40), nullable=False)
    config: Mapped[dict[str, Any]] = mapped_column(JSON, nullable=False)
    status: Mapped[str] = mapped_column(String(20), default="active", nullable=False)
    stop_reason: Mapped[str | None] = mapped_column(String(40))
    next_items: Mapped[list[str]] = mapped_column(JSON, default=list, nullable=False)
    n_observed: Mapped[int] = mapped_column(Integer, default=0, nullable=False)
    estimate: Mapped[float | None] = mapped_column(Float)
    variance: Mapped[float | None] = mapped_column(Float)
    ci_lo: Mapped[float | None] = mapped_column(Float)
    ci_hi: Mapped[float | None] = mapped_column(Float)
    hyperparameters: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    # multi-target only, a cache like the columns above: {"per_target": {name: {...}}, "next": [{target, item}]}
    target_state: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    prior_key: Mapped[str] = mapped_column(ForeignKey("session_priors.key"), nullable=False)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow, onupdate=utcnow)


class SessionObservation(Base):
    """One posted (target, item, score) of a session, in arrival order ``seq`` (0, 1, ...).

    ``target_index`` indexes ``EvalSession.targets`` (always 0 for a single-target session).
    """

    __tablename__ = "session_observations"
    __table_args__ = (UniqueConstraint("session_id", "target_index", "item_pk", name="uq_session_observations_item"),)

    session_id: Mapped[str] = mapped_column(ForeignKey("eval_sessions.id", ondelete="CASCADE"), primary_key=True)
    seq: Mapped[int] = mapped_column(Integer, primary_key=True)
    target_index: Mapped[int] = mapped_column(Integer, nullable=False, default=0, server_default=text("0"))
    item_pk: Mapped[int] = mapped_column(BigInteger().with_variant(Integer, "sqlite"), nullable=False)
    item_id: Mapped[str] = mapped_column(String(200), nullable=False)
    score: Mapped[float] = mapped_column(Float, nullable=False)
    # active_design: the inclusion probability of the draw that proposed the item (null otherwise)
    probability: Mapped[float | None] = mapped_column(Float, nullable=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class SessionPrior(Base):
    """The BayesAME bucket prior of a (benchmark, metric, data version, reference set), computed once.

    ``key`` is the sha256 of those four; ``item_pks`` fixes the estimator's item order (column j of
    the prior is item ``item_pks[j]``), so later item uploads never shift a running session.
    """

    __tablename__ = "session_priors"

    key: Mapped[str] = mapped_column(String(64), primary_key=True)
    benchmark_id: Mapped[str] = mapped_column(ForeignKey("benchmarks.id", ondelete="CASCADE"), nullable=False,
                                              index=True)
    n_items: Mapped[int] = mapped_column(Integer, nullable=False)
    n_buckets: Mapped[int] = mapped_column(Integer, nullable=False)
    item_pks: Mapped[list[int]] = mapped_column(JSON, nullable=False)
    blob: Mapped[bytes] = mapped_column(LargeBinary, nullable=False)
    #: what the estimators derived from the prior (reference features, calibration curves: keys of
    #: ``evalplan.core.sequential.base.derived``), so any API worker or restart starts warm
    #: (``evalplan.sessions.priors``); null until a session of the prior computed some
    derived: Mapped[bytes | None] = mapped_column(LargeBinary)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
