"""Test fixtures: every API test runs on SQLite and on PostgreSQL, inside a rolled-back transaction.

* ``client``: TestClient whose sessions join one outer transaction per test
  (SAVEPOINTs for the app's commits); rolled back afterwards. Jobs are not allowed
  here (they would run on other threads/processes that cannot see the transaction).
* ``committed_client``: real commits and the real in-process thread-pool dispatcher;
  tables are emptied after the test.
* ``services``: real PostgreSQL + Redis (reachable, or started throwaway; never skipped).
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from fastapi.testclient import TestClient
from sqlalchemy import Engine, text
from sqlalchemy.engine import make_url
from sqlalchemy.orm import Session, sessionmaker

from evalplan.db.migrate import upgrade
from evalplan.kit.db import make_engine, make_session_factory
from evalplan.main import create_app
from evalplan.workers.dispatch import InProcessDispatcher
from support.browser import chromium, live_server, module_live_server, phone_tab, tab  # noqa: F401  (browser fixtures)
from support.helpers import NoJobsDispatcher, empty_all_tables, settings_for
from support.service_bringup import Services, ServicesUnavailable, bring_up
from support.slow import mark_slow

os.environ.setdefault("HF_HUB_OFFLINE", "1")
TEST_DB_NAME = f"evalplan_test_{os.getpid()}"  # one per pytest process: parallel runs never collide
BACKENDS = ["sqlite", "postgresql"]


@pytest.fixture(scope="session")
def services() -> Iterator[Services]:
    try:
        up = bring_up()
    except ServicesUnavailable as exc:
        pytest.exit(str(exc), returncode=3)
    yield up
    up.stop()


def _admin_execute(admin_url: str, *statements: str) -> None:
    admin = make_engine(admin_url).execution_options(isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        for statement in statements:
            conn.execute(text(statement))
    admin.dispose()


@pytest.fixture(scope="session")
def database_urls(services: Services, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """One migrated database per backend (migrations run through Alembic, as in production)."""
    _admin_execute(services.admin_pg_url, f"DROP DATABASE IF EXISTS {TEST_DB_NAME} WITH (FORCE)",
                   f"CREATE DATABASE {TEST_DB_NAME}")
    urls = {
        "sqlite": f"sqlite:///{tmp_path_factory.mktemp('sqlite') / 'evalplan.db'}",
        "postgresql": make_url(services.admin_pg_url).set(database=TEST_DB_NAME).render_as_string(hide_password=False),
    }
    for url in urls.values():
        upgrade(url)
    yield urls
    _admin_execute(services.admin_pg_url, f"DROP DATABASE IF EXISTS {TEST_DB_NAME} WITH (FORCE)")


@pytest.fixture(scope="session")
def engines(database_urls: dict[str, str]) -> Iterator[dict[str, Engine]]:
    made = {name: make_engine(url) for name, url in database_urls.items()}
    yield made
    for engine in made.values():
        engine.dispose()


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    return request.param


@pytest.fixture
def engine(engines: dict[str, Engine], backend: str) -> Engine:
    return engines[backend]


@pytest.fixture
def db_session_factory(engine: Engine) -> Iterator[sessionmaker[Session]]:
    connection = engine.connect()
    outer = connection.begin()
    factory = sessionmaker(bind=connection, join_transaction_mode="create_savepoint", expire_on_commit=False)
    yield factory
    outer.rollback()
    connection.close()


@pytest.fixture
def client(db_session_factory: sessionmaker[Session], database_urls: dict[str, str], backend: str) -> Iterator[TestClient]:
    app = create_app(settings_for(database_urls[backend]), session_factory=db_session_factory,
                     dispatcher=NoJobsDispatcher())
    with TestClient(app, raise_server_exceptions=False) as test_client:
        yield test_client


@pytest.fixture
def committed_session_factory(engine: Engine) -> Iterator[sessionmaker[Session]]:
    empty_all_tables(engine)
    yield make_session_factory(engine)
    empty_all_tables(engine)


@pytest.fixture
def committed_client(committed_session_factory: sessionmaker[Session], database_urls: dict[str, str],
                     backend: str) -> Iterator[TestClient]:
    settings = settings_for(database_urls[backend])
    dispatcher = InProcessDispatcher(committed_session_factory, threads=2)
    app = create_app(settings, session_factory=committed_session_factory, dispatcher=dispatcher)
    with TestClient(app, raise_server_exceptions=False) as test_client:
        yield test_client


@pytest.fixture
def pg_engine(engines: dict[str, Engine]) -> Iterator[Engine]:
    engine = engines["postgresql"]
    empty_all_tables(engine)
    yield engine
    empty_all_tables(engine)


@pytest.fixture
def pg_committed_client(pg_engine: Engine, database_urls: dict[str, str]) -> Iterator[tuple[TestClient, Engine]]:
    """An app on PostgreSQL whose requests commit (a failure must roll back real work), and its engine."""
    factory = make_session_factory(pg_engine)
    app = create_app(settings_for(database_urls["postgresql"]), session_factory=factory,
                     dispatcher=InProcessDispatcher(factory, threads=1))
    with TestClient(app, raise_server_exceptions=False) as client:
        yield client, pg_engine


@pytest.fixture
def redis_db(services: Services) -> Iterator[str]:
    conn = redis.Redis.from_url(services.redis_url)
    conn.flushdb()
    yield services.redis_url
    conn.flushdb()
    conn.close()


@pytest.fixture
def tmp_dir() -> Iterator[Path]:
    with tempfile.TemporaryDirectory() as folder:
        yield Path(folder)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    mark_slow(items)  # the `slow` marker of the long tests (tests/support/slow.py)
