"""Race-free inserts of rows keyed by a unique constraint: ``INSERT ... ON CONFLICT DO NOTHING``.

Check-then-insert loses when two requests introduce the same name at once (the second insert
violates the unique constraint and its whole transaction is lost). Both supported databases
(PostgreSQL, SQLite >= 3.24) take ``ON CONFLICT DO NOTHING``: the loser's row is skipped, and
the caller re-reads the winner's row. On PostgreSQL a conflicting row of a transaction still in
flight makes the insert wait for that transaction, so the re-read (a new READ COMMITTED
snapshot) sees the committed winner.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import Table
from sqlalchemy.dialects.postgresql import insert as postgresql_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.orm import Session


def dialect_insert(session: Session) -> Any:
    """The ``insert`` construct of the session's database (PostgreSQL's or SQLite's), the one with
    ``on_conflict_do_nothing`` / ``on_conflict_do_update``."""
    dialect = session.get_bind().dialect.name
    if dialect == "postgresql":
        return postgresql_insert
    if dialect == "sqlite":
        return sqlite_insert
    raise RuntimeError(f"unsupported database dialect {dialect!r}")  # pragma: no cover - only these two


def _table(entity: Any) -> Table:
    return entity.__table__ if hasattr(entity, "__table__") else entity


def insert_ignoring_conflicts(session: Session, entity: Any, rows: list[dict[str, Any]],
                              conflict_columns: list[str], *, team_id: str | None = None) -> set[Any]:
    """Insert ``rows``, skipping those whose ``conflict_columns`` exist already.

    A table with a ``team_id`` column (a team's table, ``evalplan.db.models.TeamOwned``) needs
    ``team_id`` (the caller's team, ``evalplan.auth.scoping.team_of``) for rows that do not name one.

    ``rows`` are keyed by column name. Returns the primary keys of the rows this call inserted
    (single-column primary keys). Python-side column defaults (ids, timestamps) are filled in first.
    """
    if not rows:
        return set()
    table = _table(entity)
    factory = dialect_insert(session)
    (pk,) = table.primary_key.columns
    if "team_id" in table.columns:  # a team's table: rows join the caller's team
        if team_id is None and any("team_id" not in row for row in rows):
            raise ValueError(f"insert into {table.name}: pass team_id (the caller's team) for rows without one")
        rows = [row if "team_id" in row else {**row, "team_id": team_id} for row in rows]
    inserted: set[Any] = set()
    per_statement = max(1, 30000 // max(1, len(table.columns)))  # PostgreSQL: at most 65535 parameters
    for start in range(0, len(rows), per_statement):
        filled = [_with_defaults(table, row) for row in rows[start:start + per_statement]]
        stmt = factory(table).values(filled).on_conflict_do_nothing(index_elements=conflict_columns).returning(pk)
        inserted.update(session.execute(stmt).scalars())
    return inserted


def _with_defaults(table: Table, row: dict[str, Any]) -> dict[str, Any]:
    out = dict(row)
    for column in table.columns:
        default: Any = column.default
        if column.key in out or default is None or not (default.is_scalar or default.is_callable):
            continue
        out[column.key] = default.arg(None) if default.is_callable else default.arg
    return out
