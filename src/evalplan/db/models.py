"""SQLAlchemy 2 ORM models.

Scores are stored the way they are read: one ``score_rows`` row per (benchmark, model, metric) holding the
model's whole row of the matrix as a packed array aligned to the benchmark's dense item order
(``items.position``); ``scores`` is a read-only per-cell view of them (docs/DECISIONS.md "Score storage").
They are written and loaded in bulk by ``evalplan.benchmarks.score_matrix``.
"""

from __future__ import annotations

from datetime import UTC, datetime
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
    LargeBinary,
    MetaData,
    String,
    Table,
    Text,
    UniqueConstraint,
    text,
)
from sqlalchemy.dialects import postgresql
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

from evalplan.db.ids import new_id


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


class Team(Base):
    __tablename__ = "teams"

    id: Mapped[str] = mapped_column(String(40), primary_key=True, default=lambda: new_id("tm"))
    name: Mapped[str] = mapped_column(String(200), unique=True, nullable=False)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class ApiToken(Base):
    """A team's API token: only the sha256 of the secret is stored (the secret is shown once)."""

    __tablename__ = "api_tokens"

    id: Mapped[str] = mapped_column(String(40), primary_key=True, default=lambda: new_id("tk"))
    team_id: Mapped[str] = mapped_column(ForeignKey("teams.id", ondelete="CASCADE"), nullable=False, index=True)
    name: Mapped[str] = mapped_column(String(200), nullable=False)
    token_hash: Mapped[str] = mapped_column(String(64), unique=True, nullable=False)
    scopes: Mapped[list[str]] = mapped_column(JSON, nullable=False)
    expires_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    revoked_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    last_used_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class AuditEntry(Base):
    """Who created, published, deprecated, changed the visibility of, or deleted what."""

    __tablename__ = "audit_log"
    __table_args__ = (Index("ix_audit_log_team_pk", "team_id", "pk"),)

    pk: Mapped[int] = mapped_column(BigInteger().with_variant(Integer, "sqlite"), primary_key=True, autoincrement=True)
    team_id: Mapped[str] = mapped_column(String(40), nullable=False)
    actor: Mapped[str] = mapped_column(String(200), nullable=False)  # the token's name, or "local" / "admin"
    token_id: Mapped[str | None] = mapped_column(String(40))
    action: Mapped[str] = mapped_column(String(40), nullable=False)
    resource_type: Mapped[str] = mapped_column(String(40), nullable=False)
    resource_id: Mapped[str] = mapped_column(String(40), nullable=False)
    detail: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict, nullable=False)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


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


class Model(TeamOwned, Base):
    __tablename__ = "models"
    __table_args__ = (UniqueConstraint("team_id", "name", name="uq_models_team_name"),)

    id: Mapped[str] = mapped_column(String(40), primary_key=True, default=lambda: new_id("md"))
    name: Mapped[str] = mapped_column(String(300), nullable=False)
    family: Mapped[str | None] = mapped_column(String(200))
    meta: Mapped[dict[str, Any]] = mapped_column("metadata", JSON, default=dict, nullable=False)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


#: the packed score row: PostgreSQL ``double precision[]`` (NaN = missing; binary COPY in and out), SQLite a JSON
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


class BenchmarkSelection(TeamOwned, Base):
    """A benchmark-level selection (paper 000 §4.4) and its Gaussian imputation model (eq. 8).

    ``benchmark_names`` are the matrix columns in order; ``mean``/``scale`` (per column) and ``cov``
    (B x B, the correlation matrix of the standardized training scores) are what ``predict`` needs.
    ``selected`` lists names in greedy order with their ``gains``. ``diagnostics`` holds the residual
    variance fraction (eqs. 10-11), the test R^2 (eq. 9) when a test split was asked for, and the split.
    """

    __tablename__ = "benchmark_selections"

    id: Mapped[str] = mapped_column(String(40), primary_key=True, default=lambda: new_id("bs"))
    method: Mapped[str] = mapped_column(String(40), nullable=False)
    k: Mapped[int] = mapped_column(Integer, nullable=False)
    seed: Mapped[int] = mapped_column(Integer, default=0, nullable=False)
    source: Mapped[str] = mapped_column(String(20), nullable=False)  # "matrix" | "benchmarks"
    metric: Mapped[str | None] = mapped_column(String(200))
    benchmark_names: Mapped[list[str]] = mapped_column(JSON, nullable=False)
    selected: Mapped[list[str]] = mapped_column(JSON, nullable=False)
    gains: Mapped[list[float | None]] = mapped_column(JSON, nullable=False)
    mean: Mapped[list[float]] = mapped_column(JSON, nullable=False)
    scale: Mapped[list[float]] = mapped_column(JSON, nullable=False)
    cov: Mapped[list[list[float]]] = mapped_column(JSON, nullable=False)
    ridge: Mapped[float] = mapped_column(Float, nullable=False)
    n_models: Mapped[int] = mapped_column(Integer, nullable=False)
    test_fraction: Mapped[float] = mapped_column(Float, default=0.0, nullable=False)
    diagnostics: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict, nullable=False)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
