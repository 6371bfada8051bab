"""A bulk score write on PostgreSQL runs under its own, longer statement timeout (SET LOCAL), so a large
upload on a busy database is not cancelled by the per-statement timeout of ordinary requests."""

from __future__ import annotations

import pytest
from sqlalchemy import Engine, text
from sqlalchemy.orm import Session

from evalplan.benchmarks.score_matrix import PostgresRowWriter
from evalplan.kit.db import make_engine
from evalplan.kit.settings import get_settings


@pytest.mark.slow
def test_bulk_write_raises_the_statement_timeout_for_its_transaction_only(pg_engine: Engine) -> None:
    engine = make_engine(pg_engine.url.render_as_string(hide_password=False), statement_timeout_s=2.0)
    try:
        with Session(engine) as session:
            assert session.execute(text("SHOW statement_timeout")).scalar_one() == "2s"
            PostgresRowWriter(session, "bm_none", "acc").write([], [])
            assert get_settings().db_bulk_statement_timeout_s == 900.0
            assert session.execute(text("SHOW statement_timeout")).scalar_one() == "15min"
            session.execute(text("SELECT pg_sleep(2.5)"))  # past the ordinary 2 s timeout: not cancelled
            session.rollback()
            assert session.execute(text("SHOW statement_timeout")).scalar_one() == "2s"  # back after the transaction
    finally:
        engine.dispose()
