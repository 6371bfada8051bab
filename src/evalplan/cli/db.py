"""``evalplan db upgrade``: apply the Alembic migrations to the configured database.

Imported inside the command (kept out of ``evalplan --help``): ``evalplan.db.migrate`` (Alembic, SQLAlchemy)."""

from __future__ import annotations

import argparse

from evalplan.kit.settings import get_settings


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    db = sub.add_parser("db", help="database administration")
    db_sub = db.add_subparsers(dest="db_command", required=True)
    upgrade = db_sub.add_parser("upgrade", help="apply Alembic migrations")
    upgrade.add_argument("revision", nargs="?", default="head")


def db_command(args: argparse.Namespace) -> int:
    settings = get_settings()
    from evalplan.db.migrate import upgrade

    upgrade(settings.database_url, args.revision)
    print(f"database at revision {args.revision}")
    return 0
