"""Engines and session factories for SQLite (embedded) and PostgreSQL (production)."""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from sqlalchemy import Connection, Engine, create_engine, event
from sqlalchemy.orm import Session, sessionmaker

from evalplan.db.urls import normalize_url
from evalplan.kit.settings import Settings


def make_engine(url: str, *, connect_timeout_s: float = 5.0, statement_timeout_s: float = 60.0) -> Engine:
    """Create an engine that cannot hang its caller.

    PostgreSQL: ``connect_timeout``, a server-side ``statement_timeout``, TCP keepalives and
    ``tcp_user_timeout`` (a server that stops answering mid-query), ``pool_pre_ping`` and a pool
    checkout wait of ``connect_timeout_s``. SQLite: foreign keys, WAL and a busy timeout.
    """
    url = normalize_url(url)
    if url.startswith("sqlite"):
        busy = statement_timeout_s if statement_timeout_s > 0 else 30.0
        engine = create_engine(url, connect_args={"check_same_thread": False, "timeout": busy})

        @event.listens_for(engine, "connect")
        def _sqlite_pragmas(dbapi_conn: Any, _record: Any) -> None:
            # Let SQLAlchemy, not pysqlite, open transactions, so SAVEPOINTs work
            # (SQLAlchemy's documented recipe for pysqlite).
            dbapi_conn.isolation_level = None
            cursor = dbapi_conn.cursor()
            cursor.execute("PRAGMA foreign_keys=ON")
            cursor.execute("PRAGMA journal_mode=WAL")
            cursor.execute("PRAGMA synchronous=NORMAL")
            cursor.close()

        @event.listens_for(engine, "begin")
        def _sqlite_begin(conn: Any) -> None:
            # A write transaction takes the write lock up front (BEGIN IMMEDIATE): a deferred one
            # that read first fails at once ("database is locked", SQLITE_BUSY_SNAPSHOT) when
            # another writer committed meanwhile, instead of waiting out the busy timeout.
            options = conn.get_execution_options()
            wait = options.get(WAIT_OPTION)
            if wait is not None or conn.info.get(WAIT_OPTION):
                # quick_write's shorter wait for this transaction; the next one restores the busy timeout
                ms = int(1000 * (busy if wait is None else max(0.0, float(wait))))
                conn.exec_driver_sql(f"PRAGMA busy_timeout = {ms}")
                conn.info[WAIT_OPTION] = wait is not None
            conn.exec_driver_sql("BEGIN IMMEDIATE" if options.get(WRITE_OPTION) else "BEGIN")

        return engine
    connect_args: dict[str, Any] = {
        "connect_timeout": max(1, round(connect_timeout_s)),
        "keepalives": 1, "keepalives_idle": 10, "keepalives_interval": 3, "keepalives_count": 3,
        "tcp_user_timeout": int(1000 * max(connect_timeout_s, statement_timeout_s + 5)),
    }
    if statement_timeout_s > 0:
        connect_args["options"] = f"-c statement_timeout={int(statement_timeout_s * 1000)}"
    return create_engine(url, pool_pre_ping=True, pool_size=10, max_overflow=10, pool_timeout=connect_timeout_s,
                         connect_args=connect_args)


def engine_for(settings: Settings) -> Engine:
    """The engine of ``settings`` (URL and timeouts)."""
    return make_engine(settings.database_url, connect_timeout_s=settings.db_connect_timeout_s,
                       statement_timeout_s=settings.db_statement_timeout_s)


WRITE_OPTION = "evalplan_write"
WAIT_OPTION = "evalplan_lock_wait_s"


def begin_write(session: Session) -> Session:
    """Start ``session``'s transaction as a write transaction (SQLite: BEGIN IMMEDIATE; else a no-op
    marker). Call it first, before any statement, in sessions that read and then write."""
    if not session.in_transaction():
        session.connection(execution_options={WRITE_OPTION: True})
    return session


@contextmanager
def quick_write(factory: sessionmaker[Session], wait_s: float = 0.5) -> Iterator[Session]:
    """A session whose transaction is a write transaction (as :func:`begin_write`) that waits at most ``wait_s``
    for SQLite's write lock, then raises ``OperationalError`` ("database is locked"): for the optional write of
    a read request (a page that starts a job), which must never wait out a job's transaction. PostgreSQL takes
    no table lock for such writes: the same as :func:`begin_write` there."""
    with factory() as session:
        session.connection(execution_options={WRITE_OPTION: True, WAIT_OPTION: wait_s})
        yield session


def make_session_factory(engine: Engine) -> sessionmaker[Session]:
    return sessionmaker(bind=engine, expire_on_commit=False)


#: a bulk load of at least this many rows asks for ANALYZE after its commit
ANALYZE_MIN_ROWS = 10_000
_ANALYZE_KEY = "evalplan_analyze"
log = logging.getLogger(__name__)


def analyze_after_commit(session: Session, n_rows: int, *tables: str) -> None:
    """On PostgreSQL, run ``ANALYZE`` on ``tables`` once this session commits a bulk load of
    ``n_rows >= ANALYZE_MIN_ROWS`` rows: without statistics the planner picked a plan 15x slower
    right after a bulk load (issue 13, failure 9). Autovacuum would come later; this is at once."""
    if n_rows >= ANALYZE_MIN_ROWS and session.get_bind().dialect.name == "postgresql":
        session.info.setdefault(_ANALYZE_KEY, set()).update(tables)


@event.listens_for(Session, "after_commit")
def _analyze_loaded_tables(session: Session) -> None:
    tables = session.info.pop(_ANALYZE_KEY, None)
    if not tables:
        return
    bind = session.get_bind()
    engine = bind.engine if isinstance(bind, Connection) else bind

    def run() -> None:
        try:
            with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
                for table in sorted(tables):
                    conn.exec_driver_sql(f'ANALYZE "{table}"')
        except Exception:  # noqa: BLE001 - statistics are an optimisation; autovacuum catches up
            log.warning("ANALYZE %s failed", sorted(tables), exc_info=True)

    threading.Thread(target=run, name="evalplan-analyze", daemon=True).start()
