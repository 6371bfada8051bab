"""Run Alembic migrations programmatically (used by `evalplan db upgrade` and `serve`)."""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config

from evalplan.db.urls import normalize_url

#: the Alembic scripts (``evalplan.migrations``, read by path: db imports no layer above it)
MIGRATIONS = Path(__file__).resolve().parent.parent / "migrations"


def alembic_config(database_url: str) -> Config:
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    config.set_main_option("sqlalchemy.url", normalize_url(database_url).replace("%", "%%"))
    return config


def upgrade(database_url: str, revision: str = "head") -> None:
    command.upgrade(alembic_config(database_url), revision)


def downgrade(database_url: str, revision: str) -> None:
    command.downgrade(alembic_config(database_url), revision)
