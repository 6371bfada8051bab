"""The tables of the job runtime (``evalplan.kit``): jobs, their inputs, worker heartbeats, idempotency
records."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import (
    JSON,
    DateTime,
    Float,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    String,
    Text,
)
from sqlalchemy.orm import Mapped, mapped_column

from evalplan.db.ids import new_id
from evalplan.db.models.base import Base, TeamOwned, utcnow


class Job(TeamOwned, Base):
    __tablename__ = "jobs"
    __table_args__ = (Index("ix_jobs_kind_benchmark", "kind", "benchmark_id"), Index("ix_jobs_status", "status"))

    id: Mapped[str] = mapped_column(String(40), primary_key=True, default=lambda: new_id("job"))
    kind: Mapped[str] = mapped_column(String(60), nullable=False)
    queue: Mapped[str] = mapped_column(String(20), default="cpu", nullable=False)
    status: Mapped[str] = mapped_column(String(20), default="queued", nullable=False)
    progress: Mapped[float] = mapped_column(Float, default=0.0, nullable=False)
    payload: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict, nullable=False)
    result: Mapped[Any | None] = mapped_column(JSON)
    error: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    attempts: Mapped[int] = mapped_column(Integer, default=0, nullable=False)
    benchmark_id: Mapped[str | None] = mapped_column(
        ForeignKey("benchmarks.id", ondelete="SET NULL")
    )
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    started_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    finished_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    updated_at: Mapped[datetime] = mapped_column(
        DateTime(timezone=True), default=utcnow, onupdate=utcnow
    )
    #: the process running it (``host:pid``) and its last heartbeat; the reaper requeues a
    #: ``running`` job whose heartbeat is older than the lease (``evalplan.kit.reaper``)
    worker_id: Mapped[str | None] = mapped_column(String(200))
    heartbeat_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))


class Worker(Base):
    """A job-running process (Celery worker main process or an API's in-process pool) and its heartbeat."""

    __tablename__ = "workers"

    id: Mapped[str] = mapped_column(String(200), primary_key=True)  # host:pid
    kind: Mapped[str] = mapped_column(String(20), nullable=False)  # celery | inprocess
    queues: Mapped[list[str]] = mapped_column(JSON, default=list, nullable=False)
    started_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    last_seen_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow, index=True)


class JobInput(Base):
    """A file handed to a job (e.g. a large lm-eval log), stored durably so any worker can read it."""

    __tablename__ = "job_inputs"

    pk: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    job_id: Mapped[str] = mapped_column(
        ForeignKey("jobs.id", ondelete="CASCADE"), nullable=False, index=True
    )
    filename: Mapped[str] = mapped_column(String(500), nullable=False)
    content: Mapped[bytes] = mapped_column(LargeBinary, nullable=False)


class IdempotencyRecord(Base):
    """The stored response of a POST sent with an ``Idempotency-Key`` header.

    Keyed by (scope, key, method, sha256 of the path): ``scope`` is the caller's team, so two
    teams' keys never meet; the path is hashed so a long path fits the key. A record with no
    ``status_code`` is in progress until ``lease_expires_at``; after it a retry takes it over.
    """

    __tablename__ = "idempotency_keys"

    scope: Mapped[str] = mapped_column(String(100), primary_key=True)
    key: Mapped[str] = mapped_column(String(200), primary_key=True)
    method: Mapped[str] = mapped_column(String(10), primary_key=True)
    path_hash: Mapped[str] = mapped_column(String(64), primary_key=True)
    path: Mapped[str] = mapped_column(Text, nullable=False)
    request_hash: Mapped[str] = mapped_column(String(64), nullable=False)
    status_code: Mapped[int | None] = mapped_column(Integer)
    content_type: Mapped[str | None] = mapped_column(String(200))
    response_headers: Mapped[list[list[str]] | None] = mapped_column(JSON)
    response_body: Mapped[bytes | None] = mapped_column(LargeBinary)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow, index=True)
    lease_expires_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
